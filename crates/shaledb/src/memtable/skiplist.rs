//! The memtable's skiplist: one writer at a time or a group of concurrent ones, any number of
//! lock-free readers, nodes laid out in an [`Arena`] (the LevelDB/RocksDB design).
//!
//! # Node layout
//!
//! A node of height `h` is one arena allocation:
//!
//! ```text
//! [link h-1] ... [link 1] [link 0] | varint(klen) ikey varint(vlen) value
//!                                  ^ node pointer
//! ```
//!
//! The links are `AtomicPtr`s *before* the node pointer (link `i` at `node - 8 * (i + 1)`), so
//! the entry can be found without knowing the height. `ikey` is an internal key
//! (`user_key ++ fixed64_le(trailer)`, see `key.rs`), at least 8 bytes long.
//!
//! A list with a [point index](SkipList::with_point_index) gives every node one more slot,
//! right below the node pointer, and moves the links down by one (link `i` at
//! `node - 8 * (i + 2)`):
//!
//! ```text
//! [link h-1] ... [link 0] [hash link] | varint(klen) ikey varint(vlen) value
//! ```
//!
//! # Point index
//!
//! A get walks the list from the top, comparing keys of nodes spread over the whole arena: a
//! cache miss for most of them once the memtable outgrows the cache (YCSB with its records in
//! a 64 MiB memtable spent a third of its time there). The index is a fixed array of buckets
//! (a power of two, sized when the memtable is made); each bucket heads a chain, through the
//! nodes' hash links, of the *newest* node of every user key hashed to it. A get hashes the
//! key, walks the chain comparing user keys (the hash link and the key share a cache line), and
//! from the newest node follows level-0 links to the newest version its sequence may see:
//! versions of one user key sit next to each other, newest first. A new version replaces the
//! old node in its chain (the old node's hash link is left as it was, so a reader standing on
//! it still reaches the rest of the chain).
//!
//! # Concurrency
//!
//! Two ways to insert, never mixed at the same time (the engine's write groups see to that):
//!
//! - [`SkipList::insert`]: one thread at a time (a write group's leader alone, WAL replay),
//!   checked with a `try_lock` of the writer state (a concurrent call panics instead of
//!   racing). Links are set with plain stores, and the last insert's predecessors are kept
//!   so in-order inserts skip the search (the splice).
//! - [`SkipList::insert_concurrent`]: any number of threads at once (the members of a write
//!   group inserting their own batches, RocksDB's `allow_concurrent_memtable_write`). Each
//!   level's link is set with a compare-and-swap; one that loses to another insert finds its
//!   neighbours again from its predecessor at that level, which is still before it (nodes are
//!   never removed). Nodes come from the arena under the writer state's lock, held only for
//!   the allocation; point-index chains change under a lock of their own. The splice is then stale: the next single-writer insert starts
//!   from the head.
//!
//! Readers take no locks. A node's entry and links are fully written before the node is
//! published with a `Release` store (or compare-and-swap) into its predecessors' links;
//! readers follow links with `Acquire` loads, so every node they reach is fully initialized.
//! Entries are never modified or freed while the list lives; only links change (atomically),
//! so a reader holding a node can always continue from it, and sees nodes inserted after it if
//! it reaches them.

use super::arena::{Arena, ALIGN};
use crate::key::{self, SequenceNumber, ValueKind};
use crate::sst::filter::key_hash;
use parking_lot::Mutex;
use std::cmp::Ordering as CmpOrdering;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Arc;

/// Towers are at most this tall.
pub(crate) const MAX_HEIGHT: usize = 12;
/// One in `BRANCHING` nodes of height `h` also reaches height `h + 1`.
const BRANCHING: u64 = 4;
const _: () = assert!(BRANCHING.is_power_of_two());
const LINK: usize = std::mem::size_of::<AtomicPtr<u8>>();
const _: () = assert!(LINK == ALIGN);

/// An internal key to search for, split once into user key and trailer.
#[derive(Clone, Copy)]
pub(crate) struct Target<'a> {
    user_key: &'a [u8],
    trailer: u64,
}

impl<'a> Target<'a> {
    /// The key `user_key` at (`seq`, `kind`).
    pub(crate) fn new(user_key: &'a [u8], seq: SequenceNumber, kind: ValueKind) -> Self {
        Target {
            user_key,
            trailer: key::pack_trailer(seq, kind),
        }
    }

    /// An encoded internal key; split like `key::compare_internal` does (a key shorter than
    /// the trailer is all user key, trailer 0).
    pub(crate) fn from_internal(ikey: &'a [u8]) -> Self {
        Target {
            user_key: key::user_key(ikey),
            trailer: key::trailer(ikey),
        }
    }
}

/// A node in a list, borrowed from it.
#[derive(Clone, Copy)]
pub(crate) struct Entry<'a> {
    node: NonNull<u8>,
    _list: PhantomData<&'a SkipList>,
}

impl<'a> Entry<'a> {
    /// The encoded internal key.
    #[inline]
    pub(crate) fn key(self) -> &'a [u8] {
        let (len, n) = read_varint(self.node);
        // SAFETY: `node` is a published node of a list borrowed for 'a (`Entry` is only made
        // by `SkipList` methods from its own nodes), so its entry bytes were fully written
        // before publication (Release/Acquire on the link we reached it by) and are immutable
        // and alive for 'a; the key occupies the `len` bytes after its varint.
        unsafe { std::slice::from_raw_parts(self.node.as_ptr().add(n), len) }
    }

    /// The value.
    #[inline]
    pub(crate) fn value(self) -> &'a [u8] {
        let (klen, n) = read_varint(self.node);
        // SAFETY: as in `key`; the value's varint follows the key, inside the entry.
        let vstart = unsafe { NonNull::new_unchecked(self.node.as_ptr().add(n + klen)) };
        let (vlen, m) = read_varint(vstart);
        // SAFETY: as in `key`; the value occupies the `vlen` bytes after its varint.
        unsafe { std::slice::from_raw_parts(vstart.as_ptr().add(m), vlen) }
    }

    /// The user key and trailer of the key.
    #[inline]
    fn parts(self) -> (&'a [u8], u64) {
        let k = self.key();
        let (user_key, trailer) = k.split_at(k.len() - key::TRAILER_LEN);
        let t = u64::from_le_bytes(trailer.try_into().expect("8-byte trailer"));
        (user_key, t)
    }

    /// Orders this node's key against `t` in internal-key order (user key ascending, trailer
    /// descending).
    #[inline]
    fn cmp(self, t: &Target<'_>) -> CmpOrdering {
        let (user_key, trailer) = self.parts();
        // Fast path: the first 8 bytes as big-endian integers order like the bytes do, and
        // usually decide. memtable_bench (16-byte keys) measured ~20% off reverse scans and a
        // few % off gets; keys with long shared prefixes pay one extra integer compare.
        if let (Some(a), Some(b)) = (user_key.first_chunk::<8>(), t.user_key.first_chunk::<8>()) {
            let (a, b) = (u64::from_be_bytes(*a), u64::from_be_bytes(*b));
            if a != b {
                return a.cmp(&b);
            }
        }
        match user_key.cmp(t.user_key) {
            CmpOrdering::Equal => t.trailer.cmp(&trailer),
            o => o,
        }
    }

    /// The user key, and the kind if it is a known one.
    pub(crate) fn user_key_and_kind(self) -> (&'a [u8], Option<ValueKind>) {
        let (user_key, trailer) = self.parts();
        (user_key, ValueKind::from_u8((trailer & 0xff) as u8))
    }

    /// The entry's sequence number.
    pub(crate) fn sequence(self) -> SequenceNumber {
        self.parts().1 >> 8
    }
}

/// Decodes the LEB128 varint at `p` (written by `insert`, so well formed and at most 10 bytes).
#[inline]
fn read_varint(p: NonNull<u8>) -> (usize, usize) {
    let mut v = 0usize;
    let mut i = 0;
    loop {
        // SAFETY: `p` points at a varint inside a published node's entry (see `Entry::key`);
        // the varint was written whole by `insert`, so every byte up to its last (high bit
        // clear) is initialized and in bounds.
        let b = unsafe { *p.as_ptr().add(i) };
        v |= usize::from(b & 0x7f) << (7 * i);
        i += 1;
        if b < 0x80 {
            return (v, i);
        }
    }
}

fn put_varint(dst: &mut [u8], mut v: usize) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        dst[i] = (v as u8) | 0x80;
        v >>= 7;
        i += 1;
    }
    dst[i] = v as u8;
    i + 1
}

fn varint_len(v: usize) -> usize {
    crate::coding::varint_length(v as u64)
}

/// Slot `i` below `node`: its link `i - skip` (or, with a point index, slot 0: its hash link).
///
/// # Safety
///
/// `node` is the head or a node of a list that outlives 'a, and has more than `i` slots.
#[inline]
unsafe fn slot<'a>(node: NonNull<u8>, i: usize) -> &'a AtomicPtr<u8> {
    // SAFETY: (caller) `node` has more than `i` slots, stored just below the node pointer,
    // 8-aligned, initialized by `init_slot` before the node was published (the head's by
    // `build`), alive as long as the list. Slots are only accessed atomically, so shared
    // references to them are fine.
    unsafe { &*slot_ptr(node, i) }
}

/// Writes the first value of slot `i` below `node`: the arena hands out uninitialized memory,
/// and no reference to a slot is made before this.
///
/// # Safety
///
/// As for [`slot`], and the node is not published yet (no other thread can see the slot).
#[inline]
unsafe fn init_slot(node: NonNull<u8>, i: usize, value: *mut u8) {
    // SAFETY: (caller) the slot is in bounds, 8-aligned and private to this thread.
    unsafe { slot_ptr(node, i).write(AtomicPtr::new(value)) }
}

/// The address of slot `i` below `node` (in bounds when the node has more than `i` slots).
#[inline]
fn slot_ptr(node: NonNull<u8>, i: usize) -> *mut AtomicPtr<u8> {
    node.as_ptr().cast::<AtomicPtr<u8>>().wrapping_sub(i + 1)
}

/// The point index's buckets: each the newest node of a chain (null: none).
struct PointIndex {
    buckets: Box<[AtomicPtr<u8>]>,
    /// `64 - log2(buckets.len())`: a hash's top bits pick its bucket.
    shift: u32,
}

impl PointIndex {
    fn new(buckets: usize) -> Self {
        let n = buckets.max(1).next_power_of_two();
        PointIndex {
            buckets: (0..n)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            shift: 64 - n.trailing_zeros(),
        }
    }

    #[inline]
    fn bucket(&self, hash: u64) -> &AtomicPtr<u8> {
        // The key hash's low half picks bloom bits; mix before taking the top bits.
        let h = (hash ^ (hash >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // `shift` is 64 when there is one bucket: `checked_shr` gives bucket 0.
        let i = h.checked_shr(self.shift).unwrap_or(0) as usize;
        &self.buckets[i]
    }

    fn bytes(&self) -> usize {
        self.buckets.len() * LINK
    }
}

/// What the single writer ([`SkipList::insert`]) holds for a whole insert, and a concurrent
/// insert only for its node's allocation.
struct WriterState {
    arena: Arena,
    rng: u64,
    /// The last inserted node's predecessor at every level, that node itself at the levels
    /// it has (all the head in an empty list). A key that goes right after that node has
    /// these predecessors too, so in-order inserts (sequential fills, WAL replay of them)
    /// skip the search from the top (RocksDB's splice).
    splice: [NonNull<u8>; MAX_HEIGHT],
}

/// An ordered multiset of (internal key, value) entries: single writer, lock-free readers.
pub(crate) struct SkipList {
    /// The head node: `MAX_HEIGHT` links and an empty entry; never compared.
    head: NonNull<u8>,
    /// Height of the tallest tower; only grows.
    max_height: AtomicUsize,
    len: AtomicUsize,
    memory: AtomicUsize,
    writer: Mutex<WriterState>,
    /// Set by a concurrent insert: the writer's splice may have nodes between its levels.
    splice_stale: AtomicBool,
    /// User key -> newest node, if the list has one (see the module comment).
    index: Option<PointIndex>,
    /// Held by a concurrent insert while it changes a point-index chain.
    index_lock: Mutex<()>,
    /// Slots below a node pointer before its link 0: 1 with an index (its hash link), else 0.
    skip: usize,
}

// SAFETY: the list owns its arena (which owns all nodes, including `head`); the raw pointers
// are only into that memory. Shared use from many threads is the design: entries are immutable
// once published, links are atomics with Release/Acquire publication (compare-and-swap for
// concurrent inserts), the arena and the single writer's state are behind a mutex, and index
// chains change under `index_lock` (concurrent inserts) or the single writer's lock.
unsafe impl Send for SkipList {}
// SAFETY: see `Send` above.
unsafe impl Sync for SkipList {}

impl SkipList {
    /// An empty list.
    pub(crate) fn new() -> Self {
        Self::build(None)
    }

    /// An empty list with a point index of about `buckets` buckets (rounded up to a power
    /// of two): [`SkipList::get`] then finds a key's versions without walking the list. Each
    /// node is one slot (8 bytes) larger.
    pub(crate) fn with_point_index(buckets: usize) -> Self {
        Self::build(Some(PointIndex::new(buckets)))
    }

    fn build(index: Option<PointIndex>) -> Self {
        let skip = usize::from(index.is_some());
        let mut arena = Arena::new();
        // Slots plus one byte so the node pointer is inside the allocation.
        let slots = (MAX_HEIGHT + skip) * LINK;
        let base = arena.allocate(slots + 1);
        // SAFETY: the allocation is `slots + 1` bytes, so the node pointer after the slots is
        // in bounds (and non-null).
        let head = unsafe { NonNull::new_unchecked(base.as_ptr().add(slots)) };
        for i in 0..MAX_HEIGHT + skip {
            // SAFETY: the head has `MAX_HEIGHT + skip` slots below it, 8-aligned (the arena's
            // alignment), seen by no other thread yet. Null: the end of every level.
            unsafe { init_slot(head, i, std::ptr::null_mut()) };
        }
        SkipList {
            head,
            max_height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            memory: AtomicUsize::new(arena.memory_usage()),
            writer: Mutex::new(WriterState {
                arena,
                rng: 0x9E37_79B9_7F4A_7C15,
                splice: [head; MAX_HEIGHT],
            }),
            splice_stale: AtomicBool::new(false),
            index,
            index_lock: Mutex::new(()),
            skip,
        }
    }

    /// Bytes of the point index's buckets (0 without one); nodes' hash links are in the arena.
    pub(crate) fn index_bytes(&self) -> usize {
        self.index.as_ref().map_or(0, PointIndex::bytes)
    }

    /// Bytes of the arena ([`SkipList::memory_usage`]) that are hash links: one slot per
    /// node and the head's (0 without an index).
    pub(crate) fn hash_link_bytes(&self) -> usize {
        match self.index {
            Some(_) => (self.len() + 1) * LINK,
            None => 0,
        }
    }

    /// Starts loading the point-index bucket of a key of hash `hash` (none without an index).
    pub(crate) fn prefetch_index(&self, hash: u64) {
        if let Some(index) = &self.index {
            super::prefetch(index.bucket(hash));
        }
    }

    /// Whether [`SkipList::get`] uses a point index (else it seeks).
    pub(crate) fn has_point_index(&self) -> bool {
        self.index.is_some()
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Arena bytes in use (see `Arena::memory_usage`).
    pub(crate) fn memory_usage(&self) -> usize {
        self.memory.load(Ordering::Relaxed)
    }

    /// The node after `node` at `level`, if any. REQUIRES: `node` is the head or a node of
    /// this list with height > `level` (everything the search functions pass).
    #[inline]
    fn next(&self, node: NonNull<u8>, level: usize) -> Option<NonNull<u8>> {
        debug_assert!(level < MAX_HEIGHT);
        // SAFETY: callers only pass the head (height MAX_HEIGHT) or nodes reached through a
        // link at `level` or above, whose height is therefore > `level`.
        let l = unsafe { slot(node, level + self.skip) };
        NonNull::new(l.load(Ordering::Acquire))
    }

    /// The hash link of `node`. REQUIRES: the list has a point index and `node` is one of its
    /// nodes (not the head).
    #[inline]
    fn hash_link(&self, node: NonNull<u8>) -> &AtomicPtr<u8> {
        debug_assert!(self.skip == 1 && node != self.head);
        // SAFETY: with an index every node has its hash link as slot 0, written (or left
        // null) by `insert` before the node was published, alive as long as the list.
        unsafe { slot(node, 0) }
    }

    fn entry(&self, node: NonNull<u8>) -> Entry<'_> {
        debug_assert!(node != self.head);
        Entry {
            node,
            _list: PhantomData,
        }
    }

    /// The first node >= `t`, filling `prev[level]` with the last node < `t` per level.
    fn find_greater_or_equal(
        &self,
        t: &Target<'_>,
        mut prev: Option<&mut [NonNull<u8>; MAX_HEIGHT]>,
    ) -> Option<NonNull<u8>> {
        let mut x = self.head;
        let mut level = self.max_height.load(Ordering::Relaxed) - 1;
        // The node known to be >= t at the level below, to skip re-comparing it.
        let mut last_ge: Option<NonNull<u8>> = None;
        loop {
            let next = self.next(x, level);
            let ahead = match next {
                Some(n) if Some(n) != last_ge => self.entry(n).cmp(t) == CmpOrdering::Less,
                _ => false,
            };
            if ahead {
                x = next.expect("checked");
            } else {
                if let Some(p) = prev.as_deref_mut() {
                    p[level] = x;
                }
                if level == 0 {
                    return next;
                }
                last_ge = next;
                level -= 1;
            }
        }
    }

    /// If `t` goes right after `splice[0]` (the last insert), its successor at level 0 (`None`
    /// when `t` goes last), which the search from the top would return; `None` otherwise.
    ///
    /// Why the rest of the splice is then right too: every level-`i` node after `splice[i]`
    /// comes after `splice[0]`, so it is at least the level-0 successor, which is >= `t`.
    fn splice_successor(
        &self,
        splice: &[NonNull<u8>; MAX_HEIGHT],
        t: &Target<'_>,
    ) -> Option<Option<NonNull<u8>>> {
        let last = splice[0];
        if last != self.head && self.entry(last).cmp(t) != CmpOrdering::Less {
            return None;
        }
        let next = self.next(last, 0);
        match next {
            Some(n) if self.entry(n).cmp(t) == CmpOrdering::Less => None,
            _ => Some(next),
        }
    }

    /// The last node < `t`, or the head.
    fn find_less_than(&self, t: &Target<'_>) -> NonNull<u8> {
        let mut x = self.head;
        let mut level = self.max_height.load(Ordering::Relaxed) - 1;
        loop {
            match self.next(x, level) {
                Some(n) if self.entry(n).cmp(t) == CmpOrdering::Less => x = n,
                _ => {
                    if level == 0 {
                        return x;
                    }
                    level -= 1;
                }
            }
        }
    }

    /// The last node, or the head if the list is empty.
    fn find_last(&self) -> NonNull<u8> {
        let mut x = self.head;
        let mut level = self.max_height.load(Ordering::Relaxed) - 1;
        loop {
            match self.next(x, level) {
                Some(n) => x = n,
                None => {
                    if level == 0 {
                        return x;
                    }
                    level -= 1;
                }
            }
        }
    }

    fn not_head(&self, node: NonNull<u8>) -> Option<NonNull<u8>> {
        (node != self.head).then_some(node)
    }

    /// The first entry >= `t`.
    pub(crate) fn seek(&self, t: &Target<'_>) -> Option<Entry<'_>> {
        self.find_greater_or_equal(t, None).map(|n| self.entry(n))
    }

    /// The newest entry of `user_key` at or below sequence `seq` (the first entry >= the
    /// target (`user_key`, `seq`, `KIND_FOR_SEEK`), if it has that user key). `hash` is
    /// `key_hash(user_key)` if the caller has it.
    pub(crate) fn get(
        &self,
        user_key: &[u8],
        seq: SequenceNumber,
        hash: Option<u64>,
    ) -> Option<Entry<'_>> {
        let t = Target::new(user_key, seq, key::KIND_FOR_SEEK);
        let Some(index) = &self.index else {
            return self.seek(&t).filter(|e| e.parts().0 == user_key);
        };
        let hash = hash.unwrap_or_else(|| key_hash(user_key));
        let mut next = index.bucket(hash).load(Ordering::Acquire);
        while let Some(node) = NonNull::new(next) {
            if self.entry(node).parts().0 == user_key {
                return self.visible_version(node, &t);
            }
            next = self.hash_link(node).load(Ordering::Acquire);
        }
        None
    }

    /// From `node`, the newest of its user key's nodes, the first version >= `t` (of the same
    /// user key): versions follow each other at level 0, newest first.
    fn visible_version(&self, mut node: NonNull<u8>, t: &Target<'_>) -> Option<Entry<'_>> {
        loop {
            let e = self.entry(node);
            let (user_key, trailer) = e.parts();
            if user_key != t.user_key {
                return None;
            }
            // Same user key: the entry is >= t when its trailer is not above t's.
            if trailer <= t.trailer {
                return Some(e);
            }
            node = self.next(node, 0)?;
        }
    }

    /// Makes `node`, just linked into the list, the indexed node of its user key if it is the
    /// newest version: it takes the place of `older` (the next node, if of the same user key)
    /// in its chain, or heads its bucket's chain. `newer` is the node before it at level 0.
    fn index_node(
        &self,
        index: &PointIndex,
        hash: u64,
        node: NonNull<u8>,
        newer: NonNull<u8>,
        older: Option<NonNull<u8>>,
    ) {
        let (user_key, _) = self.entry(node).parts();
        let same_key = |n: NonNull<u8>| n != self.head && self.entry(n).parts().0 == user_key;
        if same_key(newer) {
            // Written below a newer version (never by the engine's writes, whose sequences
            // grow): the chain keeps the newer node, from which gets walk down to this one.
            return;
        }
        let bucket = index.bucket(hash);
        let Some(older) = older.filter(|&n| same_key(n)) else {
            self.hash_link(node)
                .store(bucket.load(Ordering::Relaxed), Ordering::Relaxed);
            // Release: a reader that loads the pointer sees the node's slots and entry.
            bucket.store(node.as_ptr(), Ordering::Release);
            return;
        };
        self.hash_link(node).store(
            self.hash_link(older).load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        let mut link = bucket;
        loop {
            let current = link.load(Ordering::Relaxed);
            if current == older.as_ptr() {
                link.store(node.as_ptr(), Ordering::Release);
                return;
            }
            match NonNull::new(current) {
                Some(n) => link = self.hash_link(n),
                None => {
                    debug_assert!(false, "the newest version of a key is in its chain");
                    return;
                }
            }
        }
    }

    /// Inserts an entry for (`user_key`, `seq`, `kind`) -> `value`. An entry equal to an
    /// existing key goes before it (so it is the one `seek` finds); the engine never does that,
    /// as every write has its own sequence number.
    ///
    /// REQUIRES: no other thread is inserting into this list. Panics if one is calling this
    /// (checked with a `try_lock`, one uncontended atomic operation); readers may run
    /// concurrently.
    pub(crate) fn insert(
        &self,
        user_key: &[u8],
        seq: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
        hash: Option<u64>,
    ) {
        let mut w = self.writer.try_lock().expect(
            "SkipList::insert called concurrently: the memtable takes one writer at a time",
        );
        if self.splice_stale.load(Ordering::Relaxed) {
            w.splice = [self.head; MAX_HEIGHT];
            self.splice_stale.store(false, Ordering::Relaxed);
        }
        let t = Target::new(user_key, seq, kind);
        let indexed = self.prefetch_bucket(user_key, hash);
        let mut prev = w.splice;
        let found = match self.splice_successor(&prev, &t) {
            Some(found) => found,
            None => {
                prev = [self.head; MAX_HEIGHT];
                self.find_greater_or_equal(&t, Some(&mut prev))
            }
        };
        if let Some(n) = found {
            debug_assert!(self.entry(n).cmp(&t) != CmpOrdering::Equal, "duplicate key");
        }

        let height = random_height(&mut w.rng);
        let max = self.max_height.load(Ordering::Relaxed);
        if height > max {
            // `prev` already holds the head for the new levels. Readers that see the new height
            // before the new node find null head links there and drop a level: harmless.
            self.max_height.store(height, Ordering::Relaxed);
        }
        let node = self.new_node(&mut w.arena, &t, value, height);
        for (level, &p) in prev.iter().enumerate().take(height) {
            // SAFETY: `p` is the head (MAX_HEIGHT links) or was reached through a link at
            // `level`, so has height > `level`; both belong to this list, borrowed here.
            let prev_link = unsafe { slot(p, level + self.skip) };
            // SAFETY: `node` was made above with `height` > `level` links and is not
            // published yet. The Release store below publishes the link with the entry.
            unsafe { init_slot(node, level + self.skip, prev_link.load(Ordering::Relaxed)) };
            prev_link.store(node.as_ptr(), Ordering::Release);
        }
        w.splice = prev;
        w.splice[..height].fill(node);
        if let Some((index, hash)) = indexed {
            self.index_node(index, hash, node, prev[0], found);
        }
        // One writer (the lock above): a load and a store, not a locked read-modify-write.
        self.len
            .store(self.len.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// [`SkipList::insert`] for a thread that may be one of several inserting at once.
    ///
    /// REQUIRES: no thread is in [`SkipList::insert`] meanwhile, and no two inserts have the
    /// same key (`user_key`, `seq`, `kind`). Readers may run concurrently.
    pub(crate) fn insert_concurrent(
        &self,
        user_key: &[u8],
        seq: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
        hash: Option<u64>,
    ) {
        let t = Target::new(user_key, seq, kind);
        let indexed = self.prefetch_bucket(user_key, hash);
        // From the sequence number, not a shared generator: no state to contend for, and
        // every entry the engine writes has its own.
        let height = height_for(seq);
        let node = self.new_node(&mut self.writer.lock().arena, &t, value, height);
        for level in 0..height {
            // SAFETY: `node` was made with `height` > `level` links and is not published yet.
            unsafe { init_slot(node, level + self.skip, std::ptr::null_mut()) };
        }
        self.max_height.fetch_max(height, Ordering::Relaxed);
        let mut prev = [self.head; MAX_HEIGHT];
        let mut next = [None; MAX_HEIGHT];
        self.find_splice(&t, height, &mut prev, &mut next);
        for level in 0..height {
            // SAFETY: `node` was made with `height` > `level` links.
            let own = unsafe { slot(node, level + self.skip) };
            loop {
                let expected = next[level].map_or(std::ptr::null_mut(), NonNull::as_ptr);
                // Not published at this level yet: only a reader or insert that reached the
                // node through this level's link could read it.
                own.store(expected, Ordering::Relaxed);
                // SAFETY: `prev[level]` is the head or a node reached through a link at
                // `level` (see `find_splice`), so it has height > `level`.
                let prev_link = unsafe { slot(prev[level], level + self.skip) };
                let swapped = prev_link.compare_exchange(
                    expected,
                    node.as_ptr(),
                    Ordering::Release,
                    Ordering::Acquire,
                );
                if swapped.is_ok() {
                    break;
                }
                // Another insert got in between: its node is before or after ours, and
                // `prev[level]` is still before ours.
                let (p, n) = self.find_splice_at(&t, prev[level], level);
                prev[level] = p;
                next[level] = n;
            }
        }
        if !self.splice_stale.load(Ordering::Relaxed) {
            self.splice_stale.store(true, Ordering::Relaxed);
        }
        if let Some((index, hash)) = indexed {
            let _chains = self.index_lock.lock();
            self.index_node_concurrent(index, hash, node);
        }
        self.len.fetch_add(1, Ordering::Relaxed);
    }

    /// The point index and `user_key`'s hash, if the list has an index, with the hash's
    /// bucket loading meanwhile (the insert walks the list before it needs it).
    fn prefetch_bucket(&self, user_key: &[u8], hash: Option<u64>) -> Option<(&PointIndex, u64)> {
        self.index.as_ref().map(|index| {
            let hash = hash.unwrap_or_else(|| key_hash(user_key));
            super::prefetch(index.bucket(hash));
            (index, hash)
        })
    }

    /// A new node of `height` from `arena` for the entry (`t`, `value`): entry written, hash
    /// link (if any) null, links uninitialized (each path writes them before it publishes the
    /// node), not linked into the list.
    #[inline]
    fn new_node(
        &self,
        arena: &mut Arena,
        t: &Target<'_>,
        value: &[u8],
        height: usize,
    ) -> NonNull<u8> {
        let klen = t.user_key.len() + key::TRAILER_LEN;
        let entry_len = varint_len(klen) + klen + varint_len(value.len()) + value.len();
        let tower = (height + self.skip) * LINK;
        let base = arena.allocate(tower + entry_len);
        self.memory.store(arena.memory_usage(), Ordering::Relaxed);
        // SAFETY: the allocation is `tower + entry_len` bytes, so the node pointer is in bounds
        // (entry_len >= 2 > 0).
        let node = unsafe { NonNull::new_unchecked(base.as_ptr().add(tower)) };
        // SAFETY: `[node, node + entry_len)` is the entry part of a fresh allocation that only
        // this thread can see until the node is published, so a unique slice is fine; it does
        // not overlap the links (below `node`).
        let e = unsafe { std::slice::from_raw_parts_mut(node.as_ptr(), entry_len) };
        let mut i = put_varint(e, klen);
        e[i..i + t.user_key.len()].copy_from_slice(t.user_key);
        i += t.user_key.len();
        e[i..i + key::TRAILER_LEN].copy_from_slice(&t.trailer.to_le_bytes());
        i += key::TRAILER_LEN;
        i += put_varint(&mut e[i..], value.len());
        e[i..].copy_from_slice(value);
        if self.skip == 1 {
            // SAFETY: the node was allocated with `height + 1` slots, the hash link first, and
            // is not published yet. The index update sets it once the node is in the list.
            unsafe { init_slot(node, 0, std::ptr::null_mut()) };
        }
        node
    }

    /// For a concurrent insert of `t` whose node has `height` levels: at every level below
    /// the list's height and `height`, the last node < `t` in `prev` and its successor in
    /// `next`.
    fn find_splice(
        &self,
        t: &Target<'_>,
        height: usize,
        prev: &mut [NonNull<u8>; MAX_HEIGHT],
        next: &mut [Option<NonNull<u8>>; MAX_HEIGHT],
    ) {
        let top = self.max_height.load(Ordering::Relaxed).max(height);
        let mut x = self.head;
        for level in (0..top).rev() {
            let (p, n) = self.find_splice_at(t, x, level);
            prev[level] = p;
            next[level] = n;
            x = p;
        }
    }

    /// From `start` (the head or a node < `t` of height > `level`), the last node < `t` at
    /// `level` and its successor there.
    fn find_splice_at(
        &self,
        t: &Target<'_>,
        start: NonNull<u8>,
        level: usize,
    ) -> (NonNull<u8>, Option<NonNull<u8>>) {
        let mut x = start;
        loop {
            match self.next(x, level) {
                Some(n) if self.entry(n).cmp(t) == CmpOrdering::Less => x = n,
                next => return (x, next),
            }
        }
    }

    /// [`SkipList::index_node`] for a concurrent insert, which does not know its neighbours
    /// once other inserts ran: `node` (linked at level 0) takes the place of its user key's
    /// indexed node if it is newer, or heads its bucket's chain if the key has none.
    /// REQUIRES: `index_lock` held.
    fn index_node_concurrent(&self, index: &PointIndex, hash: u64, node: NonNull<u8>) {
        let (user_key, trailer) = self.entry(node).parts();
        let bucket = index.bucket(hash);
        let mut link = bucket;
        loop {
            let Some(n) = NonNull::new(link.load(Ordering::Relaxed)) else {
                self.hash_link(node)
                    .store(bucket.load(Ordering::Relaxed), Ordering::Relaxed);
                // Release: a reader that loads the pointer sees the node's slots and entry.
                bucket.store(node.as_ptr(), Ordering::Release);
                return;
            };
            let (indexed_key, indexed_trailer) = self.entry(n).parts();
            if indexed_key == user_key {
                // A larger trailer is a newer version: gets find ours walking down from it.
                if indexed_trailer < trailer {
                    self.hash_link(node)
                        .store(self.hash_link(n).load(Ordering::Relaxed), Ordering::Relaxed);
                    link.store(node.as_ptr(), Ordering::Release);
                }
                return;
            }
            link = self.hash_link(n);
        }
    }
}

/// The height of the node of sequence `seq` in a concurrent insert: the number of leading
/// pairs of zero bits of a mix of `seq` (so one in [`BRANCHING`] nodes of height `h` reaches
/// `h + 1`, as [`random_height`] gives).
fn height_for(seq: SequenceNumber) -> usize {
    // splitmix64's finalizer: consecutive sequence numbers give unrelated bits.
    let mut z = seq.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let per_level = BRANCHING.trailing_zeros();
    (1 + (z.trailing_zeros() / per_level) as usize).min(MAX_HEIGHT)
}

fn random_height(rng: &mut u64) -> usize {
    let mut height = 1;
    while height < MAX_HEIGHT {
        // xorshift64
        let mut x = *rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *rng = x;
        // BRANCHING is a power of two: `& (BRANCHING - 1)` is `% BRANCHING`.
        if x & (BRANCHING - 1) != 0 {
            break;
        }
        height += 1;
    }
    height
}

/// A cursor over a list that keeps the list alive. `None` is "not positioned".
pub(crate) struct Cursor {
    list: Arc<SkipList>,
    node: Option<NonNull<u8>>,
}

// SAFETY: the node pointer is into the list's arena, kept alive by the `Arc`; reading through
// it from another thread is what `SkipList: Sync` allows.
unsafe impl Send for Cursor {}
// SAFETY: `&Cursor` only reads immutable entries (see `Send`).
unsafe impl Sync for Cursor {}

impl Cursor {
    pub(crate) fn new(list: Arc<SkipList>) -> Self {
        Cursor { list, node: None }
    }

    /// The current entry, borrowed from the cursor (which keeps the list alive).
    #[inline]
    pub(crate) fn current(&self) -> Option<Entry<'_>> {
        // `node` is only ever set from `self.list`'s search functions, so it is a node of the
        // list that `self.list` keeps alive for as long as `self` is borrowed.
        self.node.map(|n| self.list.entry(n))
    }

    pub(crate) fn seek_to_first(&mut self) {
        self.node = self.list.next(self.list.head, 0);
    }

    pub(crate) fn seek_to_last(&mut self) {
        self.node = self.list.not_head(self.list.find_last());
    }

    pub(crate) fn seek(&mut self, t: &Target<'_>) {
        self.node = self.list.find_greater_or_equal(t, None);
    }

    /// REQUIRES: positioned (else stays unpositioned).
    pub(crate) fn next(&mut self) {
        self.node = self.node.and_then(|n| self.list.next(n, 0));
    }

    /// REQUIRES: positioned (else stays unpositioned).
    pub(crate) fn prev(&mut self) {
        self.node = self.current().and_then(|e| {
            let t = Target::from_internal(e.key());
            self.list.not_head(self.list.find_less_than(&t))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn heights_follow_branching() {
        let mut rng = 1u64;
        let mut counts = [0usize; MAX_HEIGHT + 1];
        for _ in 0..100_000 {
            counts[random_height(&mut rng)] += 1;
        }
        assert!(counts[1] > 70_000 && counts[1] < 80_000, "{counts:?}");
        assert!(counts[2] > 15_000 && counts[2] < 22_000, "{counts:?}");
        assert_eq!(counts[0], 0);
    }

    /// Every level holds its nodes in internal-key order, level 0 holds them all, and each
    /// key's newest version (via the point index, if any) is found.
    fn assert_well_formed(l: &SkipList, expected: &[(Vec<u8>, SequenceNumber)]) {
        let mut level0 = Vec::new();
        for level in 0..MAX_HEIGHT {
            let mut keys: Vec<(Vec<u8>, u64)> = Vec::new();
            let mut node = l.next(l.head, level);
            while let Some(n) = node {
                let (user_key, trailer) = l.entry(n).parts();
                keys.push((user_key.to_vec(), trailer >> 8));
                node = l.next(n, level);
            }
            let ordered = keys
                .windows(2)
                .all(|w| w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 > w[1].1));
            assert!(ordered, "level {level} out of order: {keys:?}");
            if level == 0 {
                level0 = keys;
            }
        }
        let mut sorted = expected.to_vec();
        sorted.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        assert_eq!(level0, sorted);
        for (user_key, seq) in expected {
            let e = l.get(user_key, *seq, None).expect("inserted key is found");
            assert_eq!((e.parts().0, e.sequence()), (&user_key[..], *seq));
            assert_eq!(e.value(), format!("{seq}").as_bytes());
        }
    }

    #[test]
    fn inserts_in_any_order_keep_every_level_sorted() {
        // Runs that go up (the splice of the last insert fits), down (it never does), jump
        // back and forth, and repeat user keys with newer sequences.
        let mut rng = 7u64;
        let mut order: Vec<u32> = (0..300).collect();
        order.extend((300..600).rev());
        order.extend((0..400).map(|i| if i % 2 == 0 { 600 + i } else { 999 - i }));
        for _ in 0..500 {
            order.push((random_height(&mut rng) as u32 * 7919 + (rng as u32 % 1000)) % 1000);
        }
        order.extend(0..50);
        for indexed in [false, true] {
            let l = if indexed {
                SkipList::with_point_index(64)
            } else {
                SkipList::new()
            };
            let mut expected = Vec::new();
            for (i, k) in order.iter().enumerate() {
                let user_key = format!("key{k:05}").into_bytes();
                let seq = i as SequenceNumber + 1;
                l.insert(
                    &user_key,
                    seq,
                    ValueKind::Put,
                    format!("{seq}").as_bytes(),
                    None,
                );
                expected.push((user_key, seq));
            }
            assert_well_formed(&l, &expected);
        }
    }

    #[test]
    fn heights_from_sequences_follow_branching() {
        let mut counts = [0usize; MAX_HEIGHT + 1];
        for seq in 1..=100_000 {
            counts[height_for(seq)] += 1;
        }
        assert!(counts[1] > 70_000 && counts[1] < 80_000, "{counts:?}");
        assert!(counts[2] > 15_000 && counts[2] < 22_000, "{counts:?}");
        assert!(counts[3] > 3_000 && counts[3] < 6_000, "{counts:?}");
        assert_eq!(counts[0], 0);
    }

    /// Threads insert at once (user keys shared between them, so versions of one key come
    /// from different threads in any order) while others read; then single-writer inserts
    /// follow, which must not trust the splice the concurrent ones made stale.
    fn concurrent_inserts_keep_the_list_whole(indexed: bool) {
        const THREADS: u64 = 4;
        const PER_THREAD: u64 = 20_000;
        let l = if indexed {
            SkipList::with_point_index(256)
        } else {
            SkipList::new()
        };
        // Single-writer inserts first, so the splice points into the list.
        let mut expected = Vec::new();
        let mut seq = 0;
        let mut serial = |l: &SkipList, expected: &mut Vec<(Vec<u8>, u64)>, user_key: String| {
            seq += 1;
            let s = 1_000_000 + seq;
            let user_key = user_key.into_bytes();
            l.insert(
                &user_key,
                s,
                ValueKind::Put,
                format!("{s}").as_bytes(),
                None,
            );
            expected.push((user_key, s));
        };
        // Their own user keys ("-s"), so the key after the last of them comes from the
        // concurrent inserts.
        for k in 0..200 {
            serial(&l, &mut expected, format!("key{:05}-s", k * 5));
        }
        let done = AtomicBool::new(false);
        let start = std::sync::Barrier::new(THREADS as usize);
        let written: Vec<Vec<(Vec<u8>, u64)>> = std::thread::scope(|scope| {
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    scope.spawn(|| {
                        // Every key a reader meets at level 0 is in order.
                        while !done.load(Ordering::Relaxed) {
                            let mut last: Option<Vec<u8>> = None;
                            let mut node = l.next(l.head, 0);
                            while let Some(n) = node {
                                let k = l.entry(n).key().to_vec();
                                if let Some(p) = &last {
                                    assert_eq!(key::compare_internal(p, &k), CmpOrdering::Less);
                                }
                                last = Some(k);
                                node = l.next(n, 0);
                            }
                        }
                    })
                })
                .collect();
            let writers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (l, start) = (&l, &start);
                    scope.spawn(move || {
                        let mut mine = Vec::new();
                        let mut rng = t + 1;
                        start.wait();
                        for i in 0..PER_THREAD {
                            // Half the threads append in step (they race for the same
                            // links at the tail), half insert anywhere.
                            let k = match t % 2 {
                                0 => i / 4,
                                _ => random_height(&mut rng) as u64 * 7919 + rng % 6_000,
                            };
                            let user_key = format!("key{:05}", k % 6_000).into_bytes();
                            // Sequences interleave across threads, as a group's members' do.
                            let s = i * THREADS + t + 1;
                            l.insert_concurrent(
                                &user_key,
                                s,
                                ValueKind::Put,
                                format!("{s}").as_bytes(),
                                None,
                            );
                            mine.push((user_key, s));
                        }
                        mine
                    })
                })
                .collect();
            let written = writers
                .into_iter()
                .map(|w| w.join().expect("writer"))
                .collect();
            done.store(true, Ordering::Relaxed);
            for r in readers {
                r.join().expect("reader");
            }
            written
        });
        expected.extend(written.into_iter().flatten());
        // Right after the last single-writer insert: the stale splice would take these.
        for c in 'a'..='z' {
            serial(&l, &mut expected, format!("key00995-s{c}"));
        }
        for k in 0..300 {
            serial(&l, &mut expected, format!("key{:05}", k * 3 + 1));
        }
        assert_eq!(l.len(), expected.len());
        assert_well_formed(&l, &expected);
    }

    // Several rounds: a lost race needs two inserts to meet at one link, which a round on a
    // busy two-core machine may not bring about.
    #[test]
    fn concurrent_inserts_keep_every_level_sorted() {
        for _ in 0..4 {
            concurrent_inserts_keep_the_list_whole(false);
        }
    }

    #[test]
    fn concurrent_inserts_keep_the_point_index_on_the_newest_version() {
        for _ in 0..4 {
            concurrent_inserts_keep_the_list_whole(true);
        }
    }

    #[test]
    fn concurrent_insert_panics_instead_of_racing() {
        let l = SkipList::new();
        let _held = l.writer.lock();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            l.insert(b"k", 1, ValueKind::Put, b"v", None)
        }));
        assert!(r.is_err());
        assert_eq!(l.len(), 0);
    }
}
