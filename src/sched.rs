//! Running a dependency-ordered batch of jobs on a pool of worker threads.
//!
//! Owns: the ready set and its order (jobs others wait on first), dispatch to at most
//! `parallelism` workers over crossbeam channels, and
//! the rule that a failed job's dependents are skipped (once, naming the failure) while
//! unrelated jobs carry on; an interrupt flag, or the owner asking to halt (its results can no
//! longer be recorded), stops new dispatches and lets in-flight jobs end; and when the owner
//! makes a batch of results durable ([`Owner::flush`]): only jobs independent of the batch may
//! start before it, its dependents after; and a [`Waker`], with which work the owner starts
//! beside the batch (an evaluation) brings the loop back to the owner when it ends.
//! The calling thread is the single owner of everything the jobs produce: it prepares each
//! job's input when the job becomes ready and receives every result and progress report, so
//! state needs no locks. Not: what a job does.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use crossbeam_channel::{unbounded, Receiver, Sender};

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Status {
    /// Ran and succeeded.
    Done,
    /// Ran (or failed to prepare) and failed.
    Failed,
    /// Not run because the job at this index failed.
    Skipped {
        /// The index of the failed job.
        because: usize,
    },
    /// Not run because of an interrupt.
    Interrupted,
    /// Not run because the owner halted the batch ([`Owner::halted`]).
    Halted,
}

/// The owner-thread side of a batch.
pub(crate) trait Owner {
    /// Input handed to a worker.
    type Input: Send;
    /// Intermediate reports from a running job.
    type Progress: Send;
    /// Final results.
    type Output: Send;
    /// Whether work outside the batch waits on job `i` (jobs the owner adds once it ended):
    /// asked when `i` becomes ready. Such a job, like one that other jobs of the batch depend
    /// on, is dispatched before the ready jobs nothing waits on.
    fn awaited(&self, _i: usize) -> bool {
        false
    }
    /// Job `i` became ready; `Err` fails it without running it.
    fn prepare(&mut self, i: usize) -> Result<Self::Input, Self::Output>;
    /// A running job reported progress.
    fn progress(&mut self, i: usize, progress: Self::Progress);
    /// Job `i` ended; returns whether it succeeded.
    fn finish(&mut self, i: usize, output: Self::Output) -> bool;
    /// Called after a batch of results was handled and before new jobs are dispatched, so an
    /// owner can make the batch durable at once (one fsync for several results); and after
    /// each batch of progress reports, which a job may wait on.
    fn flush(&mut self) {}
    /// Whether to dispatch nothing more (e.g. results can no longer be recorded). Checked
    /// before every dispatch; jobs already running still end and reach [`Owner::finish`].
    fn halted(&self) -> bool {
        false
    }
    /// Called after [`Owner::flush`] and after [`Owner::woken`], unless interrupted or halted
    /// (`load`: how many ready jobs wait for a worker, how many run): the owner may add jobs,
    /// given as their dependencies (indices of the jobs so far or of the new ones, which take
    /// the next indices in order). A dependency that failed skips the new job; one that
    /// succeeded is already met. Work the owner starts here beside the batch calls `waker`'s
    /// [`Waker::wake`] when it ends.
    fn extend(&mut self, _load: Load, _waker: &Waker) -> Vec<Vec<usize>> {
        Vec::new()
    }
    /// Whether work the owner started beside the batch still runs: the batch does not end
    /// before its [`Waker::wake`] (so the owner gets it back whatever else happened).
    fn awaiting(&self) -> bool {
        false
    }
    /// Work the owner started beside the batch woke the loop: called once per wake, also
    /// after an interrupt or a halt.
    fn woken(&mut self) {}
}

/// How busy the batch is when [`Owner::extend`] is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Load {
    /// Ready jobs waiting for a worker.
    pub(crate) queued: usize,
    /// Jobs running.
    pub(crate) in_flight: usize,
    /// The workers the batch may use.
    pub(crate) parallelism: usize,
}

/// Brings the scheduler's loop back to its owner from another thread (see [`Owner::extend`]).
#[derive(Clone)]
pub(crate) struct Waker(Sender<()>);

impl Waker {
    /// Wakes the loop, which then calls [`Owner::woken`].
    pub(crate) fn wake(&self) {
        let _ = self.0.send(());
    }
}

/// The worker side: runs on several threads at once.
pub(crate) trait Worker<O: Owner>: Sync {
    /// Runs job `i`.
    fn run(&self, i: usize, input: O::Input, reporter: &Reporter<O::Progress>) -> O::Output;
}

/// Lets a running job report intermediate results (e.g. "old object deleted" before "new object
/// created") so the owner records them even if the job fails later.
pub(crate) struct Reporter<P> {
    index: usize,
    tx: Sender<Message<P, ()>>,
}

impl<P> Reporter<P> {
    /// Sends a progress report to the owner.
    pub(crate) fn report(&self, progress: P) {
        let _ = self.tx.send(Message::Progress(self.index, progress));
    }
}

enum Message<P, R> {
    Progress(usize, P),
    Done(usize, R),
}

/// Runs jobs `0..deps.len()`, where `deps[i]` lists the jobs `i` must wait for.
///
/// Dispatch around a batch of results (the rule of DESIGN §85): the jobs that were ready
/// before the batch depend on nothing in it, so they are dispatched before [`Owner::flush`]
/// makes the batch durable, while the workers would otherwise idle; the jobs the batch made
/// ready wait until the flush returned. Every dispatch first asks [`Owner::halted`], so after a
/// failed flush nothing more starts.
// Long because it is the scheduler's one event loop and starts the workers it feeds; the
// bookkeeping its arms share is `Board`.
pub(crate) fn run<O, W>(
    owner: &mut O,
    worker: &W,
    deps: &[Vec<usize>],
    parallelism: usize,
    interrupted: &AtomicBool,
) -> Vec<Status>
where
    O: Owner,
    W: Worker<O>,
{
    let n = deps.len();
    if n == 0 {
        return Vec::new();
    }
    let parallelism = parallelism.max(1);
    let mut board = Board::new(owner, deps, parallelism.min(n));
    let jobs = JobQueue::<O::Input>::default();
    let (result_tx, result_rx) = unbounded::<Message<O::Progress, O::Output>>();
    let (progress_tx, progress_rx) = unbounded::<Message<O::Progress, ()>>();
    let (wake_tx, wake_rx) = unbounded::<()>();
    let waker = Waker(wake_tx);

    std::thread::scope(|scope| {
        let spawn = |w: usize| {
            let jobs = &jobs;
            let result_tx = result_tx.clone();
            let progress_tx = progress_tx.clone();
            std::thread::Builder::new()
                .name(format!("nivis-worker-{w}"))
                .spawn_scoped(scope, move || {
                    while let Some((i, input)) = jobs.pop() {
                        let reporter = Reporter {
                            index: i,
                            tx: progress_tx.clone(),
                        };
                        let out = worker.run(i, input, &reporter);
                        if result_tx.send(Message::Done(i, out)).is_err() {
                            break;
                        }
                    }
                })
                .expect("spawn worker thread");
        };
        for w in 0..board.workers {
            spawn(w);
        }
        // Closed however the loop ends (a panicking owner too), so the workers end and the
        // scope can join them.
        let _closing = Closing(&jobs);

        // More jobs may use more workers, up to `parallelism`.
        let grow = |board: &mut Board, owner: &mut O| {
            if interrupted.load(Ordering::SeqCst) || owner.halted() {
                return;
            }
            let load = Load {
                queued: board.ready.len(),
                in_flight: board.in_flight,
                parallelism,
            };
            let added = owner.extend(load, &waker);
            board.extend(owner, added);
            while board.workers < parallelism.min(board.status.len()) {
                spawn(board.workers);
                board.workers += 1;
            }
        };
        loop {
            board.dispatch(owner, &jobs, interrupted, None);
            if board.in_flight == 0 && !owner.awaiting() {
                break;
            }
            crossbeam_channel::select! {
                recv(progress_rx) -> msg => {
                    if let Ok(Message::Progress(i, p)) = msg {
                        owner.progress(i, p);
                        // Every report already waiting joins one flush: a job may wait for
                        // what its report recorded to be durable (a pending operation's
                        // note, DESIGN §97), and several such notes cost one write.
                        while let Ok(Message::Progress(j, p)) = progress_rx.try_recv() {
                            owner.progress(j, p);
                        }
                        owner.flush();
                    }
                }
                recv(result_rx) -> msg => match msg {
                    Ok(first) => {
                        // Everything in the queue now was ready before this batch.
                        let ready_before = board.ready.begin_batch();
                        board.take(owner, first, &progress_rx);
                        // Take every other result already waiting into the same batch.
                        while let Ok(msg) = result_rx.try_recv() {
                            board.take(owner, msg, &progress_rx);
                        }
                        board.dispatch(owner, &jobs, interrupted, Some(ready_before));
                        owner.flush();
                        grow(&mut board, owner);
                    }
                    Err(_) => break,
                },
                recv(wake_rx) -> _ => {
                    owner.woken();
                    grow(&mut board, owner);
                }
            }
        }
    });
    let never_run = if owner.halted() {
        Status::Halted
    } else {
        Status::Interrupted
    };
    board
        .status
        .into_iter()
        .map(|s| s.unwrap_or_else(|| never_run.clone()))
        .collect()
}

/// The jobs waiting for a worker. A worker with nothing to do sleeps on the condition variable
/// at once: crossbeam's receive spins and yields before it sleeps, CPU a busy machine's
/// providers need (DESIGN §85).
struct JobQueue<I> {
    /// The queue, and whether it is closed (no job will come any more).
    queue: Mutex<(VecDeque<(usize, I)>, bool)>,
    filled: Condvar,
}

impl<I> Default for JobQueue<I> {
    fn default() -> Self {
        JobQueue {
            queue: Mutex::new((VecDeque::new(), false)),
            filled: Condvar::new(),
        }
    }
}

impl<I> JobQueue<I> {
    fn push(&self, job: (usize, I)) {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.0.push_back(job);
        drop(queue);
        self.filled.notify_one();
    }

    /// Lets every worker end once the queue is empty.
    fn close(&self) {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.filled.notify_all();
    }

    /// The next job, waiting for one; `None` once the queue is closed and empty.
    fn pop(&self) -> Option<(usize, I)> {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(job) = queue.0.pop_front() {
                return Some(job);
            }
            if queue.1 {
                return None;
            }
            queue = self
                .filled
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Closes a [`JobQueue`] when dropped.
struct Closing<'q, I>(&'q JobQueue<I>);

impl<I> Drop for Closing<'_, I> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The scheduler's bookkeeping: what ended how, what waits on what, what is ready and how many
/// jobs run.
struct Board {
    status: Vec<Option<Status>>,
    /// How many of its dependencies each job still waits for.
    waiting: Vec<usize>,
    dependents: Vec<Vec<usize>>,
    ready: Ready,
    in_flight: usize,
    workers: usize,
}

/// The ready jobs in two queues, each in the order its jobs became ready: first the jobs
/// something waits on (other jobs of the batch, or work the owner adds: [`Owner::awaited`]),
/// then the rest. A batch whose latency is the providers' finishes sooner when what unlocks
/// more work starts first (DESIGN §101). Each entry carries the batch of results it became
/// ready in, for the dispatch before that batch's flush (§85).
#[derive(Default)]
struct Ready {
    awaited: VecDeque<(usize, u64)>,
    rest: VecDeque<(usize, u64)>,
    /// The number of the batch of results being taken.
    batch: u64,
}

impl Ready {
    fn push(&mut self, i: usize, awaited: bool) {
        let queue = match awaited {
            true => &mut self.awaited,
            false => &mut self.rest,
        };
        queue.push_back((i, self.batch));
    }

    fn len(&self) -> usize {
        self.awaited.len() + self.rest.len()
    }

    /// A new batch of results begins: returns its number, the jobs it makes ready carry it.
    fn begin_batch(&mut self) -> u64 {
        self.batch += 1;
        self.batch
    }

    /// The next job to dispatch; with `before`, only of those ready before that batch.
    fn pop(&mut self, before: Option<u64>) -> Option<usize> {
        let eligible = |q: &VecDeque<(usize, u64)>| {
            q.front()
                .is_some_and(|&(_, b)| before.is_none_or(|before| b < before))
        };
        let queue = match (eligible(&self.awaited), eligible(&self.rest)) {
            (true, _) => &mut self.awaited,
            (false, true) => &mut self.rest,
            (false, false) => return None,
        };
        queue.pop_front().map(|(i, _)| i)
    }
}

impl Board {
    fn new<O: Owner>(owner: &O, deps: &[Vec<usize>], workers: usize) -> Board {
        let n = deps.len();
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, ds) in deps.iter().enumerate() {
            for &d in ds {
                dependents[d].push(i);
            }
        }
        let waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
        let mut board = Board {
            status: vec![None; n],
            ready: Ready::default(),
            waiting,
            dependents,
            in_flight: 0,
            workers,
        };
        for i in 0..n {
            if board.waiting[i] == 0 {
                board.make_ready(owner, i);
            }
        }
        board
    }

    /// Queues job `i`, whose dependencies are all met.
    fn make_ready<O: Owner>(&mut self, owner: &O, i: usize) {
        let awaited = !self.dependents[i].is_empty() || owner.awaited(i);
        self.ready.push(i, awaited);
    }

    /// Dispatches ready jobs (with `before`: only those ready before that batch of results)
    /// while a worker is free and neither an interrupt nor the owner stops it. A job that
    /// fails to prepare ends at once (its dependents go to the back of the queue).
    fn dispatch<O: Owner>(
        &mut self,
        owner: &mut O,
        jobs: &JobQueue<O::Input>,
        interrupted: &AtomicBool,
        before: Option<u64>,
    ) {
        while self.in_flight < self.workers
            && !interrupted.load(Ordering::SeqCst)
            && !owner.halted()
        {
            let Some(i) = self.ready.pop(before) else {
                break;
            };
            match owner.prepare(i) {
                Ok(input) => {
                    self.in_flight += 1;
                    jobs.push((i, input));
                }
                Err(out) => {
                    let ok = owner.finish(i, out);
                    self.settle(owner, i, ok);
                }
            }
        }
    }

    /// Hands a message from the results channel to the owner; for a result, first the
    /// progress its job sent before it.
    fn take<O: Owner>(
        &mut self,
        owner: &mut O,
        msg: Message<O::Progress, O::Output>,
        progress_rx: &Receiver<Message<O::Progress, ()>>,
    ) {
        match msg {
            Message::Done(i, out) => {
                while let Ok(Message::Progress(j, p)) = progress_rx.try_recv() {
                    owner.progress(j, p);
                }
                self.in_flight -= 1;
                let ok = owner.finish(i, out);
                self.settle(owner, i, ok);
            }
            Message::Progress(i, p) => owner.progress(i, p),
        }
    }

    /// Adds jobs depending on `deps` (see [`Owner::extend`]), indexed after the existing ones.
    fn extend<O: Owner>(&mut self, owner: &O, deps: Vec<Vec<usize>>) {
        let first = self.status.len();
        let n = first + deps.len();
        self.status.resize(n, None);
        self.waiting.resize(n, 0);
        self.dependents.resize(n, Vec::new());
        for (k, ds) in deps.into_iter().enumerate() {
            let i = first + k;
            for d in ds {
                match &self.status[d] {
                    Some(Status::Done) => {}
                    Some(Status::Failed) => self.status[i] = Some(Status::Skipped { because: d }),
                    Some(Status::Skipped { because }) => {
                        self.status[i] = Some(Status::Skipped { because: *because })
                    }
                    _ => {
                        self.waiting[i] += 1;
                        self.dependents[d].push(i);
                    }
                }
            }
        }
        // Queued once all are in: an added job may depend on a later one.
        for i in first..n {
            if self.waiting[i] == 0 && self.status[i].is_none() {
                self.make_ready(owner, i);
            }
        }
    }

    /// Records how job `i` ended: its dependents become ready (success), or are skipped.
    fn settle<O: Owner>(&mut self, owner: &O, i: usize, ok: bool) {
        if ok {
            self.status[i] = Some(Status::Done);
            for k in 0..self.dependents[i].len() {
                let d = self.dependents[i][k];
                self.waiting[d] -= 1;
                if self.waiting[d] == 0 && self.status[d].is_none() {
                    self.make_ready(owner, d);
                }
            }
            return;
        }
        self.status[i] = Some(Status::Failed);
        let mut todo = self.dependents[i].clone();
        while let Some(d) = todo.pop() {
            if self.status[d].is_none() {
                self.status[d] = Some(Status::Skipped { because: i });
                todo.extend(self.dependents[d].iter().copied());
            }
        }
    }
}

#[cfg(test)]
mod tests;
