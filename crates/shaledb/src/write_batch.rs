//! Write batches: a group of puts and deletes applied atomically. See docs/format/wal.md.
//!
//! The batch is kept in its encoded form (`rep`), which is exactly what a WAL record holds:
//!
//! ```text
//! fixed64 sequence | fixed32 count | count x ( tag:u8 [| varint32 family] | varint key_len | key
//!                                              [| varint value_len | value]  for puts )
//! ```
//!
//! Entries of the default column family use the plain tags (the value kinds); entries of
//! another family use RocksDB's column-family tags followed by the family id.
//!
//! Keeping the encoding means writing the WAL needs no serialization step and group commit
//! is a byte concatenation.

use crate::coding::{put_length_prefixed, put_varint32, Decoder};
use crate::column_family::ColumnFamily;
use crate::key::ValueKind;
use std::borrow::Cow;

/// Record tags of entries in a column family other than the default (RocksDB's numbers).
mod cf_tag {
    pub(super) const DELETE: u8 = 4;
    pub(super) const PUT: u8 = 5;
    pub(super) const MERGE: u8 = 6;
    pub(super) const SINGLE_DELETE: u8 = 8;
    pub(super) const DELETE_RANGE: u8 = 0xE;
    /// A blob reference (RocksDB's `kTypeColumnFamilyBlobIndex`).
    pub(super) const BLOB_INDEX: u8 = 0x10;
}

/// Bytes of the batch header: fixed64 sequence, fixed32 count.
pub(crate) const BATCH_HEADER_SIZE: usize = 12;

/// The encoded batch. A newtype so `Default` yields a valid empty encoding (a header of zeros)
/// while `WriteBatch` keeps its derived `Default`.
#[derive(Debug, Clone)]
struct Rep(Vec<u8>);

impl Default for Rep {
    fn default() -> Self {
        Rep(vec![0u8; BATCH_HEADER_SIZE])
    }
}

/// A group of puts and deletes applied atomically by `Db::write`.
///
/// Entries apply in the order they were added; a later entry for the same key wins.
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    rep: Rep,
}

/// One entry of a batch, borrowed from its encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchEntry<'a> {
    /// Set `key` (first) to `value` (second).
    Put(&'a [u8], &'a [u8]),
    /// Delete `key`.
    Delete(&'a [u8]),
    /// Merge operand (second) for `key` (first); see [`MergeOperator`](crate::MergeOperator).
    Merge(&'a [u8], &'a [u8]),
    /// Single-delete `key` (see [`WriteBatch::single_delete`]).
    SingleDelete(&'a [u8]),
    /// Delete every key from the first (included) to the second (excluded).
    DeleteRange(&'a [u8], &'a [u8]),
    /// Internal: `key` (first) is set to the value a blob reference (second) points at. Only
    /// the engine writes these (`Options::separate_blobs_at_write`), in the WAL; a batch
    /// passed to `Db::write` holding one is refused.
    #[doc(hidden)]
    BlobIndex(&'a [u8], &'a [u8]),
}

impl BatchEntry<'_> {
    /// The entry as (kind, key, value); a delete's value is empty.
    pub(crate) fn parts(&self) -> (ValueKind, &[u8], &[u8]) {
        match *self {
            BatchEntry::Put(k, v) => (ValueKind::Put, k, v),
            BatchEntry::Delete(k) => (ValueKind::Delete, k, &[]),
            BatchEntry::Merge(k, v) => (ValueKind::Merge, k, v),
            BatchEntry::SingleDelete(k) => (ValueKind::SingleDelete, k, &[]),
            BatchEntry::DeleteRange(begin, end) => (ValueKind::RangeDeletion, begin, end),
            BatchEntry::BlobIndex(k, reference) => (ValueKind::BlobIndex, k, reference),
        }
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch::default()
    }

    /// An empty batch with room for one entry of `key_and_value` bytes (tag, family id and
    /// lengths included), so a single write allocates its batch once.
    pub(crate) fn for_one_entry(key_and_value: usize) -> Self {
        let mut rep = Vec::with_capacity(BATCH_HEADER_SIZE + 1 + 5 + 2 * 5 + key_and_value);
        rep.resize(BATCH_HEADER_SIZE, 0);
        WriteBatch { rep: Rep(rep) }
    }

    /// Adds "set `key` to `value`".
    ///
    /// # Panics
    /// If the batch already holds `u32::MAX` entries.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.put_slices(key.as_ref(), value.as_ref());
    }

    /// The non-generic body of [`WriteBatch::put`] (one copy, whatever the caller's types).
    fn put_slices(&mut self, key: &[u8], value: &[u8]) {
        self.put_in(0, key, value);
    }

    /// Adds "set `key` to `value` in column family `cf`".
    ///
    /// ```
    /// use shaledb::{CfOptions, Db, Options, WriteBatch, WriteOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// let index = db.create_cf("index", CfOptions::default()).unwrap();
    /// let mut batch = WriteBatch::new();
    /// batch.put(b"doc:1", b"hello world");
    /// batch.put_cf(&index, b"hello", b"doc:1"); // both or neither, even across a crash
    /// db.write(&WriteOptions::default(), &batch).unwrap();
    /// assert!(db.get_cf(&index, b"hello").unwrap().is_some());
    /// ```
    ///
    /// # Panics
    /// If the batch already holds `u32::MAX` entries.
    pub fn put_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.put_in(cf.id(), key.as_ref(), value.as_ref());
    }

    /// Adds "delete `key` from column family `cf`".
    ///
    /// # Panics
    /// If the batch already holds `u32::MAX` entries.
    pub fn delete_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>) {
        self.delete_in(cf.id(), key.as_ref());
    }

    /// Adds "merge `value` into `key`" (the family's merge operator combines it with the
    /// key's value when read).
    ///
    /// # Panics
    /// If the batch already holds `u32::MAX` entries.
    pub fn merge(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.merge_in(0, key.as_ref(), value.as_ref());
    }

    /// Adds "merge `value` into `key` in column family `cf`".
    ///
    /// # Panics
    /// If the batch already holds `u32::MAX` entries.
    pub fn merge_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.merge_in(cf.id(), key.as_ref(), value.as_ref());
    }

    /// Adds "single-delete `key`" (RocksDB's `SingleDelete`): like a delete, but in
    /// compaction it vanishes together with the put below it instead of staying as a
    /// tombstone down to the last level. Only for a key written by exactly one put since it
    /// was last deleted (or never deleted) and not merged into: as in RocksDB, mixing single
    /// deletes with several puts, merges or deletes of one key has undefined results (an
    /// older value may reappear).
    ///
    /// # Panics
    /// If the batch already holds `u32::MAX` entries.
    pub fn single_delete(&mut self, key: impl AsRef<[u8]>) {
        self.single_delete_in(0, key.as_ref());
    }

    /// Adds "single-delete `key` in column family `cf`" (see
    /// [`single_delete`](Self::single_delete)).
    ///
    /// # Panics
    /// If the batch already holds `u32::MAX` entries.
    pub fn single_delete_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>) {
        self.single_delete_in(cf.id(), key.as_ref());
    }

    /// Adds "delete every key in `[begin, end)`": one range tombstone, however many keys it
    /// covers. A range with `begin >= end` deletes nothing.
    ///
    /// ```
    /// use shaledb::{Db, Options, WriteBatch, WriteOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// db.put(b"user:7:name", b"ann").unwrap();
    /// let mut batch = WriteBatch::new();
    /// batch.delete_range(b"user:7:", b"user:7;"); // every key with the prefix "user:7:"
    /// batch.put(b"log", b"deleted user 7");
    /// db.write(&WriteOptions::default(), &batch).unwrap();
    /// assert!(db.get(b"user:7:name").unwrap().is_none());
    /// ```
    ///
    /// # Panics
    /// If the batch already holds `u32::MAX` entries.
    pub fn delete_range(&mut self, begin: impl AsRef<[u8]>, end: impl AsRef<[u8]>) {
        self.delete_range_in(0, begin.as_ref(), end.as_ref());
    }

    /// Adds "delete every key in `[begin, end)` of column family `cf`" (see
    /// [`delete_range`](Self::delete_range)).
    ///
    /// # Panics
    /// If the batch already holds `u32::MAX` entries.
    pub fn delete_range_cf(
        &mut self,
        cf: &ColumnFamily,
        begin: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) {
        self.delete_range_in(cf.id(), begin.as_ref(), end.as_ref());
    }

    /// Adds a range deletion in family `cf` (by id).
    pub(crate) fn delete_range_in(&mut self, cf: u32, begin: &[u8], end: &[u8]) {
        self.bump_count();
        self.push_tag(cf, ValueKind::RangeDeletion as u8, cf_tag::DELETE_RANGE);
        put_length_prefixed(&mut self.rep.0, begin);
        put_length_prefixed(&mut self.rep.0, end);
    }

    /// This batch with the write time `now` appended to every put's value in the families
    /// `ttl_family` names (see `clock.rs`); other entries are copied as they are.
    pub(crate) fn with_write_times(
        &self,
        ttl_family: &dyn Fn(u32) -> bool,
        now: u64,
    ) -> WriteBatch {
        let mut out = WriteBatch::new();
        for (cf, e) in self.iter_cf() {
            match e {
                BatchEntry::Put(k, v) if ttl_family(cf) => {
                    out.put_in(cf, k, &crate::clock::stamp(v, now));
                }
                e => out.push_entry(cf, e),
            }
        }
        out.set_sequence(self.sequence());
        out
    }

    /// Appends entry `e` of family `cf` (by id) as it is.
    pub(crate) fn push_entry(&mut self, cf: u32, e: BatchEntry<'_>) {
        match e {
            BatchEntry::Put(k, v) => self.put_in(cf, k, v),
            BatchEntry::Delete(k) => self.delete_in(cf, k),
            BatchEntry::Merge(k, v) => self.merge_in(cf, k, v),
            BatchEntry::SingleDelete(k) => self.single_delete_in(cf, k),
            BatchEntry::DeleteRange(b, e) => self.delete_range_in(cf, b, e),
            BatchEntry::BlobIndex(k, r) => self.blob_index_in(cf, k, r),
        }
    }

    /// Adds a single delete in family `cf` (by id).
    pub(crate) fn single_delete_in(&mut self, cf: u32, key: &[u8]) {
        self.bump_count();
        self.push_tag(cf, ValueKind::SingleDelete as u8, cf_tag::SINGLE_DELETE);
        put_length_prefixed(&mut self.rep.0, key);
    }

    /// Adds a merge operand in family `cf` (by id).
    pub(crate) fn merge_in(&mut self, cf: u32, key: &[u8], value: &[u8]) {
        self.bump_count();
        self.push_tag(cf, ValueKind::Merge as u8, cf_tag::MERGE);
        put_length_prefixed(&mut self.rep.0, key);
        put_length_prefixed(&mut self.rep.0, value);
    }

    /// Adds a put in family `cf` (by id).
    pub(crate) fn put_in(&mut self, cf: u32, key: &[u8], value: &[u8]) {
        self.bump_count();
        self.push_tag(cf, ValueKind::Put as u8, cf_tag::PUT);
        put_length_prefixed(&mut self.rep.0, key);
        put_length_prefixed(&mut self.rep.0, value);
    }

    /// Adds a blob reference `reference` (an encoded `BlobRef`) for `key` in family `cf`.
    pub(crate) fn blob_index_in(&mut self, cf: u32, key: &[u8], reference: &[u8]) {
        self.bump_count();
        self.push_tag(cf, ValueKind::BlobIndex as u8, cf_tag::BLOB_INDEX);
        put_length_prefixed(&mut self.rep.0, key);
        put_length_prefixed(&mut self.rep.0, reference);
    }

    /// Adds a delete in family `cf` (by id).
    pub(crate) fn delete_in(&mut self, cf: u32, key: &[u8]) {
        self.bump_count();
        self.push_tag(cf, ValueKind::Delete as u8, cf_tag::DELETE);
        put_length_prefixed(&mut self.rep.0, key);
    }

    /// A record's tag: the plain one in the default family, else the family tag and id.
    fn push_tag(&mut self, cf: u32, plain: u8, in_family: u8) {
        if cf == 0 {
            self.rep.0.push(plain);
        } else {
            self.rep.0.push(in_family);
            put_varint32(&mut self.rep.0, cf);
        }
    }

    /// Adds "delete `key`".
    ///
    /// # Panics
    /// If the batch already holds `u32::MAX` entries.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.delete_slice(key.as_ref());
    }

    /// The non-generic body of [`WriteBatch::delete`].
    fn delete_slice(&mut self, key: &[u8]) {
        self.delete_in(0, key);
    }

    /// Removes every entry and resets the sequence number to 0.
    pub fn clear(&mut self) {
        self.rep = Rep::default();
    }

    /// Number of entries (puts plus deletes).
    pub fn len(&self) -> usize {
        self.count() as usize
    }

    /// True if the batch has no entries.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// The encoding (header and records), as stored in a WAL record.
    pub(crate) fn data(&self) -> &[u8] {
        &self.rep.0
    }

    /// Validates an encoded batch (e.g. a WAL record) and wraps it. Checks the header, every
    /// record's kind and lengths, that nothing trails the last record, and that the number of
    /// records equals the header's count. `Err` carries a description of the problem.
    pub(crate) fn from_data(bytes: Vec<u8>) -> Result<WriteBatch, String> {
        if bytes.len() < BATCH_HEADER_SIZE {
            return Err(format!(
                "write batch too short: {} bytes, header needs {BATCH_HEADER_SIZE}",
                bytes.len()
            ));
        }
        let batch = WriteBatch { rep: Rep(bytes) };
        let expected = batch.count();
        let mut d = Decoder::new(&batch.rep.0[BATCH_HEADER_SIZE..]);
        let mut found: u64 = 0;
        while !d.is_empty() {
            let at = BATCH_HEADER_SIZE + d.position();
            decode_record(&mut d).map_err(|e| format!("{e} in record {found} at byte {at}"))?;
            found += 1;
        }
        if found != u64::from(expected) {
            return Err(format!(
                "write batch count mismatch: header says {expected}, found {found} records"
            ));
        }
        Ok(batch)
    }

    /// The sequence number of the first entry (entry `i` gets `sequence() + i`).
    pub(crate) fn sequence(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.rep.0[..8]);
        u64::from_le_bytes(b)
    }

    /// Sets the sequence number of the first entry; done by the engine at commit.
    pub(crate) fn set_sequence(&mut self, seq: u64) {
        self.rep.0[..8].copy_from_slice(&seq.to_le_bytes());
    }

    /// Appends all of `other`'s entries after this batch's (group commit). Keeps this batch's
    /// sequence number.
    ///
    /// # Panics
    /// If the combined count exceeds `u32::MAX`.
    pub fn append(&mut self, other: &WriteBatch) {
        let count = self
            .count()
            .checked_add(other.count())
            .expect("WriteBatch holds more than u32::MAX entries");
        self.set_count(count);
        self.rep
            .0
            .extend_from_slice(&other.rep.0[BATCH_HEADER_SIZE..]);
    }

    /// Bytes of the encoding; the cost of the batch in the WAL and roughly in the memtable.
    pub fn approximate_size(&self) -> usize {
        self.rep.0.len()
    }

    /// Iterates over the entries in order, in every column family (see
    /// [`iter_cf`](Self::iter_cf) for each entry's family).
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            d: Decoder::new(&self.rep.0[BATCH_HEADER_SIZE..]),
        }
    }

    /// Iterates over the entries in order with the id of each one's column family (0 is the
    /// default family; see [`ColumnFamily::id`]).
    pub fn iter_cf(&self) -> impl Iterator<Item = (u32, BatchEntry<'_>)> {
        let mut it = self.iter();
        std::iter::from_fn(move || it.next_with_family())
    }

    /// The entries encoded in bytes `start..end` of the batch (with their family ids), where
    /// both are boundaries between entries, as [`WriteBatch::append`] leaves them: the part
    /// of a write group that one member's batch brought. Out-of-range bounds give nothing.
    pub(crate) fn iter_cf_between(
        &self,
        start: usize,
        end: usize,
    ) -> impl Iterator<Item = (u32, BatchEntry<'_>)> {
        let bytes = self
            .rep
            .0
            .get(start.max(BATCH_HEADER_SIZE)..end)
            .unwrap_or(&[]);
        let mut it = BatchIter {
            d: Decoder::new(bytes),
        };
        std::iter::from_fn(move || it.next_with_family())
    }

    fn count(&self) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.rep.0[8..12]);
        u32::from_le_bytes(b)
    }

    fn set_count(&mut self, count: u32) {
        self.rep.0[8..12].copy_from_slice(&count.to_le_bytes());
    }

    fn bump_count(&mut self) {
        let count = self
            .count()
            .checked_add(1)
            .expect("WriteBatch holds more than u32::MAX entries");
        self.set_count(count);
    }
}

/// Validates an encoded batch (a WAL record payload) and wraps it; for the fuzz targets and
/// test kit (see `WriteBatch::from_data`).
pub fn write_batch_from_data(bytes: Vec<u8>) -> Result<WriteBatch, String> {
    WriteBatch::from_data(bytes)
}

/// A batch's encoding, as a WAL record holds it; for the fuzz targets and test kit.
pub fn write_batch_data(batch: &WriteBatch) -> &[u8] {
    batch.data()
}

/// The sequence number of a batch's first entry (entry `i` has `sequence + i`), as a WAL
/// record holds it; for `shale wal-dump`.
pub fn write_batch_sequence(batch: &WriteBatch) -> u64 {
    batch.sequence()
}

impl<'a> IntoIterator for &'a WriteBatch {
    type Item = BatchEntry<'a>;
    type IntoIter = BatchIter<'a>;
    fn into_iter(self) -> BatchIter<'a> {
        self.iter()
    }
}

/// Decodes one record and its family id; `Err` names what was wrong.
fn decode_record<'a>(d: &mut Decoder<'a>) -> Result<(u32, BatchEntry<'a>), String> {
    let tag = d.u8().ok_or("missing kind byte")?;
    let (cf, kind) = match tag {
        cf_tag::DELETE
        | cf_tag::PUT
        | cf_tag::MERGE
        | cf_tag::SINGLE_DELETE
        | cf_tag::DELETE_RANGE
        | cf_tag::BLOB_INDEX => {
            let cf = d
                .varint32()
                .filter(|&cf| cf != 0 && cf < crate::version::edit::MAX_COLUMN_FAMILY_ID)
                .ok_or("truncated or bad column family id")?;
            let kind = match tag {
                cf_tag::PUT => ValueKind::Put,
                cf_tag::MERGE => ValueKind::Merge,
                cf_tag::SINGLE_DELETE => ValueKind::SingleDelete,
                cf_tag::DELETE_RANGE => ValueKind::RangeDeletion,
                cf_tag::BLOB_INDEX => ValueKind::BlobIndex,
                _ => ValueKind::Delete,
            };
            (cf, kind as u8)
        }
        _ => (0, tag),
    };
    Ok((cf, decode_entry(d, kind)?))
}

/// Decodes the body of one record of value kind `kind`; `Err` names what was wrong.
fn decode_entry<'a>(d: &mut Decoder<'a>, kind: u8) -> Result<BatchEntry<'a>, String> {
    match ValueKind::from_u8(kind) {
        Some(ValueKind::Put) => {
            let key = d.length_prefixed().ok_or("truncated or bad put key")?;
            let value = d.length_prefixed().ok_or("truncated or bad put value")?;
            Ok(BatchEntry::Put(key, value))
        }
        Some(ValueKind::Delete) => {
            let key = d.length_prefixed().ok_or("truncated or bad delete key")?;
            Ok(BatchEntry::Delete(key))
        }
        Some(ValueKind::SingleDelete) => {
            let key = d
                .length_prefixed()
                .ok_or("truncated or bad single delete key")?;
            Ok(BatchEntry::SingleDelete(key))
        }
        Some(ValueKind::Merge) => {
            let key = d.length_prefixed().ok_or("truncated or bad merge key")?;
            let value = d
                .length_prefixed()
                .ok_or("truncated or bad merge operand")?;
            Ok(BatchEntry::Merge(key, value))
        }
        Some(ValueKind::RangeDeletion) => {
            let begin = d
                .length_prefixed()
                .ok_or("truncated or bad range deletion start")?;
            let end = d
                .length_prefixed()
                .ok_or("truncated or bad range deletion end")?;
            Ok(BatchEntry::DeleteRange(begin, end))
        }
        Some(ValueKind::BlobIndex) => {
            let key = d
                .length_prefixed()
                .ok_or("truncated or bad blob index key")?;
            let reference = d
                .length_prefixed()
                .ok_or("truncated or bad blob reference")?;
            Ok(BatchEntry::BlobIndex(key, reference))
        }
        None => Err(format!("unknown record kind {kind}")),
    }
}

/// Iterator over a batch's entries, from [`WriteBatch::iter`].
///
/// Batches built through the API or read back from a WAL always decode fully;
/// should the bytes be malformed anyway, iteration stops instead of panicking.
#[derive(Debug, Clone)]
pub struct BatchIter<'a> {
    d: Decoder<'a>,
}

impl<'a> BatchIter<'a> {
    /// The next entry with its family id.
    pub(crate) fn next_with_family(&mut self) -> Option<(u32, BatchEntry<'a>)> {
        if self.d.is_empty() {
            return None;
        }
        match decode_record(&mut self.d) {
            Ok(e) => Some(e),
            Err(_) => {
                // Unreachable for validated batches; end iteration rather than loop or panic.
                self.d = Decoder::new(&[]);
                None
            }
        }
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = BatchEntry<'a>;
    fn next(&mut self) -> Option<BatchEntry<'a>> {
        self.next_with_family().map(|(_, e)| e)
    }
}

/// A batch handed to [`Db::write`](crate::Db::write) by value is moved into the write queue.
impl From<WriteBatch> for Cow<'_, WriteBatch> {
    fn from(batch: WriteBatch) -> Self {
        Cow::Owned(batch)
    }
}

/// A batch lent to [`Db::write`](crate::Db::write) is copied, so the caller keeps it.
impl<'a> From<&'a WriteBatch> for Cow<'a, WriteBatch> {
    fn from(batch: &'a WriteBatch) -> Self {
        Cow::Borrowed(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coding::{put_fixed32, put_fixed64, put_varint64};

    fn encode_header(dst: &mut Vec<u8>, seq: u64, count: u32) {
        put_fixed64(dst, seq);
        put_fixed32(dst, count);
    }

    fn entries(b: &WriteBatch) -> Vec<(bool, Vec<u8>, Vec<u8>)> {
        b.iter()
            .map(|e| match e {
                BatchEntry::Put(k, v) => (true, k.to_vec(), v.to_vec()),
                BatchEntry::Delete(k) => (false, k.to_vec(), Vec::new()),
                BatchEntry::Merge(..)
                | BatchEntry::SingleDelete(..)
                | BatchEntry::DeleteRange(..)
                | BatchEntry::BlobIndex(..) => {
                    panic!("no merges or single deletes in these tests")
                }
            })
            .collect()
    }

    #[test]
    fn merges_and_family_entries_encode_with_rocksdb_tags() {
        let mut b = WriteBatch::new();
        b.merge(b"a", b"x");
        b.merge_in(3, b"c", b"z");
        b.put_in(3, b"p", b"");
        b.delete_in(3, b"d");
        b.delete_range(b"f", b"gg");
        b.delete_range_in(3, b"", b"z");
        let mut want = Vec::new();
        encode_header(&mut want, 0, 6);
        want.extend_from_slice(&[2, 1, b'a', 1, b'x']);
        want.extend_from_slice(&[6, 3, 1, b'c', 1, b'z']);
        want.extend_from_slice(&[5, 3, 1, b'p', 0]);
        want.extend_from_slice(&[4, 3, 1, b'd']);
        want.extend_from_slice(&[0xF, 1, b'f', 2, b'g', b'g']);
        want.extend_from_slice(&[0xE, 3, 0, 1, b'z']);
        assert_eq!(b.data(), &want[..]);
        let back = WriteBatch::from_data(want).expect("valid");
        let got: Vec<(u32, BatchEntry<'_>)> = back.iter_cf().collect();
        assert_eq!(
            got,
            vec![
                (0, BatchEntry::Merge(b"a", b"x")),
                (3, BatchEntry::Merge(b"c", b"z")),
                (3, BatchEntry::Put(b"p", b"")),
                (3, BatchEntry::Delete(b"d")),
                (0, BatchEntry::DeleteRange(b"f", b"gg")),
                (3, BatchEntry::DeleteRange(b"", b"z")),
            ]
        );
        // A family tag naming family 0 is malformed (the default family uses the plain tags).
        let mut bad = Vec::new();
        encode_header(&mut bad, 0, 1);
        bad.extend_from_slice(&[5, 0, 1, b'p', 0]);
        assert!(WriteBatch::from_data(bad).is_err());
    }

    #[test]
    fn blob_references_encode_with_rocksdb_blob_index_tags() {
        let mut b = WriteBatch::new();
        b.blob_index_in(0, b"k", &[7, 9]);
        b.blob_index_in(2, b"q", &[1]);
        let mut want = Vec::new();
        encode_header(&mut want, 0, 2);
        want.extend_from_slice(&[3, 1, b'k', 2, 7, 9]);
        want.extend_from_slice(&[0x10, 2, 1, b'q', 1, 1]);
        assert_eq!(b.data(), &want[..]);
        let back = WriteBatch::from_data(want.clone()).expect("valid");
        let got: Vec<(u32, BatchEntry<'_>)> = back.iter_cf().collect();
        assert_eq!(
            got,
            vec![
                (0, BatchEntry::BlobIndex(b"k", &[7, 9])),
                (2, BatchEntry::BlobIndex(b"q", &[1])),
            ]
        );
        // A reference cut short is refused.
        let mut cut = want;
        cut.truncate(cut.len() - 1);
        assert!(WriteBatch::from_data(cut).is_err());
    }

    #[test]
    fn empty_and_default_are_valid() {
        for b in [WriteBatch::new(), WriteBatch::default()] {
            assert!(b.is_empty());
            assert_eq!(b.len(), 0);
            assert_eq!(b.sequence(), 0);
            assert_eq!(b.data(), &[0u8; 12]);
            assert_eq!(b.iter().count(), 0);
            let c = WriteBatch::from_data(b.data().to_vec()).expect("valid");
            assert!(c.is_empty());
        }
    }

    #[test]
    fn round_trip() {
        let mut b = WriteBatch::new();
        b.put(b"k1", b"v1");
        b.delete(b"k2");
        b.put(b"", b"");
        let big = vec![7u8; 300];
        b.put(&big, &big);
        b.delete(b"");
        b.set_sequence(0x0102_0304_0506);
        assert_eq!(b.len(), 5);
        assert!(!b.is_empty());
        assert_eq!(b.approximate_size(), b.data().len());
        let expected = vec![
            (true, b"k1".to_vec(), b"v1".to_vec()),
            (false, b"k2".to_vec(), Vec::new()),
            (true, Vec::new(), Vec::new()),
            (true, big.clone(), big.clone()),
            (false, Vec::new(), Vec::new()),
        ];
        assert_eq!(entries(&b), expected);
        let c = WriteBatch::from_data(b.data().to_vec()).expect("valid");
        assert_eq!(c.sequence(), 0x0102_0304_0506);
        assert_eq!(c.len(), 5);
        assert_eq!(entries(&c), expected);
        assert_eq!((&c).into_iter().count(), 5);

        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.sequence(), 0);
        assert_eq!(b.data().len(), BATCH_HEADER_SIZE);
    }

    #[test]
    fn exact_encoding() {
        let mut b = WriteBatch::new();
        b.set_sequence(5);
        b.put(b"a", b"xy");
        b.delete(b"b");
        let mut want = Vec::new();
        encode_header(&mut want, 5, 2);
        want.extend_from_slice(&[1, 1, b'a', 2, b'x', b'y', 0, 1, b'b']);
        assert_eq!(b.data(), &want[..]);
    }

    #[test]
    fn append_concatenates() {
        let mut a = WriteBatch::new();
        a.set_sequence(10);
        a.put(b"a", b"1");
        let mut b = WriteBatch::new();
        b.set_sequence(99);
        b.delete(b"b");
        b.put(b"c", b"3");
        a.append(&b);
        a.append(&WriteBatch::new());
        assert_eq!(a.sequence(), 10);
        assert_eq!(a.len(), 3);
        assert_eq!(
            entries(&a),
            vec![
                (true, b"a".to_vec(), b"1".to_vec()),
                (false, b"b".to_vec(), Vec::new()),
                (true, b"c".to_vec(), b"3".to_vec()),
            ]
        );
        assert!(WriteBatch::from_data(a.data().to_vec()).is_ok());
    }

    #[test]
    fn count_mismatch_is_rejected() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v");
        let mut data = b.data().to_vec();
        data[8] = 2;
        let e = WriteBatch::from_data(data.clone()).expect_err("too few records");
        assert!(e.contains("count"), "{e}");
        data[8] = 0;
        assert!(WriteBatch::from_data(data).is_err());
    }

    #[test]
    fn truncated_data_is_rejected() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        b.delete(b"other");
        let data = b.data().to_vec();
        for cut in 0..data.len() {
            assert!(
                WriteBatch::from_data(data[..cut].to_vec()).is_err(),
                "cut at {cut} accepted"
            );
        }
        assert!(WriteBatch::from_data(data).is_ok());
    }

    #[test]
    fn bad_kind_and_bad_lengths_are_rejected() {
        let mut data = Vec::new();
        encode_header(&mut data, 1, 1);
        // 3 is a blob reference since separate_blobs_at_write; 4 and up are family tags
        // needing a family; 0x7f is nothing.
        data.extend_from_slice(&[0x7f, 1, b'k']);
        let e = WriteBatch::from_data(data).expect_err("bad kind");
        assert!(e.contains("kind"), "{e}");

        // A key length far beyond the data, and an overlong varint.
        let mut data = Vec::new();
        encode_header(&mut data, 1, 1);
        data.push(0);
        put_varint64(&mut data, u64::MAX);
        assert!(WriteBatch::from_data(data).is_err());
        let mut data = Vec::new();
        encode_header(&mut data, 1, 1);
        data.push(0);
        data.extend_from_slice(&[0xff; 11]);
        assert!(WriteBatch::from_data(data).is_err());

        // Trailing garbage after the counted records.
        let mut b = WriteBatch::new();
        b.delete(b"k");
        let mut data = b.data().to_vec();
        data.push(9);
        assert!(WriteBatch::from_data(data).is_err());
    }

    #[test]
    fn random_bytes_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for _ in 0..2000 {
            let len = rng.gen_range(0..64);
            let mut data: Vec<u8> = (0..len).map(|_| rng.gen_range(0..4)).collect();
            if data.len() >= 12 {
                data[9..12].fill(0);
            }
            if let Ok(b) = WriteBatch::from_data(data) {
                assert_eq!(b.iter().count(), b.len());
            }
        }
    }
}
