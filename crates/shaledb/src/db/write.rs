//! The write path: a queue of writers with group commit.
//!
//! Each writer enqueues itself under the state mutex. The writer at the front is the leader:
//! it makes room (freezing a full memtable, or stalling while flushes and compactions catch
//! up), merges the batches queued behind it into one group, and with the mutex released
//! appends the group to the WAL as one record (one fsync if any member asked for sync) and
//! inserts it into the memtable. Then it publishes the group's last sequence number and wakes
//! the members with the shared result. No member is acknowledged before the WAL bytes reached
//! the OS (and, for sync writes, the disk); if that fails all of them get the error and the
//! database refuses further writes.

use super::{DbInner, DbState, Writer};
use crate::error::{Error, Result};
use crate::log::LogWriter;
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::version::filename;
use crate::write_batch::{BatchEntry, WriteBatch};
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Writer {
    /// A writer ready to be queued.
    fn queued(batch: WriteBatch, sync: bool, disable_wal: bool) -> Arc<Writer> {
        Arc::new(Writer {
            batch: Mutex::new(batch),
            sync,
            disable_wal,
            done: AtomicBool::new(false),
            result: Mutex::new(None),
            cv: Condvar::new(),
        })
    }
}

/// A group stops growing past this many bytes so one leader does not delay its own write too
/// long.
const MAX_GROUP_BYTES: usize = 1 << 20;

impl DbInner {
    fn validate_batch(&self, batch: &WriteBatch) -> Result<()> {
        for e in batch.iter() {
            let (k, v) = match e {
                BatchEntry::Put(k, v) => (k, v),
                BatchEntry::Delete(k) => (k, &[][..]),
            };
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
        Ok(())
    }

    pub(crate) fn write_owned(&self, wo: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.validate_batch(&batch)?;
        let user_bytes = batch.approximate_size() as u64;
        let w = Writer::queued(batch, wo.sync, wo.disable_wal);
        let mut st = self.state.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        st.writers.push_back(w.clone());
        while !w.done.load(Ordering::Acquire)
            && !st.writers.front().is_some_and(|f| Arc::ptr_eq(f, &w))
        {
            w.cv.wait(&mut st);
        }
        if w.done.load(Ordering::Acquire) {
            return w.result.lock().take().unwrap_or(Ok(()));
        }

        // This writer leads a group.
        let mut result = self.make_room_for_write(&mut st, false);
        let mut group_len = 1;
        if result.is_ok() {
            let (group, n, sync) = build_group(&st);
            group_len = n;
            let seq = self.last_sequence.load(Ordering::Acquire) + 1;
            let mem = st.mem.clone();
            let disable_wal = w.disable_wal;
            let res = MutexGuard::unlocked(&mut st, || {
                let mut group = group;
                group.set_sequence(seq);
                self.write_group(&group, seq, sync, disable_wal, &mem)
                    .map(|()| group.len() as u64)
            });
            match res {
                Ok(count) => {
                    self.last_sequence.store(seq + count - 1, Ordering::Release);
                    self.user_bytes_written
                        .fetch_add(user_bytes, Ordering::Relaxed);
                }
                Err(e) => {
                    if st.bg_error.is_none() {
                        st.bg_error = Some(e.duplicate());
                    }
                    result = Err(e);
                }
            }
        }
        // Acknowledge the group, then hand leadership to the next writer.
        for _ in 0..group_len {
            let Some(m) = st.writers.pop_front() else {
                break;
            };
            if !Arc::ptr_eq(&m, &w) {
                *m.result.lock() = Some(match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(e.duplicate()),
                });
                m.done.store(true, Ordering::Release);
                m.cv.notify_one();
            }
        }
        if let Some(next) = st.writers.front() {
            next.cv.notify_one();
        }
        result
    }

    /// Freezes the active memtable (if it holds anything) so a flush can write it. Queues as a
    /// writer with an empty batch so no leader is inserting into the memtable meanwhile.
    pub(crate) fn freeze_memtable(&self) -> Result<()> {
        let w = Writer::queued(WriteBatch::new(), false, false);
        let mut st = self.state.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        st.writers.push_back(w.clone());
        while !st.writers.front().is_some_and(|f| Arc::ptr_eq(f, &w)) {
            w.cv.wait(&mut st);
        }
        let res = self.make_room_for_write(&mut st, true);
        st.writers.pop_front();
        if let Some(next) = st.writers.front() {
            next.cv.notify_one();
        }
        self.bg_cv.notify_all();
        res
    }

    /// Appends the group to the WAL and the memtable. Called without the state mutex; only
    /// the leader runs it.
    fn write_group(
        &self,
        group: &WriteBatch,
        seq: u64,
        sync: bool,
        disable_wal: bool,
        mem: &MemTable,
    ) -> Result<()> {
        if !disable_wal {
            let mut wal = self.wal.lock();
            let w = wal.as_mut().ok_or(Error::Closed)?;
            let number = self.wal_number.load(Ordering::Relaxed);
            let res = w
                .add_record(group.data())
                .and_then(|_| if sync { w.sync() } else { w.flush() });
            res.map_err(|e| {
                Error::Poisoned(format!(
                    "writing WAL {} failed: {e}",
                    filename::log_file(&self.dir, number).display()
                ))
            })?;
        }
        for (i, e) in group.iter().enumerate() {
            let s = seq + i as u64;
            match e {
                BatchEntry::Put(k, v) => mem.add(s, crate::key::ValueKind::Put, k, v),
                BatchEntry::Delete(k) => mem.add(s, crate::key::ValueKind::Delete, k, &[]),
            }
        }
        Ok(())
    }

    /// Ensures the active memtable has room, freezing it or stalling as needed. With `force`,
    /// freezes the memtable even if it is not full (used by flush).
    pub(crate) fn make_room_for_write(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        mut force: bool,
    ) -> Result<()> {
        let mut allow_delay = !force;
        let stall_start = Instant::now();
        let mut stalled = false;
        loop {
            if let Some(e) = &st.bg_error {
                return Err(match e {
                    Error::Poisoned(_) => e.duplicate(),
                    other => Error::Poisoned(other.to_string()),
                });
            }
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            let version = st.versions.current();
            let l0 = version.level_files(0).len();
            let compactions_on = !self.opts.disable_auto_compactions;
            let pending = if compactions_on {
                crate::compaction::picker::pending_compaction_bytes(&version, &self.opts)
            } else {
                0
            };
            if allow_delay
                && compactions_on
                && (l0 >= self.opts.level0_slowdown_writes_trigger
                    || pending >= self.opts.soft_pending_compaction_bytes_limit)
            {
                // Slow each write a little rather than stopping one for seconds later.
                MutexGuard::unlocked(st, || std::thread::sleep(Duration::from_millis(1)));
                allow_delay = false;
                st.stall_count += 1;
                stalled = true;
                continue;
            }
            let full = st.mem.approximate_memory_usage() >= self.opts.write_buffer_size;
            if !force && !full {
                break;
            }
            if force && st.mem.is_empty() {
                break;
            }
            if st.imms.len() + 1 >= self.opts.max_write_buffer_number
                || (compactions_on
                    && (l0 >= self.opts.level0_stop_writes_trigger
                        || pending >= self.opts.hard_pending_compaction_bytes_limit))
            {
                // Wait for a flush or compaction to finish.
                if !stalled {
                    st.stall_count += 1;
                    stalled = true;
                }
                self.bg_cv.notify_all();
                self.bg_cv.wait_for(st, Duration::from_millis(100));
                continue;
            }
            self.switch_memtable(st)?;
            force = false;
        }
        if stalled {
            st.stall_micros += stall_start.elapsed().as_micros() as u64;
        }
        Ok(())
    }

    /// Freezes the active memtable and starts a new WAL for its successor.
    fn switch_memtable(&self, st: &mut MutexGuard<'_, DbState>) -> Result<()> {
        let number = st.versions.new_file_number();
        let path = filename::log_file(&self.dir, number);
        let file = self
            .fs
            .create(&path)
            .map_err(|e| Error::io(format!("creating WAL {}", path.display()), e))?;
        let new_writer = LogWriter::new(file);
        {
            let mut wal = self.wal.lock();
            // The old WAL must be durable before the new one is relied on, or a power loss could
            // leave a hole between them.
            if let Some(old) = wal.as_mut() {
                if let Err(e) = old.sync() {
                    let err = Error::Poisoned(format!("syncing the WAL before rotation: {e}"));
                    st.bg_error = Some(err.duplicate());
                    let _ = self.fs.remove_file(&path);
                    return Err(err);
                }
            }
            if let Err(e) = self.fs.sync_dir(&self.dir) {
                let err = Error::Poisoned(format!("syncing the directory for a new WAL: {e}"));
                st.bg_error = Some(err.duplicate());
                return Err(err);
            }
            *wal = Some(new_writer);
            self.wal_number.store(number, Ordering::Release);
        }
        st.live_wals.push(number);
        let new_mem = Arc::new(MemTable::new(number));
        let old = std::mem::replace(&mut st.mem, new_mem);
        st.imms.push_back(old);
        self.install_super_version(st);
        self.bg_cv.notify_all();
        Ok(())
    }
}

/// Merges the batches at the front of the queue into one. Returns the group, how many writers
/// it covers and whether it must be synced. The leader's batch is taken, not cloned, and the
/// followers' batches are appended to it; a group of one is the leader's batch itself.
fn build_group(st: &DbState) -> (WriteBatch, usize, bool) {
    let Some(leader) = st.writers.front() else {
        return (WriteBatch::new(), 0, false);
    };
    let mut group = std::mem::take(&mut *leader.batch.lock());
    let mut size = group.approximate_size();
    // A small leader does not wait for a big group.
    let max = if size <= 128 << 10 {
        size + (128 << 10)
    } else {
        MAX_GROUP_BYTES
    };
    let mut n = 1;
    for w in st.writers.iter().skip(1) {
        let batch = w.batch.lock();
        // An empty batch is a flush request: it must lead on its own.
        if batch.is_empty() || (w.sync && !leader.sync) || w.disable_wal != leader.disable_wal {
            break;
        }
        size += batch.approximate_size();
        if size > max {
            break;
        }
        group.append(&batch);
        n += 1;
    }
    (group, n, leader.sync)
}
