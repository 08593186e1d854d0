//! Snapshots: a pinned sequence number. While a snapshot lives, compaction keeps every version
//! it can see.

use crate::key::SequenceNumber;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The live snapshots of a database: sequence number -> how many snapshots hold it.
#[derive(Default)]
pub(crate) struct SnapshotList {
    live: Mutex<BTreeMap<SequenceNumber, usize>>,
}

impl SnapshotList {
    /// The oldest sequence number any reader may still ask for: the oldest snapshot, or
    /// `latest()` if there is none. Read under the list's lock, so a snapshot being created
    /// concurrently either is counted or gets a sequence number >= the result.
    pub(crate) fn oldest_or(&self, latest: impl FnOnce() -> SequenceNumber) -> SequenceNumber {
        let live = self.live.lock();
        match live.keys().next() {
            Some(&s) => s,
            None => latest(),
        }
    }

    /// The newest live snapshot's sequence number, if any.
    pub(crate) fn newest(&self) -> Option<SequenceNumber> {
        self.live.lock().keys().next_back().copied()
    }

    pub(crate) fn count(&self) -> usize {
        self.live.lock().values().sum()
    }
}

struct SnapshotInner {
    sequence: SequenceNumber,
    list: Arc<SnapshotList>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        let mut live = self.list.live.lock();
        if let Some(n) = live.get_mut(&self.sequence) {
            *n -= 1;
            if *n == 0 {
                live.remove(&self.sequence);
            }
        }
    }
}

/// A consistent point-in-time view of the database, for `get` and iterators (through
/// [`crate::ReadOptions::snapshot`]). Cheap to clone; released when the last clone drops.
///
/// ```
/// # use shaledb::{Db, Options, ReadOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = Db::open(dir.path(), Options::default()).unwrap();
/// db.put(b"k", b"old").unwrap();
/// let snap = db.snapshot();
/// db.put(b"k", b"new").unwrap();
/// let ro = ReadOptions { snapshot: Some(snap), ..Default::default() };
/// assert_eq!(db.get_opt(&ro, b"k").unwrap().as_deref(), Some(&b"old"[..]));
/// ```
#[derive(Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// Registers a snapshot at the sequence `current()` returns, read under the list's lock
    /// (see `SnapshotList::oldest_or`).
    pub(crate) fn new(
        list: &Arc<SnapshotList>,
        current: impl FnOnce() -> SequenceNumber,
    ) -> Snapshot {
        let mut live = list.live.lock();
        let sequence = current();
        *live.entry(sequence).or_insert(0) += 1;
        drop(live);
        Snapshot {
            inner: Arc::new(SnapshotInner {
                sequence,
                list: list.clone(),
            }),
        }
    }

    /// The sequence number this snapshot reads at.
    pub fn sequence(&self) -> SequenceNumber {
        self.inner.sequence
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Snapshot({})", self.inner.sequence)
    }
}
