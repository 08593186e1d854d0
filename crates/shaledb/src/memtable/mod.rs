//! The memtable: the in-memory write buffer, an ordered map from internal keys to values.
//! One writer at a time inserts (the group-commit leader, or WAL replay) while any number of
//! readers look up and iterate without locks (an arena-based skiplist, `skiplist.rs`). When it
//! grows past `write_buffer_size` it is frozen (made immutable) and flushed to an L0 table by a
//! background thread while a fresh memtable takes new writes.

mod arena;
mod bloom;
mod skiplist;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{SequenceNumber, ValueKind};
use crate::range_del::{FragmentedRangeTombstones, RangeTombstone};
use crate::sst::filter::key_hash;
use crate::value::{LookupResult, Value};
use parking_lot::Mutex;
use skiplist::{Cursor, SkipList, Target};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// An ordered write buffer: one writer at a time ([`MemTable::add`]) or several at once
/// (`add_concurrent`, for pipelined write groups), never both together; lock-free readers.
pub struct MemTable {
    list: Arc<SkipList>,
    num_deletes: AtomicU64,
    /// The WAL file holding this memtable's writes.
    log_number: u64,
    /// Range tombstones, kept apart from the point entries (see `range_del.rs`). Most
    /// memtables have none: readers check `has_range_dels` before taking the lock.
    range_dels: Mutex<RangeDels>,
    has_range_dels: AtomicBool,
    range_del_bytes: AtomicUsize,
    /// Whole keys and/or prefixes inserted, when the family asks for a memtable bloom.
    bloom: Option<MemTableBloom>,
    /// The memory charged to the family's write buffer manager, released on drop.
    charge: Option<crate::memory::MemCharge>,
    /// The blob files this memtable's references point into, in a family that separates
    /// values when they are written (`Options::separate_blobs_at_write`).
    write_time_blobs: Option<crate::blob::WriteTimeBlobs>,
}

/// Asks the CPU to start loading the cache line holding `r`, so that work done meanwhile
/// overlaps the miss (the bloom's line and the hash index's bucket, during an insert's walk).
#[inline]
pub(crate) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint with no effect on memory and never faults, and SSE (which
    // has the instruction) is part of every x86_64 target.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(r).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// Write buffer bytes per bucket of the skiplist's point index (`Options::memtable_hash_index`):
/// a 64 MiB write buffer gets 512 Ki buckets (4 MiB), about one per entry of 128 bytes.
const HASH_INDEX_BYTES_PER_BUCKET: usize = 128;

/// What a memtable's bloom filter holds (`Options::memtable_prefix_bloom_size_ratio`).
struct MemTableBloom {
    bits: bloom::MemBloom,
    /// Every key is added (`Options::memtable_whole_key_filtering`): gets of absent keys skip
    /// the skiplist.
    whole_key: bool,
    /// Every key's prefix is added: prefix seeks skip a memtable without the prefix.
    prefix_extractor: Option<Arc<dyn crate::PrefixExtractor>>,
}

/// A memtable's range tombstones as written, and their fragmented form, rebuilt on the first
/// read after a new tombstone (RocksDB caches the fragmented list the same way).
#[derive(Default)]
struct RangeDels {
    written: Vec<RangeTombstone>,
    fragmented: Option<Arc<FragmentedRangeTombstones>>,
}

impl MemTable {
    /// An empty memtable whose writes go to WAL `log_number`.
    pub fn new(log_number: u64) -> Self {
        MemTable {
            list: Arc::new(SkipList::new()),
            num_deletes: AtomicU64::new(0),
            log_number,
            range_dels: Mutex::new(RangeDels::default()),
            has_range_dels: AtomicBool::new(false),
            range_del_bytes: AtomicUsize::new(0),
            bloom: None,
            charge: None,
            write_time_blobs: None,
        }
    }

    /// An empty memtable of a family with options `opts` (its bloom filter, if they ask for
    /// one) whose writes go to WAL `log_number`.
    pub fn for_family(log_number: u64, opts: &crate::Options) -> Self {
        let prefix_extractor = opts.prefix_extractor.clone();
        // A memtable never holds more than a write buffer manager's budget either: sized by
        // the smaller, a filter charged to a small budget leaves room for the entries.
        let holds_at_most = opts
            .write_buffer_manager
            .as_ref()
            .map_or(opts.write_buffer_size, |w| {
                w.buffer_size().min(opts.write_buffer_size)
            });
        let bytes = (holds_at_most as f64 * opts.memtable_prefix_bloom_size_ratio) as usize;
        let wanted = opts.memtable_whole_key_filtering || prefix_extractor.is_some();
        let list = match opts.memtable_hash_index {
            true => SkipList::with_point_index(holds_at_most / HASH_INDEX_BYTES_PER_BUCKET),
            false => SkipList::new(),
        };
        MemTable {
            list: Arc::new(list),
            bloom: (bytes > 0 && wanted).then(|| MemTableBloom {
                bits: bloom::MemBloom::with_bytes(bytes),
                whole_key: opts.memtable_whole_key_filtering,
                prefix_extractor,
            }),
            charge: opts
                .write_buffer_manager
                .clone()
                .map(crate::memory::MemCharge::new),
            write_time_blobs: crate::blob::WriteTimeBlobs::for_family(opts),
            ..MemTable::new(log_number)
        }
    }

    /// The blob files this memtable's references point into, if its family separates values
    /// when they are written.
    pub(crate) fn write_time_blobs(&self) -> Option<&crate::blob::WriteTimeBlobs> {
        self.write_time_blobs.as_ref()
    }

    /// Charges the memory grown since the last call to the write buffer manager, if any
    /// (the write path calls it once per write group and memtable written).
    #[inline]
    pub(crate) fn charge_growth(&self) {
        if let Some(c) = &self.charge {
            c.grow_to(self.approximate_memory_usage());
        }
    }

    /// The memtable was frozen: its memory no longer counts as active in the manager.
    pub(crate) fn freeze_charge(&self) {
        if let Some(c) = &self.charge {
            c.freeze();
        }
    }

    /// The WAL whose records this memtable holds.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Inserts one entry. Readers (`get`, iterators) may run concurrently.
    ///
    /// REQUIRES: no other thread is calling `add` or `add_concurrent` on this memtable at the
    /// same time (the engine calls it from a write group's leader inserting alone, or WAL
    /// replay). A concurrent `add` panics.
    /// A range deletion (`kind` `RangeDeletion`) deletes `[user_key, value)`.
    pub fn add(&self, seq: SequenceNumber, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        self.add_entry(seq, kind, user_key, value, false);
    }

    /// [`MemTable::add`] for one of several threads inserting at once (the members of a write
    /// group, each its own batch).
    ///
    /// REQUIRES: no thread is in [`MemTable::add`] meanwhile, and every entry has its own
    /// sequence number.
    pub(crate) fn add_concurrent(
        &self,
        seq: SequenceNumber,
        kind: ValueKind,
        user_key: &[u8],
        value: &[u8],
    ) {
        self.add_entry(seq, kind, user_key, value, true);
    }

    fn add_entry(
        &self,
        seq: SequenceNumber,
        kind: ValueKind,
        user_key: &[u8],
        value: &[u8],
        concurrent: bool,
    ) {
        if kind == ValueKind::RangeDeletion {
            self.add_range_deletion(seq, user_key, value);
            return;
        }
        let hash = self.whole_key_hash(user_key);
        // The filter's lines are loaded while the skiplist is walked; their bits are set after
        // the insert but before the write's sequence is published (`bloom.rs` on ordering).
        let hashes = self.bloom.as_ref().map(|b| {
            let whole = hash.filter(|_| b.whole_key);
            let prefix = b
                .prefix_extractor
                .as_ref()
                .and_then(|ex| ex.prefix(user_key))
                .map(key_hash);
            for h in whole.iter().chain(prefix.iter()) {
                b.bits.prefetch(*h);
            }
            (&b.bits, whole, prefix)
        });
        if concurrent {
            self.list
                .insert_concurrent(user_key, seq, kind, value, hash);
        } else {
            self.list.insert(user_key, seq, kind, value, hash);
        }
        if let Some((bits, whole, prefix)) = hashes {
            for h in whole.into_iter().chain(prefix) {
                match concurrent {
                    true => bits.add_concurrent(h),
                    false => bits.add(h),
                }
            }
        }
        if kind.is_deletion() {
            self.num_deletes.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn add_range_deletion(&self, seq: SequenceNumber, start: &[u8], end: &[u8]) {
        let mut r = self.range_dels.lock();
        r.written.push(RangeTombstone {
            start: start.to_vec(),
            end: end.to_vec(),
            seq,
        });
        r.fragmented = None;
        // Published under the lock, after the tombstone: a reader seeing the flag finds it.
        self.has_range_dels.store(true, Ordering::Release);
        self.range_del_bytes
            .fetch_add(start.len() + end.len() + 64, Ordering::Relaxed);
    }

    /// The memtable's range tombstones, fragmented; `None` if it has none.
    pub fn range_tombstones(&self) -> Option<Arc<FragmentedRangeTombstones>> {
        if !self.has_range_dels.load(Ordering::Acquire) {
            return None;
        }
        let mut r = self.range_dels.lock();
        if r.fragmented.is_none() {
            r.fragmented = Some(Arc::new(FragmentedRangeTombstones::new(
                r.written.iter().cloned(),
            )));
        }
        r.fragmented.clone()
    }

    /// The newest range tombstone covering `user_key` visible at `seq`; 0 if none.
    #[inline]
    pub fn max_covering_tombstone_seq(&self, user_key: &[u8], seq: SequenceNumber) -> u64 {
        if !self.has_range_dels.load(Ordering::Acquire) {
            return 0;
        }
        self.range_tombstones()
            .map_or(0, |t| t.max_covering_seq(user_key, seq))
    }

    /// Looks up the newest version of `user_key` with sequence <= `seq`.
    pub fn get(&self, user_key: &[u8], seq: SequenceNumber) -> LookupResult {
        self.get_entry(user_key, seq).0
    }

    /// [`MemTable::get`] that also returns the sequence number of the entry found (0 if
    /// none), which range tombstones are compared with.
    pub fn get_entry(&self, user_key: &[u8], seq: SequenceNumber) -> (LookupResult, u64) {
        let whole_key_bloom = self.bloom.as_ref().filter(|b| b.whole_key);
        let hash = self.whole_key_hash(user_key);
        if let (Some(b), Some(h)) = (whole_key_bloom, hash) {
            if !b.bits.may_contain(h) {
                return (LookupResult::NotPresent, 0);
            }
        }
        let Some(e) = self.list.get(user_key, seq, hash) else {
            return (LookupResult::NotPresent, 0);
        };
        let r = match e.user_key_and_kind().1 {
            Some(ValueKind::Put) => LookupResult::Found(Value::from_vec(e.value().to_vec())),
            Some(ValueKind::Delete | ValueKind::SingleDelete) => LookupResult::Deleted,
            Some(ValueKind::Merge) => LookupResult::Merge,
            // A value written to a blob file with its write (`separate_blobs_at_write`).
            Some(ValueKind::BlobIndex) => LookupResult::Blob(Value::from_vec(e.value().to_vec())),
            _ => return (LookupResult::NotPresent, 0),
        };
        (r, e.sequence())
    }

    /// False if no key with `prefix` (as the family's extractor gives it) was ever inserted;
    /// true when unsure or without a prefix bloom.
    pub fn may_contain_prefix(&self, prefix: &[u8]) -> bool {
        match &self.bloom {
            Some(b) if b.prefix_extractor.is_some() => b.bits.may_contain(key_hash(prefix)),
            _ => true,
        }
    }

    /// Approximate memory used, in bytes: the skiplist arena's allocated bytes, range
    /// tombstones and the bloom filter (counted from the start, as RocksDB allocates its
    /// memtable bloom from the memtable's arena).
    pub fn approximate_memory_usage(&self) -> usize {
        self.list.memory_usage()
            + self.list.index_bytes()
            + self.range_del_bytes.load(Ordering::Relaxed)
            + self.bloom.as_ref().map_or(0, |b| b.bits.size())
    }

    /// What counts toward `write_buffer_size`: [`MemTable::approximate_memory_usage`] without
    /// the skiplist's hash index (its buckets and each entry's hash link), which comes on top,
    /// so that the index changes when a memtable is flushed in nothing (a write buffer
    /// manager's budget still counts it: it charges `approximate_memory_usage`).
    pub fn write_buffer_usage(&self) -> usize {
        self.approximate_memory_usage() - self.list.index_bytes() - self.list.hash_link_bytes()
    }

    /// Starts loading the cache lines an `add` of `user_key` will write at random places (its
    /// point-index bucket, its whole-key filter line), so that a caller with other work
    /// before the insert (the WAL write) does not wait for them in it. Only a hint.
    pub(crate) fn prefetch_for_add(&self, user_key: &[u8]) {
        let Some(hash) = self.whole_key_hash(user_key) else {
            return;
        };
        self.list.prefetch_index(hash);
        if let Some(b) = self.bloom.as_ref().filter(|b| b.whole_key) {
            b.bits.prefetch(hash);
        }
    }

    /// `key_hash(user_key)` if the whole-key bloom or the skiplist's hash index uses it: one
    /// hash serves both.
    fn whole_key_hash(&self, user_key: &[u8]) -> Option<u64> {
        let used = self.list.has_point_index() || self.bloom.as_ref().is_some_and(|b| b.whole_key);
        used.then(|| key_hash(user_key))
    }

    /// Number of entries (puts, deletes and range deletions).
    pub fn len(&self) -> usize {
        self.list.len() + self.range_dels.lock().written.len()
    }

    /// Number of tombstones.
    pub fn num_deletes(&self) -> u64 {
        self.num_deletes.load(Ordering::Relaxed)
    }

    /// True if nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An iterator over the memtable's entries in internal-key order. It keeps the memtable's
    /// skiplist alive and sees entries inserted after it was created.
    pub fn iter(self: &Arc<Self>) -> MemTableIterator {
        MemTableIterator {
            cursor: Cursor::new(self.list.clone()),
        }
    }
}

/// Iterates a memtable. Holds a pointer to the current skiplist node (and a reference count on
/// the skiplist, which keeps the node alive): `next` is one atomic load, `prev` one search, and
/// `key`/`value` borrow from the node without copying.
pub struct MemTableIterator {
    cursor: Cursor,
}

impl InternalIterator for MemTableIterator {
    fn valid(&self) -> bool {
        self.cursor.current().is_some()
    }
    fn seek_to_first(&mut self) {
        self.cursor.seek_to_first();
    }
    fn seek_to_last(&mut self) {
        self.cursor.seek_to_last();
    }
    fn seek(&mut self, target: &[u8]) {
        self.cursor.seek(&Target::from_internal(target));
    }
    fn next(&mut self) {
        self.cursor.next();
    }
    fn prev(&mut self) {
        self.cursor.prev();
    }
    fn key(&self) -> &[u8] {
        self.cursor.current().map_or(&[], |e| e.key())
    }
    fn value(&self) -> &[u8] {
        self.cursor.current().map_or(&[], |e| e.value())
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key;

    fn bloom_options(whole_key: bool, prefix: bool) -> crate::Options {
        crate::Options {
            write_buffer_size: 1 << 20,
            memtable_prefix_bloom_size_ratio: 0.05,
            memtable_whole_key_filtering: whole_key,
            prefix_extractor: prefix
                .then(|| Arc::new(crate::FixedPrefix(4)) as Arc<dyn crate::PrefixExtractor>),
            ..Default::default()
        }
    }

    #[test]
    fn whole_key_bloom_answers_like_the_skiplist() {
        let m = MemTable::for_family(1, &bloom_options(true, false));
        assert!(
            m.approximate_memory_usage() >= (1 << 20) / 20,
            "the bloom is counted"
        );
        for i in 0..2000u32 {
            m.add(
                u64::from(i) + 1,
                ValueKind::Put,
                format!("k{i}").as_bytes(),
                b"v",
            );
        }
        for i in 0..4000u32 {
            let want = if i < 2000 {
                LookupResult::Found(Value::from(b"v".to_vec()))
            } else {
                LookupResult::NotPresent
            };
            assert_eq!(m.get(format!("k{i}").as_bytes(), 10_000), want, "k{i}");
        }
        // Without an extractor the bloom knows no prefixes: always "maybe".
        assert!(m.may_contain_prefix(b"zzzz"));
    }

    #[test]
    fn prefix_bloom_rules_out_prefixes_never_inserted() {
        let m = MemTable::for_family(1, &bloom_options(false, true));
        for p in 0..500u32 {
            m.add(
                u64::from(p) + 1,
                ValueKind::Put,
                format!("{p:04}-key").as_bytes(),
                b"",
            );
        }
        for p in 0..500u32 {
            assert!(m.may_contain_prefix(format!("{p:04}").as_bytes()));
        }
        let ruled_out = (500..5500u32)
            .filter(|p| !m.may_contain_prefix(format!("{p:04}").as_bytes()))
            .count();
        assert!(
            ruled_out > 4900,
            "only {ruled_out} of 5000 absent prefixes ruled out"
        );
        // Whole keys are not in this bloom: gets still search the skiplist.
        assert_eq!(
            m.get(b"0001-key", 1000),
            LookupResult::Found(Value::from(Vec::new()))
        );
        // No memtable bloom without a ratio.
        let plain = MemTable::for_family(
            1,
            &crate::Options {
                memtable_prefix_bloom_size_ratio: 0.0,
                ..bloom_options(true, true)
            },
        );
        plain.add(1, ValueKind::Put, b"aaaa1", b"");
        assert!(plain.may_contain_prefix(b"zzzz"));
    }

    /// A memtable whose skiplist has a point index of `buckets` buckets (no bloom).
    fn with_point_index(buckets: usize) -> MemTable {
        MemTable {
            list: Arc::new(SkipList::with_point_index(buckets)),
            ..MemTable::new(1)
        }
    }

    #[test]
    fn get_sees_newest_visible_version() {
        get_sees_newest_visible_version_in(MemTable::new(1));
        // One bucket: every key in one chain.
        get_sees_newest_visible_version_in(with_point_index(1));
        get_sees_newest_visible_version_in(with_point_index(1024));
    }

    fn get_sees_newest_visible_version_in(m: MemTable) {
        m.add(1, ValueKind::Put, b"k", b"v1");
        m.add(2, ValueKind::Put, b"k", b"v2");
        m.add(3, ValueKind::Delete, b"k", b"");
        m.add(4, ValueKind::Put, b"k", b"v4");
        assert_eq!(m.get(b"k", 0), LookupResult::NotPresent);
        assert_eq!(
            m.get(b"k", 1),
            LookupResult::Found(Value::from(b"v1".to_vec()))
        );
        assert_eq!(
            m.get(b"k", 2),
            LookupResult::Found(Value::from(b"v2".to_vec()))
        );
        assert_eq!(m.get(b"k", 3), LookupResult::Deleted);
        assert_eq!(
            m.get(b"k", 100),
            LookupResult::Found(Value::from(b"v4".to_vec()))
        );
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

    use crate::key::{InternalKey, MAX_SEQUENCE};
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicBool;

    fn collect_forward(it: &mut MemTableIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        it.seek_to_first();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        out
    }

    #[test]
    fn randomized_against_btreemap() {
        randomized_against_btreemap_in(MemTable::new(7));
    }

    #[test]
    fn randomized_against_btreemap_with_a_point_index() {
        // Few buckets: long chains, keys replaced in the middle of them.
        randomized_against_btreemap_in(with_point_index(4));
        randomized_against_btreemap_in(with_point_index(1 << 12));
    }

    fn randomized_against_btreemap_in(m: MemTable) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
        let m = Arc::new(m);
        let mut model: BTreeMap<InternalKey, Vec<u8>> = BTreeMap::new();
        let mut seqs: Vec<u64> = (1..=3000).collect();
        // Sequence numbers unique (as in the engine) but inserted in random order.
        for i in (1..seqs.len()).rev() {
            seqs.swap(i, rng.gen_range(0..=i));
        }
        let user_keys: Vec<Vec<u8>> = (0..300)
            .map(|_| {
                let len = rng.gen_range(0..20);
                // A small alphabet makes shared prefixes and prefix keys common.
                (0..len).map(|_| rng.gen_range(b'a'..=b'd')).collect()
            })
            .collect();
        for &seq in &seqs {
            let uk = &user_keys[rng.gen_range(0..user_keys.len())];
            let kind = match rng.gen_range(0..10) {
                0 => ValueKind::Delete,
                1 => ValueKind::SingleDelete,
                2 => ValueKind::Merge,
                _ => ValueKind::Put,
            };
            let value: Vec<u8> = match kind {
                ValueKind::Put | ValueKind::Merge | ValueKind::BlobIndex => {
                    (0..rng.gen_range(0..50)).map(|_| rng.gen()).collect()
                }
                ValueKind::Delete | ValueKind::SingleDelete | ValueKind::RangeDeletion => {
                    Vec::new()
                }
            };
            m.add(seq, kind, uk, &value);
            model.insert(InternalKey::new(uk, seq, kind), value);
        }
        assert_eq!(m.len(), model.len());
        let expected: Vec<(Vec<u8>, Vec<u8>)> = model
            .iter()
            .map(|(k, v)| (k.0.clone(), v.clone()))
            .collect();

        let mut it = m.iter();
        assert_eq!(collect_forward(&mut it), expected);
        let mut back = Vec::new();
        it.seek_to_last();
        while it.valid() {
            back.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        back.reverse();
        assert_eq!(back, expected);

        // Seeks: to existing keys, to keys between versions, and to unseen user keys.
        for _ in 0..2000 {
            let uk: Vec<u8> = if rng.gen_bool(0.7) {
                user_keys[rng.gen_range(0..user_keys.len())].clone()
            } else {
                (0..rng.gen_range(0..20))
                    .map(|_| rng.gen_range(b'a'..=b'e'))
                    .collect()
            };
            let seq = rng.gen_range(0..=3001);
            let target = InternalKey::new(&uk, seq, key::KIND_FOR_SEEK);
            it.seek(target.encoded());
            let want = model.range(target.clone()..).next();
            match want {
                Some((k, v)) => {
                    assert!(it.valid());
                    assert_eq!(it.key(), k.encoded());
                    assert_eq!(it.value(), &v[..]);
                    // A step each way from a seek lands on the neighbours.
                    it.prev();
                    let before = model.range(..k.clone()).next_back();
                    assert_eq!(it.valid(), before.is_some());
                    if let Some((bk, _)) = before {
                        assert_eq!(it.key(), bk.encoded());
                        it.next();
                        assert_eq!(it.key(), k.encoded());
                    }
                }
                None => assert!(!it.valid()),
            }

            let want_get = match want {
                Some((k, v)) if k.user_key() == &uk[..] => {
                    match key::parse_internal_key(k.encoded()).map(|p| p.kind) {
                        Some(ValueKind::Put) => LookupResult::Found(Value::from(v.clone())),
                        Some(ValueKind::Merge) => LookupResult::Merge,
                        _ => LookupResult::Deleted,
                    }
                }
                _ => LookupResult::NotPresent,
            };
            assert_eq!(m.get(&uk, seq), want_get, "get({uk:?}, {seq})");
        }
        // Short (malformed) seek targets order like `compare_internal` says.
        it.seek(b"c");
        let want = model
            .keys()
            .find(|k| key::compare_internal(k.encoded(), b"c").is_ge());
        assert_eq!(
            it.valid().then(|| it.key().to_vec()),
            want.map(|k| k.0.clone())
        );
    }

    #[test]
    fn empty_keys_values_and_large_values() {
        let m = Arc::new(MemTable::new(1));
        assert!(m.is_empty());
        let mut it = m.iter();
        it.seek_to_first();
        assert!(!it.valid());
        it.seek_to_last();
        assert!(!it.valid());
        it.seek(&key::make_internal_key(b"", MAX_SEQUENCE, ValueKind::Put));
        assert!(!it.valid());
        assert_eq!(m.get(b"", MAX_SEQUENCE), LookupResult::NotPresent);

        let big: Vec<u8> = (0..(3 << 20) / 2).map(|i| (i % 251) as u8).collect();
        let huge: Vec<u8> = (0..(5 << 20)).map(|i| (i % 241) as u8).collect();
        m.add(1, ValueKind::Put, b"", b"");
        m.add(2, ValueKind::Put, b"", b"e2");
        m.add(3, ValueKind::Put, b"big", &big);
        m.add(4, ValueKind::Put, b"small", b"s");
        m.add(5, ValueKind::Put, b"huge", &huge);
        m.add(6, ValueKind::Delete, b"", b"");
        assert_eq!(m.len(), 6);
        assert!(m.approximate_memory_usage() >= big.len() + huge.len());
        assert_eq!(m.get(b"", 1), LookupResult::Found(Value::from(Vec::new())));
        assert_eq!(
            m.get(b"", 2),
            LookupResult::Found(Value::from(b"e2".to_vec()))
        );
        assert_eq!(m.get(b"", 6), LookupResult::Deleted);
        assert_eq!(
            m.get(b"big", 6),
            LookupResult::Found(Value::from(big.clone()))
        );
        assert_eq!(
            m.get(b"huge", 6),
            LookupResult::Found(Value::from(huge.clone()))
        );
        assert_eq!(
            m.get(b"small", 6),
            LookupResult::Found(Value::from(b"s".to_vec()))
        );
        assert_eq!(m.get(b"bi", 6), LookupResult::NotPresent);
        let all = collect_forward(&mut it);
        let users: Vec<&[u8]> = all.iter().map(|(k, _)| key::user_key(k)).collect();
        assert_eq!(users, vec![&b""[..], b"", b"", b"big", b"huge", b"small"]);
        assert_eq!(all[0].1, b"");
        assert_eq!(all[3].1, big);
        assert_eq!(all[4].1, huge);
    }

    #[test]
    fn one_writer_many_readers() {
        one_writer_many_readers_of(MemTable::new(1));
    }

    #[test]
    fn one_writer_many_readers_with_a_point_index() {
        one_writer_many_readers_of(with_point_index(64));
    }

    fn one_writer_many_readers_of(m: MemTable) {
        const N: u64 = 20_000;
        let m = Arc::new(m);
        let done = AtomicBool::new(false);
        // Key i has user key "key{i:08}" (inserted in a scattered order) and a value derived
        // from it, so a reader can check any entry it meets is complete.
        let user_key = |i: u64| format!("key{i:08}").into_bytes();
        let value_for = |k: &[u8], seq: u64| {
            let mut v = k.to_vec();
            v.extend_from_slice(&seq.to_le_bytes());
            v.resize(k.len() + 8 + (seq % 64) as usize, b'x');
            v
        };
        let check_entry = |ikey: &[u8], value: &[u8]| {
            let p = key::parse_internal_key(ikey).expect("complete key");
            assert_eq!(value, &value_for(p.user_key, p.sequence)[..]);
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                for seq in 1..=N {
                    // A multiplicative permutation of 0..N.
                    let i = (seq * 7919) % N;
                    let k = user_key(i);
                    m.add(seq, ValueKind::Put, &k, &value_for(&k, seq));
                    if seq % 3 == 0 {
                        // A second, newer version of a key written earlier.
                        let j = ((seq / 3) * 7919) % N;
                        let k = user_key(j);
                        m.add(N + seq, ValueKind::Put, &k, &value_for(&k, N + seq));
                    }
                }
                done.store(true, Ordering::Release);
            });
            for r in 0..3u64 {
                let m = &m;
                let done = &done;
                s.spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(r);
                    let mut passes = 0;
                    loop {
                        let finished = done.load(Ordering::Acquire);
                        let before = m.len();
                        let mut it = m.iter();
                        let mut prev: Option<Vec<u8>> = None;
                        let mut n = 0;
                        if r == 0 {
                            it.seek_to_last();
                        } else {
                            it.seek_to_first();
                        }
                        while it.valid() {
                            check_entry(it.key(), it.value());
                            if let Some(p) = &prev {
                                let o = key::compare_internal(p, it.key());
                                if r == 0 {
                                    assert!(o.is_gt(), "backward order");
                                } else {
                                    assert!(o.is_lt(), "forward order");
                                }
                            }
                            prev = Some(it.key().to_vec());
                            n += 1;
                            if r == 0 {
                                it.prev();
                            } else {
                                it.next();
                            }
                        }
                        // Everything inserted before the pass started is seen.
                        assert!(n >= before, "saw {n} of at least {before}");
                        // Gets: a found value is complete; a key seen once stays visible.
                        for _ in 0..200 {
                            let i = rng.gen_range(0..N);
                            let k = user_key(i);
                            match m.get(&k, MAX_SEQUENCE) {
                                LookupResult::Found(v) => {
                                    let seq = u64::from_le_bytes(
                                        v[k.len()..k.len() + 8].try_into().expect("8 bytes"),
                                    );
                                    assert_eq!(v, value_for(&k, seq));
                                    assert!(matches!(
                                        m.get(&k, MAX_SEQUENCE),
                                        LookupResult::Found(_)
                                    ));
                                }
                                LookupResult::Deleted
                                | LookupResult::Merge
                                | LookupResult::Blob(_) => panic!("only puts were written"),
                                LookupResult::NotPresent => {}
                            }
                        }
                        passes += 1;
                        if finished {
                            assert_eq!(n, m.len());
                            break;
                        }
                    }
                    assert!(passes >= 1);
                });
            }
        });
        assert_eq!(m.len() as u64, N + N / 3);
    }

    #[test]
    fn memory_usage_tracks_the_arena() {
        let m = MemTable::new(1);
        let empty = m.approximate_memory_usage();
        assert!(empty < 4096, "an empty memtable is small: {empty}");
        for i in 0..1000u64 {
            m.add(i + 1, ValueKind::Put, &i.to_be_bytes(), &[0u8; 100]);
        }
        let used = m.approximate_memory_usage();
        // 1000 entries of 16 + 100 bytes plus links and lengths.
        assert!((1000 * 124..1000 * 124 * 2).contains(&used), "{used}");
    }

    #[test]
    fn a_point_index_is_counted_and_sized_by_the_write_buffer() {
        let opts = |index: bool| crate::Options {
            write_buffer_size: 1 << 20,
            memtable_prefix_bloom_size_ratio: 0.0,
            memtable_hash_index: index,
            ..Default::default()
        };
        let plain = MemTable::for_family(1, &opts(false));
        let indexed = MemTable::for_family(1, &opts(true));
        // 1 MiB / 128 bytes per bucket = 8192 buckets of 8 bytes.
        assert_eq!(indexed.list.index_bytes(), 8192 * 8);
        assert_eq!(plain.list.index_bytes(), 0);
        let empty = indexed.approximate_memory_usage() - plain.approximate_memory_usage();
        // The buckets, and the head node's hash slot.
        assert_eq!(empty, 8192 * 8 + 8);
        for i in 0..1000u64 {
            plain.add(i + 1, ValueKind::Put, &i.to_be_bytes(), &[0u8; 100]);
            indexed.add(i + 1, ValueKind::Put, &i.to_be_bytes(), &[0u8; 100]);
        }
        for i in 0..1001u64 {
            let k = i.to_be_bytes();
            assert_eq!(indexed.get(&k, 500), plain.get(&k, 500), "key {i}");
            assert_eq!(indexed.get(&k, 2000), plain.get(&k, 2000), "key {i}");
        }
        // Each entry's hash link: 8 bytes more per entry (give or take the unused tails of
        // the arenas' chunks).
        let grown = indexed.approximate_memory_usage() - plain.approximate_memory_usage();
        assert!(
            (empty + 1000 * 8 - 2048..empty + 1000 * 8 + 2048).contains(&grown),
            "{grown}"
        );
        // The flush threshold sees the same memtable with or without the index.
        assert_eq!(
            indexed.write_buffer_usage(),
            indexed.approximate_memory_usage() - 8192 * 8 - 1001 * 8
        );
        let (a, b) = (indexed.write_buffer_usage(), plain.write_buffer_usage());
        assert!(a.abs_diff(b) < 2048, "{a} {b}");
    }
}
