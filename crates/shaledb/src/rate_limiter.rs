//! The rate limiter of flush and compaction writes (`Options::rate_limit_bytes_per_sec`,
//! RocksDB's `rate_limiter`): every append to a table or blob file a flush or compaction
//! writes first asks the limiter for its bytes, and sleeps off any debt. The bucket is the
//! one that paces delayed writes (`db/write_delay.rs`), with its credit capped at a tenth of
//! a second's worth so that a pause is not followed by a burst.

use crate::db::write_delay::WriteDelay;
use crate::fs::{FileSystem, FsHook, HookedFileSystem, WritableFile};
use crate::statistics::{Statistics, Ticker};
use parking_lot::Mutex;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes per second shared by every flush and compaction of one database.
pub(crate) struct RateLimiter {
    bucket: Mutex<WriteDelay>,
    /// Bytes per second, at least 1.
    rate: u64,
    /// Set at close: waits end at once, so close is not held up by a long debt.
    closed: AtomicBool,
    stats: Option<Arc<Statistics>>,
}

impl RateLimiter {
    /// A limiter of `rate` bytes per second (at least 1).
    pub(crate) fn new(rate: u64, stats: Option<Arc<Statistics>>) -> RateLimiter {
        RateLimiter {
            bucket: Mutex::new(WriteDelay::with_max_credit(rate, (rate / 10).max(1))),
            rate: rate.max(1),
            closed: AtomicBool::new(false),
            stats,
        }
    }

    /// The rate, in bytes per second.
    pub(crate) fn rate(&self) -> u64 {
        self.rate
    }

    /// Waits until `bytes` may be written. Concurrent callers queue behind each other's debt
    /// (the bucket's accounting runs ahead of the clock), so together they keep to the rate.
    pub(crate) fn request(&self, bytes: u64) {
        let start = Instant::now();
        let wait = self.bucket.lock().delay(bytes, start);
        if wait.is_zero() {
            return;
        }
        let until = start + wait;
        // In slices, so a close is not held up.
        while !self.closed.load(Ordering::Acquire) {
            let now = Instant::now();
            if now >= until {
                break;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(100)));
        }
        if let Some(s) = &self.stats {
            s.add(
                Ticker::RateLimiterWaitMicros,
                start.elapsed().as_micros() as u64,
            );
        }
    }

    /// The database is closing: no more waiting.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// `fs` with every file it creates paced by this limiter: what flushes and compactions
    /// write their outputs through.
    pub(crate) fn wrap(self: &Arc<Self>, fs: Arc<dyn FileSystem>) -> Arc<dyn FileSystem> {
        Arc::new(HookedFileSystem::new(fs, Limited(self.clone())))
    }
}

/// The hook that wraps created files.
struct Limited(Arc<RateLimiter>);

impl FsHook for Limited {
    fn writable(&self, _path: &Path, file: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        Box::new(LimitedFile {
            inner: file,
            limiter: self.0.clone(),
        })
    }
}

/// A file whose appends wait for the limiter.
struct LimitedFile {
    inner: Box<dyn WritableFile>,
    limiter: Arc<RateLimiter>,
}

impl WritableFile for LimitedFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.limiter.request(data.len() as u64);
        self.inner.append(data)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn set_writeback_interval(&mut self, bytes: u64) {
        self.inner.set_writeback_interval(bytes)
    }
    fn preallocate(&mut self, len: u64) -> io::Result<()> {
        self.inner.preallocate(len)
    }
    fn trim_preallocated(&mut self) -> io::Result<()> {
        self.inner.trim_preallocated()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFileSystem;

    #[test]
    fn appends_through_the_wrapper_keep_to_the_rate() {
        let limiter = Arc::new(RateLimiter::new(100_000, None));
        let fs = limiter.wrap(Arc::new(MemFileSystem::new()));
        fs.create_dir_all(Path::new("/d")).expect("test");
        let mut f = fs.create(Path::new("/d/1.sst")).expect("test");
        let start = Instant::now();
        // 30 KB at 100 KB/s: at least 300 ms less the tenth of a second of credit a pause
        // may earn (none here: the bucket starts empty).
        for _ in 0..30 {
            f.append(&[7u8; 1000]).expect("test");
        }
        assert!(
            start.elapsed() >= Duration::from_millis(290),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(f.len(), 30_000);
        limiter.close();
        let start = Instant::now();
        f.append(&[7u8; 1_000_000]).expect("test");
        assert!(start.elapsed() < Duration::from_secs(5), "close ends waits");
    }
}
