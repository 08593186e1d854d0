//! Background work: flushing frozen memtables to L0 and compacting levels, on a pool of
//! `max_background_jobs` threads (split by role when their priority is lowered:
//! `BackgroundRole`). Each thread takes the state mutex only to pick a job and to
//! install its result; the IO runs unlocked, so readers and writers go on meanwhile. Flushes
//! come first (they free memory that writers may be waiting for), one at a time and oldest
//! first; compactions of disjoint key ranges run in parallel. Installing a result writes the
//! MANIFEST with the mutex released too (`log_and_apply`). A separate cleaner thread deletes
//! obsolete files as they are queued (see version/lifecycle.rs and `purge_obsolete_files`).

use super::events::OutputSummary;
use super::CfState;
use super::{DbInner, DbState};
use crate::compaction::job::{self, DropPolicy, OutputSpec};
use crate::compaction::LevelStats;
use crate::compaction::{picker, subcompactions, Compaction};
use crate::error::{Error, Result};
use crate::iter::merging::MergingIterator;
use crate::iter::InternalIterator;
use crate::key;
use crate::listener::BackgroundErrorReason;
use crate::memtable::MemTable;
use crate::options::{BottommostLevelCompaction, CompactRangeOptions, CpuPriority, Options};
use crate::range_del::FragmentedRangeTombstones;
use crate::sst::BlockReadOptions;
use crate::version::filename::FileKind;
use crate::version::{FileMetaData, LevelIterator, ObsoleteFile, Version, VersionEdit};
use parking_lot::MutexGuard;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a background thread takes on. At the default priority every thread takes any job;
/// with `background_cpu_priority` below normal, flushes and urgent compactions keep normal
/// priority on threads of their own (RocksDB runs flushes in a separate pool too), so an
/// application that keeps the cores busy slows compactions but cannot starve the work writers
/// wait on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum BackgroundRole {
    /// Flushes and compactions, at normal priority.
    Any,
    /// Flushes only, at normal priority.
    Flush,
    /// Compactions only, at the lowered priority.
    Compaction,
    /// At normal priority: flushes as the flush thread does (another family's, or while that
    /// one is busy), and compactions once they are urgent (`compaction_is_urgent`).
    Relief,
}

impl BackgroundRole {
    /// The roles of the `jobs` background threads of a database whose background threads run
    /// at `priority`: all `Any` at normal priority (or with one thread, which must flush),
    /// else one flush thread, `jobs - 1` compaction threads and one relief thread.
    pub(crate) fn of_threads(jobs: usize, priority: CpuPriority) -> Vec<BackgroundRole> {
        if priority == CpuPriority::Normal || jobs < 2 {
            return vec![BackgroundRole::Any; jobs];
        }
        let mut roles = vec![BackgroundRole::Flush];
        roles.extend(std::iter::repeat_n(BackgroundRole::Compaction, jobs - 1));
        roles.push(BackgroundRole::Relief);
        roles
    }

    /// The name of background thread `index`, which has this role.
    pub(crate) fn thread_name(self, index: usize) -> String {
        match self {
            BackgroundRole::Any => format!("shaledb-bg-{index}"),
            BackgroundRole::Flush => "shaledb-flush".to_string(),
            BackgroundRole::Compaction => format!("shaledb-compact-{index}"),
            BackgroundRole::Relief => "shaledb-relief".to_string(),
        }
    }

    /// Whether this thread runs at the lowered priority.
    pub(crate) fn lowered(self) -> bool {
        self == BackgroundRole::Compaction
    }

    fn flushes(self) -> bool {
        self != BackgroundRole::Compaction
    }
}

enum Job {
    /// Flush this frozen memtable of this family.
    Flush(u32, Arc<MemTable>),
    /// Run this compaction in this family.
    Compact(u32, Compaction),
    /// Flush the oldest frozen memtable of every family that has one, installed together
    /// (`Options::atomic_flush`).
    AtomicFlush(Vec<(u32, Arc<MemTable>)>),
    /// Move every family's log number past a failed WAL whose memtables are all flushed
    /// (recovery.rs).
    RetireWal,
}

/// Split points a subcompaction picker takes from each input table: enough to balance two to
/// eight ranges within a few percent of the inputs' bytes.
const SUBCOMPACTION_ANCHORS_PER_FILE: usize = 64;

impl DbInner {
    /// The loop each background thread runs until shutdown.
    pub(crate) fn background_thread(self: &Arc<Self>, role: BackgroundRole) {
        let mut st = self.state.lock();
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                break;
            }
            match self.pick_job(&mut st, role) {
                Some(Job::Flush(cf, mem)) => {
                    let res = self.run_flush(&mut st, cf, mem);
                    if let Some(f) = st.families.get_mut(&cf) {
                        f.flush_running = false;
                    }
                    self.record_flush_result(&mut st, res);
                }
                Some(Job::AtomicFlush(mems)) => {
                    let res = self.run_atomic_flush(&mut st, &mems);
                    for (cf, _) in &mems {
                        if let Some(f) = st.families.get_mut(cf) {
                            f.flush_running = false;
                        }
                    }
                    self.record_flush_result(&mut st, res);
                }
                Some(Job::RetireWal) => {
                    let res = self.retire_failed_wal(&mut st);
                    self.record_flush_result(&mut st, res);
                }
                Some(Job::Compact(cf, c)) => {
                    let res = self.run_busy_compaction(&mut st, cf, &c);
                    self.record_compaction_result(&mut st, res);
                }
                None => {
                    if self.deliver_events(&mut st) {
                        continue;
                    }
                    let retry_in = self.next_retry_in(&st);
                    match (self.ttl_sweep_period(&st), retry_in) {
                        (Some(period), _) if retry_in.is_none_or(|r| r >= period) => {
                            if self.work_cv.wait_for(&mut st, period).timed_out() {
                                self.sweep_expired_files(&mut st, period);
                            }
                        }
                        (_, Some(retry_in)) => {
                            self.work_cv.wait_for(&mut st, retry_in);
                        }
                        (_, None) => self.work_cv.wait(&mut st),
                    }
                    continue;
                }
            }
            // The job's events first: a waiter woken below may expect them delivered.
            self.deliver_events(&mut st);
            // A new version may need another compaction, free a stalled writer, or satisfy a
            // waiter; the files it replaced were queued for the cleaner when dropped.
            self.recheck_stall_condition(&mut st);
            self.notify_state_changed();
        }
    }

    /// The cleaner thread: deletes queued obsolete files until close.
    pub(crate) fn cleaner_thread(&self) {
        while let Some(files) = self.obsolete.wait_take() {
            self.unlink_obsolete(files);
        }
    }

    /// The one purge routine: deletes the files queued so far (see version/lifecycle.rs).
    /// Never called with the state mutex held; a queued file is one nothing needs any more.
    pub(crate) fn purge_obsolete_files(&self) {
        let files = self.obsolete.take();
        if !files.is_empty() {
            self.unlink_obsolete(files);
        }
    }

    /// Unlinks files taken from the deletion queue and reports the purge finished.
    fn unlink_obsolete(&self, files: Vec<ObsoleteFile>) {
        if !self.owns_files() {
            // A secondary's catch-up replaces every version: a file the new ones list again
            // must stay open (the primary may have unlinked it already).
            let live = self.state.lock().versions.live_files();
            for f in files.iter().filter(|f| !live.contains(&f.number)) {
                if matches!(f.kind, FileKind::Table | FileKind::Blob) {
                    self.tables.evict(f.number);
                }
            }
            self.obsolete.purged();
            return;
        }
        for f in files {
            if matches!(f.kind, FileKind::Table | FileKind::Blob) {
                self.tables.evict(f.number);
            }
            if let Some(path) = f.path(&self.dir) {
                // Failure only leaves garbage, which the next open removes.
                let res = self.fs.remove_file(&path);
                if f.kind == FileKind::Table {
                    self.table_file_deleted(f.number, &path, res);
                }
            }
        }
        self.obsolete.purged();
    }

    /// Wakes everyone who waits on background state: idle background threads (there may be
    /// work), writers stalled on L0 or memtables, and flush/compaction waiters. Called after a
    /// job finishes, on a background error, and at close.
    pub(crate) fn notify_state_changed(&self) {
        self.work_cv.notify_all();
        self.stall_cv.notify_all();
        self.done_cv.notify_all();
    }

    /// Keeps the first failure that stops writes for good (see recovery.rs for the ones a
    /// retry may lift), and reports it to the LOG and listeners.
    pub(crate) fn record_bg_error(
        &self,
        st: &mut DbState,
        e: Error,
        reason: BackgroundErrorReason,
    ) {
        if matches!(e, Error::Closed) {
            return;
        }
        let suspended = matches!(st.bg_error, Some(Error::Suspended(_)));
        if st.bg_error.is_none() || suspended {
            self.note_background_error(st, reason, &e);
            st.bg_error = Some(e);
        }
        // No retry once writes are stopped for good, also when the final error was recorded
        // first by its source (the MANIFEST writer, during a flush retry): else the retry
        // would run the failing flush again and again.
        st.flush_retry = None;
    }

    /// Runs compaction `c` of family `cf` with its inputs marked busy.
    fn run_busy_compaction(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        cf: u32,
        c: &Compaction,
    ) -> Result<()> {
        if let Some(f) = st.families.get_mut(&cf) {
            f.busy.add(c);
        }
        st.running_compactions += 1;
        let res = self.run_compaction(st, cf, c);
        if let Some(f) = st.families.get_mut(&cf) {
            f.busy.remove(c);
        }
        st.running_compactions -= 1;
        res
    }

    /// The next job for a thread of `role`: a flush of any family first (oldest memtable
    /// first within a family), else a compaction.
    fn pick_job(&self, st: &mut DbState, role: BackgroundRole) -> Option<Job> {
        if st.closed || !self.lift_suspension_if_due(st) {
            return None;
        }
        if role.flushes() {
            let flush = if self.opts.atomic_flush {
                pick_atomic_flush(st)
            } else {
                pick_flush(st)
            };
            if flush.is_some() {
                return flush;
            }
        }
        if st.ingesting > 0 {
            return None;
        }
        if role.flushes() && super::recovery::failed_wal_needs_edit(st) {
            return Some(Job::RetireWal);
        }
        // A retried flush with nothing left to write (its family was dropped) is done.
        self.flush_retry_done(st);
        if !super::recovery::compactions_due(st) {
            return None;
        }
        let compacts = match role {
            BackgroundRole::Any | BackgroundRole::Compaction => true,
            BackgroundRole::Flush => false,
            BackgroundRole::Relief => compaction_is_urgent(st),
        };
        if !compacts {
            return None;
        }
        let job = st
            .families
            .iter()
            .find_map(|(&id, f)| pick_compaction(st, f).map(|c| Job::Compact(id, c)));
        if job.is_none() && st.compaction_retry.take().is_some() {
            // A due retry with nothing left to compact (the failed one was manual) is done.
            self.done_cv.notify_all();
        }
        job
    }

    /// Writes family `cf`'s oldest frozen memtable to an L0 table and installs it.
    fn run_flush(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        cf: u32,
        mem: Arc<MemTable>,
    ) -> Result<()> {
        let start = Instant::now();
        let Some((opts, name)) = st
            .family(cf)
            .map(|f| (f.data.opts.clone(), f.data.name.clone()))
        else {
            return Ok(());
        };
        let policy = DropPolicy::for_flush(self.smallest_snapshot(), st.versions.current(cf));
        let metas = MutexGuard::unlocked(st, || {
            let mut it = mem.iter();
            let range_dels = mem.range_tombstones();
            let spec = OutputSpec {
                fs: &self.output_fs,
                dir: &self.dir,
                opts: &opts,
                tables: &self.tables,
                level: 0,
                base_level: 1,
                bottommost: false,
                max_file_size: u64::MAX,
                flush: true,
                cf_id: cf,
                cf_name: &name,
                blob_gc: None,
                write_time_blobs: mem.write_time_blobs(),
            };
            let written_with_values = finish_write_time_blobs(&mem)?;
            let mut written = job::write_tables(
                &spec,
                &mut it,
                range_dels.as_deref(),
                Some(&policy),
                &mut || self.state_new_file_number(),
                &self.shutting_down,
            )?;
            written.blob_files.extend(written_with_values);
            Ok::<_, Error>(written)
        })?;
        let Some(f) = st.family(cf) else {
            self.discard_outputs(&metas);
            return Ok(());
        };
        let mut edit = VersionEdit {
            column_family: cf,
            ..Default::default()
        };
        let written = metas.bytes();
        let summary = OutputSummary::of(&metas);
        metas.add_to(&mut edit, 0);
        // WALs older than the next memtable's are no longer needed once this edit is durable.
        let next_log = f.imms.get(1).map_or(f.mem.log_number(), |m| m.log_number());
        edit.log_number = Some(next_log);
        edit.last_sequence = Some(self.last_sequence.load(Ordering::Acquire));
        let mut edits = vec![edit];
        edits.extend(log_number_advances(st, &[cf]));
        if !self.log_and_apply_all(st, &mut edits, EditKind::Flush)? {
            self.discard_outputs_of(&edits[0]);
            return Ok(());
        }
        let Some(f) = st.families.get_mut(&cf) else {
            return Ok(());
        };
        if f.imms.front().is_some_and(|m| Arc::ptr_eq(m, &mem)) {
            f.imms.pop_front();
        }
        let s = &mut f.level_stats[0];
        s.count += 1;
        s.bytes_written += written;
        s.micros += start.elapsed().as_micros() as u64;
        for e in &edits {
            st.install_super_version(e.column_family);
        }
        self.flush_completed(st, cf, &summary, start.elapsed());
        if has_range_deletions(&edits[0]) {
            self.drop_files_under_tombstones(st, cf)?;
        }
        self.drop_expired_files(st, cf)?;
        Ok(())
    }

    /// Writes the oldest frozen memtable of each family in `mems` to L0 tables and installs
    /// them all with one atomic MANIFEST group (`Options::atomic_flush`).
    fn run_atomic_flush(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        mems: &[(u32, Arc<MemTable>)],
    ) -> Result<()> {
        let start = Instant::now();
        let jobs: Vec<(u32, Arc<MemTable>, Arc<Options>, String)> = mems
            .iter()
            .filter_map(|(cf, m)| {
                let data = &st.family(*cf)?.data;
                Some((*cf, m.clone(), data.opts.clone(), data.name.clone()))
            })
            .collect();
        let smallest_snapshot = self.smallest_snapshot();
        let versions: Vec<Arc<Version>> = jobs
            .iter()
            .map(|(cf, ..)| st.versions.current(*cf))
            .collect();
        let outputs = MutexGuard::unlocked(st, || -> Result<Vec<(u32, job::Written)>> {
            let mut out = Vec::with_capacity(jobs.len());
            for ((cf, mem, opts, name), version) in jobs.iter().zip(versions) {
                let policy = DropPolicy::for_flush(smallest_snapshot, version);
                let spec = OutputSpec {
                    fs: &self.output_fs,
                    dir: &self.dir,
                    opts,
                    tables: &self.tables,
                    level: 0,
                    base_level: 1,
                    bottommost: false,
                    max_file_size: u64::MAX,
                    flush: true,
                    cf_id: *cf,
                    cf_name: name,
                    blob_gc: None,
                    write_time_blobs: mem.write_time_blobs(),
                };
                let written_with_values = finish_write_time_blobs(mem)?;
                let mut metas = job::write_tables(
                    &spec,
                    &mut mem.iter(),
                    mem.range_tombstones().as_deref(),
                    Some(&policy),
                    &mut || self.state_new_file_number(),
                    &self.shutting_down,
                )?;
                metas.blob_files.extend(written_with_values);
                out.push((*cf, metas));
            }
            Ok(out)
        })?;
        let mut edits = Vec::with_capacity(outputs.len());
        let mut flushed = Vec::with_capacity(outputs.len());
        let mut summaries = Vec::with_capacity(outputs.len());
        for (cf, metas) in outputs {
            let Some(f) = st.family(cf) else {
                self.discard_outputs(&metas);
                continue;
            };
            summaries.push((cf, OutputSummary::of(&metas)));
            let mut edit = VersionEdit {
                column_family: cf,
                log_number: Some(f.imms.get(1).map_or(f.mem.log_number(), |m| m.log_number())),
                atomic_group_remaining: Some(0),
                ..Default::default()
            };
            metas.add_to(&mut edit, 0);
            edits.push(edit);
            flushed.push(cf);
        }
        if edits.is_empty() {
            return Ok(());
        }
        edits.extend(log_number_advances(st, &flushed).into_iter().map(|mut e| {
            e.atomic_group_remaining = Some(0);
            e
        }));
        edits[0].last_sequence = Some(self.last_sequence.load(Ordering::Acquire));
        if !self.log_and_apply_all(st, &mut edits, EditKind::Flush)? {
            for e in &edits {
                self.discard_outputs_of(e);
            }
            return Ok(());
        }
        for (cf, mem) in mems {
            let Some(f) = st.families.get_mut(cf) else {
                continue;
            };
            if f.imms.front().is_some_and(|m| Arc::ptr_eq(m, mem)) {
                f.imms.pop_front();
            }
            // Tables and blob files, as the single-family flush counts them.
            let written: u64 = edits
                .iter()
                .filter(|e| e.column_family == *cf)
                .flat_map(|e| {
                    let tables = e.new_files.iter().map(|(_, m)| m.file_size);
                    tables.chain(e.blob_files_added.iter().map(|b| b.file_size))
                })
                .sum();
            let s = &mut f.level_stats[0];
            s.count += 1;
            s.bytes_written += written;
            s.micros += start.elapsed().as_micros() as u64;
        }
        for e in &edits {
            st.install_super_version(e.column_family);
        }
        for (cf, summary) in &summaries {
            self.flush_completed(st, *cf, summary, start.elapsed());
        }
        Ok(())
    }

    /// Queues the tables and blob files a job wrote for a family dropped meanwhile: no
    /// version lists them.
    fn discard_outputs(&self, written: &job::Written) {
        let tables = written.tables.iter().map(|m| (FileKind::Table, m.number));
        let blobs = written
            .blob_files
            .iter()
            .map(|b| (FileKind::Blob, b.number));
        self.discard_files(tables.chain(blobs));
    }

    /// [`discard_outputs`](Self::discard_outputs) for the files an edit adds.
    fn discard_outputs_of(&self, edit: &VersionEdit) {
        let tables = edit
            .new_files
            .iter()
            .map(|(_, m)| (FileKind::Table, m.number));
        let blobs = edit
            .blob_files_added
            .iter()
            .map(|b| (FileKind::Blob, b.number));
        self.discard_files(tables.chain(blobs));
    }

    fn discard_files(&self, files: impl Iterator<Item = (FileKind, u64)>) {
        for (kind, number) in files {
            self.obsolete.push(ObsoleteFile { kind, number });
        }
    }

    /// The oldest sequence number any reader can still ask for: the oldest snapshot's, or
    /// the last one written if there is none.
    fn smallest_snapshot(&self) -> u64 {
        self.snapshots
            .oldest_or(|| self.last_sequence.load(Ordering::Acquire))
    }

    pub(super) fn state_new_file_number(&self) -> u64 {
        self.state.lock().versions.new_file_number()
    }

    /// Logs an edit to the MANIFEST and installs it; a failure poisons the database. The
    /// write and sync run with the state mutex released (LevelDB's `LogAndApply`); MANIFEST
    /// writers take turns, and the new version is installed only after its record is durable.
    /// Tables the edit removes are queued for deletion when the last version listing them is
    /// dropped; WALs the new log number makes obsolete are queued here.
    ///
    /// Several edits are written together, with one sync. Returns `Ok(false)`, writing
    /// nothing, if the first edit's column family was dropped meanwhile; later edits for
    /// dropped families are left out. `kind` says whether the closed WALs are synced first.
    pub(crate) fn log_and_apply_all(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        edits: &mut Vec<VersionEdit>,
        kind: EditKind,
    ) -> Result<bool> {
        while st.manifest_writing {
            self.manifest_cv.wait(st);
        }
        let live = |st: &DbState, e: &VersionEdit| {
            e.column_family_add.is_some() || st.families.contains_key(&e.column_family)
        };
        if !edits.first().is_some_and(|e| live(st, e)) {
            return Ok(false);
        }
        let first = edits.remove(0);
        edits.retain(|e| live(st, e));
        edits.insert(0, first);
        if edits.iter().any(|e| e.atomic_group_remaining.is_some()) {
            // Numbered after leaving out dropped families, so replay sees the whole group.
            let n = edits.len();
            for (i, e) in edits.iter_mut().enumerate() {
                e.atomic_group_remaining = Some((n - 1 - i) as u32);
            }
        }
        let mut wal_failed = false;
        let res = match st.versions.prepare_edits(edits) {
            Ok(mut write) => {
                st.manifest_writing = true;
                // The closed WALs first where the edit could otherwise become durable ahead
                // of the writes before it (closed_wals.rs).
                let sync_closed_wals = match kind {
                    EditKind::Flush => st.families.len() > 1,
                    EditKind::Compaction => false,
                    EditKind::Other => true,
                };
                let res = MutexGuard::unlocked(st, || {
                    if sync_closed_wals {
                        if let Err(e) = self.closed_wals.sync_all(&*self.fs, &self.dir) {
                            wal_failed = true;
                            return Err(e);
                        }
                    }
                    write.write(&self.fs, &self.dir)
                });
                let res = st.versions.finish_edits(write, edits, res);
                st.manifest_writing = false;
                self.manifest_cv.notify_all();
                res
            }
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            let err = Error::poisoned(e);
            if st.bg_error.is_none() {
                let reason = match wal_failed {
                    true => BackgroundErrorReason::WriteWal,
                    false => BackgroundErrorReason::Manifest,
                };
                self.note_background_error(st, reason, &err);
            }
            st.bg_error = Some(err.duplicate());
            return Err(err);
        }
        let log_number = st.versions.log_number();
        self.closed_wals.forget_below(log_number);
        st.live_wals.retain(|&(number, _)| {
            if number < log_number {
                self.obsolete.push(ObsoleteFile {
                    kind: FileKind::Log,
                    number,
                });
                return false;
            }
            true
        });
        Ok(true)
    }

    /// Runs one compaction of family `cf` and installs its result.
    fn run_compaction(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        cf: u32,
        c: &Compaction,
    ) -> Result<()> {
        let start = Instant::now();
        let Some((opts, name)) = st
            .family(cf)
            .map(|f| (f.data.opts.clone(), f.data.name.clone()))
        else {
            return Ok(());
        };
        let mut edit = VersionEdit {
            column_family: cf,
            ..Default::default()
        };
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
            if self.log_and_apply_all(st, &mut vec![edit], EditKind::Compaction)? {
                st.install_super_version(cf);
                if let Some(s) = stats_at(st, cf, c.output_level) {
                    s.bytes_moved += read0;
                }
                self.compaction_completed(st, cf, c, None, start.elapsed());
            }
            return Ok(());
        }
        let version = st.versions.current(cf);
        let smallest_snapshot = self.smallest_snapshot();
        let outputs = MutexGuard::unlocked(st, || {
            self.merge_inputs(c, version, smallest_snapshot, &opts, (cf, &name))
        })?;
        let written = outputs.bytes();
        let summary = OutputSummary::of(&outputs);
        for f in &c.inputs[0] {
            edit.delete_file(c.level, f.number);
        }
        for f in &c.inputs[1] {
            edit.delete_file(c.output_level, f.number);
        }
        outputs.add_to(&mut edit, c.output_level);
        if let Some(last) = c.inputs[0].iter().map(|f| &f.largest).max() {
            edit.compact_pointers.push((c.level, last.clone()));
        }
        edit.last_sequence = Some(self.last_sequence.load(Ordering::Acquire));
        let mut edits = vec![edit];
        if !self.log_and_apply_all(st, &mut edits, EditKind::Compaction)? {
            self.discard_outputs_of(&edits[0]);
            return Ok(());
        }
        st.install_super_version(cf);
        if let Some(s) = stats_at(st, cf, c.output_level) {
            s.count += 1;
            s.bytes_read += read0 + read1;
            s.bytes_written += written;
            s.micros += start.elapsed().as_micros() as u64;
        }
        self.compaction_completed(st, cf, c, Some(&summary), start.elapsed());
        if has_range_deletions(&edits[0]) {
            self.drop_files_under_tombstones(st, cf)?;
        }
        self.drop_expired_files(st, cf)?;
        Ok(())
    }

    /// How often idle background threads look for files whose every value expired, when
    /// some family has a TTL: half the shortest TTL, between one second and ten minutes.
    fn ttl_sweep_period(&self, st: &DbState) -> Option<Duration> {
        let shortest = st.families.values().filter_map(|f| f.data.opts.ttl).min()?;
        Some((shortest / 2).clamp(Duration::from_secs(1), Duration::from_secs(600)))
    }

    /// Drops the expired files of every TTL family, at most once per `period` whichever
    /// thread wakes first, so a family no longer written (hence never flushed or compacted)
    /// still shrinks as its data expires.
    fn sweep_expired_files(&self, st: &mut MutexGuard<'_, DbState>, period: Duration) {
        if self.shutting_down.load(Ordering::Acquire) || st.closed || st.bg_error.is_some() {
            return;
        }
        if st.ttl_swept_at.is_some_and(|t| t.elapsed() < period) {
            return;
        }
        st.ttl_swept_at = Some(Instant::now());
        let families: Vec<u32> = st
            .families
            .iter()
            .filter(|(_, f)| f.data.opts.ttl.is_some())
            .map(|(&id, _)| id)
            .collect();
        for cf in families {
            if let Err(e) = self.drop_expired_files(st, cf) {
                self.record_bg_error(st, e, BackgroundErrorReason::Compaction);
            }
        }
    }

    /// In a family with a TTL: removes, without reading them, the files whose every value
    /// expired, that hold no tombstone and that no deeper (or, in L0, older) file overlaps,
    /// so no older version of their keys exists to reappear. Run after each flush and
    /// compaction of the family, and periodically while idle (`sweep_expired_files`).
    pub(crate) fn drop_expired_files(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        cf: u32,
    ) -> Result<()> {
        let Some(f) = st.families.get(&cf) else {
            return Ok(());
        };
        let Some(ttl) = f.data.opts.ttl else {
            return Ok(());
        };
        let expiry = crate::clock::Expiry {
            ttl_secs: ttl.as_secs().max(1),
            now: self.opts.clock.now_secs(),
        };
        let version = st.versions.current(cf);
        let (expired, refs) = MutexGuard::unlocked(st, || {
            let expired = expired_files(&version, &self.tables, expiry)?;
            let refs = blob_references_of(&version, &self.tables, &expired)?;
            Ok::<_, Error>((expired, refs))
        })?;
        let Some(f) = st.families.get(&cf) else {
            return Ok(());
        };
        let current = st.versions.current(cf);
        if !Arc::ptr_eq(&current, &version) {
            return Ok(()); // the next flush or compaction looks again
        }
        let mut edit = VersionEdit {
            column_family: cf,
            ..Default::default()
        };
        for (level, number) in expired {
            if !f.busy.files.contains(&number) {
                edit.delete_file(level, number);
            }
        }
        add_dropped_garbage(&mut edit, &refs, &current);
        self.apply_file_drops(st, cf, edit)
    }

    /// Installs `edit`, which only deletes files of family `cf`. The files are marked busy
    /// until it is installed: the MANIFEST write may wait for its turn with the mutex
    /// released, and a compaction picked meanwhile must not move or rewrite them (the edit
    /// names each file's level).
    fn apply_file_drops(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        cf: u32,
        mut edit: VersionEdit,
    ) -> Result<()> {
        if edit.deleted_files.is_empty() {
            return Ok(());
        }
        let numbers: Vec<u64> = edit.deleted_files.iter().map(|&(_, n)| n).collect();
        if let Some(f) = st.families.get_mut(&cf) {
            f.busy.files.extend(numbers.iter().copied());
        }
        edit.last_sequence = Some(self.last_sequence.load(Ordering::Acquire));
        let applied = self.log_and_apply_all(st, &mut vec![edit], EditKind::Other);
        if let Some(f) = st.families.get_mut(&cf) {
            for n in &numbers {
                f.busy.files.remove(n);
            }
        }
        // A manual compaction may be waiting for these files.
        self.done_cv.notify_all();
        if applied? {
            st.install_super_version(cf);
        }
        Ok(())
    }

    /// Pebble's delete-only compaction: removes, without reading or rewriting them, the files
    /// of family `cf` whose every key a range tombstone deletes for every reader (the
    /// tombstone is newer than all of the file and at or below the oldest snapshot). Their
    /// tombstones, if any, lie inside the covering one, so nothing they hid reappears.
    fn drop_files_under_tombstones(&self, st: &mut MutexGuard<'_, DbState>, cf: u32) -> Result<()> {
        let version = st.versions.current(cf);
        let oldest = self
            .snapshots
            .oldest_or(|| self.last_sequence.load(Ordering::Acquire));
        let (covered, refs) = MutexGuard::unlocked(st, || {
            let covered = files_under_tombstones(&version, &self.tables, oldest)?;
            let refs = blob_references_of(&version, &self.tables, &covered)?;
            Ok::<_, Error>((covered, refs))
        })?;
        let Some(f) = st.families.get(&cf) else {
            return Ok(());
        };
        // Files a compaction took meanwhile, or that are gone, stay out of this edit.
        let current = st.versions.current(cf);
        let mut edit = VersionEdit {
            column_family: cf,
            ..Default::default()
        };
        for (level, number) in covered {
            let live = current
                .level_files(level)
                .iter()
                .any(|g| g.number == number);
            if live && !f.busy.files.contains(&number) {
                edit.delete_file(level, number);
            }
        }
        add_dropped_garbage(&mut edit, &refs, &current);
        self.apply_file_drops(st, cf, edit)
    }

    /// The IO of a compaction, run without the state mutex: merges the input files and
    /// writes the output tables. `version`, the one the compaction was picked from, decides
    /// which tombstones may be dropped. The inputs stay on disk meanwhile: the current version
    /// lists them until this compaction's edit is installed.
    fn merge_inputs(
        &self,
        c: &Compaction,
        version: Arc<Version>,
        smallest_snapshot: u64,
        family_opts: &Options,
        (cf_id, cf_name): (u32, &str),
    ) -> Result<job::Written> {
        let range_dels = self.input_range_tombstones(c)?;
        let gc_version = version.clone();
        let blob_gc = family_opts
            .enable_blob_garbage_collection
            .then(|| {
                job::BlobGc::oldest(&gc_version, family_opts.blob_garbage_collection_age_cutoff)
            })
            .flatten();
        let spec = OutputSpec {
            fs: &self.output_fs,
            dir: &self.dir,
            opts: family_opts,
            tables: &self.tables,
            level: c.output_level,
            base_level: c.base_level,
            bottommost: version.nothing_below(c.output_level),
            max_file_size: picker::target_file_size(family_opts, c.output_level),
            flush: false,
            cf_id,
            cf_name,
            blob_gc,
            write_time_blobs: None,
        };
        let policy = DropPolicy {
            smallest_snapshot,
            version,
            output_level: c.output_level,
            filter: family_opts.compaction_filter.clone().map(|f| (f, c.level)),
            newest_snapshot: self.snapshots.newest(),
            merge_operator: family_opts.merge_operator.clone(),
            expiry: family_opts.ttl.map(|t| crate::clock::Expiry {
                ttl_secs: t.as_secs().max(1),
                now: self.opts.clock.now_secs(),
            }),
            flush: false,
        };
        let boundaries = self.subcompaction_boundaries(c)?;
        let ranges = subcompactions::ranges(&boundaries);
        let run = |range: job::KeyRange<'_>| -> Result<job::Written> {
            let mut input = self.compaction_input(c)?;
            job::write_range(
                &spec,
                &mut input,
                range,
                Some(&range_dels),
                Some(&policy),
                &mut || self.state_new_file_number(),
                &self.shutting_down,
            )
        };
        match ranges.as_slice() {
            [] => run(job::KeyRange::default()),
            [only] => run(*only),
            _ => self.run_subcompactions(&ranges, &run),
        }
    }

    /// Runs `run` for each of `ranges` (at least two), the first on this thread and the
    /// others on threads of their own, and joins their outputs in range order; if one fails,
    /// the files the others wrote are removed.
    fn run_subcompactions(
        &self,
        ranges: &[job::KeyRange<'_>],
        run: &(dyn Fn(job::KeyRange<'_>) -> Result<job::Written> + Sync),
    ) -> Result<job::Written> {
        let Some((&first, rest)) = ranges.split_first() else {
            return Ok(job::Written::default());
        };
        if let Some(s) = &self.stats {
            s.add(
                crate::statistics::Ticker::SubcompactionsRun,
                ranges.len() as u64,
            );
        }
        let results: Vec<Result<job::Written>> = std::thread::scope(|scope| {
            let handles: Vec<_> = rest
                .iter()
                .map(|&r| {
                    std::thread::Builder::new()
                        .name("shaledb-subcompaction".to_string())
                        .spawn_scoped(scope, move || run(r))
                })
                .collect();
            let mut results = vec![run(first)];
            for h in handles {
                results.push(match h {
                    // A panic goes on as it would have on the compaction's own thread.
                    Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                    Err(e) => Err(Error::io("starting a subcompaction thread", e)),
                });
            }
            results
        });
        let mut parts = Vec::with_capacity(results.len());
        let mut failure = None;
        for r in results {
            match r {
                Ok(w) => parts.push(w),
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        if let Some(e) = failure {
            // The ranges that finished leave no files behind either.
            for w in &parts {
                self.discard_outputs(w);
            }
            return Err(e);
        }
        Ok(subcompactions::merge_written(parts))
    }

    /// The range tombstones of `c`'s input tables, fragmented.
    fn input_range_tombstones(&self, c: &Compaction) -> Result<FragmentedRangeTombstones> {
        let mut range_dels = Vec::new();
        for f in c.inputs.iter().flatten() {
            if f.num_range_deletions > 0 {
                let t = self.tables.get(f)?;
                range_dels.extend(t.range_tombstones().cloned());
            }
        }
        Ok(FragmentedRangeTombstones::merge(
            range_dels.iter().map(|t| &**t),
        ))
    }

    /// The merged input of `c`: every input table, read with checksums verified, around the
    /// block cache.
    fn compaction_input(&self, c: &Compaction) -> Result<MergingIterator> {
        let opts = BlockReadOptions {
            verify_checksums: true,
            fill_cache: false,
        };
        let readahead = self.opts.compaction_readahead_size;
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        if c.level == 0 {
            for f in &c.inputs[0] {
                let t = self.tables.get(f)?;
                children.push(Box::new(t.iter(opts).with_compaction_readahead(readahead)));
            }
        } else {
            children.push(Box::new(
                LevelIterator::new(c.inputs[0].clone(), self.tables.clone(), opts)
                    .with_compaction_readahead(readahead),
            ));
        }
        if !c.inputs[1].is_empty() {
            children.push(Box::new(
                LevelIterator::new(c.inputs[1].clone(), self.tables.clone(), opts)
                    .with_compaction_readahead(readahead),
            ));
        }
        Ok(MergingIterator::new(children))
    }

    /// The user keys that split `c` into subcompactions of about equal input bytes
    /// (`Options::max_subcompactions`), cut at the data-block bounds of its input tables:
    /// none unless `c` compacts out of L0 into a deeper level or is manual (RocksDB's rule).
    fn subcompaction_boundaries(&self, c: &Compaction) -> Result<Vec<Vec<u8>>> {
        let n = self.opts.max_subcompactions.max(1) as usize;
        if n < 2 || !((c.level == 0 && c.output_level > 0) || c.manual) {
            return Ok(Vec::new());
        }
        let mut tables = Vec::new();
        for f in c.inputs.iter().flatten() {
            tables.push((f.clone(), self.tables.get(f)?));
        }
        let mut candidates: Vec<Vec<u8>> = tables
            .iter()
            .flat_map(|(_, t)| t.key_anchors(SUBCOMPACTION_ANCHORS_PER_FILE))
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        let total: u64 = tables.iter().map(|(f, _)| f.file_size).sum();
        let bytes_below = |user_key: &[u8]| -> u64 {
            let target = key::make_internal_key(user_key, key::MAX_SEQUENCE, key::KIND_FOR_SEEK);
            let below = |(f, t): &(Arc<FileMetaData>, Arc<crate::sst::Table>)| {
                if user_key <= f.smallest.user_key() {
                    0
                } else if user_key > f.largest.user_key() {
                    f.file_size
                } else {
                    t.approximate_offset_of(&target).min(f.file_size)
                }
            };
            tables.iter().map(below).sum()
        };
        Ok(subcompactions::pick_boundaries(
            &candidates,
            n,
            total,
            &bytes_below,
        ))
    }

    /// Freezes the active memtable and waits until it is flushed.
    pub(crate) fn flush_and_wait(&self, cf: u32) -> Result<()> {
        self.freeze_memtable(cf)?;
        let mut st = self.state.lock();
        loop {
            if let Some(e) = &st.bg_error {
                let e = e.duplicate();
                // The failure's event reaches the listeners before the caller hears of it.
                self.settle_events(&mut st);
                return Err(e);
            }
            let done = if self.opts.atomic_flush {
                st.families.values().all(|f| f.imms.is_empty())
            } else {
                st.family(cf).is_none_or(|f| f.imms.is_empty())
            };
            if done {
                self.settle_events(&mut st);
                return Ok(());
            }
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            self.done_cv.wait(&mut st);
        }
    }

    pub(crate) fn wait_for_compactions(&self) -> Result<()> {
        if !self.owns_files() {
            return Ok(()); // nothing runs on a read-only or secondary instance
        }
        let mut st = self.state.lock();
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.duplicate());
            }
            if let Some(e) = super::recovery::compaction_failure(&st) {
                // Retried later by itself, or now by `Db::resume`.
                return Err(e);
            }
            let busy = st.running_compactions > 0
                || st.families.values().any(|f| {
                    !f.imms.is_empty() || f.flush_running || pick_compaction(&st, f).is_some()
                });
            if !busy {
                self.settle_events(&mut st);
                break;
            }
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            self.done_cv.wait(&mut st);
        }
        drop(st);
        self.purge_obsolete_files();
        self.obsolete.wait_idle();
        Ok(())
    }

    pub(crate) fn compact_range(
        &self,
        cf: u32,
        opts: &CompactRangeOptions,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        self.flush_and_wait(cf)?;
        let mut st = self.state.lock();
        while st.family(cf).is_some_and(|f| f.manual_compaction) {
            self.done_cv.wait(&mut st);
        }
        let Some(f) = st.families.get_mut(&cf) else {
            return Ok(());
        };
        f.manual_compaction = true;
        let res = self.compact_range_locked(&mut st, cf, opts, begin, end);
        if let Some(f) = st.families.get_mut(&cf) {
            f.manual_compaction = false;
        }
        self.settle_events(&mut st);
        drop(st);
        self.notify_state_changed();
        res?;
        self.purge_obsolete_files();
        self.obsolete.wait_idle();
        Ok(())
    }

    fn compact_range_locked(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        cf: u32,
        opts: &CompactRangeOptions,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        while st.running_compactions > 0 {
            if let Some(e) = &st.bg_error {
                return Err(e.duplicate());
            }
            self.done_cv.wait(st);
        }
        let v = st.versions.current(cf);
        if v.num_levels() == 0 {
            return Ok(()); // dropped
        }
        let deepest = (0..v.num_levels())
            .rev()
            .find(|&l| !v.overlapping_files(l, begin, end).is_empty())
            .unwrap_or(0);
        let target = deepest.max(1).min(v.num_levels() - 1);
        // Files of the target level from before this compaction (ForceOptimized rewrites
        // only those).
        let old_at_target: HashSet<u64> = v.level_files(target).iter().map(|f| f.number).collect();
        let has_filter = st
            .family(cf)
            .is_some_and(|f| f.data.opts.compaction_filter.is_some());
        let rewrite_target = match opts.bottommost_level_compaction {
            BottommostLevelCompaction::Skip => false,
            BottommostLevelCompaction::IfHaveCompactionFilter => has_filter,
            BottommostLevelCompaction::Force | BottommostLevelCompaction::ForceOptimized => true,
        };
        for level in 0..=target {
            if level == target && !rewrite_target {
                break;
            }
            self.wait_for_manual_step(st, cf)?;
            let v = st.versions.current(cf);
            let inputs0 = if level == 0 {
                v.level_files(0).to_vec()
            } else {
                v.overlapping_files(level, begin, end)
            };
            if level < target {
                self.run_manual_step(st, cf, level, (level + 1).min(target), inputs0)?;
                continue;
            }
            // The target level is rewritten in place, in runs of adjacent files, so that no
            // output spans a file left out (which would make the level's files overlap).
            let optimized =
                opts.bottommost_level_compaction == BottommostLevelCompaction::ForceOptimized;
            for run in adjacent_runs(inputs0, |f| !optimized || old_at_target.contains(&f.number)) {
                self.run_manual_step(st, cf, level, level, run)?;
            }
        }
        Ok(())
    }
    /// Waits until a manual compaction may take its next step: no error, not closing, and no
    /// file drop of the family still installing (its files must not be inputs). Automatic
    /// compactions of the family are off meanwhile.
    fn wait_for_manual_step(&self, st: &mut MutexGuard<'_, DbState>, cf: u32) -> Result<()> {
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.duplicate());
            }
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            if st.ingesting == 0 && st.family(cf).is_none_or(|f| f.busy.files.is_empty()) {
                return Ok(());
            }
            self.done_cv.wait(st);
        }
    }

    /// Compacts `inputs0` (at `level`) with what they overlap at `output` into `output`.
    fn run_manual_step(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        cf: u32,
        level: usize,
        output: usize,
        inputs0: Vec<Arc<FileMetaData>>,
    ) -> Result<()> {
        let Some((s, l)) = picker::user_range(&inputs0) else {
            return Ok(());
        };
        let v = st.versions.current(cf);
        let inputs1 = if output == level {
            Vec::new()
        } else {
            v.overlapping_files(output, Some(&s), Some(&l))
        };
        let mut c = Compaction::new(level, output, inputs0, inputs1);
        c.manual = true;
        c.reason = crate::CompactionReason::Manual;
        if let Some(f) = st.family(cf) {
            c.base_level = picker::base_level(&v, &f.data.opts);
        }
        let res = self.run_busy_compaction(st, cf, &c);
        let outcome = match &res {
            Ok(()) => Ok(()),
            Err(e) => Err(e.duplicate()),
        };
        self.record_compaction_result(st, outcome);
        self.recheck_stall_condition(st);
        self.notify_state_changed();
        res
    }
}

/// Splits `files` (one level's, in key order) into runs of adjacent files that `keep` accepts.
fn adjacent_runs(
    files: Vec<Arc<FileMetaData>>,
    keep: impl Fn(&FileMetaData) -> bool,
) -> Vec<Vec<Arc<FileMetaData>>> {
    let mut runs = vec![Vec::new()];
    for f in files {
        match keep(&f) {
            true => runs.last_mut().map_or((), |r| r.push(f)),
            false => runs.push(Vec::new()),
        }
    }
    runs.retain(|r| !r.is_empty());
    runs
}

/// Whether compaction is urgent: writes are being slowed or stopped, or some family's debt
/// is past the speedup point (`needs_compaction_speedup`).
fn compaction_is_urgent(st: &DbState) -> bool {
    st.stall_condition != crate::listener::WriteStallCondition::Normal
        || st
            .families
            .values()
            .any(|cf| super::write::needs_compaction_speedup(st, cf))
}

/// The oldest frozen memtable of the first family that has one and no flush running.
fn pick_flush(st: &mut DbState) -> Option<Job> {
    let (&id, f) = st
        .families
        .iter_mut()
        .find(|(_, f)| !f.flush_running && !f.imms.is_empty())?;
    let mem = f.imms.front()?.clone();
    f.flush_running = true;
    Some(Job::Flush(id, mem))
}

/// With `atomic_flush`: the oldest frozen memtable of every family that has one, unless a
/// flush is running.
fn pick_atomic_flush(st: &mut DbState) -> Option<Job> {
    if st.families.values().any(|f| f.flush_running) {
        return None;
    }
    let mems: Vec<(u32, Arc<MemTable>)> = st
        .families
        .iter()
        .filter_map(|(&id, f)| Some((id, f.imms.front()?.clone())))
        .collect();
    if mems.is_empty() {
        return None;
    }
    for (id, _) in &mems {
        if let Some(f) = st.families.get_mut(id) {
            f.flush_running = true;
        }
    }
    Some(Job::AtomicFlush(mems))
}

/// The compaction family `f` needs next, if automatic compactions may run in it.
fn pick_compaction(st: &DbState, f: &CfState) -> Option<Compaction> {
    if f.data.opts.disable_auto_compactions || f.manual_compaction {
        return None;
    }
    let id = f.data.id;
    let v = st.versions.current(id);
    let by_size = picker::pick(&v, &f.data.opts, &f.busy, st.versions.compact_pointers(id));
    by_size.or_else(|| pick_seek_compaction(&v, f))
}

/// The family's seek candidate's compaction (version/seeks.rs), if it has one that can run
/// now. The candidate stays until a pick finds its table gone (compacted by this or another
/// compaction), so that asking (as `wait_for_compactions` does) never loses it; while its
/// compaction runs, the table is busy and the pick says later.
fn pick_seek_compaction(v: &Version, f: &CfState) -> Option<Compaction> {
    let (level, number) = f.data.seeks.get()?;
    match picker::pick_seek(v, &f.data.opts, &f.busy, level, number) {
        picker::SeekPick::Compact(c) => Some(c),
        picker::SeekPick::Later => None,
        picker::SeekPick::Gone => {
            f.data.seeks.clear((level, number));
            None
        }
    }
}

/// Edits moving other families' log numbers up to their oldest unflushed WAL (for families
/// whose memtables were empty when the WAL switched), written with family `flushed`'s flush
/// so idle families do not keep old WALs alive.
pub(super) fn log_number_advances(st: &DbState, flushed: &[u32]) -> Vec<VersionEdit> {
    st.families
        .iter()
        .filter(|(id, _)| !flushed.contains(id))
        .filter_map(|(&id, f)| {
            let oldest = f.oldest_log();
            let recorded = st.versions.family(id)?.log_number();
            (oldest > recorded).then(|| VersionEdit {
                column_family: id,
                log_number: Some(oldest),
                ..Default::default()
            })
        })
        .collect()
}

/// Family `cf`'s statistics for `level`, if the family is live.
fn stats_at(st: &mut DbState, cf: u32, level: usize) -> Option<&mut LevelStats> {
    st.families.get_mut(&cf)?.level_stats.get_mut(level)
}

/// (level, file number) of the files of `version` that `drop_expired_files` may remove.
fn expired_files(
    version: &Version,
    tables: &crate::cache::TableCache,
    expiry: crate::clock::Expiry,
) -> Result<Vec<(usize, u64)>> {
    let mut out = Vec::new();
    for (level, files) in version.files.iter().enumerate() {
        for (i, g) in files.iter().enumerate() {
            if g.num_deletions > 0 || g.num_range_deletions > 0 {
                continue;
            }
            let (small, large) = (g.smallest.user_key(), g.largest.user_key());
            let overlaps = |h: &Arc<FileMetaData>| {
                h.smallest.user_key() <= large && h.largest.user_key() >= small
            };
            // L0 is newest first: the files after this one are older.
            let older_l0 = level == 0 && files[i + 1..].iter().any(overlaps);
            if older_l0 || !version.is_base_level_for_range_inclusive(level, small, large) {
                continue;
            }
            let newest = tables.get(g)?.properties().newest_write_time;
            if newest > 0 && expiry.expired(newest) {
                out.push((level, g.number));
            }
        }
    }
    Ok(out)
}

/// The blob references (table property `shaledb.blob.references`) of each of `files` that
/// references blob files, by table number: what becomes garbage if the table is dropped whole.
/// Tables written before the property existed have none, and their drop counts no garbage
/// (their blob files still go once no table references them). Run without the state mutex:
/// it may open tables.
fn blob_references_of(
    version: &Version,
    tables: &crate::cache::TableCache,
    files: &[(usize, u64)],
) -> Result<HashMap<u64, Vec<crate::sst::BlobReferences>>> {
    let mut out = HashMap::new();
    for &(level, number) in files {
        let Some(f) = version
            .level_files(level)
            .iter()
            .find(|f| f.number == number)
        else {
            continue;
        };
        if f.blob_files.is_empty() {
            continue;
        }
        let table = tables.get(f)?;
        let refs = &table.properties().blob_references;
        if !refs.is_empty() {
            out.insert(number, refs.clone());
        }
    }
    Ok(out)
}

/// Adds to `edit` (whole-file drops only) the blob garbage of the tables it deletes: their
/// references, from `refs` ([`blob_references_of`]). RocksDB's garbage meter counts only
/// what compactions read; here whole-file drops count too, so `shaledb.blob-stats` and
/// forced blob GC see their garbage. The sum per blob file is
/// capped at what `current` has not yet counted, so the edit always applies: a correct count
/// never reaches the cap (each record is referenced by one live table entry at most).
fn add_dropped_garbage(
    edit: &mut VersionEdit,
    refs: &HashMap<u64, Vec<crate::sst::BlobReferences>>,
    current: &Version,
) {
    let mut sums: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (_, number) in &edit.deleted_files {
        for r in refs.get(number).into_iter().flatten() {
            let e = sums.entry(r.file_number).or_default();
            e.0 = e.0.saturating_add(r.count);
            e.1 = e.1.saturating_add(r.bytes);
        }
    }
    for (number, (count, bytes)) in sums {
        let Some(b) = current.blob_file(number) else {
            continue;
        };
        let a = &b.meta.addition;
        let count = count.min(a.blob_count.saturating_sub(b.garbage_count));
        let bytes = bytes.min(a.blob_bytes.saturating_sub(b.garbage_bytes));
        if count > 0 || bytes > 0 {
            edit.blob_garbage.push(crate::version::BlobGarbage {
                number,
                count,
                bytes,
            });
        }
    }
}

/// True if the edit adds a file holding range tombstones.
fn has_range_deletions(edit: &VersionEdit) -> bool {
    edit.new_files
        .iter()
        .any(|(_, f)| f.num_range_deletions > 0)
}

/// (level, file number) of every file of `version` that the range tombstones of its other
/// files delete entirely for every reader at or above sequence `oldest`.
fn files_under_tombstones(
    version: &Version,
    tables: &crate::cache::TableCache,
    oldest: u64,
) -> Result<Vec<(usize, u64)>> {
    let mut tombstones = Vec::new();
    for f in version.files.iter().flatten() {
        if f.num_range_deletions > 0 {
            if let Some(t) = tables.get(f)?.range_tombstones() {
                tombstones.push((f.number, t.clone()));
            }
        }
    }
    let mut out = Vec::new();
    for (level, files) in version.files.iter().enumerate() {
        for g in files {
            let covered = tombstones.iter().any(|(number, t)| {
                *number != g.number
                    && t.covers_range(
                        g.smallest.user_key(),
                        g.largest.user_key(),
                        g.largest_seqno,
                        oldest,
                    )
            });
            if covered {
                out.push((level, g.number));
            }
        }
    }
    Ok(out)
}

/// The blob files a memtable's values went to when written (`Options::
/// separate_blobs_at_write`), finished and synced for the flush that adds them to the
/// MANIFEST with the memtable's table (whose directory sync covers them).
fn finish_write_time_blobs(mem: &MemTable) -> Result<Vec<crate::version::BlobFileAddition>> {
    match mem.write_time_blobs() {
        Some(b) => b.finish(),
        None => Ok(Vec::new()),
    }
}

/// What a MANIFEST write makes durable, which decides whether the closed WALs are synced
/// before it (closed_wals.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EditKind {
    /// Memtables written to tables: synced first only when there are several families.
    Flush,
    /// Files rewritten, moved or merged: no write becomes durable, nothing is synced first.
    Compaction,
    /// Anything else (an ingestion, files dropped, families created or dropped, log
    /// numbers alone): synced first.
    Other,
}

#[cfg(test)]
mod tests {
    use super::BackgroundRole;
    use crate::fs::{FsHook, HookedFileSystem, MemFileSystem, WritableFile};
    use crate::{Db, Options};
    use parking_lot::{Condvar, Mutex};
    use std::io;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    /// Holds MANIFEST syncs while closed, and counts syncs waiting at it.
    #[derive(Default)]
    struct Gate {
        state: Mutex<(bool, usize)>,
        cv: Condvar,
    }

    impl Gate {
        fn set_closed(&self, closed: bool) {
            self.state.lock().0 = closed;
            self.cv.notify_all();
        }
        fn pass(&self) {
            let mut st = self.state.lock();
            st.1 += 1;
            self.cv.notify_all();
            while st.0 {
                self.cv.wait(&mut st);
            }
            st.1 -= 1;
        }
        fn wait_for_a_waiter(&self) {
            let mut st = self.state.lock();
            while st.1 == 0 {
                self.cv.wait(&mut st);
            }
        }
        /// Whether something waits at the gate within `limit`.
        fn has_a_waiter_within(&self, limit: Duration) -> bool {
            let deadline = std::time::Instant::now() + limit;
            let mut st = self.state.lock();
            while st.1 == 0 {
                if self.cv.wait_until(&mut st, deadline).timed_out() {
                    return st.1 > 0;
                }
            }
            true
        }
    }

    struct GatedFile {
        inner: Box<dyn WritableFile>,
        gate: Arc<Gate>,
    }

    impl WritableFile for GatedFile {
        fn append(&mut self, data: &[u8]) -> io::Result<()> {
            self.inner.append(data)
        }
        fn flush(&mut self) -> io::Result<()> {
            self.inner.flush()
        }
        fn sync(&mut self) -> io::Result<()> {
            self.gate.pass();
            self.inner.sync()
        }
        fn len(&self) -> u64 {
            self.inner.len()
        }
    }

    /// MANIFEST syncs pass through the gate.
    struct GateManifestSyncs(Arc<Gate>);

    impl FsHook for GateManifestSyncs {
        fn writable(&self, path: &Path, file: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
            let manifest = path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST"));
            if !manifest {
                return file;
            }
            Box::new(GatedFile {
                inner: file,
                gate: self.0.clone(),
            })
        }
    }

    #[test]
    fn writes_go_on_while_a_manifest_sync_is_slow() {
        let gate = Arc::new(Gate::default());
        let fs = Arc::new(HookedFileSystem::new(
            Arc::new(MemFileSystem::new()),
            GateManifestSyncs(gate.clone()),
        ));
        let opts = Options {
            fs,
            ..Default::default()
        };
        let db = Arc::new(Db::open("/db", opts).expect("open"));
        db.put(b"a", b"1").expect("put");
        gate.set_closed(true);
        let flusher = {
            let db = db.clone();
            std::thread::spawn(move || db.flush())
        };
        // The flush's MANIFEST edit is now being synced.
        gate.wait_for_a_waiter();
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = {
            let db = db.clone();
            std::thread::spawn(move || {
                let res = db.put(b"b", b"2");
                let _ = tx.send(res.is_ok());
            })
        };
        // With the MANIFEST written under the database mutex, the put waits for the sync.
        let during = rx.recv_timeout(Duration::from_secs(5));
        gate.set_closed(false);
        writer.join().expect("writer");
        flusher.join().expect("flusher").expect("flush");
        assert_eq!(during, Ok(true));
        assert_eq!(db.get(b"a").expect("get").as_deref(), Some(&b"1"[..]));
        assert_eq!(db.get(b"b").expect("get").as_deref(), Some(&b"2"[..]));
        assert_eq!(
            db.property("shaledb.num-files-at-level0"),
            Some("1".to_string())
        );
    }

    /// Records which thread created each table file, and holds the compaction threads at
    /// their first output while its gate is closed.
    struct WatchTableCreators {
        gate: Arc<Gate>,
        creators: Mutex<Vec<String>>,
    }

    impl FsHook for WatchTableCreators {
        fn writable(&self, path: &Path, file: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
            if path.extension().is_some_and(|e| e == "sst") {
                let name = std::thread::current().name().unwrap_or("").to_string();
                let held = name.starts_with("shaledb-compact-");
                self.creators.lock().push(name);
                if held {
                    self.gate.pass();
                }
            }
            file
        }
    }

    fn level0_files(db: &Db, cf: &crate::ColumnFamily) -> String {
        db.property_cf(cf, "shaledb.num-files-at-level0")
            .expect("property")
    }

    #[test]
    fn with_lowered_priority_flushes_and_urgent_compactions_keep_their_own_threads() {
        let fs = Arc::new(HookedFileSystem::new(
            Arc::new(MemFileSystem::new()),
            WatchTableCreators {
                gate: Arc::new(Gate::default()),
                creators: Mutex::new(Vec::new()),
            },
        ));
        let watch = fs.hook();
        // Compaction is urgent from 8 L0 files on: twice the trigger, and a quarter of the
        // way to the slowdown trigger.
        let opts = Options {
            fs: fs.clone(),
            max_background_jobs: 2,
            background_cpu_priority: crate::CpuPriority::Low,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            ..Default::default()
        };
        let db = Db::open("/db", opts.clone()).expect("open");
        let other = db.create_cf("other", opts.cf_options()).expect("create_cf");
        let default = db.default_cf();
        watch.gate.set_closed(true);
        // A failed assertion must not leave the compaction thread held: closing the database
        // waits for it. Dropped before `db`.
        struct OpenOnDrop<'a>(&'a Gate);
        impl Drop for OpenOnDrop<'_> {
            fn drop(&mut self) {
                self.0.set_closed(false);
            }
        }
        let _open_on_drop = OpenOnDrop(&watch.gate);
        // Every table holds key 1000 too, so the tables overlap and compacting them writes
        // a new one (no trivial move).
        for i in 0..4u32 {
            db.put(i.to_be_bytes(), b"default").expect("put");
            db.put(1000u32.to_be_bytes(), b"default").expect("put");
            db.flush().expect("flush");
        }
        // The default family's L0 compaction is due; the compaction thread takes it and is
        // held at its output.
        assert!(
            watch.gate.has_a_waiter_within(Duration::from_secs(30)),
            "{:?}",
            watch.creators.lock()
        );
        for i in 0..7u32 {
            db.put_cf(&other, i.to_be_bytes(), b"other").expect("put");
            db.put_cf(&other, 1000u32.to_be_bytes(), b"other")
                .expect("put");
            db.flush_cf(&other).expect("flush");
        }
        // Due but not urgent: the relief thread leaves it to the (busy) compaction thread.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(level0_files(&db, &other), "7");
        {
            let creators = watch.creators.lock();
            assert_eq!(creators.len(), 12, "{creators:?}");
            let flushed_by: Vec<&str> = creators
                .iter()
                .filter(|n| !n.starts_with("shaledb-compact-"))
                .map(|n| n.as_str())
                .collect();
            assert_eq!(flushed_by.len(), 11, "{creators:?}");
            assert!(
                flushed_by
                    .iter()
                    .all(|n| *n == "shaledb-flush" || *n == "shaledb-relief"),
                "{creators:?}"
            );
        }
        db.put_cf(&other, 7u32.to_be_bytes(), b"other")
            .expect("put");
        db.put_cf(&other, 1000u32.to_be_bytes(), b"other")
            .expect("put");
        db.flush_cf(&other).expect("flush");
        // Eight L0 files: urgent, so the relief thread compacts them at normal priority.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while level0_files(&db, &other) != "0" {
            assert!(std::time::Instant::now() < deadline, "not compacted");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(level0_files(&db, &default), "4");
        assert_eq!(
            watch.creators.lock().last().map(String::as_str),
            Some("shaledb-relief")
        );
        watch.gate.set_closed(false);
        db.wait_for_compactions().expect("wait");
        assert_eq!(level0_files(&db, &default), "0");
        for i in (0..8u32).chain([1000]) {
            let in_default = db.get(i.to_be_bytes()).expect("get");
            let want: Option<&[u8]> = (i < 4 || i == 1000).then_some(b"default");
            assert_eq!(in_default.as_deref(), want, "{i}");
            assert_eq!(
                db.get_cf(&other, i.to_be_bytes()).expect("get").as_deref(),
                Some(&b"other"[..]),
                "{i}"
            );
        }
    }

    #[test]
    fn thread_roles_split_only_below_normal_priority() {
        use super::BackgroundRole::*;
        use crate::CpuPriority;
        assert_eq!(
            BackgroundRole::of_threads(2, CpuPriority::Normal),
            [Any, Any]
        );
        assert_eq!(BackgroundRole::of_threads(1, CpuPriority::Low), [Any]);
        assert_eq!(
            BackgroundRole::of_threads(3, CpuPriority::Idle),
            [Flush, Compaction, Compaction, Relief]
        );
        let names: Vec<String> = BackgroundRole::of_threads(2, CpuPriority::Low)
            .iter()
            .enumerate()
            .map(|(i, r)| r.thread_name(i))
            .collect();
        assert_eq!(
            names,
            ["shaledb-flush", "shaledb-compact-1", "shaledb-relief"]
        );
    }
}
