//! Internal keys: a user key followed by an 8-byte trailer packing the sequence number and the
//! value kind.
//!
//! Layout: `user_key ++ fixed64_le((sequence << 8) | kind)`. Internal keys order by user key
//! ascending (bytewise), then by sequence number descending, then by kind descending, so the
//! newest version of a key comes first. Sequence numbers are at most 2^56 - 1.

use std::cmp::Ordering;

/// A sequence number: every write gets the next one; snapshots pin one.
pub(crate) type SequenceNumber = u64;

/// The largest sequence number that fits in the trailer.
pub const MAX_SEQUENCE: SequenceNumber = (1 << 56) - 1;

/// Bytes of the trailer after the user key.
pub(crate) const TRAILER_LEN: usize = 8;

/// What an internal key records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key was deleted at this sequence number.
    Delete = 0,
    /// A value was written at this sequence number.
    Put = 1,
    /// A merge operand was written at this sequence number (see `merge.rs`).
    Merge = 2,
    /// A put whose value lives in a blob file: the entry's value is a blob reference
    /// (`blob::BlobRef`). Only tables hold it (flush and compaction write it); below the
    /// seek kind like every point kind.
    BlobIndex = 3,
    /// A single delete (RocksDB's `SingleDelete`): a tombstone that, in compaction, vanishes
    /// together with the one put below it.
    SingleDelete = 7,
    /// A range tombstone (RocksDB's `kTypeRangeDeletion`): never a point entry; it appears in
    /// range-deletion blocks (key: start of the range, value: its exclusive end) and in file
    /// bounds (see `range_del.rs`).
    RangeDeletion = 0xF,
}

/// The kind used when building a seek target: the highest kind, so a seek for sequence `s`
/// lands on the first entry with sequence <= `s`. (Index separators written before merge
/// operands existed carry kind 1 with the largest sequence number; they still sort after
/// every entry of their user key, so old tables read the same.)
pub(crate) const KIND_FOR_SEEK: ValueKind = ValueKind::SingleDelete;

impl ValueKind {
    /// Decodes a kind byte; `None` for unknown kinds (corruption).
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            2 => Some(ValueKind::Merge),
            3 => Some(ValueKind::BlobIndex),
            7 => Some(ValueKind::SingleDelete),
            0xF => Some(ValueKind::RangeDeletion),
            _ => None,
        }
    }

    /// True for the kinds that delete the key (delete and single delete).
    pub fn is_deletion(self) -> bool {
        matches!(self, ValueKind::Delete | ValueKind::SingleDelete)
    }
}

/// Packs a sequence number and a kind into the trailer value.
#[inline]
pub(crate) fn pack_trailer(seq: SequenceNumber, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQUENCE);
    (seq << 8) | kind as u64
}

/// Appends the internal key for (`user_key`, `seq`, `kind`) to `dst`.
pub(crate) fn append_internal_key(
    dst: &mut Vec<u8>,
    user_key: &[u8],
    seq: SequenceNumber,
    kind: ValueKind,
) {
    dst.reserve(user_key.len() + TRAILER_LEN);
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// Builds an owned internal key.
pub fn make_internal_key(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut v, user_key, seq, kind);
    v
}

/// Inline capacity of a [`LookupKey`]: user keys up to `LOOKUP_KEY_INLINE - TRAILER_LEN` bytes
/// are built on the stack; longer ones allocate once.
pub(crate) const LOOKUP_KEY_INLINE: usize = 128;

/// The internal key a point read searches for: (`user_key`, read sequence, `KIND_FOR_SEEK`).
/// Built on the stack for short keys, so a `get` allocates nothing to search memtables and
/// tables.
pub struct LookupKey {
    repr: LookupRepr,
}

enum LookupRepr {
    Inline {
        buf: [u8; LOOKUP_KEY_INLINE],
        len: usize,
    },
    Heap(Vec<u8>),
}

impl LookupKey {
    /// The lookup key for `user_key` as of sequence `seq`.
    pub fn new(user_key: &[u8], seq: SequenceNumber) -> Self {
        let trailer = pack_trailer(seq, KIND_FOR_SEEK).to_le_bytes();
        let len = user_key.len() + TRAILER_LEN;
        let repr = if len <= LOOKUP_KEY_INLINE {
            let mut buf = [0u8; LOOKUP_KEY_INLINE];
            buf[..user_key.len()].copy_from_slice(user_key);
            buf[user_key.len()..len].copy_from_slice(&trailer);
            LookupRepr::Inline { buf, len }
        } else {
            LookupRepr::Heap(make_internal_key(user_key, seq, KIND_FOR_SEEK))
        };
        LookupKey { repr }
    }

    /// The encoded internal key.
    #[inline]
    pub fn internal_key(&self) -> &[u8] {
        match &self.repr {
            LookupRepr::Inline { buf, len } => &buf[..*len],
            LookupRepr::Heap(v) => v,
        }
    }

    /// The user key part.
    #[inline]
    pub fn user_key(&self) -> &[u8] {
        user_key(self.internal_key())
    }

    /// The read sequence number.
    #[inline]
    pub fn sequence(&self) -> SequenceNumber {
        trailer(self.internal_key()) >> 8
    }

    /// True if the key lives on the heap (only for user keys longer than the inline buffer).
    #[doc(hidden)]
    pub fn is_on_heap(&self) -> bool {
        matches!(self.repr, LookupRepr::Heap(_))
    }
}

impl std::fmt::Debug for LookupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LookupKey")
            .field("user_key", &String::from_utf8_lossy(self.user_key()))
            .field("sequence", &self.sequence())
            .finish()
    }
}

/// An internal key split into its parts. Borrowed from the encoded bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedInternalKey<'a> {
    /// The caller's key.
    pub user_key: &'a [u8],
    /// When it was written.
    pub sequence: SequenceNumber,
    /// Put or delete.
    pub kind: ValueKind,
}

/// Splits an encoded internal key; `None` if it is shorter than the trailer or has an unknown
/// kind byte.
#[inline]
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedInternalKey<'_>> {
    let split = ikey.len().checked_sub(TRAILER_LEN)?;
    let (user_key, trailer) = ikey.split_at(split);
    let t = u64::from_le_bytes(trailer.try_into().ok()?);
    let kind = ValueKind::from_u8((t & 0xff) as u8)?;
    Some(ParsedInternalKey {
        user_key,
        sequence: t >> 8,
        kind,
    })
}

/// The user-key part of an internal key. Keys shorter than the trailer (only possible from
/// corrupt input, which parsing rejects elsewhere) yield the whole slice.
#[inline]
pub(crate) fn user_key(ikey: &[u8]) -> &[u8] {
    match ikey.len().checked_sub(TRAILER_LEN) {
        Some(n) => &ikey[..n],
        None => ikey,
    }
}

/// The trailer of an internal key (0 if too short).
#[inline]
pub(crate) fn trailer(ikey: &[u8]) -> u64 {
    match ikey.len().checked_sub(TRAILER_LEN) {
        Some(n) => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&ikey[n..]);
            u64::from_le_bytes(b)
        }
        None => 0,
    }
}

/// Orders two encoded internal keys: user key ascending, then trailer descending.
#[inline]
pub(crate) fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    match user_key(a).cmp(user_key(b)) {
        Ordering::Equal => trailer(b).cmp(&trailer(a)),
        o => o,
    }
}

/// An owned, encoded internal key whose `Ord` is the internal-key order. Used as the memtable's
/// skiplist key and wherever an internal key must be kept.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct InternalKey(pub Vec<u8>);

impl InternalKey {
    /// Builds the key for (`user_key`, `seq`, `kind`).
    pub fn new(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Self {
        InternalKey(make_internal_key(user_key, seq, kind))
    }
    /// The encoded bytes.
    pub fn encoded(&self) -> &[u8] {
        &self.0
    }
    /// The user key part.
    pub fn user_key(&self) -> &[u8] {
        user_key(&self.0)
    }
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(&self.0, &other.0)
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Debug for InternalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match parse_internal_key(&self.0) {
            Some(p) => write!(
                f,
                "{:?}@{}:{:?}",
                String::from_utf8_lossy(p.user_key),
                p.sequence,
                p.kind
            ),
            None => write!(f, "<bad ikey {:?}>", self.0),
        }
    }
}

/// Returns a short key `k` with `start <= k < limit` (by user key), used for index separators.
/// Works on user keys; the caller appends a trailer.
pub(crate) fn shortest_separator(start: &[u8], limit: &[u8]) -> Vec<u8> {
    let min_len = start.len().min(limit.len());
    let mut diff = 0;
    while diff < min_len && start[diff] == limit[diff] {
        diff += 1;
    }
    if diff < min_len {
        let b = start[diff];
        if b < 0xff && b + 1 < limit[diff] {
            let mut out = start[..=diff].to_vec();
            out[diff] = b + 1;
            return out;
        }
    }
    start.to_vec()
}

/// Returns a short key `k >= key`, used for the last index entry of a table.
pub(crate) fn short_successor(key: &[u8]) -> Vec<u8> {
    for (i, &b) in key.iter().enumerate() {
        if b != 0xff {
            let mut out = key[..=i].to_vec();
            out[i] = b + 1;
            return out;
        }
    }
    key.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_user_key_then_newest_first() {
        let a1 = make_internal_key(b"a", 1, ValueKind::Put);
        let a2 = make_internal_key(b"a", 2, ValueKind::Put);
        let a2d = make_internal_key(b"a", 2, ValueKind::Delete);
        let b0 = make_internal_key(b"b", 0, ValueKind::Put);
        assert_eq!(compare_internal(&a2, &a1), Ordering::Less);
        assert_eq!(compare_internal(&a2, &a2d), Ordering::Less);
        assert_eq!(compare_internal(&a1, &b0), Ordering::Less);
        // A shorter user key that is a prefix sorts first regardless of trailer bytes.
        let ab = make_internal_key(b"ab", MAX_SEQUENCE, ValueKind::Put);
        assert_eq!(compare_internal(&a1, &ab), Ordering::Less);
    }

    #[test]
    fn parse_round_trip_and_rejects_bad() {
        let k = make_internal_key(b"key", 12345, ValueKind::Delete);
        let p = parse_internal_key(&k).expect("valid key");
        assert_eq!(p.user_key, b"key");
        assert_eq!(p.sequence, 12345);
        assert_eq!(p.kind, ValueKind::Delete);
        assert!(parse_internal_key(b"short").is_none());
        let mut bad = k.clone();
        let n = bad.len();
        bad[n - 8] = 9;
        assert!(parse_internal_key(&bad).is_none());
    }

    #[test]
    fn lookup_key_matches_make_internal_key() {
        let short = LookupKey::new(b"user", 42);
        assert!(!short.is_on_heap());
        assert_eq!(
            short.internal_key(),
            &make_internal_key(b"user", 42, KIND_FOR_SEEK)[..]
        );
        assert_eq!(short.internal_key(), b"user\x07\x2a\0\0\0\0\0\0");
        assert_eq!(short.user_key(), b"user");
        assert_eq!(short.sequence(), 42);

        let empty = LookupKey::new(b"", MAX_SEQUENCE);
        assert_eq!(
            empty.internal_key(),
            &make_internal_key(b"", MAX_SEQUENCE, KIND_FOR_SEEK)[..]
        );
        assert_eq!(empty.sequence(), MAX_SEQUENCE);

        // The longest key that fits inline, and the first that does not.
        let fits = vec![b'k'; LOOKUP_KEY_INLINE - TRAILER_LEN];
        let lk = LookupKey::new(&fits, 7);
        assert!(!lk.is_on_heap());
        assert_eq!(
            lk.internal_key(),
            &make_internal_key(&fits, 7, KIND_FOR_SEEK)[..]
        );
        let long = vec![b'z'; LOOKUP_KEY_INLINE - TRAILER_LEN + 1];
        let lk = LookupKey::new(&long, 9);
        assert!(lk.is_on_heap());
        assert_eq!(
            lk.internal_key(),
            &make_internal_key(&long, 9, KIND_FOR_SEEK)[..]
        );
        assert_eq!(lk.user_key(), &long[..]);
        assert_eq!(lk.sequence(), 9);
    }

    #[test]
    fn separators_stay_in_range() {
        assert_eq!(shortest_separator(b"abcd", b"abzz"), b"abd".to_vec());
        assert_eq!(shortest_separator(b"abc", b"abd"), b"abc".to_vec());
        assert_eq!(shortest_separator(b"ab", b"abc"), b"ab".to_vec());
        assert_eq!(short_successor(b"\xff\xffa"), b"\xff\xffb".to_vec());
        assert_eq!(short_successor(b"\xff"), b"\xff".to_vec());
    }
}
