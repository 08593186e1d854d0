//! The memtable: the in-memory write buffer, an ordered concurrent map from internal keys to
//! values. Writers insert while readers look up and iterate, without locks
//! (crossbeam-skiplist). When it grows past `write_buffer_size` it is frozen (made immutable)
//! and flushed to an L0 table by a background thread while a fresh memtable takes new writes.

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, InternalKey, SequenceNumber, ValueKind};
use crossbeam_skiplist::SkipMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Per-entry bookkeeping bytes counted on top of key and value, approximating the skiplist
/// node, its tower and the two heap allocations.
const ENTRY_OVERHEAD: usize = 64;

/// What a memtable knows about a key at a sequence number.
#[derive(Debug, PartialEq, Eq)]
pub enum LookupResult {
    /// The newest visible version is a value.
    Found(Vec<u8>),
    /// The newest visible version is a tombstone.
    Deleted,
    /// The memtable has no visible version; look in older data.
    NotPresent,
}

/// An ordered, concurrent write buffer.
pub struct MemTable {
    map: SkipMap<InternalKey, Arc<[u8]>>,
    approximate_bytes: AtomicUsize,
    num_deletes: AtomicU64,
    /// The WAL file holding this memtable's writes.
    log_number: u64,
}

impl MemTable {
    /// An empty memtable whose writes go to WAL `log_number`.
    pub fn new(log_number: u64) -> Self {
        MemTable {
            map: SkipMap::new(),
            approximate_bytes: AtomicUsize::new(0),
            num_deletes: AtomicU64::new(0),
            log_number,
        }
    }

    /// The WAL whose records this memtable holds.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Inserts one entry. Safe to call from several threads at once.
    pub fn add(&self, seq: SequenceNumber, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        let ikey = InternalKey::new(user_key, seq, kind);
        let bytes = ikey.0.len() + value.len() + ENTRY_OVERHEAD;
        self.map.insert(ikey, Arc::from(value));
        self.approximate_bytes.fetch_add(bytes, Ordering::Relaxed);
        if kind == ValueKind::Delete {
            self.num_deletes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Looks up the newest version of `user_key` with sequence <= `seq`.
    pub fn get(&self, user_key: &[u8], seq: SequenceNumber) -> LookupResult {
        let lookup = InternalKey::new(user_key, seq, key::KIND_FOR_SEEK);
        let Some(entry) = self
            .map
            .range((Bound::Included(&lookup), Bound::Unbounded))
            .next()
        else {
            return LookupResult::NotPresent;
        };
        match key::parse_internal_key(entry.key().encoded()) {
            Some(p) if p.user_key == user_key => match p.kind {
                ValueKind::Put => LookupResult::Found(entry.value().to_vec()),
                ValueKind::Delete => LookupResult::Deleted,
            },
            _ => LookupResult::NotPresent,
        }
    }

    /// Approximate memory used, in bytes.
    pub fn approximate_memory_usage(&self) -> usize {
        self.approximate_bytes.load(Ordering::Relaxed)
    }

    /// Number of entries (puts and deletes).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Number of tombstones.
    pub fn num_deletes(&self) -> u64 {
        self.num_deletes.load(Ordering::Relaxed)
    }

    /// True if nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// An iterator over the memtable's entries in internal-key order. It keeps the memtable
    /// alive and sees entries inserted after it was created.
    pub fn iter(self: &Arc<Self>) -> MemTableIterator {
        MemTableIterator {
            mem: self.clone(),
            current: None,
        }
    }
}

/// Iterates a memtable. Holds a copy of the current key and a shared handle to the current
/// value; each step is a skiplist search from the current key, so no lifetimes tie the
/// iterator to the map.
pub struct MemTableIterator {
    mem: Arc<MemTable>,
    current: Option<(InternalKey, Arc<[u8]>)>,
}

impl MemTableIterator {
    fn set(&mut self, e: Option<crossbeam_skiplist::map::Entry<'_, InternalKey, Arc<[u8]>>>) {
        self.current = e.map(|e| (e.key().clone(), e.value().clone()));
    }
}

impl InternalIterator for MemTableIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn seek_to_first(&mut self) {
        let mem = self.mem.clone();
        let e = mem.map.front();
        self.set(e);
    }
    fn seek_to_last(&mut self) {
        let mem = self.mem.clone();
        let e = mem.map.back();
        self.set(e);
    }
    fn seek(&mut self, target: &[u8]) {
        let t = InternalKey(target.to_vec());
        let mem = self.mem.clone();
        let e = mem
            .map
            .range((Bound::Included(&t), Bound::Unbounded))
            .next();
        self.set(e);
    }
    fn next(&mut self) {
        let Some((k, _)) = self.current.take() else {
            return;
        };
        let mem = self.mem.clone();
        let e = mem
            .map
            .range((Bound::Excluded(&k), Bound::Unbounded))
            .next();
        self.set(e);
    }
    fn prev(&mut self) {
        let Some((k, _)) = self.current.take() else {
            return;
        };
        let mem = self.mem.clone();
        let e = mem
            .map
            .range((Bound::Unbounded, Bound::Excluded(&k)))
            .next_back();
        self.set(e);
    }
    fn key(&self) -> &[u8] {
        match &self.current {
            Some((k, _)) => k.encoded(),
            None => &[],
        }
    }
    fn value(&self) -> &[u8] {
        match &self.current {
            Some((_, v)) => v,
            None => &[],
        }
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_sees_newest_visible_version() {
        let m = MemTable::new(1);
        m.add(1, ValueKind::Put, b"k", b"v1");
        m.add(2, ValueKind::Put, b"k", b"v2");
        m.add(3, ValueKind::Delete, b"k", b"");
        m.add(4, ValueKind::Put, b"k", b"v4");
        assert_eq!(m.get(b"k", 0), LookupResult::NotPresent);
        assert_eq!(m.get(b"k", 1), LookupResult::Found(b"v1".to_vec()));
        assert_eq!(m.get(b"k", 2), LookupResult::Found(b"v2".to_vec()));
        assert_eq!(m.get(b"k", 3), LookupResult::Deleted);
        assert_eq!(m.get(b"k", 100), LookupResult::Found(b"v4".to_vec()));
        assert_eq!(m.get(b"j", 100), LookupResult::NotPresent);
        assert_eq!(m.get(b"kk", 100), LookupResult::NotPresent);
        assert_eq!(m.len(), 4);
        assert_eq!(m.num_deletes(), 1);
    }

    #[test]
    fn iterator_walks_both_ways_in_internal_order() {
        let m = Arc::new(MemTable::new(1));
        m.add(5, ValueKind::Put, b"b", b"b5");
        m.add(1, ValueKind::Put, b"a", b"a1");
        m.add(7, ValueKind::Put, b"b", b"b7");
        m.add(2, ValueKind::Delete, b"c", b"");
        let mut it = m.iter();
        it.seek_to_first();
        let mut fwd = Vec::new();
        while it.valid() {
            let p = key::parse_internal_key(it.key()).expect("valid key");
            fwd.push((p.user_key.to_vec(), p.sequence, it.value().to_vec()));
            it.next();
        }
        assert_eq!(
            fwd,
            vec![
                (b"a".to_vec(), 1, b"a1".to_vec()),
                (b"b".to_vec(), 7, b"b7".to_vec()),
                (b"b".to_vec(), 5, b"b5".to_vec()),
                (b"c".to_vec(), 2, b"".to_vec()),
            ]
        );
        it.seek_to_last();
        let mut back = Vec::new();
        while it.valid() {
            back.push(key::parse_internal_key(it.key()).map(|p| p.sequence));
            it.prev();
        }
        assert_eq!(back, vec![Some(2), Some(5), Some(7), Some(1)]);
        it.seek(&key::make_internal_key(b"b", 6, ValueKind::Put));
        assert_eq!(
            key::parse_internal_key(it.key()).map(|p| p.sequence),
            Some(5)
        );
    }
}
