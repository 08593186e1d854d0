//! Recovering from background errors without a reopen (RocksDB's background error handling).
//!
//! A flush or compaction that fails with an IO error while writing its outputs or reading its
//! inputs (a full disk, a transient EIO) has changed nothing: its outputs were removed, the
//! memtable is still frozen in memory, its WAL still on disk, the version unchanged. So it can
//! simply run again:
//! - a failed **flush** suspends writes (`bg_error` holds `Error::Suspended`: memtables cannot
//!   drain, so accepting more would only fill memory) and is retried after
//!   `bgerror_resume_retry_interval`, or at once by `Db::resume`; its success lifts the
//!   suspension;
//! - a failed **compaction** does not stop writes (RocksDB's "soft" error): compactions pause
//!   until the retry time, and L0 or pending-bytes stalls do the rest if it lasts.
//!
//! After `max_bgerror_resume_count` failures in a row the error is final. Errors that may have
//! left the WAL or MANIFEST in doubt (a failed write or sync of either: the MANIFEST writer
//! wraps them as `Error::Poisoned`; a failed fsync is never retried, its pages may be lost)
//! and corruption are final at once: writes fail with `Error::Poisoned` until reopen.

use super::{Db, DbInner, DbState};
use crate::error::{Error, Result};
use crate::listener::BackgroundErrorReason;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A failed job waiting for its retry.
pub(crate) struct Retry {
    /// Failures in a row.
    failures: u32,
    /// When the next attempt may start.
    at: Instant,
    /// A flush retry has been started and not finished yet (writes stay suspended until it
    /// succeeds).
    running: bool,
    /// The last failure.
    error: Error,
}

/// True if a job that failed with `e` changed nothing and may simply run again.
fn retryable(e: &Error) -> bool {
    matches!(e, Error::Io { .. })
}

/// The failure compactions wait to retry, if its retry is not due yet.
pub(super) fn compaction_failure(st: &DbState) -> Option<Error> {
    st.compaction_retry
        .as_ref()
        .filter(|r| Instant::now() < r.at)
        .map(|r| r.error.duplicate())
}

/// Writes are accepted again: the retried flush succeeded.
fn lift_suspension(st: &mut DbState) {
    st.flush_retry = None;
    if matches!(st.bg_error, Some(Error::Suspended(_))) {
        st.bg_error = None;
    }
}

/// True unless compactions wait for the retry time of an earlier failure.
pub(super) fn compactions_due(st: &DbState) -> bool {
    st.compaction_retry
        .as_ref()
        .is_none_or(|r| Instant::now() >= r.at)
}

impl DbInner {
    /// What a failure `e` of a job that failed `failures - 1` times before becomes: retried
    /// later, or final.
    fn next_retry(&self, failures: u32, error: &Error) -> Option<Retry> {
        (failures <= self.opts.max_bgerror_resume_count).then(|| Retry {
            failures,
            at: Instant::now() + self.opts.bgerror_resume_retry_interval,
            running: false,
            error: error.duplicate(),
        })
    }

    /// Records a flush's result: a success lifts a suspension, an IO failure suspends writes
    /// until a retry, anything else stops them for good.
    pub(super) fn record_flush_result(&self, st: &mut DbState, res: Result<()>) {
        let e = match res {
            Ok(()) => {
                if st.flush_retry.as_ref().is_some_and(|r| r.running) {
                    lift_suspension(st);
                }
                return;
            }
            Err(e) => e,
        };
        let suspended = st.bg_error.is_none() || matches!(st.bg_error, Some(Error::Suspended(_)));
        if !retryable(&e) || !suspended {
            self.record_bg_error(st, e, BackgroundErrorReason::Flush);
            return;
        }
        let failures = st.flush_retry.as_ref().map_or(0, |r| r.failures) + 1;
        match self.next_retry(failures, &e) {
            Some(retry) => {
                let suspended = Error::Suspended(Arc::new(e));
                self.note_background_error(st, BackgroundErrorReason::Flush, &suspended);
                st.flush_retry = Some(retry);
                st.bg_error = Some(suspended);
            }
            None => self.record_bg_error(st, e, BackgroundErrorReason::Flush),
        }
    }

    /// Records a compaction's result: an IO failure pauses compactions until a retry, anything
    /// else stops writes for good.
    pub(super) fn record_compaction_result(&self, st: &mut DbState, res: Result<()>) {
        let e = match res {
            Ok(()) => {
                st.compaction_retry = None;
                return;
            }
            Err(Error::Closed) => return,
            Err(e) => e,
        };
        if !retryable(&e) {
            self.record_bg_error(st, e, BackgroundErrorReason::Compaction);
            return;
        }
        let failures = st.compaction_retry.as_ref().map_or(0, |r| r.failures) + 1;
        match self.next_retry(failures, &e) {
            Some(retry) => {
                self.note_background_error(st, BackgroundErrorReason::Compaction, &e);
                st.compaction_retry = Some(retry);
            }
            None => self.record_bg_error(st, e, BackgroundErrorReason::Compaction),
        }
    }

    /// Starts the retry of a failed flush once it is due (writes stay suspended until it
    /// succeeds). Returns whether background work may run at all.
    pub(super) fn lift_suspension_if_due(&self, st: &mut DbState) -> bool {
        if st.bg_error.is_none() {
            return true;
        }
        match &mut st.flush_retry {
            Some(r) if r.running => true,
            Some(r) if Instant::now() >= r.at => {
                r.running = true;
                true
            }
            _ => false,
        }
    }

    /// A started flush retry that found nothing to flush has succeeded.
    pub(super) fn flush_retry_done(&self, st: &mut DbState) {
        if st.flush_retry.as_ref().is_some_and(|r| r.running) {
            let idle = st.families.values().all(|f| !f.flush_running);
            if idle {
                lift_suspension(st);
                self.done_cv.notify_all(); // `resume` waits for this
            }
        }
    }

    /// How long an idle background thread may sleep before a retry is due.
    pub(super) fn next_retry_in(&self, st: &DbState) -> Option<Duration> {
        let flush = st.flush_retry.as_ref().filter(|r| !r.running);
        let compaction = st.compaction_retry.as_ref();
        flush
            .into_iter()
            .chain(compaction)
            .map(|r| r.at.saturating_duration_since(Instant::now()))
            .min()
            .map(|d| d.max(Duration::from_millis(1)))
    }
}

impl Db {
    /// Retries, now, the flush whose failure suspended writes ([`Error::Suspended`]) and waits
    /// for the outcome: `Ok` once writes are accepted again, the retry's error if it failed
    /// too (writes stay suspended; call again once the cause, e.g. a full disk, is fixed).
    /// Also retries paused compactions. A database whose writes are poisoned
    /// ([`Error::Poisoned`]: a failed WAL or MANIFEST write or sync, corruption, or too many
    /// failed retries) cannot resume: it returns that error, and only a reopen recovers.
    /// `Ok` at once when nothing failed.
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// db.resume().unwrap(); // nothing to recover from
    /// ```
    pub fn resume(&self) -> Result<()> {
        let inner = &self.inner;
        inner.check_writable("resume")?;
        let mut st = inner.state.lock();
        if let (Some(e), None) = (&st.bg_error, &st.flush_retry) {
            return Err(Error::poisoned(e.duplicate()));
        }
        // Both retries are due now; remember how often each failed so far.
        let now = Instant::now();
        let mut failures = [0; 2];
        let state = &mut *st;
        for (retry, seen) in [&mut state.flush_retry, &mut state.compaction_retry]
            .into_iter()
            .zip(&mut failures)
        {
            if let Some(r) = retry {
                r.at = now;
                *seen = r.failures;
            }
        }
        inner.work_cv.notify_all();
        loop {
            if let (Some(e), None) = (&st.bg_error, &st.flush_retry) {
                return Err(Error::poisoned(e.duplicate()));
            }
            if let Some(r) = st.flush_retry.as_ref().filter(|r| r.failures > failures[0]) {
                return Err(Error::Suspended(Arc::new(r.error.duplicate())));
            }
            if let Some(r) = st
                .compaction_retry
                .as_ref()
                .filter(|r| r.failures > failures[1])
            {
                return Err(r.error.duplicate());
            }
            if st.bg_error.is_none() && st.flush_retry.is_none() && st.compaction_retry.is_none() {
                return Ok(());
            }
            if st.closed {
                return Err(Error::Closed);
            }
            inner.done_cv.wait(&mut st);
        }
    }
}
