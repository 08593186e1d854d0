//! Writeback hints (`sync_file_range`, RocksDB's `bytes_per_sync`) issued by one background
//! thread instead of the thread that appends.
//!
//! Starting writeback is not free: the kernel builds and submits the IO in the caller's
//! context. For a WAL that caller is the write-group leader, and a fill spent 4% of its
//! foreground time there (bench/results/2026-11-26-writeback-thread). A hint promises
//! nothing (a sync does), so it can run a little later, on another core: the appending
//! thread queues the range and goes on.
//!
//! The worker holds its own descriptor of each file (`File::try_clone`, the same open file),
//! so a file closed or deleted before its hint ran is harmless. One thread serves the
//! process, started at the first hint; it sleeps when nothing is queued.

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, OnceLock};

/// A file whose writeback the worker starts.
pub(super) struct Target {
    file: File,
    /// Set by the worker when the OS refused a hint: the file stops asking.
    refused: AtomicBool,
    /// End of the last range the worker started writeback for (tests wait on it).
    hinted_to: AtomicU64,
}

impl Target {
    /// A target writing back `file` (through a second descriptor of it).
    pub(super) fn new(file: &File) -> std::io::Result<Arc<Target>> {
        Ok(Arc::new(Target {
            file: file.try_clone()?,
            refused: AtomicBool::new(false),
            hinted_to: AtomicU64::new(0),
        }))
    }

    /// Whether the OS refused a hint for this file (not supported here, or failed).
    pub(super) fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// End of the last range started.
    #[cfg(test)]
    pub(super) fn hinted_to(&self) -> u64 {
        self.hinted_to.load(Ordering::Acquire)
    }
}

struct Request {
    target: Arc<Target>,
    offset: u64,
    len: u64,
}

/// The worker's queue; `None` if its thread could not be started (hints are then run by the
/// caller).
fn queue() -> Option<&'static Sender<Request>> {
    static QUEUE: OnceLock<Option<Sender<Request>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Request>();
            std::thread::Builder::new()
                .name("shaledb-writeback".into())
                .spawn(move || {
                    for r in rx {
                        run(&r);
                    }
                })
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

fn run(r: &Request) {
    if r.target.refused() {
        return;
    }
    if super::posix::start_writeback(&r.target.file, r.offset, r.len) {
        r.target
            .hinted_to
            .store(r.offset + r.len, Ordering::Release);
    } else {
        r.target.refused.store(true, Ordering::Relaxed);
    }
}

/// Starts writeback of `[offset, offset + len)` of `target` soon, on the worker thread.
pub(super) fn start(target: &Arc<Target>, offset: u64, len: u64) {
    let request = Request {
        target: Arc::clone(target),
        offset,
        len,
    };
    match queue() {
        Some(tx) => {
            if let Err(mpsc::SendError(request)) = tx.send(request) {
                // The worker is gone: the caller runs the hint itself.
                run(&request);
            }
        }
        // The worker could not be started.
        None => run(&request),
    }
}
