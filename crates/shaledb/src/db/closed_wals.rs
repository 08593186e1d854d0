//! WALs a newer one took over from, synced off the writers' path (RocksDB syncs closed WALs
//! the same way, in its flush: `SyncClosedLogs`).
//!
//! At a memtable switch the old WAL is only cut back to its records and handed to the OS
//! (`LogWriter::finish`), and the directory entry of the new one is not synced either: the
//! `fdatasync` and the directory `fsync` (on ext4 a journal commit, which writes out the old
//! WAL's data too) waited for on the writers' path cost a fill about a tenth of its time. The
//! directory and then every closed WAL, oldest first, are synced (RocksDB syncs the WAL
//! directory the same way, by the next synced write: `need_log_dir_sync`):
//! - by a synced write, before the current WAL's sync (its promise covers every earlier
//!   write);
//! - before a MANIFEST write that could otherwise become durable ahead of the writes before
//!   it (`DbInner::log_and_apply_all`, `EditKind`): a flush when there are several column
//!   families (the flushed family's newer writes would survive another family's older
//!   ones), an ingestion, a family created or dropped. Not before a flush of the only
//!   family: its table holds every write of the WALs it retires, and the newer WALs' writes
//!   all come after them (RocksDB syncs closed WALs in a flush under the same condition,
//!   `SyncClosedLogs`); nor before a compaction, which makes no write durable. A WAL a
//!   flush retired unsynced is closed and deleted without ever being synced
//!   (`forget_below`): a fill that synced each one spent its flushes waiting on the disk
//!   for data about to be deleted;
//! - by close.
//!
//! After a power loss an older WAL may then be cut short, or a WAL may be missing, while a
//! newer one holds writes that reached the disk unsynced (a journal commit of the file system
//! may make a directory entry durable at any time). Recovery keeps the prefix up to the cut,
//! unless a marker shows
//! the older WAL was synced (docs/format/wal.md, "Marker records"; db/open.rs,
//! `torn_before_later_data`): after syncing, the next record appended to the current WAL is
//! a `WalMarker::Synced` naming the newest WAL synced.

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::log::{LogWriter, WalMarker};
use crate::version::filename;
use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The closed, unsynced WALs. Lock order: the current WAL's lock, then `syncing`, then
/// `waiting`.
#[derive(Default)]
pub(crate) struct ClosedWals {
    /// Held for a whole sync, so a caller returns only once every WAL closed before it
    /// started is durable, even if another caller took them. True once a sync failed: the
    /// WALs' state is unknown for good (a failed fsync is final, recovery.rs).
    syncing: Mutex<bool>,
    /// Closed and not yet synced, oldest first, by file number. Held only briefly (a memtable
    /// switch adds to it while writers wait).
    waiting: Mutex<Vec<(u64, LogWriter)>>,
    /// The newest WAL synced that no marker in the current WAL names yet (0: none).
    unmarked: AtomicU64,
    /// A WAL was created since the directory was last synced. Set before the closed WAL is
    /// added, so a sync that takes that WAL also sees the directory to sync.
    dir_unsynced: AtomicBool,
}

impl ClosedWals {
    /// Adds WAL `number`, which a newer one, created in the directory and not synced there,
    /// just took over from.
    pub(crate) fn push(&self, number: u64, wal: LogWriter) {
        self.dir_unsynced.store(true, Ordering::Release);
        self.waiting.lock().push((number, wal));
    }

    /// Syncs the directory if a WAL was created since its last sync, then every closed WAL,
    /// oldest first, and forgets them.
    pub(crate) fn sync_all(&self, fs: &dyn FileSystem, dir: &Path) -> Result<()> {
        let mut failed = self.syncing.lock();
        if *failed {
            return Err(Error::io(
                "syncing the closed WALs",
                std::io::Error::other("an earlier sync of a closed WAL failed"),
            ));
        }
        let wals = std::mem::take(&mut *self.waiting.lock());
        if self.dir_unsynced.swap(false, Ordering::AcqRel) {
            if let Err(e) = fs.sync_dir(dir) {
                *failed = true;
                return Err(Error::io("syncing the directory for a new WAL", e));
            }
        }
        let Some(&(newest, _)) = wals.last() else {
            return Ok(());
        };
        for (number, mut wal) in wals {
            if let Err(e) = wal.sync() {
                *failed = true;
                let path = filename::log_file(dir, number);
                return Err(Error::io(format!("syncing WAL {}", path.display()), e));
            }
        }
        self.unmarked.fetch_max(newest, Ordering::AcqRel);
        Ok(())
    }

    /// Forgets the WALs below `log_number`: every family flushed them and the MANIFEST says
    /// so, so recovery never reads them. Those still waiting are closed unsynced (the file
    /// is deleted next, and its pages with it, never written), and no marker is owed for
    /// them.
    pub(crate) fn forget_below(&self, log_number: u64) {
        // Dropped outside the lock: a writer's drop may write its last buffered bytes.
        let obsolete: Vec<(u64, LogWriter)> = {
            let mut waiting = self.waiting.lock();
            let retired = waiting.partition_point(|&(n, _)| n < log_number);
            waiting.drain(..retired).collect()
        };
        drop(obsolete);
        let _ = self
            .unmarked
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                (u != 0 && u < log_number).then_some(0)
            });
    }

    /// Appends a `Synced` marker to `current` (the current WAL, its lock held) if closed WALs
    /// were synced since the last marker. Cheap when none were: one load.
    pub(crate) fn mark_synced(&self, current: &mut LogWriter) -> std::io::Result<()> {
        // A WAL whose append failed takes nothing more (close still syncs it).
        if self.unmarked.load(Ordering::Relaxed) == 0 || current.has_failed() {
            return Ok(());
        }
        let through = self.unmarked.swap(0, Ordering::AcqRel);
        if through == 0 {
            return Ok(());
        }
        let appended = current.add_marker(&WalMarker::Synced { through }.encode());
        if appended.is_err() {
            // Owed still; the WAL's writer is given up, its successor gets the marker.
            self.unmarked.fetch_max(through, Ordering::AcqRel);
        }
        appended
    }
}
