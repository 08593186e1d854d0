//! Background work: flushing frozen memtables to L0 and compacting levels, on a pool of
//! `max_background_jobs` threads. Each thread takes the state mutex only to pick a job and to
//! install its result; the IO runs unlocked, so readers and writers go on meanwhile. Flushes
//! come first (they free memory that writers may be waiting for), one at a time and oldest
//! first; compactions of disjoint key ranges run in parallel.

use super::{DbInner, DbState};
use crate::compaction::job::{self, DropPolicy, OutputSpec};
use crate::compaction::{picker, Compaction};
use crate::error::{Error, Result};
use crate::iter::merging::MergingIterator;
use crate::iter::InternalIterator;
use crate::key;
use crate::memtable::MemTable;
use crate::options::ReadOptions;
use crate::version::{filename, LevelIterator, VersionEdit};
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

enum Job {
    Flush(Arc<MemTable>),
    Compact(Compaction),
}

impl DbInner {
    /// The loop each background thread runs until shutdown.
    pub(crate) fn background_thread(self: &Arc<Self>) {
        let mut st = self.state.lock();
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                break;
            }
            match self.pick_job(&mut st) {
                Some(Job::Flush(mem)) => {
                    let res = self.run_flush(&mut st, mem);
                    st.flush_running = false;
                    self.record_bg_result(&mut st, res);
                }
                Some(Job::Compact(c)) => {
                    st.busy.add(&c);
                    st.running_compactions += 1;
                    let res = self.run_compaction(&mut st, &c);
                    st.busy.remove(&c);
                    st.running_compactions -= 1;
                    self.record_bg_result(&mut st, res);
                }
                None => {
                    self.bg_cv.wait_for(&mut st, Duration::from_millis(500));
                    // Tables a reader still held when their compaction finished become
                    // deletable when it lets go; without this they waited for the next job.
                    if !st.obsolete_tables.is_empty() {
                        MutexGuard::unlocked(&mut st, || self.delete_obsolete_files());
                    }
                    continue;
                }
            }
            self.bg_cv.notify_all();
            MutexGuard::unlocked(&mut st, || self.delete_obsolete_files());
        }
    }

    fn record_bg_result(&self, st: &mut DbState, res: Result<()>) {
        if let Err(e) = res {
            if matches!(e, Error::Closed) {
                return;
            }
            if st.bg_error.is_none() {
                st.bg_error = Some(e);
            }
        }
    }

    fn pick_job(&self, st: &mut DbState) -> Option<Job> {
        if st.bg_error.is_some() || st.closed {
            return None;
        }
        if !st.flush_running {
            if let Some(m) = st.imms.front() {
                st.flush_running = true;
                return Some(Job::Flush(m.clone()));
            }
        }
        if self.opts.disable_auto_compactions || st.manual_compaction {
            return None;
        }
        let v = st.versions.current();
        let c = picker::pick(&v, &self.opts, &st.busy, &st.versions.compact_pointers)?;
        Some(Job::Compact(c))
    }

    /// Writes the oldest frozen memtable to an L0 table and installs it.
    fn run_flush(&self, st: &mut MutexGuard<'_, DbState>, mem: Arc<MemTable>) -> Result<()> {
        let start = Instant::now();
        let metas = MutexGuard::unlocked(st, || {
            let mut it = mem.iter();
            let spec = OutputSpec {
                fs: &self.fs,
                dir: &self.dir,
                opts: &self.opts,
                tables: &self.tables,
                level: 0,
                max_file_size: u64::MAX,
            };
            job::write_tables(
                &spec,
                &mut it,
                None,
                &mut || self.state_new_file_number(),
                &self.shutting_down,
            )
        })?;
        let mut edit = VersionEdit::default();
        let written: u64 = metas.iter().map(|m| m.file_size).sum();
        for m in metas {
            edit.add_file(0, m);
        }
        // WALs older than the next memtable's are no longer needed once this edit is durable.
        let next_log = st
            .imms
            .get(1)
            .map_or(st.mem.log_number(), |m| m.log_number());
        edit.log_number = Some(next_log);
        edit.last_sequence = Some(self.last_sequence.load(Ordering::Acquire));
        self.log_and_apply(st, &mut edit)?;
        if st.imms.front().is_some_and(|m| Arc::ptr_eq(m, &mem)) {
            st.imms.pop_front();
        }
        self.install_super_version(st);
        let s = &mut st.level_stats[0];
        s.count += 1;
        s.bytes_written += written;
        s.micros += start.elapsed().as_micros() as u64;
        Ok(())
    }

    fn state_new_file_number(&self) -> u64 {
        self.state.lock().versions.new_file_number()
    }

    /// Logs an edit to the MANIFEST and installs it; a failure poisons the database. Files the
    /// edit removes are queued for deletion once no reader holds them.
    pub(crate) fn log_and_apply(&self, st: &mut DbState, edit: &mut VersionEdit) -> Result<()> {
        let before = st.versions.current();
        if let Err(e) = st.versions.log_and_apply(edit) {
            let err = Error::Poisoned(format!("writing the MANIFEST failed: {e}"));
            st.bg_error = Some(err.duplicate());
            return Err(err);
        }
        let live = st.versions.live_files();
        for (level, number) in &edit.deleted_files {
            if live.contains(number) {
                continue; // moved, not removed
            }
            if let Some(f) = before
                .level_files(*level)
                .iter()
                .find(|f| f.number == *number)
            {
                st.obsolete_tables.push(f.clone());
            }
        }
        Ok(())
    }

    /// Runs one compaction and installs its result.
    fn run_compaction(&self, st: &mut MutexGuard<'_, DbState>, c: &Compaction) -> Result<()> {
        let start = Instant::now();
        let mut edit = VersionEdit::default();
        let [read0, read1] = c.input_bytes();
        if c.is_trivial_move() {
            for f in &c.inputs[0] {
                edit.delete_file(c.level, f.number);
                edit.add_file(c.output_level, (**f).clone());
            }
            if let Some(last) = c.inputs[0]
                .iter()
                .max_by(|a, b| key::compare_internal(a.largest.encoded(), b.largest.encoded()))
            {
                edit.compact_pointers.push((c.level, last.largest.clone()));
            }
            edit.last_sequence = Some(self.last_sequence.load(Ordering::Acquire));
            self.log_and_apply(st, &mut edit)?;
            self.install_super_version(st);
            st.level_stats[c.output_level].bytes_moved += read0;
            return Ok(());
        }
        let version = st.versions.current();
        let smallest_snapshot = self
            .snapshots
            .oldest_or(|| self.last_sequence.load(Ordering::Acquire));
        let outputs = MutexGuard::unlocked(st, || {
            let ro = ReadOptions {
                fill_cache: false,
                ..Default::default()
            };
            let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
            if c.level == 0 {
                for f in &c.inputs[0] {
                    let t = self.tables.get(f.number, f.file_size)?;
                    children.push(Box::new(
                        t.iter(ro.verify_checksums, false)
                            .with_compaction_readahead(),
                    ));
                }
            } else {
                children.push(Box::new(
                    LevelIterator::new(c.inputs[0].clone(), self.tables.clone(), true, false)
                        .with_compaction_readahead(),
                ));
            }
            if !c.inputs[1].is_empty() {
                children.push(Box::new(
                    LevelIterator::new(c.inputs[1].clone(), self.tables.clone(), true, false)
                        .with_compaction_readahead(),
                ));
            }
            let mut merged = MergingIterator::new(children);
            let spec = OutputSpec {
                fs: &self.fs,
                dir: &self.dir,
                opts: &self.opts,
                tables: &self.tables,
                level: c.output_level,
                max_file_size: picker::target_file_size(&self.opts, c.output_level),
            };
            let policy = DropPolicy {
                smallest_snapshot,
                version,
                output_level: c.output_level,
            };
            job::write_tables(
                &spec,
                &mut merged,
                Some(&policy),
                &mut || self.state_new_file_number(),
                &self.shutting_down,
            )
        })?;
        let written: u64 = outputs.iter().map(|m| m.file_size).sum();
        for f in &c.inputs[0] {
            edit.delete_file(c.level, f.number);
        }
        for f in &c.inputs[1] {
            edit.delete_file(c.output_level, f.number);
        }
        for m in outputs {
            edit.add_file(c.output_level, m);
        }
        if let Some(last) = c.inputs[0].iter().map(|f| &f.largest).max() {
            edit.compact_pointers.push((c.level, last.clone()));
        }
        edit.last_sequence = Some(self.last_sequence.load(Ordering::Acquire));
        self.log_and_apply(st, &mut edit)?;
        self.install_super_version(st);
        let s = &mut st.level_stats[c.output_level];
        s.count += 1;
        s.bytes_read += read0 + read1;
        s.bytes_written += written;
        s.micros += start.elapsed().as_micros() as u64;
        Ok(())
    }

    /// Deletes tables no version or reader holds any more, and WALs older than the MANIFEST's
    /// log number.
    pub(crate) fn delete_obsolete_files(&self) {
        let taken = Self::take_deletable_files(&mut self.state.lock());
        if let Some((tables, wals)) = taken {
            self.unlink_files(tables, wals);
        }
    }

    /// Takes out of the state the tables and WALs that can be deleted now (dropping replaced
    /// tables that became live again), and counts their deletion as running. `None` if there
    /// is nothing to delete.
    fn take_deletable_files(st: &mut DbState) -> Option<(Vec<u64>, Vec<u64>)> {
        let live = st.versions.live_files();
        let mut tables = Vec::new();
        st.obsolete_tables.retain(|f| {
            if live.contains(&f.number) {
                return false;
            }
            if Arc::strong_count(f) == 1 {
                tables.push(f.number);
                return false;
            }
            true
        });
        let log_number = st.versions.log_number();
        let mut wals = Vec::new();
        st.live_wals.retain(|&n| {
            if n < log_number {
                wals.push(n);
                false
            } else {
                true
            }
        });
        if tables.is_empty() && wals.is_empty() {
            return None;
        }
        st.deletions_running += 1;
        Some((tables, wals))
    }

    /// Unlinks what `take_deletable_files` took; called without the state mutex.
    fn unlink_files(&self, tables: Vec<u64>, wals: Vec<u64>) {
        for n in tables {
            self.tables.evict(n);
            let _ = self.fs.remove_file(&filename::table_file(&self.dir, n));
        }
        for n in wals {
            let _ = self.fs.remove_file(&filename::log_file(&self.dir, n));
        }
        self.state.lock().deletions_running -= 1;
        self.bg_cv.notify_all();
    }

    /// Freezes the active memtable and waits until it is flushed.
    pub(crate) fn flush_and_wait(&self) -> Result<()> {
        self.freeze_memtable()?;
        let mut st = self.state.lock();
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.duplicate());
            }
            if st.imms.is_empty() {
                return Ok(());
            }
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            self.bg_cv.wait_for(&mut st, Duration::from_millis(100));
        }
    }

    /// Waits until there is no pending or running flush or compaction and no deletable file
    /// is left on disk.
    pub(crate) fn wait_for_compactions(&self) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.duplicate());
            }
            let v = st.versions.current();
            let needs = !self.opts.disable_auto_compactions
                && picker::pick(&v, &self.opts, &st.busy, &st.versions.compact_pointers).is_some();
            if st.imms.is_empty() && !st.flush_running && st.running_compactions == 0 && !needs {
                // A background thread deletes a job's replaced files only after it reports the
                // job done; finish that here so the caller sees the disk as the live data.
                if let Some((tables, wals)) = Self::take_deletable_files(&mut st) {
                    MutexGuard::unlocked(&mut st, || self.unlink_files(tables, wals));
                    continue;
                }
                if st.deletions_running == 0 {
                    return Ok(());
                }
            }
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            self.bg_cv.notify_all();
            self.bg_cv.wait_for(&mut st, Duration::from_millis(50));
        }
    }

    /// Manual compaction: flushes, pauses automatic compactions, then compacts each level's
    /// files overlapping the range into the next level, down to the deepest level with data.
    pub(crate) fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.flush_and_wait()?;
        let mut st = self.state.lock();
        while st.manual_compaction {
            self.bg_cv.wait_for(&mut st, Duration::from_millis(10));
        }
        st.manual_compaction = true;
        let res = self.compact_range_locked(&mut st, begin, end);
        st.manual_compaction = false;
        self.bg_cv.notify_all();
        drop(st);
        self.delete_obsolete_files();
        res
    }

    fn compact_range_locked(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        // Let running compactions finish so ours do not conflict with them.
        while st.running_compactions > 0 {
            if let Some(e) = &st.bg_error {
                return Err(e.duplicate());
            }
            self.bg_cv.wait_for(st, Duration::from_millis(10));
        }
        let v = st.versions.current();
        let deepest = (0..v.num_levels())
            .rev()
            .find(|&l| !v.overlapping_files(l, begin, end).is_empty())
            .unwrap_or(0);
        // Everything in the range ends up merged at `target`.
        let target = deepest.max(1).min(v.num_levels() - 1);
        let mut wrote_target = false;
        for level in 0..=target {
            if let Some(e) = &st.bg_error {
                return Err(e.duplicate());
            }
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            // The last step rewrites `target` into itself, only if nothing was merged into it.
            if level == target && wrote_target {
                break;
            }
            let output = (level + 1).min(target);
            let v = st.versions.current();
            let inputs0 = if level == 0 {
                v.level_files(0).to_vec()
            } else {
                v.overlapping_files(level, begin, end)
            };
            let Some((s, l)) = picker::user_range(&inputs0) else {
                continue;
            };
            let inputs1 = if output == level {
                Vec::new()
            } else {
                v.overlapping_files(output, Some(&s), Some(&l))
            };
            let mut c = Compaction::new(level, output, inputs0, inputs1);
            c.manual = true;
            st.busy.add(&c);
            st.running_compactions += 1;
            let res = self.run_compaction(st, &c);
            st.busy.remove(&c);
            st.running_compactions -= 1;
            if let Err(e) = &res {
                // Like an automatic compaction's failure: it stops writes and shows in
                // background_error() (the caller gets it too).
                self.record_bg_result(st, Err(e.duplicate()));
            }
            res?;
            wrote_target |= output == target;
            MutexGuard::unlocked(st, || self.delete_obsolete_files());
        }
        Ok(())
    }
}
