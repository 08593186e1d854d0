//! The write path: a queue of writers with group commit.
//!
//! Each writer enqueues itself under the state mutex. The writer at the front is the leader:
//! it makes room (freezing a full memtable, or stalling while flushes and compactions catch
//! up), merges the batches queued behind it into one group, and with the mutex released
//! appends the group to the WAL as one record (one fsync if any member asked for sync) and
//! inserts it into the memtable. Then it publishes the group's last sequence number and wakes
//! the members with the shared result. No member is acknowledged before the WAL bytes reached
//! the OS (and, for sync writes, the disk); if that fails all of them get the error and the
//! database refuses further writes: until recovery replaces the WAL if it was full
//! (`Error::Suspended`, recovery.rs), for good otherwise (`Error::Poisoned`).

use super::group_insert::{insert_entries, GroupInserts, Part};
use super::{recovery, CfState, DbInner, DbState, Writer};
use crate::column_family::DEFAULT_FAMILY;
use crate::error::{Error, Result};
use crate::listener::{BackgroundErrorReason, WriteStallCondition};
use crate::log::{LogWriter, WalMarker};
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::statistics::{HistogramKind, Ticker};
use crate::version::filename;
use crate::write_batch::{BatchEntry, WriteBatch, BATCH_HEADER_SIZE};
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::cell::Cell;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

thread_local! {
    /// This thread's last writer, reused by its next write if nobody holds it any more.
    static SPARE_WRITER: Cell<Option<Arc<Writer>>> = const { Cell::new(None) };
}

impl Writer {
    /// A writer ready to be queued (`batch` `None`: a flush request or a write barrier).
    fn queued(batch: Option<WriteBatch>, sync: bool, disable_wal: bool) -> Arc<Writer> {
        Arc::new(Writer::fresh(batch, sync, disable_wal))
    }

    fn fresh(batch: Option<WriteBatch>, sync: bool, disable_wal: bool) -> Writer {
        Writer {
            batch: Mutex::new(batch),
            sync,
            disable_wal,
            result: Mutex::new(None),
            cv: Condvar::new(),
            woken: AtomicBool::new(false),
            inserts: Mutex::new(None),
            inserts_posted: AtomicBool::new(false),
        }
    }

    /// A writer for `batch`: this thread's spare one (`recycle`) made new, else a new one. A
    /// lone writer so allocates nothing per write for its place in the queue.
    fn for_write(batch: WriteBatch, sync: bool, disable_wal: bool) -> Arc<Writer> {
        if let Some(mut spare) = SPARE_WRITER.with(Cell::take) {
            if let Some(w) = Arc::get_mut(&mut spare) {
                *w = Writer::fresh(Some(batch), sync, disable_wal);
                return spare;
            }
        }
        Writer::queued(Some(batch), sync, disable_wal)
    }

    /// Keeps `w`, whose write is done, as this thread's spare writer if no other thread
    /// holds it (a leader may keep a member's handle for a moment after acknowledging it),
    /// emptied: a member's batch (copied into its group, not taken) and inserts
    /// posted to it (which hold memtables) must not outlive the write in an idle thread.
    fn recycle(mut w: Arc<Writer>) {
        if let Some(emptied) = Arc::get_mut(&mut w) {
            *emptied.batch.get_mut() = None;
            *emptied.inserts.get_mut() = None;
            SPARE_WRITER.with(|spare| spare.set(Some(w)));
        }
    }

    /// Wakes this writer to look at the queue again. Called with the state mutex held.
    fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        self.cv.notify_one();
    }

    /// Offers this member of a group the group's memtable inserts, which it helps with if it
    /// is still yielding (`yield_until_woken`); asleep, it leaves them to the leader.
    fn post_inserts(&self, inserts: &Arc<GroupInserts>) {
        *self.inserts.lock() = Some(inserts.clone());
        self.inserts_posted.store(true, Ordering::Release);
    }
}

/// How long a queued writer yields its core, waiting for its leader, before it sleeps on its
/// condition variable. A leader usually finishes within a few microseconds (one WAL write
/// and the memtable inserts), much less than a futex sleep and wake-up cost in CPU; a yield
/// also lets the leader run when it shares the core. RocksDB's `WriteThread::AwaitState`
/// yields the same way (up to `max_yield_usec`, 100 us by default) but gives up after three
/// yields that took over 3 us (other threads ran); that cutoff made most followers sleep at
/// once with 8 writers on 2 cores (YCSB load with 8 threads 163K-209K ops/s with it, 296K-340K
/// without), so here the time bound alone limits the yielding.
const YIELD_BEFORE_SLEEP: Duration = Duration::from_micros(50);

/// Refuses option combinations that cannot keep their promise.
pub(super) fn check_write_options(wo: &WriteOptions) -> Result<()> {
    if wo.sync && wo.disable_wal {
        // Nothing would be synced: the batch lives only in the memtable until a flush. RocksDB
        // refuses this combination too.
        return Err(Error::InvalidArgument(
            "WriteOptions::sync needs the WAL, but WriteOptions::disable_wal is set: a write \
             without the WAL cannot be made durable when it is acknowledged (set one of them \
             to false)"
                .to_string(),
        ));
    }
    Ok(())
}

/// Waits (on `w`'s condition variable, releasing the mutex) until writer `w` is at the front
/// of the queue, and returns `None` then: `w` leads the next group. Returns `Some(result)`
/// instead if a leader wrote `w`'s batch in its group meanwhile. The result is left under the
/// state mutex, which we hold when reading it: there is no "done but no result" state to
/// misread as success.
fn wait_for_turn(st: &mut MutexGuard<'_, DbState>, w: &Writer) -> Option<Result<()>> {
    let mut yielded = false;
    loop {
        if let Some(result) = w.result.lock().take() {
            return Some(result);
        }
        if st.writers.front().is_some_and(|f| std::ptr::eq(&**f, w)) {
            return None;
        }
        if !yielded {
            yielded = true;
            // Reset under the mutex: a wake-up from now on is seen by the yield loop.
            w.woken.store(false, Ordering::Relaxed);
            MutexGuard::unlocked(st, || yield_until_woken(w));
            continue;
        }
        w.cv.wait(st);
    }
}

/// Waits until a writer that left the queue (its group is inflight) has its result.
fn wait_for_result(st: &mut MutexGuard<'_, DbState>, w: &Writer) -> Result<()> {
    loop {
        // Not in the queue, so never at its front: only a result ends the wait.
        if let Some(result) = wait_for_turn(st, w) {
            return result;
        }
    }
}

/// Yields the core until `w` is woken, for at most `YIELD_BEFORE_SLEEP`, helping with its
/// group's memtable inserts if its leader posts them meanwhile.
fn yield_until_woken(w: &Writer) {
    let mut start = Instant::now();
    while !w.woken.load(Ordering::Acquire) && start.elapsed() < YIELD_BEFORE_SLEEP {
        if w.inserts_posted.swap(false, Ordering::Acquire) {
            if let Some(inserts) = w.inserts.lock().take() {
                inserts.help();
            }
            // The leader acknowledges the group as soon as the last part is in: wait for
            // that afresh rather than sleep.
            start = Instant::now();
            continue;
        }
        std::thread::yield_now();
    }
}

/// The body of `DbInner::separate_blobs`: appends each separable put's value of `group` to
/// its family's blob file, noting every record in `appended`, fills `out` with the group's
/// entries (references in place of those values), then hands the files to the OS.
fn append_blobs<'g, 'm>(
    group: &'g WriteBatch,
    blobs_of: &dyn Fn(u32) -> Option<&'m crate::blob::WriteTimeBlobs>,
    env: &crate::blob::BlobFileEnv<'_>,
    out: &mut WriteBatch,
    appended: &mut Vec<(u32, &'g [u8], crate::blob::BlobRef)>,
) -> Result<()> {
    let mut reference = Vec::with_capacity(crate::blob::BlobRef::MAX_ENCODED_LEN);
    for (cf, e) in group.iter_cf() {
        let separable = match (e, blobs_of(cf)) {
            (BatchEntry::Put(k, v), Some(blobs)) => blobs
                .separable(v)
                .map(|(value, time)| (k, value, time, blobs)),
            _ => None,
        };
        let Some((k, value, write_time, blobs)) = separable else {
            out.push_entry(cf, e);
            continue;
        };
        let r = blobs.add(env, cf, k, value)?;
        appended.push((cf, k, r));
        reference.clear();
        r.encode_entry_to(write_time, &mut reference);
        out.blob_index_in(cf, k, &reference);
    }
    let mut touched: Vec<u32> = appended.iter().map(|(cf, ..)| *cf).collect();
    touched.sort_unstable();
    touched.dedup();
    for blobs in touched.into_iter().filter_map(blobs_of) {
        blobs.hand_to_os()?;
    }
    Ok(())
}

/// The active memtable of every family, listed in the vector the last group left
/// (`DbState::spare_mems`): a lone writer allocates none per write.
fn active_mems(st: &mut DbState) -> Vec<(u32, Arc<MemTable>)> {
    let mut mems = std::mem::take(&mut st.spare_mems);
    mems.extend(st.families.iter().map(|(id, f)| (*id, f.mem.clone())));
    mems
}

/// Leader `w` hands the group's `result` to the other `group_len - 1` writers at the front of
/// the queue, removes all `group_len` (itself included), and wakes the next leader.
fn acknowledge_group(
    st: &mut MutexGuard<'_, DbState>,
    w: &Writer,
    group_len: usize,
    result: &Result<()>,
) {
    for _ in 0..group_len {
        let Some(m) = st.writers.pop_front() else {
            break;
        };
        if !std::ptr::eq(&*m, w) {
            *m.result.lock() = Some(match result {
                Ok(()) => Ok(()),
                Err(e) => Err(e.duplicate()),
            });
            m.wake();
        }
    }
    if let Some(next) = st.writers.front() {
        next.wake();
    }
}

/// A group stops growing past this many bytes so one leader does not delay its own write too
/// long.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// Entries of a group whose memtable cache lines are prefetched before the WAL write.
const PREFETCH_ENTRIES: usize = 8;

impl DbInner {
    /// Checks sizes; returns the column families other than the default the batch writes to,
    /// and those it merges into (to be checked against the live families).
    fn validate_batch(&self, batch: &WriteBatch) -> Result<BatchFamilies> {
        let mut families = BatchFamilies::default();
        for (cf, e) in batch.iter_cf() {
            if cf != DEFAULT_FAMILY && !families.written.contains(&cf) {
                families.written.push(cf);
            }
            let (_, k, v) = e.parts();
            if matches!(e, BatchEntry::BlobIndex(..)) {
                return Err(Error::InvalidArgument(
                    "a write batch cannot hold blob references: only the engine writes them"
                        .to_string(),
                ));
            }
            if matches!(e, BatchEntry::Merge(..)) && !families.merged.contains(&cf) {
                families.merged.push(cf);
            }
            if k.len() > self.opts.max_key_size {
                return Err(Error::InvalidArgument(format!(
                    "key of {} bytes is longer than the maximum of {} (Options::max_key_size)",
                    k.len(),
                    self.opts.max_key_size
                )));
            }
            if v.len() > self.opts.max_value_size {
                return Err(Error::InvalidArgument(format!(
                    "value of {} bytes is longer than the maximum of {} (Options::max_value_size)",
                    v.len(),
                    self.opts.max_value_size
                )));
            }
        }
        Ok(families)
    }

    pub(crate) fn write_owned(&self, wo: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.check_writable("a write")?;
        match &self.stats {
            None => self.write_owned_timed(wo, batch),
            Some(s) => {
                let start = Instant::now();
                let res = self.write_owned_timed(wo, batch);
                s.record_since(HistogramKind::WriteMicros, start);
                res
            }
        }
    }

    fn write_owned_timed(&self, wo: &WriteOptions, batch: WriteBatch) -> Result<()> {
        check_write_options(wo)?;
        let families = self.validate_batch(&batch)?;
        if wo.low_pri {
            self.pace_low_pri(batch.approximate_size() as u64);
        }
        let w = Writer::for_write(batch, wo.sync, wo.disable_wal);
        let result = self.queue_and_write(&w, &families);
        Writer::recycle(w);
        result
    }

    /// Queues writer `w` and waits until its batch (writing to `families`) is written: by
    /// a leader, or by `w` as the leader of the next group.
    fn queue_and_write(&self, w: &Arc<Writer>, families: &BatchFamilies) -> Result<()> {
        let mut st = self.state.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        families.check(&st)?;
        if families.has_ttl(&st) {
            // Stamped under the mutex: a family cannot be dropped and recreated meanwhile.
            let mut b = w.batch.lock();
            let now = self.opts.clock.now_secs();
            if let Some(batch) = b.as_mut() {
                *batch = batch.with_write_times(
                    &|cf| st.family(cf).is_some_and(|f| f.data.opts.ttl.is_some()),
                    now,
                );
            }
        }
        st.writers.push_back(w.clone());
        // Under the mutex, so a load and a store: a leader sees a writer came while it wrote
        // its group to the WAL.
        self.writers_enqueued.store(
            self.writers_enqueued.load(Ordering::Relaxed) + 1,
            Ordering::Relaxed,
        );
        if let Some(result) = wait_for_turn(&mut st, w) {
            return result;
        }
        let result = self.lead_group(&mut st, w);
        // A stall condition change this leader saw (not while it led: that would hold up
        // the queue).
        self.deliver_events(&mut st);
        result
    }

    /// As the queue's leader `w`: makes room, merges the queued batches into one group, writes
    /// it (WAL, then memtables) with the mutex released, publishes its sequence numbers and
    /// acknowledges its writers. Returns `w`'s result.
    fn lead_group(&self, st: &mut MutexGuard<'_, DbState>, w: &Writer) -> Result<()> {
        let slow_down = match self.make_room_for_write(st, None) {
            Ok(slow_down) => slow_down,
            Err(e) => {
                let result = Err(e);
                acknowledge_group(st, w, 1, &result);
                return result;
            }
        };
        let group = build_group(&st.writers);
        let group_len = group.len;
        // Every member's bytes, not only the leader's (members return without counting),
        // each with its own batch header as the caller saw it: the group holds one header.
        let group_bytes = group.batch.approximate_size();
        let user_bytes = (group_bytes + (group_len - 1) * BATCH_HEADER_SIZE) as u64;
        self.pace_write(st, slow_down, group_bytes as u64);
        let concurrent = self.opts.allow_concurrent_memtable_write;
        // The members that may insert their parts themselves (group_insert.rs).
        let helpers: Vec<Arc<Writer>> = match concurrent {
            true if group_len > 1 => st.writers.range(1..group_len).cloned().collect(),
            _ => Vec::new(),
        };
        let seq = match st.inflight.back() {
            Some(g) => g.last,
            None => self.last_sequence.load(Ordering::Acquire),
        } + 1;
        let mut mems = active_mems(st);
        let disable_wal = w.disable_wal;
        // Hand the queue on once the group is in the WAL if a writer waits for it (now, or
        // one that comes meanwhile), or if an earlier group is inserting anyway (see
        // "Pipelined groups" below). Else the queue stays this leader's and nobody else
        // inserts meanwhile: it inserts alone, before it takes the mutex again.
        let pipeline_now = concurrent && (!st.inflight.is_empty() || st.writers.len() > group_len);
        let enqueued = self.writers_enqueued.load(Ordering::Relaxed);
        let written = MutexGuard::unlocked(st, || {
            let logged = self.log_group(group, seq, disable_wal, &mems)?;
            let size = (
                logged.batch.len() as u64,
                logged.batch.approximate_size() as u64,
            );
            // Read without the mutex: a writer it misses waits for this group, as it would
            // have without pipelining.
            let arrived = self.writers_enqueued.load(Ordering::Relaxed) != enqueued;
            if pipeline_now || (concurrent && arrived) {
                return Ok((size, Some(logged)));
            }
            self.insert_group(logged, seq, &mems, &helpers, false);
            Ok((size, None))
        });
        let ((count, wal_bytes), pending) = match written {
            Ok(written) => written,
            Err(failure) => {
                let result = Err(self.group_failed(st, failure));
                acknowledge_group(st, w, group_len, &result);
                return result;
            }
        };
        if !disable_wal {
            if let Some(w) = st.live_wals.last_mut() {
                w.1 += wal_bytes;
            }
        }
        self.count_written(count, user_bytes);
        let last = seq + count - 1;
        let result = match pending {
            None => {
                self.last_sequence.store(last, Ordering::Release);
                acknowledge_group(st, w, group_len, &Ok(()));
                Ok(())
            }
            Some(logged) => {
                self.insert_pipelined(st, w, group_len, logged, seq..=last, &mems, &helpers)
            }
        };
        mems.clear();
        st.spare_mems = mems;
        result
    }

    /// Counts a group's `entries` and its writers' `user_bytes` (their batches as they passed
    /// them) in the property and the statistics.
    fn count_written(&self, entries: u64, user_bytes: u64) {
        self.user_bytes_written
            .fetch_add(user_bytes, Ordering::Relaxed);
        if let Some(s) = &self.stats {
            s.add(Ticker::KeysWritten, entries);
            s.add(Ticker::BytesWritten, user_bytes);
        }
    }

    /// Pipelined groups: a group in the WAL leaves the queue, so the next leader appends its
    /// own group while this one inserts into the memtables; groups then insert at the same
    /// time (`MemTable::add_concurrent`). Sequence numbers are published in order: whoever
    /// finishes inserting the oldest group publishes it and every inserted group after it,
    /// and acknowledges their writers, so no thread spins waiting for one that is not
    /// running. Until the last of them is published, `inflight` keeps memtables from being
    /// frozen (a flush would miss the entries still coming) and write barriers from
    /// beginning. Returns `w`'s result once its group is published.
    #[allow(clippy::too_many_arguments)]
    fn insert_pipelined(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        w: &Writer,
        group_len: usize,
        logged: LoggedGroup,
        seqs: std::ops::RangeInclusive<u64>,
        mems: &[(u32, Arc<MemTable>)],
        helpers: &[Arc<Writer>],
    ) -> Result<()> {
        let (seq, last) = (*seqs.start(), *seqs.end());
        let members = st.writers.drain(..group_len).collect();
        st.inflight.push_back(InflightGroup {
            last,
            inserted: false,
            members,
        });
        if let Some(next) = st.writers.front() {
            next.wake();
        }
        MutexGuard::unlocked(st, || self.insert_group(logged, seq, mems, helpers, true));
        if let Some(g) = st.inflight.iter_mut().find(|g| g.last == last) {
            g.inserted = true;
        }
        self.publish_inserted_groups(st);
        wait_for_result(st, w)
    }

    /// Publishes the oldest inflight groups that are inserted, in order, and acknowledges
    /// their writers.
    fn publish_inserted_groups(&self, st: &mut MutexGuard<'_, DbState>) {
        while st.inflight.front().is_some_and(|g| g.inserted) {
            let Some(g) = st.inflight.pop_front() else {
                break;
            };
            self.last_sequence.store(g.last, Ordering::Release);
            for m in g.members {
                *m.result.lock() = Some(Ok(()));
                m.wake();
            }
        }
        if st.inflight.is_empty() {
            self.inflight_cv.notify_all();
        }
    }

    /// Waits, with the mutex released, until no write group is inflight (see
    /// `insert_pipelined`). Returns whether it had to wait (the state may have changed).
    pub(crate) fn wait_for_inflight_groups(&self, st: &mut MutexGuard<'_, DbState>) -> bool {
        let waited = !st.inflight.is_empty();
        while !st.inflight.is_empty() {
            self.inflight_cv.wait(st);
        }
        waited
    }

    /// The error a group's writers get for `failure`, which suspends or poisons writes.
    fn group_failed(&self, st: &mut MutexGuard<'_, DbState>, failure: GroupFailure) -> Error {
        match failure {
            GroupFailure::NoSpace(number, e) => self.suspend_for_failed_wal(st, number, e),
            GroupFailure::Final(e) => {
                if st.bg_error.is_none() {
                    self.note_background_error(st, BackgroundErrorReason::WriteWal, &e);
                    st.bg_error = Some(e.duplicate());
                    self.notify_state_changed();
                }
                e
            }
        }
    }

    /// Freezes the active memtable (if it holds anything) so a flush can write it. Queues as a
    /// writer with an empty batch so no leader is inserting into the memtable meanwhile.
    pub(crate) fn freeze_memtable(&self, cf: u32) -> Result<()> {
        self.check_writable("a flush or compaction")?;
        let w = Writer::queued(None, false, false);
        let mut st = self.state.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        st.writers.push_back(w.clone());
        while !st.writers.front().is_some_and(|f| Arc::ptr_eq(f, &w)) {
            w.cv.wait(&mut st);
        }
        let res = self
            .make_room_for_write(&mut st, Some(cf))
            .map(|_slow_down| ());
        st.writers.pop_front();
        if let Some(next) = st.writers.front() {
            next.wake();
        }
        self.deliver_events(&mut st);
        res
    }

    /// Queues an empty writer and waits until it is at the front of the queue: from then until
    /// [`leave_write_barrier`](Self::leave_write_barrier) no write group runs (ingestion's
    /// barrier, RocksDB's unbatched write). Returns the writer to pass back.
    pub(crate) fn enter_write_barrier(&self, st: &mut MutexGuard<'_, DbState>) -> Arc<Writer> {
        let w = Writer::queued(None, false, false);
        st.writers.push_back(w.clone());
        while !st.writers.front().is_some_and(|f| Arc::ptr_eq(f, &w)) {
            w.cv.wait(st);
        }
        // Groups before it may still be inserting: the barrier begins when they are done.
        self.wait_for_inflight_groups(st);
        w
    }

    /// Ends the barrier `w` began and hands the queue to the next writer.
    pub(crate) fn leave_write_barrier(&self, st: &mut MutexGuard<'_, DbState>, w: &Arc<Writer>) {
        if st.writers.front().is_some_and(|f| Arc::ptr_eq(f, w)) {
            st.writers.pop_front();
        }
        if let Some(next) = st.writers.front() {
            next.wake();
        }
    }

    /// Appends the group (its first entry's sequence `seq`) to the WAL, large values first to
    /// their memtable's blob file in families that separate them when written (`mems`, by
    /// family id). Returns what the memtables get. Called without the state mutex; only the
    /// leader runs it.
    fn log_group(
        &self,
        group: Group,
        seq: u64,
        disable_wal: bool,
        mems: &[(u32, Arc<MemTable>)],
    ) -> std::result::Result<LoggedGroup, GroupFailure> {
        let Group {
            batch: mut group,
            sync,
            mut parts,
            ..
        } = group;
        group.set_sequence(seq);
        let group = match self.separate_blobs(&group, mems) {
            Ok(Some(separated)) => {
                // Members' parts are where `build_group` appended them; references moved
                // them, so the group is inserted as one part.
                parts.clear();
                separated
            }
            Ok(None) => group,
            Err(e) if e.is_no_space() => {
                // Nothing of the group reached the WAL or a memtable, and earlier groups'
                // blobs are intact: recovered like a full WAL (recovery.rs), whose new WAL
                // and flushes need the space too.
                let number = self.wal_number.load(Ordering::Relaxed);
                return Err(GroupFailure::NoSpace(number, e));
            }
            Err(e) => return Err(GroupFailure::Final(Error::poisoned(e))),
        };
        if sync && !disable_wal {
            // Every family's blobs, not only this group's: once this WAL record is durable,
            // so are the earlier ones, whose blobs may be in any family's file.
            for blobs in mems.iter().filter_map(|(_, m)| m.write_time_blobs()) {
                blobs
                    .sync()
                    .map_err(|e| GroupFailure::Final(Error::poisoned(e)))?;
            }
        }
        if !disable_wal {
            // An insert's random cache misses (index bucket, filter line) load during the
            // WAL write instead of stalling the insert: fillseq spent a tenth of its
            // foreground time waiting for the bucket. A few entries: more would be evicted
            // before use.
            for (cf, e) in group.iter_cf().take(PREFETCH_ENTRIES) {
                if let Some((_, mem)) = mems.iter().find(|(id, _)| *id == cf) {
                    mem.prefetch_for_add(e.parts().1);
                }
            }
            self.append_to_wal(&group, sync)?;
        }
        Ok(LoggedGroup {
            batch: group,
            parts,
        })
    }

    /// Inserts the logged group (sequences from `seq` on) into the memtables `mems`: alone if
    /// no `helpers` (members of the group) may help and no other group may be inserting
    /// (`!concurrent`), else as shared parts (group_insert.rs). Called without the state
    /// mutex.
    fn insert_group(
        &self,
        logged: LoggedGroup,
        seq: u64,
        mems: &[(u32, Arc<MemTable>)],
        helpers: &[Arc<Writer>],
        concurrent: bool,
    ) {
        let LoggedGroup { batch, parts } = logged;
        let helpers = if parts.is_empty() { &[] } else { helpers };
        if helpers.is_empty() && !concurrent {
            insert_entries(batch.iter_cf(), seq, mems, false);
        } else {
            let inserts = Arc::new(GroupInserts::new(batch, seq, mems.to_vec(), &parts));
            for h in helpers {
                h.post_inserts(&inserts);
            }
            inserts.help();
            inserts.wait();
        }
        if self.opts.write_buffer_manager.is_some() {
            // Once per group: the growth of each memtable, one reservation each.
            for (_, mem) in mems {
                mem.charge_growth();
            }
        }
    }

    /// Makes every write appended to a WAL so far durable: the blob files the WALs refer to,
    /// the directory and the closed WALs, then the current WAL (after a `Synced` marker if
    /// one is owed). For `Db::sync_wal` and close.
    pub(crate) fn sync_wals(&self) -> Result<()> {
        self.sync_write_time_blobs(&self.state.lock())?;
        let mut wal = self.wal.lock();
        self.closed_wals.sync_all(&*self.fs, &self.dir)?;
        let Some(w) = wal.as_mut() else {
            return Ok(());
        };
        let number = self.wal_number.load(Ordering::Relaxed);
        let marked = self.closed_wals.mark_synced(w);
        let path = || filename::log_file(&self.dir, number);
        marked.map_err(|e| Error::io(format!("writing WAL {}", path().display()), e))?;
        self.sync_current_wal(w, number)
    }

    /// Syncs the current WAL `w`, number `number`, counting it in the statistics.
    fn sync_current_wal(&self, w: &mut LogWriter, number: u64) -> Result<()> {
        let path = || filename::log_file(&self.dir, number);
        w.sync()
            .map_err(|e| Error::io(format!("syncing WAL {}", path().display()), e))?;
        if let Some(s) = &self.stats {
            s.add(Ticker::WalSyncs, 1);
        }
        Ok(())
    }

    /// Appends the group's record to the current WAL (after a `Synced` marker if one is
    /// owed), and syncs it, every closed WAL first, if `sync`; else hands it to the OS.
    fn append_to_wal(
        &self,
        group: &WriteBatch,
        sync: bool,
    ) -> std::result::Result<(), GroupFailure> {
        let mut wal = self.wal.lock();
        let w = wal.as_mut().ok_or(GroupFailure::Final(Error::Closed))?;
        let number = self.wal_number.load(Ordering::Relaxed);
        // The path only for an error message: built on failure, not per group.
        let path = || filename::log_file(&self.dir, number);
        if sync {
            // The WALs before this one first: a synced record promises every earlier
            // write too. A failed sync is final (recovery.rs).
            self.closed_wals
                .sync_all(&*self.fs, &self.dir)
                .map_err(|e| GroupFailure::Final(Error::poisoned(e)))?;
        }
        let written = self
            .closed_wals
            .mark_synced(w)
            .and_then(|()| w.add_record(group.data()))
            .and_then(|()| if sync { Ok(()) } else { w.flush() });
        if let Err(e) = written {
            let no_space = recovery::is_no_space(&e);
            let err = Error::io(format!("writing WAL {}", path().display()), e);
            if no_space {
                // Its tail may hold a torn record and its block offset is wrong: the
                // writer is given up, never appended to again (recovery.rs).
                *wal = None;
                return Err(GroupFailure::NoSpace(number, err));
            }
            return Err(GroupFailure::Final(Error::poisoned(err)));
        }
        if sync {
            // A failed fsync is final whatever its cause (recovery.rs).
            self.sync_current_wal(w, number)
                .map_err(|e| GroupFailure::Final(Error::poisoned(e)))?;
        }
        Ok(())
    }

    /// In families that separate values when they are written: the group with each put of
    /// a large enough value replaced by a reference to it, appended to its memtable's blob
    /// file, and those files handed to the OS so no reference reaches the WAL or a reader
    /// before its blob. `None` if the group has no such put.
    fn separate_blobs(
        &self,
        group: &WriteBatch,
        mems: &[(u32, Arc<MemTable>)],
    ) -> Result<Option<WriteBatch>> {
        if !mems.iter().any(|(_, m)| m.write_time_blobs().is_some()) {
            // No family separates at write (the common case): the group is not even read.
            return Ok(None);
        }
        let blobs_of = |cf: u32| {
            mems.iter()
                .find(|(id, _)| *id == cf)
                .and_then(|(_, m)| m.write_time_blobs())
        };
        let separated = |cf: u32, e: &BatchEntry<'_>| match e {
            BatchEntry::Put(_, v) => blobs_of(cf).is_some_and(|b| b.separable(v).is_some()),
            _ => false,
        };
        if !group.iter_cf().any(|(cf, e)| separated(cf, &e)) {
            return Ok(None);
        }
        let new_file_number = || self.state_new_file_number();
        let env = crate::blob::BlobFileEnv {
            fs: &self.output_fs,
            dir: &self.dir,
            new_file_number: &new_file_number,
        };
        let mut out = WriteBatch::new();
        // The records appended, so a failure can tell their files nothing refers to them.
        let mut appended = Vec::new();
        if let Err(e) = append_blobs(group, &blobs_of, &env, &mut out, &mut appended) {
            for (cf, k, r) in &appended {
                if let Some(blobs) = blobs_of(*cf) {
                    blobs.orphan(k, r);
                }
            }
            return Err(e);
        }
        out.set_sequence(group.sequence());
        Ok(Some(out))
    }

    /// Syncs the blob files of every family's active memtable: before a WAL is synced at
    /// rotation or close, the blobs its references point at must be durable.
    pub(crate) fn sync_write_time_blobs(&self, st: &DbState) -> Result<()> {
        for f in st.families.values() {
            if let Some(b) = f.mem.write_time_blobs() {
                b.sync()?;
            }
        }
        Ok(())
    }

    /// With several families and the live WALs past `max_total_wal_size`: the oldest live WAL,
    /// which the families whose active memtable started in it are flushed to free.
    fn wal_to_free(&self, st: &DbState) -> Option<u64> {
        if st.families.len() < 2 || st.live_wals.len() < 2 {
            return None;
        }
        let limit = match self.opts.max_total_wal_size {
            0 => st
                .families
                .values()
                .map(|f| {
                    let o = &f.data.opts;
                    4 * (o.write_buffer_size as u64) * (o.max_write_buffer_number as u64)
                })
                .sum(),
            n => n,
        };
        let total: u64 = st.live_wals.iter().map(|w| w.1).sum();
        (total > limit).then(|| st.live_wals[0].0)
    }

    /// A low-priority write of `bytes`: while any family's compaction falls behind, waits
    /// (without the mutex) until the low-priority token bucket allows it.
    fn pace_low_pri(&self, bytes: u64) {
        let wait = {
            let mut st = self.state.lock();
            let behind = st.families.values().any(|f| {
                let v = st.versions.current(f.data.id);
                let o = &f.data.opts;
                let pending = crate::compaction::picker::pending_compaction_bytes(&v, o);
                compaction_behind(v.level_files(0).len(), pending, o)
            });
            if behind {
                st.low_pri_delay.delay(bytes, Instant::now())
            } else {
                st.low_pri_delay.reset();
                Duration::ZERO
            }
        };
        let until = Instant::now() + wait;
        // In slices, so a close is not held up by a long debt at a tiny rate.
        while !self.shutting_down.load(Ordering::Acquire) {
            let now = Instant::now();
            if now >= until {
                break;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(100)));
        }
    }

    /// In the slowdown state, sleeps (mutex released) until the token bucket allows a group of
    /// `bytes`; outside it, resets the bucket. Writers queue behind the sleeping leader, so
    /// the next group is bigger and pays for all of them: the rate holds for the whole stream.
    fn pace_write(&self, st: &mut MutexGuard<'_, DbState>, slow_down: bool, bytes: u64) {
        if !slow_down {
            st.write_delay.reset();
            return;
        }
        let start = Instant::now();
        let wait = st.write_delay.delay(bytes, start);
        if wait.is_zero() {
            return;
        }
        MutexGuard::unlocked(st, || {
            // In slices, so a close is not held up by a long debt at a tiny rate.
            let until = start + wait;
            while !self.shutting_down.load(Ordering::Acquire) {
                let now = Instant::now();
                if now >= until {
                    break;
                }
                std::thread::sleep((until - now).min(Duration::from_millis(100)));
            }
        });
        let micros = start.elapsed().as_micros() as u64;
        st.stall_count += 1;
        st.stall_micros += micros;
        if let Some(s) = &self.stats {
            s.add(Ticker::StallMicros, micros);
        }
    }

    /// Ensures every family's active memtable has room, freezing full ones or stalling as
    /// needed. With `force`, freezes that family's memtable even if it is not full (used by
    /// flush). Returns whether the database is in the slowdown state (the caller paces the
    /// write, see `pace_write`).
    pub(crate) fn make_room_for_write(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        mut force: Option<u32>,
    ) -> Result<bool> {
        // A write (not a flush request), which sees whether writes are slowed.
        let writing = force.is_none();
        let mut allow_delay = writing;
        let mut slow_down = false;
        // Taken when a stall begins: reading the clock on every write cost a fill 1%.
        let mut stall_start: Option<Instant> = None;
        let mut wbm_switched = false;
        'retry: loop {
            if let Some(e) = &st.bg_error {
                return Err(Error::poisoned(e.duplicate()));
            }
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            if writing && self.opts.write_buffer_manager.is_some() {
                match self.write_buffer_room(st, &mut wbm_switched)? {
                    BufferRoom::Fine => {}
                    BufferRoom::Switched => continue 'retry,
                    BufferRoom::Stall => {
                        if stall_start.is_none() {
                            st.stall_count += 1;
                            stall_start = Some(Instant::now());
                        }
                        self.work_cv.notify_all();
                        // Timed: the memory may be freed by another database sharing the
                        // manager, which does not signal this one.
                        self.stall_cv.wait_for(st, BUFFER_STALL_POLL);
                        continue 'retry;
                    }
                }
            }
            let old_wal = self.wal_to_free(st);
            for (&id, cf) in &st.families {
                // With atomic flush a flush request freezes every family that holds data; a
                // family whose active memtable started in the WAL to free is flushed too.
                let forced = force == Some(id)
                    || (self.opts.atomic_flush && force.is_some())
                    || old_wal.is_some_and(|w| cf.mem.log_number() <= w);
                let room = family_room(st, cf, forced);
                if allow_delay && room.slow_down {
                    // Slow writes to delayed_write_rate rather than stopping them for seconds
                    // later; the leader pays once the group's size is known (`pace_write`).
                    allow_delay = false;
                    slow_down = true;
                }
                match room.need {
                    Need::Nothing => {}
                    Need::Stall => {
                        if self.note_stall_condition(st, WriteStallCondition::Stopped) {
                            // Told before waiting, with the mutex released: then look again.
                            self.deliver_events(st);
                            continue 'retry;
                        }
                        // Wait for a flush or compaction to finish.
                        if stall_start.is_none() {
                            st.stall_count += 1;
                            stall_start = Some(Instant::now());
                        }
                        self.work_cv.notify_all();
                        self.stall_cv.wait(st);
                        continue 'retry;
                    }
                    Need::Switch => {
                        if self.wait_for_inflight_groups(st) {
                            continue 'retry;
                        }
                        self.switch_memtable(st, id)?;
                        if force == Some(id) {
                            force = None;
                        }
                        continue 'retry;
                    }
                }
            }
            break;
        }
        if let Some(stall_start) = stall_start {
            let micros = stall_start.elapsed().as_micros() as u64;
            st.stall_micros += micros;
            if let Some(s) = &self.stats {
                s.add(Ticker::StallMicros, micros);
            }
        }
        if writing {
            let now = match slow_down {
                true => WriteStallCondition::Delayed,
                false => WriteStallCondition::Normal,
            };
            self.note_stall_condition(st, now);
        }
        Ok(slow_down)
    }

    /// What the write buffer manager asks of this write: past 7/8 of its budget in active
    /// memtables, freeze this database's largest active memtable (once per write, so
    /// memory held by other databases cannot make it freeze one after another); at the
    /// budget, with stalls allowed, wait.
    fn write_buffer_room(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        switched: &mut bool,
    ) -> Result<BufferRoom> {
        let Some(wbm) = &self.opts.write_buffer_manager else {
            return Ok(BufferRoom::Fine);
        };
        if !*switched && wbm.should_flush() {
            *switched = true;
            let largest = st
                .families
                .iter()
                .filter(|(_, f)| !f.mem.is_empty())
                // A family with as many memtables as it may hold waits for its flush instead.
                .filter(|(_, f)| f.imms.len() + 1 < f.data.opts.max_write_buffer_number)
                .max_by_key(|(_, f)| f.mem.approximate_memory_usage())
                .map(|(&id, _)| id);
            if let Some(id) = largest {
                if self.wait_for_inflight_groups(st) {
                    // Look again at a state that may have changed meanwhile.
                    *switched = false;
                    return Ok(BufferRoom::Switched);
                }
                self.switch_memtable(st, id)?;
                return Ok(BufferRoom::Switched);
            }
        }
        Ok(match wbm.should_stall() {
            true => BufferRoom::Stall,
            false => BufferRoom::Fine,
        })
    }

    /// Freezes family `cf`'s active memtable (with `atomic_flush`, every family's that holds
    /// data) and starts a new WAL for its successor. The empty memtables of other families
    /// move to the new WAL too, so they do not keep old WALs alive.
    fn switch_memtable(&self, st: &mut MutexGuard<'_, DbState>, cf: u32) -> Result<()> {
        debug_assert!(
            st.inflight.is_empty(),
            "a memtable frozen while groups insert"
        );
        let number = st.versions.new_file_number();
        let path = filename::log_file(&self.dir, number);
        let file = match super::create_wal_file(&self.opts, &path) {
            Ok(file) => file,
            Err(e) => {
                let no_space = recovery::is_no_space(&e);
                let err = Error::io(format!("creating WAL {}", path.display()), e);
                if !no_space {
                    return Err(err);
                }
                // Nothing changed, but writes cannot go on until there is space: recovered
                // like a WAL append that failed for lack of space (its retry creates the new
                // WAL: it succeeds only once there is room).
                let current = self.wal_number.load(Ordering::Acquire);
                return Err(self.suspend_for_failed_wal(st, current, err));
            }
        };
        self.start_wal(st, number, &path, super::new_wal_writer(file, &self.opts))?;
        st.live_wals.push((number, 0));
        let DbState {
            families, versions, ..
        } = &mut **st;
        for (&id, f) in families.iter_mut() {
            let frozen = (id == cf || self.opts.atomic_flush) && !f.mem.is_empty();
            let idle = f.mem.is_empty() && f.imms.is_empty();
            if !(frozen || idle) {
                continue;
            }
            let fresh = Arc::new(MemTable::for_family(number, &f.data.opts));
            let old = std::mem::replace(&mut f.mem, fresh);
            if frozen {
                old.freeze_charge();
                f.imms.push_back(old);
            }
            f.install_super_version(versions);
        }
        self.work_cv.notify_all();
        Ok(())
    }

    /// Makes WAL `number` at `path`, written by `new_writer`, the current one. The old WAL is
    /// cut back to its records and handed to the OS, not synced, nor is the new one's
    /// directory entry: that waits for the next synced write, MANIFEST write or close
    /// (closed_wals.rs). The new one starts by naming the old one and its length, so recovery
    /// sees if a power loss cut it short or lost it (docs/format/wal.md, "Marker records").
    /// The blobs its records refer to are synced now: few databases write them
    /// (`separate_blobs_at_write`), and they must be durable before their references.
    fn start_wal(
        &self,
        st: &mut DbState,
        number: u64,
        path: &Path,
        mut new_writer: LogWriter,
    ) -> Result<()> {
        let mut wal = self.wal.lock();
        let old_number = self.wal_number.load(Ordering::Relaxed);
        if let Some(old) = wal.as_mut() {
            let marker = |length| WalMarker::TakesOver {
                from: old_number,
                length,
            };
            let ended = match self.sync_write_time_blobs(st) {
                Err(e) => Err(e),
                // The marker reaches the OS now, not with the next write: copies of the
                // live WAL (checkpoints, backups) and secondaries read it from there.
                Ok(()) => match old
                    .finish()
                    .and_then(|length| new_writer.add_marker(&marker(length).encode()))
                    .and_then(|()| new_writer.flush())
                {
                    Ok(()) => Ok(()),
                    Err(e) if recovery::is_no_space(&e) => {
                        // Either WAL may now end in a torn record: the old one is given up
                        // and replaced as after a failed append (recovery.rs).
                        *wal = None;
                        let _ = self.fs.remove_file(path);
                        let err = Error::io("ending the WAL at rotation", e);
                        return Err(self.suspend_for_failed_wal(st, old_number, err));
                    }
                    Err(e) => Err(Error::io("ending the WAL at rotation", e)),
                },
            };
            if let Err(e) = ended {
                let _ = self.fs.remove_file(path);
                return Err(self.poison_for_wal(st, e));
            }
        }
        // Without an old WAL (given up after a failed append) nothing syncs the directory
        // later: here.
        if wal.is_none() {
            if let Err(e) = self.fs.sync_dir(&self.dir) {
                let e = Error::io("syncing the directory for a new WAL", e);
                return Err(self.poison_for_wal(st, e));
            }
        }
        if let Some(old) = wal.replace(new_writer) {
            self.closed_wals.push(old_number, old);
        }
        self.wal_number.store(number, Ordering::Release);
        Ok(())
    }

    /// Makes `e`, a failure that leaves a WAL in doubt, the database's final error and returns
    /// it (recovery.rs: writes fail until reopen).
    pub(crate) fn poison_for_wal(&self, st: &mut DbState, e: Error) -> Error {
        let err = Error::poisoned(e);
        if st.bg_error.is_none() {
            self.note_background_error(st, BackgroundErrorReason::WriteWal, &err);
        }
        st.bg_error = Some(err.duplicate());
        self.notify_state_changed();
        err
    }
}

/// Why a write group failed.
enum GroupFailure {
    /// Appending to or flushing WAL number `.0` failed for lack of space: writes are
    /// suspended until recovery replaces that WAL (recovery.rs).
    NoSpace(u64, Error),
    /// Anything else: the database refuses writes until reopened.
    Final(Error),
}

/// The column families a batch names, checked against the live ones under the state mutex.
#[derive(Default)]
struct BatchFamilies {
    /// Families other than the default the batch writes to.
    written: Vec<u32>,
    /// Families the batch merges into.
    merged: Vec<u32>,
}

impl BatchFamilies {
    /// True if the batch may write to a family with a TTL, whose values get write times.
    fn has_ttl(&self, st: &DbState) -> bool {
        std::iter::once(&DEFAULT_FAMILY)
            .chain(&self.written)
            .any(|&cf| st.family(cf).is_some_and(|f| f.data.opts.ttl.is_some()))
    }

    fn check(&self, st: &DbState) -> Result<()> {
        if let Some(cf) = self.written.iter().find(|id| !st.families.contains_key(id)) {
            return Err(Error::InvalidArgument(format!(
                "the batch writes to column family id {cf}, which does not exist (it was \
                 dropped, or the handle is another database's)"
            )));
        }
        for cf in &self.merged {
            if st
                .family(*cf)
                .is_some_and(|f| f.data.opts.merge_operator.is_none())
            {
                return Err(Error::InvalidArgument(format!(
                    "merge into column family id {cf}, which has no merge operator (set \
                     Options::merge_operator, or CfOptions::merge_operator for the family)"
                )));
            }
        }
        Ok(())
    }
}

/// Whether compaction falls behind, for low-priority writes (RocksDB's "speed up compaction"
/// thresholds): L0 holds at least a quarter of the way from the compaction trigger to the
/// slowdown trigger more files (at most twice the trigger), or pending compaction bytes reach a
/// quarter of the soft limit. Never with automatic compactions off.
fn compaction_behind(l0_files: usize, pending_bytes: u64, o: &crate::Options) -> bool {
    if o.disable_auto_compactions {
        return false;
    }
    let trigger = o.level0_file_num_compaction_trigger;
    let slowdown = o.level0_slowdown_writes_trigger.max(trigger);
    let l0_threshold = (trigger * 2).min(trigger + (slowdown - trigger) / 4);
    l0_files >= l0_threshold || pending_bytes >= o.soft_pending_compaction_bytes_limit / 4
}

/// How often a write stalled by the write buffer manager looks again.
const BUFFER_STALL_POLL: Duration = Duration::from_millis(5);

/// What the write buffer manager needs before the next write group.
enum BufferRoom {
    Fine,
    /// A memtable was frozen: look at the families again.
    Switched,
    /// Memtables hold the whole budget: wait for memory to be freed.
    Stall,
}

/// What a family needs before the next write group (see `family_room`).
enum Need {
    Nothing,
    /// Its memtable must be frozen, and may be now.
    Switch,
    /// Its memtable must be frozen, but too many are waiting for flush or L0 or pending
    /// compaction is at its stop limit: wait.
    Stall,
}

pub(super) struct Room {
    need: Need,
    /// L0 files or pending compaction bytes are at the slowdown limits.
    pub(super) slow_down: bool,
}

/// Whether family `cf` has room for the next write (`force`: freeze its memtable anyway if it
/// holds anything).
pub(super) fn family_room(st: &DbState, cf: &CfState, force: bool) -> Room {
    let o = &cf.data.opts;
    let debt = compaction_debt(st, cf);
    let slow_down = debt.is_some_and(|(l0, pending)| {
        l0 >= o.level0_slowdown_writes_trigger || pending >= o.soft_pending_compaction_bytes_limit
    });
    let full = cf.mem.write_buffer_usage() >= o.write_buffer_size
        || cf.mem.write_time_blobs().is_some_and(|b| b.is_full());
    let need = if !(full || force) || (force && cf.mem.is_empty()) {
        Need::Nothing
    } else if cf.imms.len() + 1 >= o.max_write_buffer_number
        || debt.is_some_and(|(l0, pending)| {
            l0 >= o.level0_stop_writes_trigger || pending >= o.hard_pending_compaction_bytes_limit
        })
    {
        Need::Stall
    } else {
        Need::Switch
    };
    Room { need, slow_down }
}

/// Family `cf`'s compaction debt: its L0 files and pending compaction bytes, or `None` when
/// automatic compactions are off (no debt paces writes then) or it has no version yet.
fn compaction_debt(st: &DbState, cf: &CfState) -> Option<(usize, u64)> {
    let o = &cf.data.opts;
    if o.disable_auto_compactions {
        return None;
    }
    // Borrowed, not cloned: the leader of every write group looks.
    let version = st.versions.current_ref(cf.data.id)?;
    let pending = crate::compaction::picker::pending_compaction_bytes(version, o);
    Some((version.level_files(0).len(), pending))
}

/// A write group that left the queue after its WAL append (`insert_pipelined`).
pub(crate) struct InflightGroup {
    /// Its last sequence number.
    last: u64,
    /// Every entry is in its memtable.
    inserted: bool,
    /// Its writers, the leader first, acknowledged when it is published.
    members: Vec<Arc<Writer>>,
}

#[cfg(test)]
impl InflightGroup {
    /// A group of no writers, not inserted, whose last sequence number is `last`: holds off
    /// what waits for inflight groups until a test removes it.
    pub(super) fn pending(last: u64) -> Self {
        InflightGroup {
            last,
            inserted: false,
            members: Vec::new(),
        }
    }
}

/// Whether family `cf`'s compaction debt is past RocksDB's point for speeding compaction up:
/// L0 files at twice the compaction trigger or a quarter of the way to the slowdown trigger
/// (whichever is fewer), or pending compaction bytes at a quarter of the soft limit. Past it,
/// the relief thread compacts too (`BackgroundRole::Relief`).
pub(super) fn needs_compaction_speedup(st: &DbState, cf: &CfState) -> bool {
    let o = &cf.data.opts;
    let trigger = o.level0_file_num_compaction_trigger;
    let l0_speedup =
        (trigger * 2).min(trigger + o.level0_slowdown_writes_trigger.saturating_sub(trigger) / 4);
    compaction_debt(st, cf).is_some_and(|(l0, pending)| {
        l0 >= l0_speedup || pending >= o.soft_pending_compaction_bytes_limit / 4
    })
}

/// A group in the WAL, to be inserted: its batch (with blob references if its values were
/// separated) and its members' parts (empty if it is one part).
struct LoggedGroup {
    batch: WriteBatch,
    parts: Vec<Part>,
}

/// A write group: the members' batches merged into one (one WAL record), and where each
/// member's entries start in it.
struct Group {
    batch: WriteBatch,
    /// Writers it covers, from the front of the queue.
    len: usize,
    /// Some member asked for a sync.
    sync: bool,
    /// For each member after the leader: its first entry's byte offset in `batch` and the
    /// number of entries before it (empty for a group of one).
    parts: Vec<Part>,
}

/// Merges the batches at the front of the queue into one group. The leader's batch is taken,
/// not cloned, and the followers' batches are appended to it; a group of one is the leader's
/// batch itself.
fn build_group(writers: &VecDeque<Arc<Writer>>) -> Group {
    let Some(leader) = writers.front() else {
        return Group {
            batch: WriteBatch::new(),
            len: 0,
            sync: false,
            parts: Vec::new(),
        };
    };
    let mut group = leader.batch.lock().take().unwrap_or_default();
    let mut size = group.approximate_size();
    // A small leader does not wait for a big group.
    let max = if size <= 128 << 10 {
        size + (128 << 10)
    } else {
        MAX_GROUP_BYTES
    };
    let mut n = 1;
    let mut parts = Vec::new();
    for w in writers.iter().skip(1) {
        let batch = w.batch.lock();
        // A flush request or barrier (or an empty batch) leads on its own.
        let Some(batch) = batch.as_ref().filter(|b| !b.is_empty()) else {
            break;
        };
        if (w.sync && !leader.sync) || w.disable_wal != leader.disable_wal {
            break;
        }
        size += batch.approximate_size();
        if size > max {
            break;
        }
        parts.push(Part {
            offset: group.approximate_size(),
            entries_before: group.len() as u64,
        });
        group.append(batch);
        n += 1;
    }
    Group {
        batch: group,
        len: n,
        sync: leader.sync,
        parts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memtable switch (here a flush's freeze) and a write barrier wait while a write group
    /// is inflight (it may still be inserting into the memtable they would freeze or write
    /// past), and go ahead once it is published.
    #[test]
    fn a_memtable_switch_and_a_write_barrier_wait_for_inflight_groups() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = crate::Db::open(dir.path(), crate::Options::default()).expect("open");
        db.put(b"k", b"v").expect("put");
        let inner = &*db.inner;
        let active = |inner: &DbInner| inner.state.lock().families[&DEFAULT_FAMILY].mem.clone();
        let before = active(inner);
        let last = inner.last_sequence.load(Ordering::Acquire);
        let inflight = |inner: &DbInner, on: bool| {
            let mut st = inner.state.lock();
            if on {
                st.inflight.push_back(InflightGroup::pending(last + 1));
            } else {
                st.inflight.clear();
                inner.inflight_cv.notify_all();
            }
        };
        let done = AtomicBool::new(false);
        inflight(inner, true);
        std::thread::scope(|s| {
            s.spawn(|| {
                inner.freeze_memtable(DEFAULT_FAMILY).expect("freeze");
                done.store(true, Ordering::Release);
            });
            std::thread::sleep(Duration::from_millis(100));
            assert!(
                !done.load(Ordering::Acquire),
                "froze a memtable a group inserts into"
            );
            assert!(Arc::ptr_eq(&before, &active(inner)));
            inflight(inner, false);
        });
        assert!(done.load(Ordering::Acquire));
        assert!(
            !Arc::ptr_eq(&before, &active(inner)),
            "the memtable was switched"
        );

        done.store(false, Ordering::Release);
        inflight(inner, true);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut st = inner.state.lock();
                let w = inner.enter_write_barrier(&mut st);
                done.store(true, Ordering::Release);
                inner.leave_write_barrier(&mut st, &w);
            });
            std::thread::sleep(Duration::from_millis(100));
            assert!(
                !done.load(Ordering::Acquire),
                "a barrier began before a group published"
            );
            inflight(inner, false);
        });
        assert!(done.load(Ordering::Acquire));
        db.close().expect("close");
    }

    /// A thread's next write reuses its last writer only when no other thread holds it, and
    /// then as a new writer: a result, wake-up or posted inserts left from the last write
    /// would acknowledge the next one before it is written.
    #[test]
    fn a_reused_writer_starts_afresh_and_only_when_nobody_else_holds_it() {
        let batch = |tag: u8| {
            let mut b = WriteBatch::new();
            b.put([tag], [tag]);
            b
        };
        let w = Writer::for_write(batch(1), false, false);
        let first = Arc::as_ptr(&w);
        *w.result.lock() = Some(Err(Error::Closed));
        w.woken.store(true, Ordering::Relaxed);
        w.inserts_posted.store(true, Ordering::Relaxed);
        Writer::recycle(w);

        let w = Writer::for_write(batch(2), true, false);
        assert_eq!(Arc::as_ptr(&w), first, "the spare writer was not reused");
        assert!(w.result.lock().is_none(), "a stale result survived");
        assert!(!w.woken.load(Ordering::Relaxed));
        assert!(!w.inserts_posted.load(Ordering::Relaxed));
        assert!(w.inserts.lock().is_none());
        assert!(w.sync && !w.disable_wal);
        let keys: Vec<Vec<u8>> = w.batch.lock().as_ref().map_or(Vec::new(), |b| {
            b.iter().map(|e| e.parts().1.to_vec()).collect()
        });
        assert_eq!(keys, vec![vec![2u8]]);

        // A leader still holding it (its group's helper list): the next write gets another.
        let held = w.clone();
        Writer::recycle(w);
        let w = Writer::for_write(batch(3), false, true);
        assert_ne!(
            Arc::as_ptr(&w),
            first,
            "a writer another thread holds was reused"
        );
        assert!(held.sync && w.disable_wal);

        // The spare keeps nothing of its write: not the batch (a member's stays in its
        // writer) nor inserts posted to it, whose memtables an idle thread would pin.
        let inserts = GroupInserts::new(WriteBatch::new(), 1, Vec::new(), &[]);
        *w.inserts.lock() = Some(Arc::new(inserts));
        Writer::recycle(w);
        let emptied = SPARE_WRITER.with(|spare| {
            let w = spare.take();
            let emptied = w
                .as_ref()
                .is_some_and(|w| w.batch.lock().is_none() && w.inserts.lock().is_none());
            spare.set(w);
            emptied
        });
        assert!(emptied, "the spare writer kept its batch or inserts");
    }

    /// A queued writer whose batch puts `n` keys with `value_len`-byte values.
    fn writer(tag: u8, n: usize, value_len: usize, sync: bool, disable_wal: bool) -> Arc<Writer> {
        let mut b = WriteBatch::new();
        for i in 0..n {
            b.put(&[tag, i as u8], &vec![tag; value_len]);
        }
        Writer::queued(Some(b), sync, disable_wal)
    }

    /// (members, sync, tags of the group's keys in order).
    fn group(ws: &[Arc<Writer>]) -> (usize, bool, Vec<u8>) {
        let q: VecDeque<Arc<Writer>> = ws.iter().cloned().collect();
        let g = build_group(&q);
        let tags = g.batch.iter().map(|e| e.parts().1[0]).collect();
        (g.len, g.sync, tags)
    }

    #[test]
    fn low_priority_writes_slow_down_a_quarter_of_the_way_to_the_slowdown_limits() {
        let o = crate::Options {
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            soft_pending_compaction_bytes_limit: 4000,
            ..Default::default()
        };
        // L0 threshold: min(2 * 4, 4 + (20 - 4) / 4) = 8 files; bytes: 4000 / 4.
        assert!(!compaction_behind(7, 999, &o));
        assert!(compaction_behind(8, 0, &o));
        assert!(compaction_behind(0, 1000, &o));
        let close = crate::Options {
            level0_slowdown_writes_trigger: 6,
            ..o.clone()
        };
        // min(8, 4 + (6 - 4) / 4) = 4: behind as soon as compaction is due.
        assert!(!compaction_behind(3, 0, &close));
        assert!(compaction_behind(4, 0, &close));
        let off = crate::Options {
            disable_auto_compactions: true,
            ..o
        };
        assert!(!compaction_behind(100, u64::MAX, &off));
    }

    #[test]
    fn members_join_in_queue_order() {
        let ws = [
            writer(1, 1, 10, false, false),
            writer(2, 2, 10, false, false),
            writer(3, 1, 10, false, false),
        ];
        assert_eq!(group(&ws), (3, false, vec![1, 2, 2, 3]));
        assert_eq!(group(&[]), (0, false, vec![]));
    }

    #[test]
    fn sync_writers_join_only_a_sync_leader() {
        // A sync writer behind a non-sync leader waits for the next group (else the leader
        // would pay for an fsync it did not ask for, or the member would not get one).
        let ws = [
            writer(1, 1, 10, false, false),
            writer(2, 1, 10, true, false),
            writer(3, 1, 10, false, false),
        ];
        assert_eq!(group(&ws), (1, false, vec![1]));
        // A sync leader takes non-sync writers along: they get more than they asked for.
        let ws = [
            writer(1, 1, 10, true, false),
            writer(2, 1, 10, false, false),
            writer(3, 1, 10, true, false),
        ];
        assert_eq!(group(&ws), (3, true, vec![1, 2, 3]));
    }

    #[test]
    fn wal_and_no_wal_writers_and_flush_requests_do_not_mix() {
        let ws = [
            writer(1, 1, 10, false, false),
            writer(2, 1, 10, false, true),
        ];
        assert_eq!(group(&ws), (1, false, vec![1]));
        // An empty batch is a memtable-freeze request: it leads alone.
        let ws = [
            writer(1, 1, 10, false, false),
            writer(2, 0, 0, false, false),
        ];
        assert_eq!(group(&ws), (1, false, vec![1]));
    }

    #[test]
    fn group_size_is_capped() {
        // A small leader (<= 128 KiB) takes at most 128 KiB more.
        let ws: Vec<_> = (0..10)
            .map(|t| writer(t, 1, 40 << 10, false, false))
            .collect();
        assert_eq!(group(&ws).0, 4);
        // A big leader groups up to MAX_GROUP_BYTES (1 MiB) in all.
        let mut ws = vec![writer(0, 1, 200 << 10, false, false)];
        ws.extend((1..20).map(|t| writer(t, 1, 100 << 10, false, false)));
        assert_eq!(group(&ws).0, 9);
        // A leader alone is a group whatever its size.
        let ws = [
            writer(0, 1, 2 << 20, false, false),
            writer(1, 1, 10, false, false),
        ];
        assert_eq!(group(&ws), (1, false, vec![0]));
    }
}
