//! Running a dependency-ordered batch of jobs on a pool of worker threads.
//!
//! Owns: the ready set, dispatch to at most `parallelism` workers over crossbeam channels, and
//! the rule that a failed job's dependents are skipped (once, naming the failure) while
//! unrelated jobs carry on; an interrupt flag, or the owner asking to halt (its results can no
//! longer be recorded), stops new dispatches and lets in-flight jobs end; and when the owner
//! makes a batch of results durable ([`Owner::flush`]): only jobs independent of the batch may
//! start before it, its dependents after.
//! The calling thread is the single owner of everything the jobs produce: it prepares each
//! job's input when the job becomes ready and receives every result and progress report, so
//! state needs no locks. Not: what a job does.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use crossbeam_channel::{unbounded, Receiver, Sender};

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
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
pub trait Owner {
    /// Input handed to a worker.
    type Input: Send;
    /// Intermediate reports from a running job.
    type Progress: Send;
    /// Final results.
    type Output: Send;
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
    /// Called after [`Owner::flush`] while jobs still run (`queued`: how many ready jobs wait
    /// for a worker): the owner may add jobs, given as their dependencies (indices of the
    /// jobs so far or of the new ones, which take the next indices in order). A dependency
    /// that failed skips the new job; one that succeeded is already met.
    fn extend(&mut self, _queued: usize) -> Vec<Vec<usize>> {
        Vec::new()
    }
}

/// The worker side: runs on several threads at once.
pub trait Worker<O: Owner>: Sync {
    /// Runs job `i`.
    fn run(&self, i: usize, input: O::Input, reporter: &Reporter<O::Progress>) -> O::Output;
}

/// Lets a running job report intermediate results (e.g. "old object deleted" before "new object
/// created") so the owner records them even if the job fails later.
pub struct Reporter<P> {
    index: usize,
    tx: Sender<Message<P, ()>>,
}

impl<P> Reporter<P> {
    /// Sends a progress report to the owner.
    pub fn report(&self, progress: P) {
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
pub fn run<O, W>(
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
    let mut board = Board::new(deps, parallelism.min(n));
    let jobs = JobQueue::<O::Input>::default();
    let (result_tx, result_rx) = unbounded::<Message<O::Progress, O::Output>>();
    let (progress_tx, progress_rx) = unbounded::<Message<O::Progress, ()>>();

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

        loop {
            board.dispatch(owner, &jobs, interrupted, usize::MAX);
            if board.in_flight == 0 {
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
                        let ready_before = board.ready.len();
                        board.take(owner, first, &progress_rx);
                        // Take every other result already waiting into the same batch.
                        while let Ok(msg) = result_rx.try_recv() {
                            board.take(owner, msg, &progress_rx);
                        }
                        board.dispatch(owner, &jobs, interrupted, ready_before);
                        owner.flush();
                        let running = board.in_flight > 0;
                        if running && !interrupted.load(Ordering::SeqCst) && !owner.halted() {
                            let added = owner.extend(board.ready.len());
                            board.extend(added);
                            // More jobs may use more workers, up to `parallelism`.
                            while board.workers < parallelism.min(board.status.len()) {
                                spawn(board.workers);
                                board.workers += 1;
                            }
                        }
                    }
                    Err(_) => break,
                },
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
    ready: VecDeque<usize>,
    in_flight: usize,
    workers: usize,
}

impl Board {
    fn new(deps: &[Vec<usize>], workers: usize) -> Board {
        let n = deps.len();
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, ds) in deps.iter().enumerate() {
            for &d in ds {
                dependents[d].push(i);
            }
        }
        let waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
        Board {
            status: vec![None; n],
            ready: (0..n).filter(|&i| waiting[i] == 0).collect(),
            waiting,
            dependents,
            in_flight: 0,
            workers,
        }
    }

    /// Dispatches ready jobs, at most `limit` of those at the front of the queue, while a
    /// worker is free and neither an interrupt nor the owner stops it. A job that fails to
    /// prepare ends at once (its dependents go to the back of the queue).
    fn dispatch<O: Owner>(
        &mut self,
        owner: &mut O,
        jobs: &JobQueue<O::Input>,
        interrupted: &AtomicBool,
        limit: usize,
    ) {
        let mut taken = 0;
        while taken < limit
            && self.in_flight < self.workers
            && !interrupted.load(Ordering::SeqCst)
            && !owner.halted()
        {
            let Some(i) = self.ready.pop_front() else {
                break;
            };
            taken += 1;
            match owner.prepare(i) {
                Ok(input) => {
                    self.in_flight += 1;
                    jobs.push((i, input));
                }
                Err(out) => {
                    let ok = owner.finish(i, out);
                    self.settle(i, ok);
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
                self.settle(i, ok);
            }
            Message::Progress(i, p) => owner.progress(i, p),
        }
    }

    /// Adds jobs depending on `deps` (see [`Owner::extend`]), indexed after the existing ones.
    fn extend(&mut self, deps: Vec<Vec<usize>>) {
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
            if self.waiting[i] == 0 && self.status[i].is_none() {
                self.ready.push_back(i);
            }
        }
    }

    /// Records how job `i` ended: its dependents become ready (success), or are skipped.
    fn settle(&mut self, i: usize, ok: bool) {
        if ok {
            self.status[i] = Some(Status::Done);
            for &d in &self.dependents[i] {
                self.waiting[d] -= 1;
                if self.waiting[d] == 0 && self.status[d].is_none() {
                    self.ready.push_back(d);
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
mod tests {
    use std::sync::Mutex;

    use super::*;

    struct Recorder {
        order: Vec<usize>,
        progress: Vec<(usize, u32)>,
    }

    impl Owner for Recorder {
        type Input = usize;
        type Progress = u32;
        type Output = bool;
        fn prepare(&mut self, i: usize) -> Result<usize, bool> {
            Ok(i)
        }
        fn progress(&mut self, i: usize, p: u32) {
            self.progress.push((i, p));
        }
        fn finish(&mut self, i: usize, ok: bool) -> bool {
            self.order.push(i);
            ok
        }
    }

    struct Runner {
        fail: usize,
        running: Mutex<usize>,
        max_running: Mutex<usize>,
    }

    impl Worker<Recorder> for Runner {
        fn run(&self, i: usize, _input: usize, reporter: &Reporter<u32>) -> bool {
            {
                let mut r = self.running.lock().unwrap();
                *r += 1;
                let mut m = self.max_running.lock().unwrap();
                *m = (*m).max(*r);
            }
            reporter.report(7);
            std::thread::sleep(std::time::Duration::from_millis(5));
            *self.running.lock().unwrap() -= 1;
            i != self.fail
        }
    }

    #[test]
    fn dependencies_order_failures_skip_dependents_only() {
        // 0 <- 1 <- 2 ; 3 independent ; 4 depends on 3
        let deps = vec![vec![], vec![0], vec![1], vec![], vec![3]];
        let mut owner = Recorder {
            order: vec![],
            progress: vec![],
        };
        let runner = Runner {
            fail: 1,
            running: Mutex::new(0),
            max_running: Mutex::new(0),
        };
        let status = run(&mut owner, &runner, &deps, 4, &AtomicBool::new(false));
        assert_eq!(
            status,
            vec![
                Status::Done,
                Status::Failed,
                Status::Skipped { because: 1 },
                Status::Done,
                Status::Done
            ]
        );
        let pos = |x| owner.order.iter().position(|&o| o == x).unwrap();
        assert!(pos(0) < pos(1));
        assert!(pos(3) < pos(4));
        assert_eq!(owner.progress.len(), 4);
    }

    #[test]
    fn parallelism_is_bounded() {
        let deps = vec![vec![]; 40];
        let mut owner = Recorder {
            order: vec![],
            progress: vec![],
        };
        let runner = Runner {
            fail: usize::MAX,
            running: Mutex::new(0),
            max_running: Mutex::new(0),
        };
        let status = run(&mut owner, &runner, &deps, 3, &AtomicBool::new(false));
        assert!(status.iter().all(|s| *s == Status::Done));
        assert_eq!(*runner.max_running.lock().unwrap(), 3);
    }

    /// Halts once `after` jobs have finished.
    struct Halting {
        finished: usize,
        after: usize,
    }

    impl Owner for Halting {
        type Input = ();
        type Progress = u32;
        type Output = bool;
        fn prepare(&mut self, _i: usize) -> Result<(), bool> {
            Ok(())
        }
        fn progress(&mut self, _i: usize, _p: u32) {}
        fn finish(&mut self, _i: usize, ok: bool) -> bool {
            self.finished += 1;
            ok
        }
        fn halted(&self) -> bool {
            self.finished >= self.after
        }
    }

    struct Sleeper;

    impl Worker<Halting> for Sleeper {
        fn run(&self, _i: usize, _input: (), _reporter: &Reporter<u32>) -> bool {
            std::thread::sleep(std::time::Duration::from_millis(20));
            true
        }
    }

    #[test]
    fn a_halting_owner_stops_dispatch_and_in_flight_jobs_finish() {
        let deps = vec![vec![]; 20];
        let mut owner = Halting {
            finished: 0,
            after: 1,
        };
        let status = run(&mut owner, &Sleeper, &deps, 4, &AtomicBool::new(false));
        let done = status.iter().filter(|s| **s == Status::Done).count();
        let halted = status.iter().filter(|s| **s == Status::Halted).count();
        assert_eq!(done + halted, 20, "{status:?}");
        assert_eq!(done, owner.finished, "every dispatched job finished");
        assert_eq!(
            done, 4,
            "the first four were running; nothing started after"
        );
    }

    /// Logs what the scheduler asks of it; its flush fails (and halts) when `flush_fails`.
    #[derive(Default)]
    struct Logging {
        log: Vec<String>,
        flush_fails: bool,
        failed: bool,
    }

    impl Owner for Logging {
        type Input = ();
        type Progress = u32;
        type Output = bool;
        fn prepare(&mut self, i: usize) -> Result<(), bool> {
            self.log.push(format!("prepare {i}"));
            Ok(())
        }
        fn progress(&mut self, _i: usize, _p: u32) {}
        fn finish(&mut self, i: usize, ok: bool) -> bool {
            self.log.push(format!("finish {i}"));
            ok
        }
        fn flush(&mut self) {
            self.failed |= self.flush_fails;
            self.log.push("flush".into());
        }
        fn halted(&self) -> bool {
            self.failed
        }
    }

    struct Quick;

    impl Worker<Logging> for Quick {
        fn run(&self, _i: usize, _input: (), _reporter: &Reporter<u32>) -> bool {
            true
        }
    }

    #[test]
    fn jobs_ready_before_a_batch_start_before_its_flush_its_dependents_after() {
        // 2 depends on 0; 1 is independent. One worker, so every batch is one result.
        let deps = vec![vec![], vec![], vec![0]];
        let mut owner = Logging::default();
        let status = run(&mut owner, &Quick, &deps, 1, &AtomicBool::new(false));
        assert!(status.iter().all(|s| *s == Status::Done), "{status:?}");
        let at = |what: &str| owner.log.iter().position(|l| l == what).unwrap();
        assert_eq!(owner.log[..2], ["prepare 0", "finish 0"], "{:?}", owner.log);
        // 1 was ready before 0's batch: it starts while that batch is made durable.
        assert!(at("prepare 1") < at("flush"), "{:?}", owner.log);
        // 2 waits until the result it depends on is durable.
        assert!(at("prepare 2") > at("flush"), "{:?}", owner.log);
    }

    #[test]
    fn after_a_failed_flush_nothing_more_starts() {
        let deps = vec![vec![]; 4];
        let mut owner = Logging {
            flush_fails: true,
            ..Logging::default()
        };
        let status = run(&mut owner, &Quick, &deps, 1, &AtomicBool::new(false));
        // 1 was dispatched before the flush of 0's batch failed, and ran to its end.
        assert_eq!(
            status,
            [Status::Done, Status::Done, Status::Halted, Status::Halted]
        );
        let failed = owner.log.iter().position(|l| l == "flush").unwrap();
        assert!(
            owner.log[failed..]
                .iter()
                .all(|l| !l.starts_with("prepare")),
            "{:?}",
            owner.log
        );
    }

    /// Adds job 2 (depending on 0, which succeeds) and job 3 (depending on 1, which fails)
    /// once 0 has finished while 1 still runs.
    #[derive(Default)]
    struct Extending {
        log: Vec<String>,
        extended: bool,
    }

    impl Owner for Extending {
        type Input = usize;
        type Progress = u32;
        type Output = bool;
        fn prepare(&mut self, i: usize) -> Result<usize, bool> {
            self.log.push(format!("prepare {i}"));
            Ok(i)
        }
        fn progress(&mut self, _i: usize, _p: u32) {}
        fn finish(&mut self, i: usize, ok: bool) -> bool {
            self.log.push(format!("finish {i}"));
            ok
        }
        fn extend(&mut self, queued: usize) -> Vec<Vec<usize>> {
            if self.extended || !self.log.contains(&"finish 0".to_string()) {
                return Vec::new();
            }
            assert_eq!(queued, 0);
            self.extended = true;
            self.log.push("extend".into());
            vec![vec![0], vec![1]]
        }
    }

    /// Job 0 is quick, job 1 slow and failing, the added ones quick.
    struct Staggered;

    impl Worker<Extending> for Staggered {
        fn run(&self, i: usize, _input: usize, _reporter: &Reporter<u32>) -> bool {
            if i == 1 {
                std::thread::sleep(std::time::Duration::from_millis(200));
                return false;
            }
            true
        }
    }

    #[test]
    fn jobs_added_while_others_run_start_at_once_and_wait_for_their_dependencies() {
        let deps = vec![vec![], vec![]];
        let mut owner = Extending::default();
        let status = run(&mut owner, &Staggered, &deps, 2, &AtomicBool::new(false));
        assert_eq!(
            status,
            [
                Status::Done,
                Status::Failed,
                Status::Done,
                Status::Skipped { because: 1 }
            ]
        );
        let at = |what: &str| owner.log.iter().position(|l| l == what).unwrap();
        // Added while 1 ran, 2 started (and ended) before 1 ended; 3 never started.
        assert!(at("extend") < at("prepare 2"), "{:?}", owner.log);
        assert!(at("finish 2") < at("finish 1"), "{:?}", owner.log);
        assert!(
            !owner.log.contains(&"prepare 3".to_string()),
            "{:?}",
            owner.log
        );
    }

    struct Panicking;

    impl Owner for Panicking {
        type Input = ();
        type Progress = u32;
        type Output = bool;
        fn prepare(&mut self, _i: usize) -> Result<(), bool> {
            Ok(())
        }
        fn progress(&mut self, _i: usize, _p: u32) {}
        fn finish(&mut self, _i: usize, _ok: bool) -> bool {
            panic!("owner failed");
        }
    }

    impl Worker<Panicking> for Quick {
        fn run(&self, _i: usize, _input: (), _reporter: &Reporter<u32>) -> bool {
            true
        }
    }

    #[test]
    fn a_panicking_owner_lets_the_idle_workers_end() {
        let deps = vec![vec![]; 8];
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run(&mut Panicking, &Quick, &deps, 4, &AtomicBool::new(false))
        }));
        assert!(
            ran.is_err(),
            "the panic reaches the caller instead of a hang"
        );
    }

    #[test]
    fn interrupt_stops_dispatch() {
        let deps = vec![vec![]; 10];
        let mut owner = Recorder {
            order: vec![],
            progress: vec![],
        };
        let runner = Runner {
            fail: usize::MAX,
            running: Mutex::new(0),
            max_running: Mutex::new(0),
        };
        let status = run(&mut owner, &runner, &deps, 2, &AtomicBool::new(true));
        assert!(status.iter().all(|s| *s == Status::Interrupted));
    }
}
