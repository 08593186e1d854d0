//! Observability glue: what the database tells the `LOG`, the statistics and the event
//! listeners (docs/operations.md, "Observability").
//!
//! Events are queued under the state mutex (`DbState::pending_events`) and delivered after it
//! is released, by whichever thread gets there first while the others leave the queue to it
//! (`DbState::delivering_events`): so callbacks never run under the mutex, and events arrive
//! in the order they were queued. Table file deletions are reported directly by the thread
//! that deletes (it holds no lock).

use super::{DbInner, DbState};
use crate::error::Error;
use crate::info_log::info_log;
use crate::listener::{
    BackgroundErrorInfo, BackgroundErrorReason, Event, EventListener, TableFileDeletionInfo,
    WriteStallCondition, WriteStallInfo,
};
use crate::statistics::Ticker;
use parking_lot::MutexGuard;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl DbInner {
    /// Queues `event` for the listeners (nothing if there are none).
    pub(crate) fn emit(&self, st: &mut DbState, event: Event) {
        if !self.opts.listeners.is_empty() {
            st.pending_events.push(event);
        }
    }

    /// Delivers the queued events with the mutex released (see the module comment). Returns
    /// whether the mutex was released (state may have changed meanwhile).
    pub(crate) fn deliver_events(&self, st: &mut MutexGuard<'_, DbState>) -> bool {
        if st.pending_events.is_empty() || st.delivering_events {
            return false;
        }
        st.delivering_events = true;
        while !st.pending_events.is_empty() {
            let events = std::mem::take(&mut st.pending_events);
            MutexGuard::unlocked(st, || {
                for e in &events {
                    self.call_listeners(|l| e.deliver(l));
                }
            });
        }
        st.delivering_events = false;
        true
    }

    /// Calls `f` on every listener; a panic is caught, counted and logged.
    fn call_listeners(&self, f: impl Fn(&dyn EventListener)) {
        for l in &self.opts.listeners {
            if catch_unwind(AssertUnwindSafe(|| f(&**l))).is_err() {
                if let Some(s) = &self.stats {
                    s.add(Ticker::ListenerPanics, 1);
                }
                info_log!(self.info_log, Error, "an event listener panicked (ignored)");
            }
        }
    }

    /// Logs a failure that stopped writes and queues its event. The caller stores it in
    /// `bg_error` (only when this is the first failure: call this only then).
    pub(crate) fn note_background_error(
        &self,
        st: &mut DbState,
        reason: BackgroundErrorReason,
        error: &Error,
    ) {
        info_log!(
            self.info_log,
            Error,
            "background error ({reason:?}); writes are refused until reopen: {error}"
        );
        self.emit(
            st,
            Event::BackgroundError(BackgroundErrorInfo {
                reason,
                error: error.duplicate(),
            }),
        );
    }

    /// Records that writes are now `current` (normal, delayed or stopped); logs and queues an
    /// event if that changed. Returns whether it changed.
    pub(crate) fn note_stall_condition(
        &self,
        st: &mut DbState,
        current: WriteStallCondition,
    ) -> bool {
        let previous = st.stall_condition;
        if previous == current {
            return false;
        }
        st.stall_condition = current;
        info_log!(
            self.info_log,
            Warn,
            "write stall condition {previous:?} -> {current:?}"
        );
        self.emit(st, Event::Stall(WriteStallInfo { previous, current }));
        true
    }

    /// Reports the deletion (or failed deletion) of table file `number` at `path`.
    pub(crate) fn table_file_deleted(
        &self,
        number: u64,
        path: &Path,
        result: std::io::Result<()>,
    ) {
        match &result {
            Ok(()) => info_log!(self.info_log, Info, "deleted table #{number}"),
            Err(e) => info_log!(self.info_log, Warn, "deleting table #{number} failed: {e}"),
        }
        if self.opts.listeners.is_empty() {
            return;
        }
        let info = TableFileDeletionInfo {
            file_number: number,
            file_path: path.to_path_buf(),
            error: result
                .err()
                .map(|e| Error::io(format!("deleting {}", path.display()), e)),
        };
        self.call_listeners(|l| l.on_table_file_deleted(&info));
    }

    /// Writes the options the database was opened with to the `LOG`.
    pub(crate) fn log_options(&self) {
        if !self.info_log.enabled(crate::InfoLogLevel::Info) {
            return;
        }
        info_log!(
            self.info_log,
            Info,
            "ShaleDB {} opened {}",
            env!("CARGO_PKG_VERSION"),
            self.dir.display()
        );
        // `{:#?}` puts one option per line; each line gets the LOG prefix.
        info_log!(self.info_log, Info, "options: {:#?}", self.opts);
    }

    /// The statistics dump thread (`Options::stats_dump_period`): every period, writes
    /// `shaledb.stats` and the statistics to the `LOG`, until close.
    pub(crate) fn stats_dump_thread(&self) {
        let period = Duration::from_secs(self.opts.stats_dump_period);
        let mut next = Instant::now() + period;
        let mut st = self.state.lock();
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            // Woken early by every finished job (work_cv is shared); only the deadline counts.
            let _ = self.work_cv.wait_until(&mut st, next);
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            if Instant::now() < next {
                continue;
            }
            next += period;
            MutexGuard::unlocked(&mut st, || self.dump_stats());
        }
    }

    /// Writes `shaledb.stats` (and the statistics, if kept) to the `LOG`.
    pub(crate) fn dump_stats(&self) {
        let stats = self
            .property(&self.default_cf, "shaledb.stats")
            .unwrap_or_default();
        info_log!(self.info_log, Info, "------- DUMPING STATS -------\n{stats}");
        if let Some(s) = &self.stats {
            info_log!(self.info_log, Info, "STATISTICS:\n{}", s.snapshot());
        }
    }
}
