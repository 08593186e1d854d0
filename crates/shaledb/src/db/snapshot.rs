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
    /// The oldest pinned sequence number, if any snapshot lives.
    pub(crate) fn oldest(&self) -> Option<SequenceNumber> {
        self.live.lock().keys().next().copied()
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
    pub(crate) fn new(list: &Arc<SnapshotList>, sequence: SequenceNumber) -> Snapshot {
        *list.live.lock().entry(sequence).or_insert(0) += 1;
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
