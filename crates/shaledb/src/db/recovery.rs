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
//! - a **WAL append or flush that fails for lack of space** (ENOSPC, `StorageFull`) fails its
//!   write group (no member acknowledged, the sequence numbers not published, nothing in the
//!   memtables) and suspends writes like a failed flush. That WAL may end in a torn record and
//!   its writer's block offset no longer matches the file, so it is given up for good; its
//!   acknowledged records are still in it and in the memtables. The recovery (each retry, or
//!   `Db::resume`): start a new WAL, freeze every family's memtable into it (`FailedWal`),
//!   flush them all, and once the MANIFEST edits moving every family's log number past the
//!   failed WAL are durable (which also queues it for deletion), lift the suspension. Until
//!   then nothing is written to the new WAL, so a crash at any point reopens with the failed
//!   WAL followed only by empty ones: its torn tail is the last write attempt and is dropped
//!   like the newest WAL's (db/open.rs, `replay_all`). The failed WAL is not synced: its
//!   acknowledged records need no more than they were promised (a sync write was synced), and
//!   after the lift they are in synced tables. RocksDB does the same (`ErrorHandler`, a WAL
//!   `NoSpace` error is a soft, auto-recoverable error; `DBImpl::ResumeImpl` flushes and
//!   switches the WAL). A memtable switch whose new WAL cannot be created for lack of space
//!   is recovered the same way (the current WAL is sound, but replacing it is the retry
//!   that needs room, and nothing is lost by flushing), and so is a blob file written with
//!   the values that runs out of space in the write group: the group never reached the
//!   WAL, and the flushes relocate the values of the given-up file (`WriteTimeBlobs`).
//!
//! After `max_bgerror_resume_count` failures in a row the error is final. Errors that may have
//! left the WAL or MANIFEST in doubt (any other failed write of either, a failed sync of
//! either: the MANIFEST writer wraps them as `Error::Poisoned`) and corruption are final at
//! once: writes fail with `Error::Poisoned` until reopen. A failed fsync is never retried, of
//! the WAL either, whatever its errno: after it the kernel may have dropped the dirty pages
//! and marked them clean, so a later sync would report success for data that is gone (the
//! "fsyncgate" behaviour of Linux), and which of the acknowledged writes are durable is
//! unknown. A failed write(2) is different: it reports exactly that these bytes did not reach
//! the file, so everything before them is as durable as it was, and a new WAL can take over.

use super::background::EditKind;
use super::{Db, DbInner, DbState};
use crate::error::{Error, Result};
use crate::listener::BackgroundErrorReason;
use crate::memtable::MemTable;
use crate::version::filename;
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
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

/// A WAL given up after a write failed for lack of space (see the module comment).
pub(crate) struct FailedWal {
    /// Its file number.
    number: u64,
    /// A new WAL took over and every memtable that held its records was frozen.
    replaced: bool,
}

/// True if a job that failed with `e` changed nothing and may simply run again.
fn retryable(e: &Error) -> bool {
    matches!(e, Error::Io { .. })
}

pub(super) use crate::error::is_no_space;

/// True once the failed WAL (if any) was replaced and every family's log number is past it:
/// nothing needs it any more, so writes may go on.
fn failed_wal_retired(st: &DbState) -> bool {
    st.failed_wal
        .as_ref()
        .is_none_or(|f| f.replaced && st.versions.log_number() > f.number)
}

/// True if the failed WAL was replaced and all its memtables are flushed, but no flush edit
/// moved every family's log number past it (no family held data, or the families that did
/// not were never advanced): a MANIFEST edit of log numbers alone must do it.
pub(super) fn failed_wal_needs_edit(st: &DbState) -> bool {
    let flushed = st
        .families
        .values()
        .all(|f| f.imms.is_empty() && !f.flush_running);
    let replaced = st.failed_wal.as_ref().is_some_and(|f| f.replaced);
    let retrying = st.flush_retry.as_ref().is_some_and(|r| r.running);
    replaced && retrying && flushed && !failed_wal_retired(st)
}

/// The failure compactions wait to retry, if its retry is not due yet.
pub(super) fn compaction_failure(st: &DbState) -> Option<Error> {
    st.compaction_retry
        .as_ref()
        .filter(|r| Instant::now() < r.at)
        .map(|r| r.error.duplicate())
}

/// Writes are accepted again: the retried flush succeeded (and a failed WAL is retired).
/// Returns false, changing nothing, while a failed WAL is still needed.
fn lift_suspension(st: &mut DbState) -> bool {
    if !failed_wal_retired(st) {
        return false;
    }
    st.failed_wal = None;
    st.flush_retry = None;
    if matches!(st.bg_error, Some(Error::Suspended(_))) {
        st.bg_error = None;
    }
    true
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
        match res {
            Ok(()) => {
                if st.flush_retry.as_ref().is_some_and(|r| r.running) {
                    lift_suspension(st);
                }
            }
            Err(e) => self.suspend_writes(st, e, BackgroundErrorReason::Flush),
        }
    }

    /// Suspends writes until a retry after a failure `e` that changed nothing (an IO error),
    /// or stops them for good (anything else, or too many failures in a row).
    fn suspend_writes(&self, st: &mut DbState, e: Error, reason: BackgroundErrorReason) {
        let suspended = st.bg_error.is_none() || matches!(st.bg_error, Some(Error::Suspended(_)));
        if !retryable(&e) || !suspended {
            self.record_bg_error(st, e, reason);
            return;
        }
        let failures = st.flush_retry.as_ref().map_or(0, |r| r.failures) + 1;
        match self.next_retry(failures, &e) {
            Some(retry) => {
                let suspended = Error::Suspended(Arc::new(e));
                self.note_background_error(st, reason, &suspended);
                st.flush_retry = Some(retry);
                st.bg_error = Some(suspended);
            }
            None => self.record_bg_error(st, e, reason),
        }
    }

    /// A write group failed to append to WAL `number` for lack of space (`e`): gives the WAL
    /// up (its writer is gone already), suspends writes until the recovery replaced and
    /// retired it, and returns the error the group's writers get.
    pub(super) fn suspend_for_failed_wal(&self, st: &mut DbState, number: u64, e: Error) -> Error {
        st.failed_wal = Some(FailedWal {
            number,
            replaced: false,
        });
        self.suspend_writes(st, e.duplicate(), BackgroundErrorReason::WriteWal);
        self.notify_state_changed();
        match &st.bg_error {
            Some(bg) => Error::poisoned(bg.duplicate()),
            None => Error::poisoned(e),
        }
    }

    /// The first step of recovering from a failed WAL (see the module comment): a new WAL
    /// takes over and every family's memtable is frozen into the flush queue, each family
    /// getting an empty one in the new WAL. Nothing is written to the new WAL before the
    /// failed one is retired. A failed directory sync is final (a failed fsync is never
    /// retried); any other failure leaves everything as it was, to be retried.
    fn replace_failed_wal(&self, st: &mut DbState) -> Result<()> {
        let number = st.versions.new_file_number();
        let path = filename::log_file(&self.dir, number);
        let file = super::create_wal_file(&self.opts, &path)
            .map_err(|e| Error::io(format!("creating WAL {}", path.display()), e))?;
        if let Err(e) = self.fs.sync_dir(&self.dir) {
            let e = Error::io("syncing the directory for a new WAL", e);
            return Err(Error::poisoned(e));
        }
        *self.wal.lock() = Some(super::new_wal_writer(file, &self.opts));
        self.wal_number.store(number, Ordering::Release);
        st.live_wals.push((number, 0));
        let DbState {
            families, versions, ..
        } = st;
        for f in families.values_mut() {
            let fresh = Arc::new(MemTable::for_family(number, &f.data.opts));
            let old = std::mem::replace(&mut f.mem, fresh);
            if !old.is_empty() {
                old.freeze_charge();
                f.imms.push_back(old);
            }
            f.install_super_version(versions);
        }
        if let Some(f) = &mut st.failed_wal {
            f.replaced = true;
        }
        Ok(())
    }

    /// The last step of recovering from a failed WAL when no flush edit moved every family's
    /// log number past it: logs edits of the log numbers alone (`failed_wal_needs_edit`).
    pub(super) fn retire_failed_wal(&self, st: &mut MutexGuard<'_, DbState>) -> Result<()> {
        let mut edits = super::background::log_number_advances(st, &[]);
        if edits.is_empty() {
            return Ok(());
        }
        edits[0].last_sequence = Some(self.last_sequence.load(Ordering::Acquire));
        self.log_and_apply_all(st, &mut edits, EditKind::Other)?;
        for e in &edits {
            st.install_super_version(e.column_family);
        }
        Ok(())
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

    /// Starts the retry of a failed flush (or of the recovery from a failed WAL, whose first
    /// step it runs here) once it is due; writes stay suspended until it succeeds. Returns
    /// whether background work may run at all.
    pub(super) fn lift_suspension_if_due(&self, st: &mut DbState) -> bool {
        if st.bg_error.is_none() {
            return true;
        }
        match &mut st.flush_retry {
            Some(r) if r.running => return true,
            // A write group past its WAL append may still be inserting into the memtables
            // the recovery freezes: it is microseconds from done, and the retry polls.
            Some(_) if !st.inflight.is_empty() => return false,
            Some(r) if Instant::now() >= r.at => r.running = true,
            _ => return false,
        }
        if st.failed_wal.as_ref().is_some_and(|f| !f.replaced) {
            if let Err(e) = self.replace_failed_wal(st) {
                self.suspend_writes(st, e, BackgroundErrorReason::WriteWal);
                self.done_cv.notify_all(); // `resume` waits for this
                return false;
            }
        }
        true
    }

    /// A started flush retry that found nothing to flush has succeeded.
    pub(super) fn flush_retry_done(&self, st: &mut DbState) {
        if st.flush_retry.as_ref().is_some_and(|r| r.running) {
            let idle = st.families.values().all(|f| !f.flush_running);
            if idle && lift_suspension(st) {
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
    /// Retries, now, the flush whose failure suspended writes ([`Error::Suspended`]), or the
    /// recovery from a WAL write that failed for lack of space (a new WAL, every memtable
    /// flushed, the failed WAL retired, as RocksDB's `DB::Resume`), and waits for the outcome:
    /// `Ok` once writes are accepted again, the retry's error if it failed too (writes stay
    /// suspended; call again once the cause, e.g. a full disk, is fixed). Also retries paused
    /// compactions. A database whose writes are poisoned ([`Error::Poisoned`]: a failed
    /// MANIFEST write, another failed WAL write, a failed WAL or MANIFEST sync, corruption, or
    /// too many failed retries) cannot resume: it returns that error, and only a reopen
    /// recovers. A flush already running when it is called is waited for first (it may still
    /// fail from the condition just fixed), so only attempts this call starts decide its
    /// answer. `Ok` once that is done when nothing failed.
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
        // A flush already running may still fail from the condition the caller has just fixed
        // (a full disk): wait for its outcome first, so that only attempts started after this
        // call decide what it returns. (With writes suspended no new memtable fills, so this
        // ends; compactions, which may follow one another, are not waited for.)
        while st.families.values().any(|f| f.flush_running) && !st.closed {
            inner.done_cv.wait(&mut st);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A retry due while a write group is inflight does not start: the recovery from a failed
    /// WAL would freeze memtables the group may still insert into. It starts once the group
    /// is published.
    #[test]
    fn a_due_retry_waits_while_a_write_group_is_inflight() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = crate::Db::open(dir.path(), crate::Options::default()).expect("open");
        let inner = &*db.inner;
        let mut st = inner.state.lock();
        st.bg_error = Some(Error::Closed);
        st.flush_retry = Some(Retry {
            failures: 1,
            at: Instant::now(),
            running: false,
            error: Error::Closed,
        });
        st.inflight
            .push_back(super::super::write::InflightGroup::pending(1));
        assert!(!inner.lift_suspension_if_due(&mut st));
        assert!(st.flush_retry.as_ref().is_some_and(|r| !r.running));
        st.inflight.clear();
        assert!(inner.lift_suspension_if_due(&mut st));
        assert!(st.flush_retry.as_ref().is_some_and(|r| r.running));
        // Back to a healthy state before the background threads look.
        st.flush_retry = None;
        st.bg_error = None;
        drop(st);
        db.close().expect("close");
    }
}
