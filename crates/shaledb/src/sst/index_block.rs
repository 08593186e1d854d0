//! Index blocks: one entry per block they locate (data blocks, index partitions, filter
//! partitions), each a separator key and a block handle. See docs/format/sstable.md.
//!
//! Two encodings share the block layout of block.md (entries, restart array, count):
//!
//! ```text
//! formats 1-3: shared: varint32, non_shared: varint32, value_len: varint32,
//!              key_delta, value = BlockHandle (varint64 offset, varint64 size)
//! format 4:    shared: varint32, non_shared: varint32, key_delta, value =
//!                at a restart point: varint64 offset, varint64 size
//!                elsewhere:          varint64 size (offset = previous offset + size + 5)
//! ```
//!
//! Format-4 keys are user keys when the table's `shaledb.index.user_keys` property says so
//! (no user key's versions span two data blocks), else internal keys as before. Every
//! positioning starts decoding at a restart point, whose entry holds a whole handle, so the
//! iterator always knows the previous entry's handle when it meets a delta.

use super::block::Block;
use super::format::BLOCK_TRAILER_LEN;
use super::BlockHandle;
use crate::coding::{get_varint32, get_varint64, put_fixed32, put_varint32, put_varint64};
use crate::error::{Error, Result};
use crate::head_index::HeadIndex;
use crate::key;
use std::cmp::Ordering;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

/// How an index block's entries are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexForm {
    /// Keys are user keys compared bytewise (format 4 with `shaledb.index.user_keys`);
    /// otherwise internal keys.
    pub user_keys: bool,
    /// Format 4: no value length; entries off a restart point hold only the block size.
    pub delta_handles: bool,
}

impl IndexForm {
    /// The index blocks of formats 1 to 3: internal keys, whole handles.
    pub const LEGACY: IndexForm = IndexForm {
        user_keys: false,
        delta_handles: false,
    };

    /// Format 4, keyed by user keys (`user_keys`) or internal keys.
    pub const fn v4(user_keys: bool) -> IndexForm {
        IndexForm {
            user_keys,
            delta_handles: true,
        }
    }

    /// The key an index entry of this form stores for the internal-key separator `sep`.
    pub(crate) fn key_of(self, sep: &[u8]) -> &[u8] {
        match self.user_keys {
            true => key::user_key(sep),
            false => sep,
        }
    }
}

/// One sampled restart key in this many becomes a head of [`IndexHeads`].
const HEAD_STRIDE: usize = 8;

/// Index blocks with fewer restarts than this are searched without heads: their restart
/// arrays span a few cache lines, and a plain binary search is as fast.
const MIN_RESTARTS_FOR_HEADS: usize = 64;

/// Heads (head_index.rs) of every [`HEAD_STRIDE`]-th restart key of an index block held in
/// memory, built once when its table opens. A seek first narrows its binary search to the
/// restarts between two samples by walking one compact array of numbers, so that a lookup in
/// a large table (a 64 MiB table's index has tens of thousands of entries) touches a few
/// nearby entries instead of missing the CPU cache at every step of the search. Costs a byte
/// of memory per data block.
#[derive(Debug)]
pub(crate) struct IndexHeads {
    /// Heads of the user keys of restarts 0, `HEAD_STRIDE`, `2 * HEAD_STRIDE`, ...
    heads: HeadIndex,
    num_restarts: usize,
}

impl IndexHeads {
    /// The heads of `block` (an index block encoded as `form`); `None` if it is small, or if
    /// its sampled keys do not decode or are out of order (damage, which the search without
    /// heads then reports).
    pub(crate) fn build(block: &Block, form: IndexForm) -> Option<IndexHeads> {
        let num_restarts = block.num_restarts();
        if num_restarts < MIN_RESTARTS_FOR_HEADS {
            return None;
        }
        let it = IndexBlockIter::new(block, form);
        let mut keys = Vec::with_capacity(num_restarts.div_ceil(HEAD_STRIDE));
        for i in (0..num_restarts).step_by(HEAD_STRIDE) {
            let k = it.restart_key(i).ok()?;
            keys.push(match form.user_keys {
                true => k,
                false => key::user_key(k),
            });
        }
        let heads = HeadIndex::new(&keys)?;
        Some(IndexHeads {
            heads,
            num_restarts,
        })
    }

    /// Bytes of memory held.
    pub(crate) fn heap_size(&self) -> usize {
        self.heads.heap_size()
    }

    /// The restarts `(first, last)` between which the last restart whose key is before a
    /// target with user key `user_key` lies: sample `lo - 1` is before it, sample `hi` after.
    fn restart_bounds(&self, user_key: &[u8]) -> (usize, usize) {
        let (lo, hi) = self.heads.equal_range(user_key);
        let first = lo.saturating_sub(1) * HEAD_STRIDE;
        let last = match hi < self.heads.len() {
            true => (hi * HEAD_STRIDE).saturating_sub(1),
            false => self.num_restarts - 1,
        };
        (first, last.max(first))
    }
}

/// The handle that follows `prev` in the file: blocks are written back to back.
fn next_handle(prev: BlockHandle, size: u64) -> Option<BlockHandle> {
    let offset = prev
        .offset
        .checked_add(prev.size)?
        .checked_add(BLOCK_TRAILER_LEN as u64)?;
    Some(BlockHandle { offset, size })
}

/// Builds one index block (before compression and trailer).
#[derive(Debug)]
pub(crate) struct IndexBlockBuilder {
    form: IndexForm,
    restart_interval: usize,
    buf: Vec<u8>,
    restarts: Vec<u32>,
    /// Entries since the last restart point.
    counter: usize,
    last_key: Vec<u8>,
    last_handle: BlockHandle,
}

impl IndexBlockBuilder {
    /// A builder of `form` with a restart point every `restart_interval` entries (at least 1;
    /// the legacy form always uses 1, as formats 1 to 3 did).
    pub(crate) fn new(form: IndexForm, restart_interval: usize) -> Self {
        let restart_interval = match form.delta_handles {
            true => restart_interval.max(1),
            false => 1,
        };
        IndexBlockBuilder {
            form,
            restart_interval,
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            last_key: Vec::new(),
            last_handle: BlockHandle::default(),
        }
    }

    /// Appends an entry. Keys must be added in the block's order; the builder does not check.
    pub(crate) fn add(&mut self, key: &[u8], handle: BlockHandle) {
        let first = self.buf.is_empty();
        // A block that does not follow the previous one cannot be delta-encoded: it starts a
        // restart point instead (never the case for the blocks of one table, written back to
        // back, but the format does not depend on it).
        let follows = next_handle(self.last_handle, handle.size) == Some(handle);
        let restart = first || self.counter >= self.restart_interval || !follows;
        if restart && !first {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
        }
        let shared = match restart {
            true => 0,
            false => common_prefix(&self.last_key, key),
        };
        let non_shared = &key[shared..];
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, non_shared.len() as u32);
        if self.form.delta_handles {
            self.buf.extend_from_slice(non_shared);
            if restart {
                handle.encode_to(&mut self.buf);
            } else {
                put_varint64(&mut self.buf, handle.size);
            }
        } else {
            let mut value = Vec::with_capacity(BlockHandle::MAX_ENCODED_LEN);
            handle.encode_to(&mut value);
            put_varint32(&mut self.buf, value.len() as u32);
            self.buf.extend_from_slice(non_shared);
            self.buf.extend_from_slice(&value);
        }
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(non_shared);
        self.last_handle = handle;
        self.counter += 1;
    }

    /// Size of the block if finished now.
    pub(crate) fn size_estimate(&self) -> usize {
        self.buf.len() + self.restarts.len() * 4 + 4
    }

    /// Appends the restart array and returns the finished block; the builder is reset.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for &r in &self.restarts {
            put_fixed32(&mut out, r);
        }
        put_fixed32(&mut out, self.restarts.len() as u32);
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
        self.last_handle = BlockHandle::default();
        out
    }
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// An iterator over one index block, yielding each entry's key and decoded handle. `B` is how
/// the block is held: shared (`Arc<Block>`) or borrowed (`&Block`, for a point lookup that
/// must not touch the block's reference count).
pub struct IndexBlockIter<B: Deref<Target = Block> = Arc<Block>> {
    block: B,
    form: IndexForm,
    /// Where errors are reported: the file and the block's offset in it.
    file: Option<Arc<Path>>,
    block_offset: u64,
    /// Every handle must end (trailer included) at or before this: the table's data end.
    limit: u64,
    /// Offset of the current entry; the end of the entries when not positioned.
    current: usize,
    /// Offset just past the current entry.
    next_offset: usize,
    /// Index of the restart point at or before `current`.
    restart_index: usize,
    key: Vec<u8>,
    handle: BlockHandle,
    valid: bool,
    error: Option<Error>,
}

impl<B: Deref<Target = Block>> IndexBlockIter<B> {
    /// An iterator over `block`, an index block encoded as `form`.
    pub fn new(block: B, form: IndexForm) -> Self {
        let end = block.entries_end();
        IndexBlockIter {
            block,
            form,
            file: None,
            block_offset: 0,
            limit: u64::MAX,
            current: end,
            next_offset: end,
            restart_index: 0,
            key: Vec::new(),
            handle: BlockHandle::default(),
            valid: false,
            error: None,
        }
    }

    /// Names the file and block offset used in corruption errors.
    pub fn with_origin(mut self, file: Arc<Path>, block_offset: u64) -> Self {
        self.file = Some(file);
        self.block_offset = block_offset;
        self
    }

    /// Names only the block offset used in corruption errors (the caller names the file).
    pub(crate) fn with_block_offset(mut self, block_offset: u64) -> Self {
        self.block_offset = block_offset;
        self
    }

    /// Reports a handle whose block (with its trailer) would end past `limit` as corruption.
    pub fn with_limit(mut self, limit: u64) -> Self {
        self.limit = limit;
        self
    }

    /// Starts with `buf` (cleared) as the key buffer, so a caller reusing one buffer across
    /// lookups does not allocate; [`IndexBlockIter::into_key_buffer`] gives it back.
    pub(crate) fn with_key_buffer(mut self, mut buf: Vec<u8>) -> Self {
        buf.clear();
        self.key = buf;
        self
    }

    /// The key buffer, for reuse by the next iterator.
    pub(crate) fn into_key_buffer(self) -> Vec<u8> {
        self.key
    }

    /// True if positioned at an entry (and no error occurred).
    pub fn valid(&self) -> bool {
        self.valid && self.error.is_none()
    }

    /// The current entry's key: a user key or an internal key, as the form says.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current entry's block handle. REQUIRES: `valid()`.
    pub(crate) fn handle(&self) -> BlockHandle {
        self.handle
    }

    /// The current entry's block: its file offset and stored size (trailer excluded).
    /// REQUIRES: `valid()`.
    pub fn offset_and_size(&self) -> (u64, u64) {
        (self.handle.offset, self.handle.size)
    }

    /// The error that stopped the iterator, if any.
    pub fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }

    /// Positions at the first entry.
    pub fn seek_to_first(&mut self) {
        if self.error.is_some() {
            return;
        }
        self.seek_to_restart(0);
        self.parse_next();
    }

    /// Positions at the last entry.
    pub fn seek_to_last(&mut self) {
        if self.error.is_some() {
            return;
        }
        self.seek_to_restart(self.block.num_restarts() - 1);
        while self.parse_next() && self.next_offset < self.block.entries_end() {}
    }

    /// Positions at the first entry whose key is at or after `target`, an internal key (of
    /// which a user-keyed block compares only the user key).
    pub fn seek(&mut self, target: &[u8]) {
        self.seek_with_heads(target, None);
    }

    /// [`IndexBlockIter::seek`], narrowed first by `heads`, which must have been built from
    /// this iterator's block (heads of another block of the same size would misdirect the
    /// seek; of another size they are ignored).
    pub(crate) fn seek_with_heads(&mut self, target: &[u8], heads: Option<&IndexHeads>) {
        if self.error.is_some() {
            return;
        }
        let num_restarts = self.block.num_restarts();
        let (mut left, mut right) = match heads {
            Some(h) if h.num_restarts == num_restarts => h.restart_bounds(key::user_key(target)),
            _ => (0, num_restarts - 1),
        };
        let target = self.form.key_of(target);
        // Binary search for the last restart point whose key is < target.
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            match self.restart_key(mid) {
                Ok(k) if self.compare(k, target) == Ordering::Less => left = mid,
                Ok(_) => right = mid - 1,
                Err(at) => return self.corrupt(at, "bad entry at restart point"),
            }
        }
        self.seek_to_restart(left);
        while self.parse_next() {
            if self.compare(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    /// Moves to the next entry. REQUIRES: `valid()`.
    pub fn next(&mut self) {
        if self.valid() {
            self.parse_next();
        }
    }

    /// Moves to the previous entry: back to the restart point before the current entry,
    /// then forward (at most one restart interval of entries). REQUIRES: `valid()`.
    pub fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        let original = self.current;
        while self.block.restart_point(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.invalidate();
                return;
            }
            self.restart_index -= 1;
        }
        self.seek_to_restart(self.restart_index);
        while self.parse_next() && self.next_offset < original {}
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        match self.form.user_keys {
            true => a.cmp(b),
            false => key::compare_internal(a, b),
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
            format!("bad index entry at byte {at} of the decoded block: {what}"),
        ));
        self.invalidate();
    }

    fn invalidate(&mut self) {
        self.valid = false;
        self.current = self.block.entries_end();
        self.next_offset = self.current;
        self.key.clear();
    }

    fn seek_to_restart(&mut self, index: usize) {
        self.key.clear();
        self.restart_index = index;
        let off = self.block.restart_point(index);
        self.current = off;
        self.next_offset = off;
        self.valid = false;
    }

    /// Decodes the entry header at `p`: (shared, non_shared, value_len, header bytes);
    /// `value_len` is 0 in format 4, whose values delimit themselves.
    fn header(&self, p: usize) -> Option<(usize, usize, usize, usize)> {
        let data = self.block.data().get(..self.block.entries_end())?;
        let (shared, n1) = get_varint32(data.get(p..)?)?;
        let (non_shared, n2) = get_varint32(data.get(p + n1..)?)?;
        let (value_len, n3) = match self.form.delta_handles {
            true => (0, 0),
            false => get_varint32(data.get(p + n1 + n2..)?)?,
        };
        Some((
            shared as usize,
            non_shared as usize,
            value_len as usize,
            n1 + n2 + n3,
        ))
    }

    /// Decodes the entry at `next_offset`. Returns false at the end of the block or on error.
    fn parse_next(&mut self) -> bool {
        let p = self.next_offset;
        let end = self.block.entries_end();
        if p >= end {
            self.invalidate();
            return false;
        }
        while self.restart_index + 1 < self.block.num_restarts()
            && self.block.restart_point(self.restart_index + 1) <= p
        {
            self.restart_index += 1;
        }
        let at_restart = self.block.restart_point(self.restart_index) == p;
        let Some((shared, non_shared, value_len, header)) = self.header(p) else {
            self.corrupt(p, "truncated entry header");
            return false;
        };
        if shared > self.key.len() || (at_restart && shared != 0) {
            self.corrupt(p, "shared prefix longer than previous key");
            return false;
        }
        let key_start = p + header;
        let key_end = key_start.checked_add(non_shared).filter(|&e| e <= end);
        let Some(delta) = key_end.and_then(|e| self.block.data().get(key_start..e)) else {
            self.corrupt(p, "key runs past the end of the block");
            return false;
        };
        self.key.truncate(shared);
        self.key.extend_from_slice(delta);
        if !self.form.user_keys && key::parse_internal_key(&self.key).is_none() {
            self.corrupt(p, "malformed internal key (too short or unknown kind)");
            return false;
        }
        let value_start = key_start + non_shared;
        match self.decode_value(value_start, value_len, at_restart) {
            Ok((handle, value_end)) => {
                self.handle = handle;
                self.current = p;
                self.next_offset = value_end;
                self.valid = true;
                true
            }
            Err(what) => {
                self.corrupt(p, what);
                false
            }
        }
    }

    /// The handle stored at `start` and where the entry ends; a format-4 entry off a restart
    /// point follows the previous entry's handle (`self.handle`).
    fn decode_value(
        &self,
        start: usize,
        value_len: usize,
        at_restart: bool,
    ) -> std::result::Result<(BlockHandle, usize), &'static str> {
        let end = self.block.entries_end();
        let rest = self.block.data().get(start..end).unwrap_or(&[]);
        let (handle, len) = if !self.form.delta_handles {
            let value = rest
                .get(..value_len)
                .ok_or("entry runs past the end of the block")?;
            let h = super::format::decode_handle_value(value).ok_or("bad block handle")?;
            (h, value_len)
        } else if at_restart {
            BlockHandle::decode_from(rest).ok_or("bad block handle")?
        } else {
            let (size, n) = get_varint64(rest).ok_or("bad delta-encoded block size")?;
            let h = next_handle(self.handle, size).ok_or("delta-encoded offset overflows")?;
            (h, n)
        };
        let fits = handle
            .offset
            .checked_add(handle.size)
            .and_then(|e| e.checked_add(BLOCK_TRAILER_LEN as u64))
            .is_some_and(|e| e <= self.limit);
        if !fits {
            return Err("block handle points past the data area");
        }
        Ok((handle, start + len))
    }

    /// The full key stored at restart point `index`, without moving the iterator; `Err` with
    /// its offset if it does not decode.
    fn restart_key(&self, index: usize) -> std::result::Result<&[u8], usize> {
        let p = self.block.restart_point(index);
        let (shared, non_shared, _, header) = self.header(p).ok_or(p)?;
        if shared != 0 {
            return Err(p);
        }
        let start = p + header;
        let stop = start.checked_add(non_shared).ok_or(p)?;
        let k = self
            .block
            .data()
            .get(..self.block.entries_end())
            .and_then(|d| d.get(start..stop))
            .ok_or(p)?;
        if !self.form.user_keys && key::parse_internal_key(k).is_none() {
            return Err(p);
        }
        Ok(k)
    }
}

#[cfg(test)]
mod tests;
