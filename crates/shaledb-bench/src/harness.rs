//! The one thread harness of db_bench, YCSB and TPC-H style runs: spawn the workers, keep a
//! monitor ticking beside them, stop everyone when one worker fails, and read the clock by
//! one rule.
//!
//! The clock rule: the run starts just before the first worker is spawned and ends when the
//! last worker returns, or earlier if a worker calls [`Run::finish`] (TPC-H's writer: the
//! readers around it only run while it writes). The monitor, which sleeps in 50 ms steps,
//! never decides when the clock stops: it did once, and every figure was rounded up to 50 ms.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How often the monitor runs.
const MONITOR_PERIOD: Duration = Duration::from_millis(50);

/// The state one run shares between its workers and its monitor.
#[derive(Debug)]
pub struct Run {
    start: Instant,
    stop: AtomicBool,
    finished: OnceLock<Instant>,
}

impl Run {
    /// When the run started.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// True once a worker failed or someone called [`Run::request_stop`]: workers should
    /// return soon.
    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Asks every worker to stop (a failure, or a time limit reached).
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Ends the run now: the clock stops here, and [`Run::is_finished`] turns true. Only the
    /// first call counts.
    pub fn finish(&self) {
        let _ = self.finished.set(Instant::now());
    }

    /// True once [`Run::finish`] was called.
    pub fn is_finished(&self) -> bool {
        self.finished.get().is_some()
    }
}

/// What the workers returned, and the run's clock.
#[derive(Debug)]
pub struct Outcome<T> {
    /// Each worker's result, in worker order.
    pub results: Vec<Result<T, String>>,
    /// When the run started.
    pub start: Instant,
    /// When the run ended (see the clock rule in the module documentation).
    pub end: Instant,
}

impl<T> Outcome<T> {
    /// Seconds from start to end, never zero (figures divide by it).
    pub fn elapsed_secs(&self) -> f64 {
        self.end.duration_since(self.start).as_secs_f64().max(1e-9)
    }
}

/// Runs `worker(tid, &run)` on `threads` threads, and `monitor(&run)` every 50 ms beside them
/// until they have all returned. A worker that fails (or panics: `panicked` is its error text)
/// asks the others to stop.
pub fn run_workers<T, W, M>(threads: usize, panicked: &str, worker: W, mut monitor: M) -> Outcome<T>
where
    T: Send,
    W: Fn(usize, &Run) -> Result<T, String> + Sync,
    M: FnMut(&Run) + Send,
{
    let run = Run {
        start: Instant::now(),
        stop: AtomicBool::new(false),
        finished: OnceLock::new(),
    };
    let all_returned = AtomicBool::new(false);
    let (results, returned) = std::thread::scope(|s| {
        let (run, all_returned) = (&run, &all_returned);
        let mon = s.spawn(move || {
            while !all_returned.load(Ordering::Relaxed) {
                std::thread::sleep(MONITOR_PERIOD);
                monitor(run);
            }
        });
        let handles: Vec<_> = (0..threads)
            .map(|tid| {
                let worker = &worker;
                s.spawn(move || {
                    let r = worker(tid, run);
                    if r.is_err() {
                        run.request_stop();
                    }
                    r
                })
            })
            .collect();
        let results: Vec<Result<T, String>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(panicked.to_string())))
            .collect();
        let returned = Instant::now();
        all_returned.store(true, Ordering::Relaxed);
        let _ = mon.join();
        (results, returned)
    });
    let end = run.finished.get().copied().unwrap_or(returned);
    Outcome {
        results,
        start: run.start,
        end,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_worker_runs_once_with_its_id_and_results_keep_worker_order() {
        let out = run_workers(4, "panicked", |tid, _| Ok(tid * 10), |_| {});
        let got: Vec<usize> = out.results.into_iter().map(|r| r.unwrap()).collect();
        assert_eq!(got, [0, 10, 20, 30]);
    }

    #[test]
    fn a_failing_worker_stops_the_others_and_a_panic_becomes_an_error() {
        let out = run_workers(
            3,
            "worker panicked",
            |tid, run| match tid {
                0 => Err("broken".to_string()),
                1 => panic!("on purpose"),
                _ => {
                    while !run.stop_requested() {
                        std::thread::yield_now();
                    }
                    Ok(())
                }
            },
            |_| {},
        );
        let errs: Vec<Option<String>> = out.results.into_iter().map(|r| r.err()).collect();
        assert_eq!(
            errs,
            [Some("broken".into()), Some("worker panicked".into()), None]
        );
    }

    #[test]
    fn finish_stops_the_clock_before_the_other_workers_return() {
        let finished_by = std::sync::Mutex::new(None);
        let out = run_workers(
            2,
            "panicked",
            |tid, run| {
                if tid == 0 {
                    run.finish();
                    *finished_by.lock().unwrap() = Some(Instant::now());
                } else {
                    while !run.is_finished() {
                        std::thread::yield_now();
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                Ok(())
            },
            |_| {},
        );
        let finished_by = finished_by.lock().unwrap().unwrap();
        assert!(out.end <= finished_by);
        assert!(out.results.iter().all(|r| r.is_ok()));
    }

    #[test]
    fn a_slow_monitor_does_not_hold_the_clock() {
        let ticked = AtomicBool::new(false);
        let monitor_done = std::sync::Mutex::new(None);
        let out = run_workers(
            1,
            "panicked",
            |_, _| {
                while !ticked.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                Ok(())
            },
            |_| {
                if !ticked.swap(true, Ordering::AcqRel) {
                    std::thread::sleep(Duration::from_millis(200));
                    *monitor_done.lock().unwrap() = Some(Instant::now());
                }
            },
        );
        let monitor_done = monitor_done.lock().unwrap().unwrap();
        assert!(out.end < monitor_done);
    }
}
