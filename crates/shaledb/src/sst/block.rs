//! Blocks: sorted key/value entries with prefix-compressed keys and restart points.
//!
//! Layout (docs/format/block.md):
//!
//! ```text
//! entry*  restart_offset: fixed32 * num_restarts  num_restarts: fixed32
//! entry = shared: varint32, non_shared: varint32, value_len: varint32,
//!         key_delta: [u8; non_shared], value: [u8; value_len]
//! ```
//!
//! At a restart point `shared` is 0, so a key can be decoded there without context; that is
//! what lets `seek` binary-search the restart array and `prev` step back.
//!
//! A data block may also carry a hash index (RocksDB's `kDataBlockBinaryAndHash`): between the
//! restart array and the count, one byte per bucket naming the restart interval that holds
//! the user keys hashing there, then the bucket count; the count's top bit says it is there.
//! A get then scans one restart interval instead of binary-searching the restart array.

use crate::coding::{decode_fixed32, get_varint32, put_fixed32, put_varint32};
use crate::error::{Error, Result};
use crate::fs::MappedFile;
use crate::iter::InternalIterator;
use crate::key;
use crate::value::Value;
use std::cmp::Ordering;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

/// Builds the contents of one block (before compression and trailer).
#[derive(Debug)]
pub(crate) struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    counter: usize,
    last_key: Vec<u8>,
    num_entries: usize,
    /// Builds a hash index with this many user keys per bucket at most (data blocks only).
    hash_ratio: Option<f64>,
    /// Each user key's hash and restart interval, once per interval it has entries in.
    key_hashes: Vec<(u64, usize)>,
}

/// The top bit of a block's restart count: the block carries a hash index.
const HASH_INDEX_FLAG: u32 = 1 << 31;
/// A bucket no user key of the block hashes to.
const BUCKET_EMPTY: u8 = 255;
/// A bucket user keys of several restart intervals hash to (or one user key whose entries
/// span intervals): a get there binary-searches as without the index.
const BUCKET_COLLISION: u8 = 254;
/// Most restart points a block with a hash index may have (bucket values 0..=253).
const MAX_HASHED_RESTARTS: usize = 254;

/// What a data block's hash index says about a user key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HashLookup {
    /// The block has no hash index.
    NoIndex,
    /// The user key is in no entry of the block.
    Absent,
    /// Its bucket is shared: search the whole block.
    Collision,
    /// Its entries, if any, are all in this restart interval.
    Interval(usize),
}

impl BlockBuilder {
    /// A builder that starts a restart point every `restart_interval` entries (at least 1).
    pub(crate) fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            counter: 0,
            last_key: Vec::new(),
            num_entries: 0,
            hash_ratio: None,
            key_hashes: Vec::new(),
        }
    }

    /// A data block builder that also writes a hash index of about `util_ratio` user keys
    /// per bucket (RocksDB's `data_block_hash_table_util_ratio`). Keys must be internal keys.
    pub(crate) fn with_hash_index(mut self, util_ratio: f64) -> Self {
        self.hash_ratio = Some(util_ratio);
        self
    }

    /// Appends an entry. Keys must be added in the block's order; the builder does not check.
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        if self.hash_ratio.is_some() {
            self.note_user_key(key);
        }
        let mut shared = 0;
        if self.counter < self.restart_interval {
            let max = self.last_key.len().min(key.len());
            while shared < max && self.last_key[shared] == key[shared] {
                shared += 1;
            }
        } else {
            // Restart: the key is stored whole so it can be decoded without context.
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
        }
        let non_shared = key.len() - shared;
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, non_shared as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.counter += 1;
        self.num_entries += 1;
    }

    /// Records the user key of internal key `key` for the hash index, once per restart
    /// interval (before `key` is added; `last_key` is still the previous key).
    fn note_user_key(&mut self, key: &[u8]) {
        let user = &key[..key.len().saturating_sub(8)];
        // `add` starts a restart point at this key when the interval is full.
        let interval = match self.counter >= self.restart_interval {
            true => self.restarts.len(),
            false => self.restarts.len() - 1,
        };
        let last = &self.last_key[..self.last_key.len().saturating_sub(8)];
        if self.num_entries > 0 && last == user {
            match self.key_hashes.last() {
                Some(&(_, i)) if i == interval => return,
                Some(&(h, _)) => {
                    // The same user key in a new interval: its bucket becomes a collision.
                    self.key_hashes.push((h, interval));
                    return;
                }
                None => {}
            }
        }
        self.key_hashes
            .push((super::filter::key_hash(user), interval));
    }

    /// Gives the builder a buffer (typically the contents `finish` returned, once written) to
    /// build the next block in, so a table's data blocks reuse one allocation.
    pub(crate) fn reuse_buffer(&mut self, mut buf: Vec<u8>) {
        if self.buf.is_empty() && self.buf.capacity() < buf.capacity() {
            buf.clear();
            self.buf = buf;
        }
    }

    /// Size of the block if finished now.
    pub(crate) fn size_estimate(&self) -> usize {
        let index = self.hash_bucket_count().map_or(0, |n| n + 2);
        self.buf.len() + self.restarts.len() * 4 + 4 + index
    }

    /// True if no entry was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    /// Appends the restart array and returns the finished block contents; the builder is reset.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for &r in &self.restarts {
            put_fixed32(&mut out, r);
        }
        let mut count = self.restarts.len() as u32;
        if let Some(buckets) = self.hash_buckets() {
            out.extend_from_slice(&buckets);
            out.extend_from_slice(&(buckets.len() as u16).to_le_bytes());
            count |= HASH_INDEX_FLAG;
        }
        put_fixed32(&mut out, count);
        self.key_hashes.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
        self.num_entries = 0;
        out
    }

    /// How many buckets the hash index of the entries added has, if the block gets one.
    fn hash_bucket_count(&self) -> Option<usize> {
        let ratio = self.hash_ratio?;
        if self.num_entries == 0 || self.restarts.len() > MAX_HASHED_RESTARTS {
            return None;
        }
        // Odd: a modulus with no factor of two spreads hashes more evenly.
        let n = ((self.key_hashes.len() as f64 / ratio).ceil() as usize).max(1) | 1;
        (n <= usize::from(u16::MAX)).then_some(n)
    }

    /// The hash index's buckets for the entries added, if the builder writes one and the
    /// block can have it (entries, at most [`MAX_HASHED_RESTARTS`] restart points, at most
    /// 65,535 buckets).
    fn hash_buckets(&self) -> Option<Vec<u8>> {
        let n = self.hash_bucket_count()?;
        let mut buckets = vec![BUCKET_EMPTY; n];
        for &(h, interval) in &self.key_hashes {
            let b = &mut buckets[(h % n as u64) as usize];
            let interval = interval as u8;
            *b = match *b {
                BUCKET_EMPTY => interval,
                same if same == interval => same,
                _ => BUCKET_COLLISION,
            };
        }
        Some(buckets)
    }
}

/// A decoded (uncompressed) block. Its restart array (and hash index) was validated when it
/// was built, so iterators only have to check the entries themselves.
#[derive(Debug)]
pub struct Block {
    bytes: BlockBytes,
    /// Offset of the restart array = end of the entries.
    restarts_offset: usize,
    num_restarts: usize,
    /// Where the hash index's buckets start, and how many there are (0: no index, and the
    /// start is where the restart count is).
    hash_buckets: (usize, usize),
}

/// Where a block's bytes live: its own allocation (read, decompressed or built), or a range of
/// a mapped table file (`Options::allow_mmap_reads`, an uncompressed block: no copy).
#[derive(Debug)]
enum BlockBytes {
    Owned(Vec<u8>),
    Mapped {
        file: Arc<MappedFile>,
        start: usize,
        end: usize,
    },
}

impl Block {
    /// Validates the block's restart array. The error is a message; the caller adds the file and
    /// offset.
    pub fn new(data: Vec<u8>) -> std::result::Result<Block, String> {
        let layout = validate_layout(&data)?;
        Ok(Block {
            bytes: BlockBytes::Owned(data),
            restarts_offset: layout.restarts_offset,
            num_restarts: layout.num_restarts,
            hash_buckets: layout.hash_buckets,
        })
    }

    /// The block stored uncompressed at `start..end` of mapped table `file`, validated as
    /// [`Block::new`] does; it keeps the map alive and copies nothing.
    pub(crate) fn mapped(
        file: Arc<MappedFile>,
        start: usize,
        end: usize,
    ) -> std::result::Result<Block, String> {
        let data = file
            .bytes()
            .get(start..end)
            .ok_or_else(|| format!("block at {start}..{end} is outside the mapped file"))?;
        let layout = validate_layout(data)?;
        Ok(Block {
            bytes: BlockBytes::Mapped { file, start, end },
            restarts_offset: layout.restarts_offset,
            num_restarts: layout.num_restarts,
            hash_buckets: layout.hash_buckets,
        })
    }

    /// Size of the decoded block in bytes (its block-cache charge).
    pub fn size(&self) -> usize {
        self.data().len()
    }

    /// What the block cache charges for holding this block: its allocation (none for a
    /// mapped block: its pages are the OS page cache's) and the cache's bookkeeping.
    pub(crate) fn cache_charge(&self) -> usize {
        let allocated = match &self.bytes {
            BlockBytes::Owned(v) => v.capacity(),
            BlockBytes::Mapped { .. } => 0,
        };
        allocated + crate::cache::BLOCK_ENTRY_OVERHEAD
    }

    /// True if the block is a slice of a mapped file rather than its own allocation.
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self.bytes, BlockBytes::Mapped { .. })
    }

    /// The raw block bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        match &self.bytes {
            BlockBytes::Owned(v) => v,
            // In range: checked in `mapped`; the map never shrinks.
            BlockBytes::Mapped { file, start, end } => {
                file.bytes().get(*start..*end).unwrap_or_default()
            }
        }
    }

    /// Where the entries end (the restart array starts).
    pub(super) fn entries_end(&self) -> usize {
        self.restarts_offset
    }

    /// Restart points (at least 1).
    pub(super) fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    /// What the hash index says about `user_key` (hashed only if the block has an index).
    pub(crate) fn hash_lookup(&self, user_key: &[u8]) -> HashLookup {
        let (start, n) = self.hash_buckets;
        if n == 0 {
            return HashLookup::NoIndex;
        }
        let hash = super::filter::key_hash(user_key);
        // In range and each value valid: checked in `new`.
        match self.data().get(start + (hash % n as u64) as usize) {
            Some(&BUCKET_EMPTY) => HashLookup::Absent,
            Some(&i) if usize::from(i) < self.num_restarts => HashLookup::Interval(usize::from(i)),
            _ => HashLookup::Collision,
        }
    }

    /// The offset of restart point `i` (validated in `new`).
    pub(super) fn restart_point(&self, i: usize) -> usize {
        // In range: validated in `new`; the fallback is unreachable but keeps this panic-free.
        self.data()
            .get(self.restarts_offset + 4 * i..)
            .and_then(decode_fixed32)
            .map_or(self.restarts_offset, |r| r as usize)
    }
}

/// Where a block's parts are, as [`validate_layout`] found them.
struct Layout {
    restarts_offset: usize,
    num_restarts: usize,
    hash_buckets: (usize, usize),
}

/// Checks a block's trailer: the restart array (count, bounds, order) and, if the count says
/// so, the hash index (bucket count, bounds, every bucket naming a restart interval or
/// empty or collision).
fn validate_layout(data: &[u8]) -> std::result::Result<Layout, String> {
    let n = data.len();
    let count = n
        .checked_sub(4)
        .and_then(|p| data.get(p..))
        .and_then(decode_fixed32)
        .ok_or_else(|| format!("block of {n} bytes is too short for its restart count"))?;
    let num_restarts = (count & !HASH_INDEX_FLAG) as usize;
    if num_restarts == 0 {
        return Err("block has no restart points".to_string());
    }
    let hash_buckets = match count & HASH_INDEX_FLAG {
        0 => (n - 4, 0),
        _ => hash_index_layout(data, num_restarts)?,
    };
    // The restart array ends where the buckets start (or at the count without an index).
    let array_end = hash_buckets.0;
    let restarts_offset = num_restarts
        .checked_mul(4)
        .and_then(|b| array_end.checked_sub(b))
        .ok_or_else(|| format!("block of {n} bytes cannot hold {num_restarts} restart points"))?;
    let mut prev = 0usize;
    for i in 0..num_restarts {
        let r = data
            .get(restarts_offset + 4 * i..)
            .and_then(decode_fixed32)
            .ok_or("restart array out of bounds")? as usize;
        if (i == 0 && r != 0) || r < prev || r > restarts_offset {
            return Err(format!("restart point {i} has bad offset {r}"));
        }
        prev = r;
    }
    Ok(Layout {
        restarts_offset,
        num_restarts,
        hash_buckets,
    })
}

/// The hash index of a block of `num_restarts` restart points whose count has the flag set:
/// returns where its buckets start (the restart array ends there) and how many there are.
fn hash_index_layout(
    data: &[u8],
    num_restarts: usize,
) -> std::result::Result<(usize, usize), String> {
    let n = data.len();
    if num_restarts > MAX_HASHED_RESTARTS {
        return Err(format!(
            "block with a hash index has {num_restarts} restart points (at most {MAX_HASHED_RESTARTS})"
        ));
    }
    let buckets = n
        .checked_sub(6)
        .and_then(|p| data.get(p..p + 2))
        .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))
        .ok_or_else(|| format!("block of {n} bytes is too short for its hash index"))?;
    if buckets == 0 {
        return Err("block hash index has no buckets".to_string());
    }
    let start = (n - 6)
        .checked_sub(buckets)
        .ok_or_else(|| format!("block of {n} bytes cannot hold {buckets} hash buckets"))?;
    let bad = data[start..n - 6].iter().position(|&b| {
        usize::from(b) >= num_restarts && b != BUCKET_EMPTY && b != BUCKET_COLLISION
    });
    if let Some(i) = bad {
        return Err(format!(
            "hash bucket {i} names restart interval {} of {num_restarts}",
            data[start + i]
        ));
    }
    Ok((start, buckets))
}

/// The order of the keys in a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyOrder {
    Internal,
    Bytewise,
}

/// An iterator over one block. Keys are rebuilt from their prefix-compressed form into an
/// owned buffer; values borrow from the block. `B` is how the block is held: shared
/// (`Arc<Block>`, the default, for iterators that outlive the call) or borrowed (`&Block`, for a
/// point lookup that must not touch the block's reference count).
pub struct BlockIter<B: Deref<Target = Block> = Arc<Block>> {
    block: B,
    order: KeyOrder,
    /// Where errors are reported: the file and the block's offset in it.
    file: Option<Arc<Path>>,
    block_offset: u64,
    /// Offset of the current entry; `restarts_offset` when not positioned.
    current: usize,
    /// Offset just past the current entry.
    next_offset: usize,
    /// Index of the restart point at or before `current`.
    restart_index: usize,
    key: Vec<u8>,
    value: (usize, usize),
    valid: bool,
    error: Option<Error>,
    prev_cache: PrevCache,
}

/// The entries of one restart interval, decoded by a `prev` that had to scan forward from the
/// restart point: the following `prev` calls inside that interval restore an entry from here
/// instead of scanning again (RocksDB's block iterator does the same). The block never
/// changes, so cached entries stay right for the iterator's life.
#[derive(Default)]
struct PrevCache {
    /// The restart interval the entries belong to.
    restart_index: usize,
    /// In block order.
    entries: Vec<CachedEntry>,
    /// The entries' full keys, back to back.
    keys: Vec<u8>,
}

impl PrevCache {
    /// Empties the cache for the entries of restart interval `restart_index`.
    fn start(&mut self, restart_index: usize) {
        self.restart_index = restart_index;
        self.entries.clear();
        self.keys.clear();
    }
}

#[derive(Clone, Copy)]
struct CachedEntry {
    offset: usize,
    next_offset: usize,
    key: (usize, usize),
    value: (usize, usize),
}

impl<B: Deref<Target = Block>> BlockIter<B> {
    /// An iterator over a block whose keys are internal keys (data and index blocks).
    pub fn new(block: B) -> Self {
        Self::with_order(block, KeyOrder::Internal)
    }

    /// An iterator over a block whose keys are ordered bytewise (metaindex, properties).
    pub fn new_bytewise(block: B) -> Self {
        Self::with_order(block, KeyOrder::Bytewise)
    }

    fn with_order(block: B, order: KeyOrder) -> Self {
        let end = block.restarts_offset;
        BlockIter {
            block,
            order,
            file: None,
            block_offset: 0,
            current: end,
            next_offset: end,
            restart_index: 0,
            key: Vec::new(),
            value: (0, 0),
            valid: false,
            error: None,
            prev_cache: PrevCache::default(),
        }
    }

    /// Starts over on another block of the same file, at `block_offset`, unpositioned; keeps
    /// its buffers, key order and file name. A table iterator crossing into the next block
    /// reuses its block iterator so: no allocation per block, and no move of the whole struct
    /// (building one per block cost `readseq` about 15%, bench/results/2026-11-27-scan-blocks).
    pub fn reset_to(&mut self, block: B, block_offset: u64) {
        self.block = block;
        self.block_offset = block_offset;
        self.restart_index = 0;
        self.error = None;
        self.prev_cache.start(0);
        self.invalidate();
    }

    /// Moves to the cached entry just before the one at `original`, if the cache has it.
    fn prev_from_cache(&mut self, original: usize) -> bool {
        let cache = &self.prev_cache;
        let Ok(i) = cache.entries.binary_search_by_key(&original, |e| e.offset) else {
            return false;
        };
        let Some(e) = i.checked_sub(1).and_then(|j| cache.entries.get(j)).copied() else {
            return false;
        };
        let Some(key) = cache.keys.get(e.key.0..e.key.1) else {
            return false;
        };
        self.key.clear();
        self.key.extend_from_slice(key);
        self.current = e.offset;
        self.next_offset = e.next_offset;
        self.value = e.value;
        self.restart_index = cache.restart_index;
        self.valid = true;
        true
    }

    /// Records the entry just decoded in the prev cache.
    fn cache_current_entry(&mut self) {
        let cache = &mut self.prev_cache;
        let start = cache.keys.len();
        cache.keys.extend_from_slice(&self.key);
        cache.entries.push(CachedEntry {
            offset: self.current,
            next_offset: self.next_offset,
            key: (start, cache.keys.len()),
            value: self.value,
        });
    }

    /// Names the file and block offset used in corruption errors.
    pub fn with_origin(mut self, file: Arc<Path>, block_offset: u64) -> Self {
        self.file = Some(file);
        self.block_offset = block_offset;
        self
    }

    /// Names only the block offset used in corruption errors (the caller names the file).
    pub fn with_block_offset(mut self, block_offset: u64) -> Self {
        self.block_offset = block_offset;
        self
    }

    /// Starts with `buf` (cleared) as the key buffer, so a caller reusing one buffer across
    /// lookups does not allocate; [`BlockIter::into_key_buffer`] gives it back.
    pub fn with_key_buffer(mut self, mut buf: Vec<u8>) -> Self {
        buf.clear();
        self.key = buf;
        self
    }

    /// The key buffer, for reuse by the next iterator.
    pub fn into_key_buffer(self) -> Vec<u8> {
        self.key
    }

    /// Where the current value lies in the block's decoded bytes ([`Block::data`]).
    pub fn value_range(&self) -> std::ops::Range<usize> {
        self.value.0..self.value.1
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        match self.order {
            KeyOrder::Internal => key::compare_internal(a, b),
            KeyOrder::Bytewise => a.cmp(b),
        }
    }

    fn corrupt(&mut self, at: usize, what: &str) {
        let file = self
            .file
            .as_deref()
            .map_or_else(|| Path::new("<block>").to_path_buf(), Path::to_path_buf);
        self.error = Some(Error::corruption(
            file,
            self.block_offset,
            format!("bad block entry at byte {at} of the decoded block: {what}"),
        ));
        self.invalidate();
    }

    fn invalidate(&mut self) {
        self.valid = false;
        self.current = self.block.restarts_offset;
        self.next_offset = self.block.restarts_offset;
        self.key.clear();
        self.value = (0, 0);
    }

    fn seek_to_restart(&mut self, index: usize) {
        self.key.clear();
        self.restart_index = index;
        let off = self.block.restart_point(index);
        self.current = off;
        self.next_offset = off;
        self.valid = false;
    }

    /// Decodes the entry at `next_offset`. Returns false at the end of the block or on error.
    fn parse_next(&mut self) -> bool {
        let p = self.next_offset;
        let end = self.block.restarts_offset;
        if p >= end {
            self.invalidate();
            return false;
        }
        let data = &self.block.data()[..end];
        let Some((shared, non_shared, value_len, header)) = decode_entry_header(data, p) else {
            self.corrupt(p, "truncated entry header");
            return false;
        };
        let (shared, non_shared, value_len) =
            (shared as usize, non_shared as usize, value_len as usize);
        if shared > self.key.len() {
            self.corrupt(p, "shared prefix longer than previous key");
            return false;
        }
        let key_start = p + header;
        let Some(value_start) = key_start.checked_add(non_shared) else {
            self.corrupt(p, "key length overflow");
            return false;
        };
        let Some(value_end) = value_start.checked_add(value_len).filter(|&e| e <= end) else {
            self.corrupt(p, "entry runs past the end of the block");
            return false;
        };
        let Some(delta) = data.get(key_start..value_start) else {
            self.corrupt(p, "key runs past the end of the block");
            return false;
        };
        self.key.truncate(shared);
        self.key.extend_from_slice(delta);
        if self.order == KeyOrder::Internal && key::parse_internal_key(&self.key).is_none() {
            // Checked here, where the file and block are known, because a block read without
            // checksum verification (`ReadOptions::verify_checksums = false`) or damaged before
            // its checksum was computed can hold such a key; every reader above (get, the
            // iterators, compaction) then sees an error instead of a key it cannot interpret.
            self.corrupt(p, "malformed internal key (too short or unknown kind)");
            return false;
        }
        self.value = (value_start, value_end);
        self.current = p;
        self.next_offset = value_end;
        if let Some(next_header) = data.get(value_end) {
            // A scan decodes that header next: with large values it is lines away, and
            // loading it now overlaps the miss with the caller's work on this entry.
            crate::memtable::prefetch(next_header);
        }
        while self.restart_index + 1 < self.block.num_restarts
            && self.block.restart_point(self.restart_index + 1) <= p
        {
            self.restart_index += 1;
        }
        self.valid = true;
        true
    }

    /// Moves to the first entry `>= target` of restart interval `index` alone (a get's search
    /// where the block's hash index places the user key); unpositioned if the interval has
    /// none, without looking further.
    fn seek_in_interval(&mut self, index: usize, target: &[u8]) {
        if self.error.is_some() || index >= self.block.num_restarts {
            return;
        }
        let limit = match index + 1 < self.block.num_restarts {
            true => self.block.restart_point(index + 1),
            false => self.block.restarts_offset,
        };
        self.seek_to_restart(index);
        while self.next_offset < limit && self.parse_next() {
            if self.compare(&self.key, target) != Ordering::Less {
                return;
            }
        }
        if self.error.is_none() {
            self.invalidate();
        }
    }

    /// The full key stored at restart point `index`, without moving the iterator.
    fn restart_key(&self, index: usize) -> std::result::Result<&[u8], usize> {
        let p = self.block.restart_point(index);
        let end = self.block.restarts_offset;
        let data = &self.block.data()[..end];
        let (shared, non_shared, _, header) = decode_entry_header(data, p).ok_or(p)?;
        if shared != 0 {
            return Err(p);
        }
        let start = p + header;
        let stop = start.checked_add(non_shared as usize).ok_or(p)?;
        let k = data.get(start..stop).ok_or(p)?;
        if self.order == KeyOrder::Internal && key::parse_internal_key(k).is_none() {
            return Err(p);
        }
        Ok(k)
    }
}

/// Decodes (shared, non_shared, value_len, header_len) of the entry at `p`.
fn decode_entry_header(data: &[u8], p: usize) -> Option<(u32, u32, u32, usize)> {
    let mut pos = p;
    let (shared, n) = get_varint32(data.get(pos..)?)?;
    pos += n;
    let (non_shared, n) = get_varint32(data.get(pos..)?)?;
    pos += n;
    let (value_len, n) = get_varint32(data.get(pos..)?)?;
    pos += n;
    Some((shared, non_shared, value_len, pos - p))
}

impl<B: Deref<Target = Block> + Send> BlockIter<B> {
    /// Positions for a point lookup of internal key `target` (a data block's keys): if the
    /// block has entries of `target`'s user key at or after `target`, at the first of them, as
    /// [`seek`](InternalIterator::seek) would be; otherwise at an entry of another user key or
    /// unpositioned. Uses the block's hash index where it has one.
    pub fn seek_for_get(&mut self, target: &[u8]) {
        let user = &target[..target.len().saturating_sub(8)];
        match self.block.hash_lookup(user) {
            HashLookup::NoIndex | HashLookup::Collision => self.seek(target),
            // Not in the block: left unpositioned, as a seek past its end.
            HashLookup::Absent => self.invalidate(),
            // The first entry >= target is in that interval if the user key is in the block
            // (its entries are all there, and entries before the interval have smaller user
            // keys); if the interval has none, neither has the block.
            HashLookup::Interval(i) => self.seek_in_interval(i, target),
        }
    }
}

impl BlockIter<Arc<Block>> {
    /// The current value sharing this iterator's block (no copy). REQUIRES: `valid()`.
    pub fn pinned_value(&self) -> Option<Value> {
        if !self.valid() {
            return None;
        }
        Value::pinned(self.block.clone(), self.value.0..self.value.1)
    }
}

impl<B: Deref<Target = Block> + Send> InternalIterator for BlockIter<B> {
    fn valid(&self) -> bool {
        self.valid && self.error.is_none()
    }

    fn seek_to_first(&mut self) {
        if self.error.is_some() {
            return;
        }
        self.seek_to_restart(0);
        self.parse_next();
    }

    fn seek_to_last(&mut self) {
        if self.error.is_some() {
            return;
        }
        self.seek_to_restart(self.block.num_restarts - 1);
        while self.parse_next() && self.next_offset < self.block.restarts_offset {}
    }

    fn seek(&mut self, target: &[u8]) {
        if self.error.is_some() {
            return;
        }
        // Binary search for the last restart point whose key is < target.
        let (mut left, mut right) = (0usize, self.block.num_restarts - 1);
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            match self.restart_key(mid) {
                Ok(k) => {
                    if self.compare(k, target) == Ordering::Less {
                        left = mid;
                    } else {
                        right = mid - 1;
                    }
                }
                Err(at) => {
                    self.corrupt(at, "bad entry at restart point");
                    return;
                }
            }
        }
        self.seek_to_restart(left);
        // Linear scan to the first key >= target.
        while self.parse_next() {
            if self.compare(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    fn next(&mut self) {
        if !self.valid() {
            return;
        }
        self.parse_next();
    }

    fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        let original = self.current;
        if self.prev_from_cache(original) {
            return;
        }
        // Back up to a restart point strictly before the current entry, then scan forward,
        // caching the entries decoded on the way for the next `prev` calls.
        while self.block.restart_point(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.invalidate();
                return;
            }
            self.restart_index -= 1;
        }
        self.seek_to_restart(self.restart_index);
        self.prev_cache.start(self.restart_index);
        while self.parse_next() {
            self.cache_current_entry();
            if self.next_offset >= original {
                break;
            }
        }
    }

    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> &[u8] {
        self.block
            .data()
            .get(self.value.0..self.value.1)
            .unwrap_or(&[])
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};

    fn ikey(k: &str, seq: u64) -> Vec<u8> {
        make_internal_key(k.as_bytes(), seq, ValueKind::Put)
    }

    fn build(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in entries {
            b.add(k, v);
        }
        let est = b.size_estimate();
        let data = b.finish();
        assert_eq!(data.len(), est);
        Arc::new(Block::new(data).expect("valid block"))
    }

    fn entries(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..n)
            .map(|i| {
                (
                    ikey(&format!("key{:05}", i * 2), 7),
                    format!("v{i}").into_bytes(),
                )
            })
            .collect()
    }

    fn collect_forward(it: &mut BlockIter) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        it.seek_to_first();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        out
    }

    #[test]
    fn round_trip_with_various_restart_intervals() {
        for interval in [1, 2, 3, 16, 1000] {
            for n in [0, 1, 2, 17, 100] {
                let e = entries(n);
                let block = build(&e, interval);
                let mut it = BlockIter::new(block.clone());
                assert_eq!(collect_forward(&mut it), e, "interval {interval} n {n}");
                // Backwards.
                let mut back = Vec::new();
                it.seek_to_last();
                while it.valid() {
                    back.push((it.key().to_vec(), it.value().to_vec()));
                    it.prev();
                }
                back.reverse();
                assert_eq!(back, e, "interval {interval} n {n} backwards");
                assert!(it.status().is_ok());
            }
        }
    }

    #[test]
    fn random_moves_match_a_model_with_the_prev_cache() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(0xb10c);
        for interval in [1, 2, 3, 7, 16, 1000] {
            let e = entries(150);
            let block = build(&e, interval);
            // An iterator moved on from another block, as a table iterator crossing blocks
            // does: its key buffer and prev cache hold that block's entries until `reset_to`.
            // That block has this one's layout (same lengths, `KEY` for `key`), so a prev
            // cache kept across the reset would hand out its keys at these offsets.
            let other: Vec<_> = e
                .iter()
                .map(|(k, v)| {
                    let mut k = k.clone();
                    k[..3].make_ascii_uppercase();
                    (k, v.clone())
                })
                .collect();
            let mut it = BlockIter::new(build(&other, interval));
            it.seek_to_last();
            for _ in 0..e.len() {
                it.prev();
            }
            it.reset_to(block.clone(), 0);
            assert!(!it.valid());
            let mut pos: Option<usize> = None;
            for step in 0..3000 {
                match rng.gen_range(0..10) {
                    0 => {
                        it.seek_to_last();
                        pos = Some(e.len() - 1);
                    }
                    1 => {
                        let i = rng.gen_range(0..e.len());
                        it.seek(&e[i].0);
                        pos = Some(i);
                    }
                    2..=3 => {
                        if pos.is_none() {
                            continue;
                        }
                        it.next();
                        pos = pos.map(|p| p + 1).filter(|&p| p < e.len());
                    }
                    _ => {
                        if pos.is_none() {
                            continue;
                        }
                        it.prev();
                        pos = pos.and_then(|p| p.checked_sub(1));
                    }
                }
                match pos {
                    Some(p) => {
                        assert!(it.valid(), "interval {interval} step {step}");
                        assert_eq!(it.key(), &e[p].0[..], "interval {interval} step {step}");
                        assert_eq!(it.value(), &e[p].1[..], "interval {interval} step {step}");
                    }
                    None => assert!(!it.valid(), "interval {interval} step {step}"),
                }
            }
            assert!(it.status().is_ok());
        }
    }

    #[test]
    fn prefix_compression_shrinks_keys_and_restarts_store_full_keys() {
        let e = entries(32);
        let compressed = build(&e, 16);
        let uncompressed = build(&e, 1);
        assert!(compressed.size() < uncompressed.size());
        // Restart points: entries 0 and 16 start with shared == 0.
        assert_eq!(compressed.num_restarts, 2);
        let it = BlockIter::new(compressed.clone());
        assert_eq!(it.restart_key(1).expect("restart key"), &e[16].0[..]);
        // The first entry after a restart shares the "key000" prefix with it.
        let p = compressed.restart_point(1);
        let (shared, ..) = decode_entry_header(compressed.data(), p).expect("hdr");
        assert_eq!(shared, 0);
        let (shared, ..) = decode_entry_header(compressed.data(), 0).expect("hdr");
        assert_eq!(shared, 0);
        let second = 3 + e[0].0.len() + e[0].1.len();
        let (shared, ..) = decode_entry_header(compressed.data(), second).expect("hdr");
        assert!(shared >= 6, "shared {shared}");
    }

    #[test]
    fn seek_finds_exact_and_next_keys() {
        let e = entries(50); // keys key00000, key00002, ... key00098
        for interval in [1, 4, 16] {
            let mut it = BlockIter::new(build(&e, interval));
            for i in 0..100usize {
                it.seek(&ikey(&format!("key{i:05}"), 100));
                let want = i.div_ceil(2);
                if want < 50 {
                    assert!(it.valid());
                    assert_eq!(it.key(), &e[want].0[..], "seek {i}");
                } else {
                    assert!(!it.valid());
                }
            }
            // Same user key, older sequence than stored: lands on the next user key.
            it.seek(&ikey("key00004", 3));
            assert_eq!(it.key(), &e[3].0[..]);
            it.seek(b"");
            assert_eq!(it.key(), &e[0].0[..]);
            it.seek(&ikey("zzz", 0));
            assert!(!it.valid());
            // Mixed directions.
            it.seek(&ikey("key00010", 100));
            assert_eq!(it.key(), &e[5].0[..]);
            it.prev();
            assert_eq!(it.key(), &e[4].0[..]);
            it.prev();
            assert_eq!(it.key(), &e[3].0[..]);
            it.next();
            assert_eq!(it.key(), &e[4].0[..]);
            it.seek_to_first();
            it.prev();
            assert!(!it.valid());
            assert!(it.status().is_ok());
        }
    }

    #[test]
    fn bytewise_blocks_use_bytewise_order() {
        let e: Vec<(Vec<u8>, Vec<u8>)> = ["a", "ab", "b", "shaledb.x"]
            .iter()
            .map(|k| (k.as_bytes().to_vec(), b"v".to_vec()))
            .collect();
        let mut it = BlockIter::new_bytewise(build(&e, 2));
        it.seek(b"aa");
        assert_eq!(it.key(), b"ab");
        it.seek(b"shaledb.x");
        assert_eq!(it.key(), b"shaledb.x");
    }

    #[test]
    fn bad_blocks_are_rejected() {
        assert!(Block::new(vec![]).is_err());
        assert!(Block::new(vec![0, 0, 0, 0]).is_err()); // zero restarts
        assert!(Block::new(vec![0xff, 0xff, 0xff, 0xff]).is_err());
        let mut bad_restart = vec![5, 0, 0, 0];
        bad_restart.extend_from_slice(&1u32.to_le_bytes());
        assert!(Block::new(bad_restart).is_err());
        // Empty block: valid, no entries.
        let empty = Block::new(vec![0, 0, 0, 0, 1, 0, 0, 0]).expect("empty block");
        let mut it = BlockIter::new(Arc::new(empty));
        it.seek_to_first();
        assert!(!it.valid());
        it.seek_to_last();
        assert!(!it.valid());
        it.seek(b"x");
        assert!(!it.valid());
        assert!(it.status().is_ok());
    }

    /// Offsets of the entries of an undamaged block, with their header and key lengths.
    fn entry_layout(block: &Block) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        let mut p = 0;
        while p < block.restarts_offset {
            let (_, non_shared, value_len, header) =
                decode_entry_header(block.data(), p).expect("good header");
            out.push((p, header, non_shared as usize));
            p += header + non_shared as usize + value_len as usize;
        }
        out
    }

    fn error_detail(it: &BlockIter) -> String {
        match it.status() {
            Err(Error::Corruption {
                file,
                offset,
                detail,
            }) => {
                assert_eq!((file.as_path(), offset), (Path::new("<block>"), 0));
                detail
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    /// Scans forward and backward; returns (entries seen forward, final status is an error).
    fn scan_both_ways(block: &Arc<Block>) -> (usize, bool) {
        let mut it = BlockIter::new(block.clone());
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            it.next();
            n += 1;
            assert!(n <= 1000, "forward scan does not end");
        }
        let forward_err = it.status().is_err();
        let mut it = BlockIter::new(block.clone());
        it.seek_to_last();
        let mut m = 0;
        while it.valid() {
            it.prev();
            m += 1;
            assert!(m <= 1000, "backward scan does not end");
        }
        (n, forward_err || it.status().is_err())
    }

    #[test]
    fn corrupt_entries_become_errors_never_panics() {
        let e = entries(40);
        let good_block = build(&e, 4);
        let good = good_block.data().to_vec();
        let layout = entry_layout(&good_block);
        assert_eq!(layout.len(), 40);
        let mut detected = 0;
        let mut tried = 0;
        for i in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut d = good.clone();
                d[i] ^= flip;
                let Ok(block) = Block::new(d) else { continue };
                let block = Arc::new(block);
                tried += 1;
                let (n, failed) = scan_both_ways(&block);
                if failed {
                    detected += 1;
                    let mut it = BlockIter::new(block.clone());
                    it.seek_to_first();
                    while it.valid() {
                        it.next();
                    }
                    if it.status().is_err() {
                        assert!(error_detail(&it).starts_with("bad block entry at byte"));
                    }
                } else {
                    // Undetected damage (a value or key byte: blocks carry no checksum of
                    // their own, the table's block checksum covers that) keeps the shape.
                    assert!(n <= 40 + 4, "flip at {i}: {n} entries from 40");
                }
                let mut it = BlockIter::new(block);
                it.seek(&ikey("key00031", 1));
                assert!(!it.valid() || it.status().is_ok());
            }
        }
        assert!(
            tried > 3 * good.len() / 2,
            "{tried} of {} flips built a block",
            3 * good.len()
        );
        assert!(detected > 0);

        // Exact expectations for each kind of damage to one entry.
        let (p, header, non_shared) = layout[5];
        let kind_byte = p + header + non_shared - 8;
        for flip in [0x80u8, 0xff] {
            let mut d = good.clone();
            d[kind_byte] ^= flip;
            let block = Arc::new(Block::new(d).expect("restarts intact"));
            let mut it = BlockIter::new(block.clone());
            it.seek_to_first();
            let mut n = 0;
            while it.valid() {
                n += 1;
                it.next();
            }
            assert_eq!(n, 5, "entries before the damaged one");
            assert_eq!(
                error_detail(&it),
                format!(
                    "bad block entry at byte {p} of the decoded block: malformed internal key \
                     (too short or unknown kind)"
                )
            );
            // Backward from the end meets it too; so does a seek to it.
            assert!(scan_both_ways(&block).1);
            let mut it = BlockIter::new(block);
            it.seek(&e[5].0);
            assert!(!it.valid());
            assert!(error_detail(&it).contains("malformed internal key"));
        }
        // The entry after a restart point (shared > 0) claiming more shared bytes than the
        // previous key has.
        let (p, _, _) = layout[5];
        let mut d = good.clone();
        d[p] = 0x7f;
        let mut it = BlockIter::new(Arc::new(Block::new(d).expect("restarts intact")));
        it.seek_to_first();
        for _ in 0..5 {
            assert!(it.valid());
            it.next();
        }
        assert!(!it.valid());
        assert_eq!(
            error_detail(&it),
            format!("bad block entry at byte {p} of the decoded block: shared prefix longer than previous key")
        );
        // A value length running past the entries.
        let (p, _, _) = layout[39];
        let mut d = good.clone();
        d[p + 2] = 0x7f;
        let mut it = BlockIter::new(Arc::new(Block::new(d).expect("restarts intact")));
        it.seek_to_last();
        assert!(!it.valid());
        assert_eq!(
            error_detail(&it),
            format!("bad block entry at byte {p} of the decoded block: entry runs past the end of the block")
        );
        // A restart point whose entry claims a shared prefix: seek's binary search rejects it.
        let (p, _, _) = layout[20];
        let mut d = good.clone();
        d[p] = 1;
        let mut it = BlockIter::new(Arc::new(Block::new(d).expect("restarts intact")));
        it.seek(&e[39].0);
        assert!(!it.valid());
        assert_eq!(
            error_detail(&it),
            format!("bad block entry at byte {p} of the decoded block: bad entry at restart point")
        );
    }
}
