//! Observability glue: what the database tells the `LOG`, the statistics and the event
//! listeners (docs/operations.md, "Observability").
//!
//! Events are queued under the state mutex (`DbState::pending_events`) and delivered after it
//! is released, by whichever thread gets there first while the others leave the queue to it
//! (`DbState::delivering_events`): so callbacks never run under the mutex, and events arrive
//! in the order they were queued. Table file deletions are reported directly by the thread
//! that deletes (it holds no lock).

use super::{DbInner, DbState};
use crate::compaction::job::Written;
use crate::compaction::Compaction;
use crate::error::Error;
use crate::info_log::info_log;
use crate::listener::{
    BackgroundErrorInfo, BackgroundErrorReason, Event, EventListener, TableFileDeletionInfo,
    WriteStallCondition, WriteStallInfo,
};
use crate::listener::{CompactionJobInfo, FlushJobInfo};
use crate::statistics::HistogramKind;
use crate::statistics::Ticker;
use crate::version::filename;
use parking_lot::MutexGuard;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

thread_local! {
    /// This thread is running listener callbacks (which may call back into the database).
    static IN_LISTENER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

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
        // Callers of `settle_events` may be waiting for this delivery.
        self.done_cv.notify_all();
        true
    }

    /// Delivers every queued event, or waits until the thread delivering them is done, so
    /// that a `flush` or `compact_range` returns after its events reached the listeners.
    /// Inside a callback it does not wait (the caller is the one delivering).
    pub(crate) fn settle_events(&self, st: &mut MutexGuard<'_, DbState>) {
        if self.opts.listeners.is_empty() || IN_LISTENER.get() {
            return;
        }
        loop {
            if self.deliver_events(st) {
                continue;
            }
            if !st.delivering_events {
                return;
            }
            self.done_cv.wait(st);
        }
    }

    /// Calls `f` on every listener; a panic is caught, counted and logged.
    fn call_listeners(&self, f: impl Fn(&dyn EventListener)) {
        let outer = IN_LISTENER.replace(true);
        for l in &self.opts.listeners {
            if catch_unwind(AssertUnwindSafe(|| f(&**l))).is_err() {
                if let Some(s) = &self.stats {
                    s.add(Ticker::ListenerPanics, 1);
                }
                info_log!(self.info_log, Error, "an event listener panicked (ignored)");
            }
        }
        IN_LISTENER.set(outer);
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
            "background error ({reason:?}): {error}"
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

    /// After a flush or compaction: writes that were slowed are slowed no more if no family
    /// still needs it, said now rather than at the next write (a stopped writer wakes and
    /// says so itself).
    pub(crate) fn recheck_stall_condition(&self, st: &mut DbState) {
        if st.stall_condition != WriteStallCondition::Delayed {
            return;
        }
        let slowed = st
            .families
            .values()
            .any(|cf| super::write::family_room(st, cf, false).slow_down);
        if !slowed {
            self.note_stall_condition(st, WriteStallCondition::Normal);
        }
    }

    /// Reports the deletion (or failed deletion) of table file `number` at `path`.
    pub(crate) fn table_file_deleted(&self, number: u64, path: &Path, result: std::io::Result<()>) {
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
        info_log!(
            self.info_log,
            Info,
            "------- DUMPING STATS -------\n{stats}"
        );
        if let Some(s) = &self.stats {
            info_log!(self.info_log, Info, "STATISTICS:\n{}", s.snapshot());
        }
    }

    /// The name of family `cf` (for LOG lines and events).
    fn cf_name(st: &DbState, cf: u32) -> String {
        st.family(cf)
            .map_or_else(|| format!("#{cf}"), |f| f.data.name.clone())
    }

    /// A flush of family `cf` installed what `out` lists: counts, logs, queues the event.
    pub(crate) fn flush_completed(
        &self,
        st: &mut DbState,
        cf: u32,
        out: &OutputSummary,
        duration: Duration,
    ) {
        if let Some(s) = &self.stats {
            s.add(Ticker::FlushBytesWritten, out.bytes);
            s.record(HistogramKind::FlushMicros, duration);
        }
        let cf_name = Self::cf_name(st, cf);
        info_log!(
            self.info_log,
            Info,
            "[{cf_name}] flush: tables {:?}, blob files {:?}, {} bytes, {} entries, in {} ms",
            out.tables.iter().map(|t| t.0).collect::<Vec<_>>(),
            out.blobs,
            out.bytes,
            out.tables.iter().map(|t| t.2).sum::<u64>(),
            duration.as_millis()
        );
        // A flush whose entries all went away (deleted below every snapshot) writes no table.
        let Some(&(number, size, entries)) = out.tables.first() else {
            return;
        };
        self.emit(
            st,
            Event::Flush(FlushJobInfo {
                cf_name,
                file_number: number,
                file_path: filename::table_file(&self.dir, number),
                file_size: size,
                num_entries: entries,
                blob_file_numbers: out.blobs.clone(),
                duration,
            }),
        );
    }

    /// Compaction `c` of family `cf` was installed, writing what `out` lists (`None`: a
    /// trivial move): counts, logs, queues the event.
    pub(crate) fn compaction_completed(
        &self,
        st: &mut DbState,
        cf: u32,
        c: &Compaction,
        out: Option<&OutputSummary>,
        duration: Duration,
    ) {
        let [read0, read1] = c.input_bytes();
        let mut input_files: Vec<u64> = c.inputs.iter().flatten().map(|f| f.number).collect();
        input_files.sort_unstable();
        let (output_files, output_blob_files, bytes_written) = match out {
            Some(o) => (
                o.tables.iter().map(|t| t.0).collect(),
                o.blobs.clone(),
                o.bytes,
            ),
            None => (input_files.clone(), Vec::new(), 0),
        };
        let bytes_read = if out.is_some() { read0 + read1 } else { 0 };
        if let Some(s) = &self.stats {
            s.add(Ticker::CompactionBytesRead, bytes_read);
            s.add(Ticker::CompactionBytesWritten, bytes_written);
            s.record(HistogramKind::CompactionMicros, duration);
        }
        let cf_name = Self::cf_name(st, cf);
        info_log!(
            self.info_log,
            Info,
            "[{cf_name}] compaction{} ({:?}) L{} -> L{}: inputs {:?} ({} bytes), outputs {:?} ({} bytes), blob files {:?}, in {} ms",
            if out.is_none() { " (trivial move)" } else { "" },
            c.reason,
            c.level,
            c.output_level,
            input_files,
            read0 + read1,
            output_files,
            bytes_written,
            output_blob_files,
            duration.as_millis()
        );
        self.emit(
            st,
            Event::Compaction(CompactionJobInfo {
                cf_name,
                base_input_level: c.level,
                output_level: c.output_level,
                input_files,
                output_files,
                output_blob_files,
                bytes_read,
                bytes_written,
                trivial_move: out.is_none(),
                duration,
                reason: c.reason,
            }),
        );
    }
}

/// What a flush or compaction wrote, kept before its `Written` moves into the edit.
pub(crate) struct OutputSummary {
    /// (number, size, entries) of each table.
    tables: Vec<(u64, u64, u64)>,
    blobs: Vec<u64>,
    bytes: u64,
}

impl OutputSummary {
    pub(crate) fn of(w: &Written) -> OutputSummary {
        OutputSummary {
            tables: w
                .tables
                .iter()
                .map(|m| (m.number, m.file_size, m.num_entries))
                .collect(),
            blobs: w.blob_files.iter().map(|b| b.number).collect(),
            bytes: w.bytes(),
        }
    }
}
