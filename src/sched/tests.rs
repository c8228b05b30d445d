//! The scheduler's tests: dependency order, bounded parallelism, halts and interrupts, the
//! dispatch around a batch's flush, jobs added while others run, work beside a batch, and
//! the order of ready jobs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::{run, Load, Owner, Reporter, Status, Waker, Worker};

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
    fn extend(&mut self, load: Load, _waker: &Waker) -> Vec<Vec<usize>> {
        if self.extended || !self.log.contains(&"finish 0".to_string()) {
            return Vec::new();
        }
        assert_eq!((load.queued, load.in_flight), (0, 1));
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

/// Once job 0 has finished (nothing else runs then), starts work beside the batch that
/// wakes the loop 50 ms later; then adds job 1, depending on 0.
#[derive(Default)]
struct Beside {
    log: Vec<String>,
    started: bool,
    woken: bool,
    added: bool,
    /// Set once the work began, when given.
    interrupt: Option<std::sync::Arc<AtomicBool>>,
}

impl Owner for Beside {
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
    fn extend(&mut self, _load: Load, waker: &Waker) -> Vec<Vec<usize>> {
        if self.woken && !self.added {
            self.added = true;
            self.log.push("extend".into());
            return vec![vec![0]];
        }
        if !self.started {
            self.started = true;
            let waker = waker.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                waker.wake();
            });
            if let Some(flag) = &self.interrupt {
                flag.store(true, Ordering::SeqCst);
            }
        }
        Vec::new()
    }
    fn awaiting(&self) -> bool {
        self.started && !self.woken
    }
    fn woken(&mut self) {
        self.woken = true;
        self.log.push("woken".into());
    }
}

impl Worker<Beside> for Quick {
    fn run(&self, _i: usize, _input: (), _reporter: &Reporter<u32>) -> bool {
        true
    }
}

#[test]
fn a_batch_waits_for_the_work_its_owner_started_beside_it_and_runs_what_it_adds() {
    let mut owner = Beside::default();
    let status = run(&mut owner, &Quick, &[vec![]], 2, &AtomicBool::new(false));
    assert_eq!(status, [Status::Done, Status::Done]);
    assert_eq!(
        owner.log,
        [
            "prepare 0",
            "finish 0",
            "woken",
            "extend",
            "prepare 1",
            "finish 1"
        ]
    );
}

#[test]
fn an_interrupted_batch_still_waits_for_the_work_beside_it() {
    let interrupted = std::sync::Arc::new(AtomicBool::new(false));
    let mut owner = Beside {
        interrupt: Some(interrupted.clone()),
        ..Beside::default()
    };
    let status = run(&mut owner, &Quick, &[vec![]], 2, &interrupted);
    assert_eq!(status, [Status::Done]);
    // Interrupted once the work began: it still ended in `woken`, and nothing was added.
    assert_eq!(owner.log, ["prepare 0", "finish 0", "woken"]);
}

/// Records the order jobs start in; job `awaited` is awaited by work outside the batch.
struct Ordered {
    started: Vec<usize>,
    awaited: usize,
}

impl Owner for Ordered {
    type Input = ();
    type Progress = u32;
    type Output = bool;
    fn awaited(&self, i: usize) -> bool {
        i == self.awaited
    }
    fn prepare(&mut self, i: usize) -> Result<(), bool> {
        self.started.push(i);
        Ok(())
    }
    fn progress(&mut self, _i: usize, _p: u32) {}
    fn finish(&mut self, _i: usize, ok: bool) -> bool {
        ok
    }
}

impl Worker<Ordered> for Quick {
    fn run(&self, _i: usize, _input: (), _reporter: &Reporter<u32>) -> bool {
        true
    }
}

#[test]
fn jobs_something_waits_on_start_before_those_nothing_waits_on() {
    // 0 and 1 are independent, 2 depends on 1, 3 is awaited outside the batch. One worker.
    let deps = vec![vec![], vec![], vec![1], vec![]];
    let mut owner = Ordered {
        started: Vec::new(),
        awaited: 3,
    };
    let status = run(&mut owner, &Quick, &deps, 1, &AtomicBool::new(false));
    assert!(status.iter().all(|s| *s == Status::Done), "{status:?}");
    // 1 and 3 first; then 0 and 2 in the order they became ready.
    assert_eq!(owner.started, [1, 3, 0, 2]);
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
