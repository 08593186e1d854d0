//! Reads issued concurrently: a small process-wide pool of threads that run blocking reads
//! (positional reads through the `FileSystem` trait), so that a `multi_get` missing several
//! blocks waits for about one device round trip instead of one per block. Threads start on
//! first use and stay; each mostly sleeps in a read, so there can be more of them than cores.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Most reads in flight from the pool at once (plus the caller's own).
const POOL_THREADS: usize = 15;

/// Below this average read time reads are served from memory (the OS page cache), and handing
/// them to other threads costs more than doing them one after another.
const PARALLEL_MIN_MICROS: u64 = 20;

/// A moving average of block reads' durations in microseconds (7/8 old, 1/8 new).
struct ReadTimer(AtomicU64);

impl ReadTimer {
    fn record(&self, took: Duration) {
        let sample = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let old = self.0.load(Ordering::Relaxed);
        // Racy on purpose: a lost update only delays the average by one sample.
        self.0.store(old - old / 8 + sample / 8, Ordering::Relaxed);
    }

    fn worth_parallel(&self, n: usize) -> bool {
        n >= 2 && self.0.load(Ordering::Relaxed) >= PARALLEL_MIN_MICROS
    }
}

/// Recent block reads of the process (multi_get's).
static READS: ReadTimer = ReadTimer(AtomicU64::new(0));

/// Records how long one block read took.
pub(crate) fn record_read(took: Duration) {
    READS.record(took);
}

/// True if `n` reads are worth running concurrently: several, and recent reads waited on
/// the device rather than coming from memory.
pub(crate) fn worth_parallel(n: usize) -> bool {
    READS.worth_parallel(n)
}

pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

struct Pool {
    queue: Mutex<VecDeque<Job>>,
    ready: Condvar,
}

static POOL: OnceLock<Arc<Pool>> = OnceLock::new();

fn pool() -> &'static Arc<Pool> {
    POOL.get_or_init(|| {
        let pool = Arc::new(Pool {
            queue: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
        });
        for i in 0..POOL_THREADS {
            let p = pool.clone();
            // A pool that cannot start threads still works: the caller runs every job.
            let _ = std::thread::Builder::new()
                .name(format!("shaledb-io-{i}"))
                .spawn(move || worker(&p));
        }
        pool
    })
}

fn worker(pool: &Pool) {
    loop {
        let job = {
            let mut q = pool.queue.lock();
            loop {
                if let Some(j) = q.pop_front() {
                    break j;
                }
                pool.ready.wait(&mut q);
            }
        };
        run_caught(job);
    }
}

/// Runs a job; a panic ends the job, not the thread running it (a pool thread stays, a caller
/// still waits for the others). Its result slot then stays empty, which callers handle.
fn run_caught(job: Job) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
}

/// Counts unfinished jobs of one `run_all` call.
struct Latch {
    left: Mutex<usize>,
    done: Condvar,
}

impl Latch {
    fn count_down(&self) {
        let mut left = self.left.lock();
        *left -= 1;
        if *left == 0 {
            self.done.notify_all();
        }
    }
}

/// Decrements the latch when a job ends, even by a panic, so the caller never waits forever.
struct CountDownOnDrop(Arc<Latch>);

impl Drop for CountDownOnDrop {
    fn drop(&mut self) {
        self.0.count_down();
    }
}

/// Runs every job, concurrently on the pool and on the calling thread, and returns when all
/// have finished. Jobs report their results through what they capture; one that panics
/// reports nothing.
pub(crate) fn run_all(mut jobs: Vec<Job>) {
    let Some(first) = jobs.pop() else {
        return;
    };
    if jobs.is_empty() {
        return run_caught(first);
    }
    let latch = Arc::new(Latch {
        left: Mutex::new(jobs.len()),
        done: Condvar::new(),
    });
    let pool = pool();
    let queued = jobs.len();
    {
        let mut q = pool.queue.lock();
        for job in jobs {
            let guard = CountDownOnDrop(latch.clone());
            q.push_back(Box::new(move || {
                let _guard = guard;
                job();
            }));
        }
    }
    // One waiter per job: waking every idle thread for two jobs costs more than it saves.
    for _ in 0..queued {
        pool.ready.notify_one();
    }
    run_caught(first);
    // Help with what no pool thread has taken yet (all of it if the pool has no threads):
    // jobs queued by other callers are run too, which only shortens their wait.
    loop {
        let next = pool.queue.lock().pop_front();
        match next {
            Some(job) => run_caught(job),
            None => break,
        }
    }
    let mut left = latch.left.lock();
    while *left > 0 {
        latch.done.wait(&mut left);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    #[test]
    fn slow_reads_make_parallel_reads_worthwhile_and_fast_ones_do_not() {
        let reads = ReadTimer(AtomicU64::new(0));
        assert!(!reads.worth_parallel(8), "nothing measured yet");
        for _ in 0..64 {
            reads.record(Duration::from_micros(100));
        }
        assert!(reads.worth_parallel(8), "reads from a device");
        assert!(!reads.worth_parallel(1), "a single read");
        for _ in 0..64 {
            reads.record(Duration::from_micros(2));
        }
        assert!(!reads.worth_parallel(8), "reads from memory");
    }

    #[test]
    fn every_job_runs_before_run_all_returns() {
        let sum = Arc::new(AtomicUsize::new(0));
        let jobs: Vec<Job> = (1..=100)
            .map(|i| {
                let sum = sum.clone();
                Box::new(move || {
                    sum.fetch_add(i, Ordering::SeqCst);
                }) as Job
            })
            .collect();
        run_all(jobs);
        assert_eq!(sum.load(Ordering::SeqCst), 5050);
        run_all(Vec::new());
    }

    #[test]
    fn blocking_jobs_overlap() {
        // Eight jobs that each sleep 100 ms finish in far less than 800 ms.
        let start = Instant::now();
        let jobs: Vec<Job> = (0..8)
            .map(|_| Box::new(|| std::thread::sleep(Duration::from_millis(100))) as Job)
            .collect();
        run_all(jobs);
        assert!(
            start.elapsed() < Duration::from_millis(500),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_panicking_job_does_not_hang_the_caller() {
        let ran = Arc::new(AtomicUsize::new(0));
        let mut jobs: Vec<Job> = vec![Box::new(|| panic!("job failed"))];
        for _ in 0..3 {
            let ran = ran.clone();
            jobs.push(Box::new(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            }));
        }
        run_all(jobs);
        assert_eq!(ran.load(Ordering::SeqCst), 3);
    }
}
