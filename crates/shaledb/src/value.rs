//! [`Value`]: the bytes a point read returns, and [`LookupResult`]: what one source (a
//! memtable, a table, a version) knows about a key.
//!
//! A value found in a table whose block sits in the block cache is returned *pinned*: it keeps
//! a reference to the cached block and points into it, so the read copies nothing. Any other
//! value (from a memtable, or from a block read around the cache) is an owned copy.

use crate::sst::Block;
use std::borrow::Borrow;
use std::fmt;
use std::ops::{Deref, Range};
use std::sync::Arc;

/// The value returned by [`crate::Db::get`]. Derefs to `[u8]`; compares equal to byte slices,
/// arrays, vectors and other values with the same bytes.
///
/// When the value was found in a block held by the block cache, the `Value` shares that block
/// instead of copying the bytes out. Holding it keeps the whole block (typically a few KiB) in
/// memory, even after the cache evicts it (it is then no longer charged to the cache). Call
/// [`Value::into_vec`] to keep a value for long without holding its block.
///
/// ```
/// use shaledb::{Db, Options, Value};
/// let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::default()).unwrap();
/// db.put(b"k", b"v1").unwrap();
/// let v: Value = db.get(b"k").unwrap().unwrap();
/// assert_eq!(v, b"v1");
/// assert_eq!(&v[..], b"v1");
/// let owned: Vec<u8> = v.into_vec();
/// assert_eq!(owned, b"v1".to_vec());
/// ```
#[derive(Clone)]
pub struct Value {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    Owned(Vec<u8>),
    /// `range` of a cached block's decoded bytes; checked against the block when built.
    Pinned {
        block: Arc<Block>,
        range: Range<usize>,
    },
}

impl Value {
    /// A value owning `bytes`.
    pub fn from_vec(bytes: Vec<u8>) -> Value {
        Value {
            repr: Repr::Owned(bytes),
        }
    }

    /// A value sharing `range` of `block`'s decoded bytes; `None` if the range is not inside
    /// the block.
    pub(crate) fn pinned(block: Arc<Block>, range: Range<usize>) -> Option<Value> {
        block.data().get(range.clone())?;
        Some(Value {
            repr: Repr::Pinned { block, range },
        })
    }

    /// The first `len` bytes (no copy). REQUIRES: `len <= self.len()`.
    pub(crate) fn truncated(self, len: usize) -> Value {
        let len = len.min(self.len());
        match self.repr {
            Repr::Owned(mut v) => {
                v.truncate(len);
                Value::from_vec(v)
            }
            Repr::Pinned { block, range } => Value {
                repr: Repr::Pinned {
                    block,
                    range: range.start..range.start + len,
                },
            },
        }
    }

    /// The bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        match &self.repr {
            Repr::Owned(v) => v,
            // The range was checked against the block when the value was built.
            Repr::Pinned { block, range } => block.data().get(range.clone()).unwrap_or_default(),
        }
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// True if the value is empty.
    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// The bytes as a vector, without copying if the value owns them.
    pub fn into_vec(self) -> Vec<u8> {
        match self.repr {
            Repr::Owned(v) => v,
            Repr::Pinned { .. } => self.as_slice().to_vec(),
        }
    }

    /// True if the value shares a table block (from the block cache, or read for an
    /// iterator) rather than owning a copy. For tests and diagnostics.
    #[doc(hidden)]
    pub fn is_pinned(&self) -> bool {
        matches!(self.repr, Repr::Pinned { .. })
    }
}

impl Deref for Value {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Value {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Borrow<[u8]> for Value {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Value {
        Value::from_vec(v)
    }
}

impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Value {
        Value::from_vec(v.to_vec())
    }
}

impl<const N: usize> From<&[u8; N]> for Value {
    fn from(v: &[u8; N]) -> Value {
        Value::from_vec(v.to_vec())
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::from_vec(v.as_bytes().to_vec())
    }
}

impl From<Value> for Vec<u8> {
    fn from(v: Value) -> Vec<u8> {
        v.into_vec()
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Like a byte string literal: printable ASCII as is, the rest escaped.
        write!(f, "b\"{}\"", self.as_slice().escape_ascii())
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Value {}

impl std::hash::Hash for Value {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Value) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Value {
    fn cmp(&self, other: &Value) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl PartialEq<[u8]> for Value {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<&[u8]> for Value {
    fn eq(&self, other: &&[u8]) -> bool {
        self.as_slice() == *other
    }
}

impl PartialEq<Vec<u8>> for Value {
    fn eq(&self, other: &Vec<u8>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<const N: usize> PartialEq<[u8; N]> for Value {
    fn eq(&self, other: &[u8; N]) -> bool {
        self.as_slice() == other
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for Value {
    fn eq(&self, other: &&[u8; N]) -> bool {
        self.as_slice() == *other
    }
}

impl PartialEq<Value> for [u8] {
    fn eq(&self, other: &Value) -> bool {
        self == other.as_slice()
    }
}

impl PartialEq<Value> for &[u8] {
    fn eq(&self, other: &Value) -> bool {
        *self == other.as_slice()
    }
}

impl PartialEq<Value> for Vec<u8> {
    fn eq(&self, other: &Value) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<const N: usize> PartialEq<Value> for [u8; N] {
    fn eq(&self, other: &Value) -> bool {
        self[..] == *other.as_slice()
    }
}

/// What one source (a memtable, a table, a version) knows about a key as of a sequence number.
#[derive(Debug, PartialEq, Eq)]
pub enum LookupResult {
    /// The newest visible version is this value.
    Found(Value),
    /// The newest visible version is a tombstone.
    Deleted,
    /// No visible version here; look in older data.
    NotPresent,
    /// The newest visible version is a merge operand: the value must be computed from it and
    /// the versions below (the database's slow path reads them all with an iterator).
    Merge,
    /// The newest visible version is a value stored in a blob file: these are the bytes of
    /// its reference (`blob::BlobRef`), which the database resolves.
    Blob(Value),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::BlockBuilder;

    fn block_with(value: &[u8]) -> (Arc<Block>, Range<usize>) {
        let mut b = BlockBuilder::new(16);
        b.add(b"key\x01\0\0\0\0\0\0\0", value);
        let block = Arc::new(Block::new(b.finish()).expect("valid block"));
        let data = block.data();
        let start = data
            .windows(value.len())
            .position(|w| w == value)
            .expect("value in block");
        (block, start..start + value.len())
    }

    #[test]
    fn owned_and_pinned_hold_the_same_bytes() {
        let owned = Value::from_vec(b"hello world".to_vec());
        let (block, range) = block_with(b"hello world");
        let pinned = Value::pinned(block, range).expect("range inside block");
        assert!(pinned.is_pinned());
        assert!(!owned.is_pinned());
        assert_eq!(owned, pinned);
        assert_eq!(&pinned[..], b"hello world");
        assert_eq!(pinned.len(), 11);
        assert_eq!(pinned.to_vec(), b"hello world".to_vec());
        assert_eq!(pinned.clone().into_vec(), b"hello world".to_vec());
        assert_eq!(format!("{pinned:?}"), "b\"hello world\"");
        assert_eq!(format!("{:?}", Value::from(vec![0u8, b'a'])), "b\"\\x00a\"");
    }

    #[test]
    fn compares_with_byte_types_both_ways() {
        let v = Value::from(b"abc".to_vec());
        assert_eq!(v, b"abc");
        assert_eq!(v, *b"abc");
        assert_eq!(v, b"abc"[..]);
        assert_eq!(v, &b"abc"[..]);
        assert_eq!(v, b"abc".to_vec());
        assert_eq!(b"abc".to_vec(), v);
        assert_eq!(&b"abc"[..], v);
        assert_eq!(*b"abc", v);
        assert_ne!(v, b"abd");
        assert_eq!(Some(v.clone()).as_deref(), Some(&b"abc"[..]));
        let s: &[u8] = v.borrow();
        assert_eq!(s, b"abc");
        assert!(Value::from(&b""[..]).is_empty());
        let smaller = Value::from(b"a".to_vec());
        assert_eq!(smaller.cmp(&v), std::cmp::Ordering::Less);
    }

    #[test]
    fn pinned_value_outlives_its_block_reference() {
        let (block, range) = block_with(b"kept alive");
        let weak = Arc::downgrade(&block);
        let v = Value::pinned(block, range).expect("range inside block");
        // The value holds the only reference: the block lives as long as the value does.
        assert_eq!(weak.strong_count(), 1);
        assert_eq!(v, b"kept alive");
        drop(v);
        assert_eq!(weak.strong_count(), 0);
    }

    #[test]
    fn pinned_rejects_a_range_outside_the_block() {
        let (block, _) = block_with(b"x");
        let n = block.data().len();
        assert!(Value::pinned(block.clone(), n..n + 1).is_none());
        assert!(Value::pinned(block, 0..n).is_some());
    }
}
