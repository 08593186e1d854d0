//! WALs a newer one took over from, synced off the writers' path (RocksDB syncs closed WALs
//! the same way, in its flush: `SyncClosedLogs`).
//!
//! At a memtable switch the old WAL is only cut back to its records and handed to the OS
//! (`LogWriter::finish`); its `fdatasync` waited for on the writers' path cost a fill about a
//! tenth of its time. It is synced, with every other closed WAL, oldest first:
//! - by a synced write, before the current WAL's sync (its promise covers every earlier
//!   write);
//! - before every MANIFEST write (`DbInner::log_and_apply_all`), so no edit (a flush moving
//!   a log number, an ingestion) becomes durable ahead of the writes before it; the flush
//!   that follows a switch is usually the one that syncs;
//! - by close.
//!
//! After a power loss an older WAL may then be cut short while a newer one holds writes that
//! reached the disk unsynced. Recovery keeps the prefix up to the cut, unless a marker shows
//! the older WAL was synced (docs/format/wal.md, "Marker records"; db/open.rs,
//! `torn_before_later_data`): after syncing, the next record appended to the current WAL is
//! a `WalMarker::Synced` naming the newest WAL synced.

use crate::error::{Error, Result};
use crate::log::{LogWriter, WalMarker};
use crate::version::filename;
use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

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
}

impl ClosedWals {
    /// Adds WAL `number`, which a newer one just took over from.
    pub(crate) fn push(&self, number: u64, wal: LogWriter) {
        self.waiting.lock().push((number, wal));
    }

    /// Syncs every closed WAL, oldest first, and forgets them.
    pub(crate) fn sync_all(&self, dir: &Path) -> Result<()> {
        let mut failed = self.syncing.lock();
        if *failed {
            return Err(Error::io(
                "syncing the closed WALs",
                std::io::Error::other("an earlier sync of a closed WAL failed"),
            ));
        }
        let wals = std::mem::take(&mut *self.waiting.lock());
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

    /// Owes no marker for WALs below `log_number`: every family flushed them, so recovery
    /// never reads them (the common case: the flush after a switch synced the old WAL).
    pub(crate) fn forget_marks_below(&self, log_number: u64) {
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
        let appended = current.add_record(&WalMarker::Synced { through }.encode());
        if appended.is_err() {
            // Owed still; the WAL's writer is given up, its successor gets the marker.
            self.unmarked.fetch_max(through, Ordering::AcqRel);
        }
        appended
    }
}
