//! The merge operator: read-modify-write without a read (RocksDB's `MergeOperator`).
//!
//! `Db::merge(key, operand)` stores an operand; the value of a key is computed when it is read,
//! and combined into one value when compaction can see everything it needs, by the column
//! family's [`MergeOperator`]. Reads collect a key's operands newest first down to its newest
//! put (the base), delete or the end of the data, then call `full_merge` with the operands
//! oldest first.

use crate::error::{Error, Result};

/// Combines a key's merge operands into its value. Set one per column family
/// (`Options::merge_operator`, `CfOptions::merge_operator`); it must be the same (same name,
/// same semantics) every time the database is opened.
///
/// ```
/// use shaledb::{Db, MergeOperator, Options};
/// use std::sync::Arc;
///
/// /// Keeps the largest operand seen.
/// struct Max;
/// impl MergeOperator for Max {
///     fn name(&self) -> &str { "max" }
///     fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, ops: &[&[u8]]) -> Option<Vec<u8>> {
///         existing.into_iter().chain(ops.iter().copied()).max().map(<[u8]>::to_vec)
///     }
/// }
///
/// let dir = tempfile::tempdir().unwrap();
/// let opts = Options { merge_operator: Some(Arc::new(Max)), ..Default::default() };
/// let db = Db::open(dir.path(), opts).unwrap();
/// db.merge(b"k", b"3").unwrap();
/// db.merge(b"k", b"7").unwrap();
/// db.merge(b"k", b"5").unwrap();
/// assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"7"[..]));
/// ```
pub trait MergeOperator: Send + Sync {
    /// The operator's name, recorded with the data so a database is not opened with another.
    fn name(&self) -> &str;

    /// The value of `key` given its base value (`None` if it was absent or deleted) and the
    /// merge operands written after it, oldest first. `None` means the operands cannot be
    /// merged: the read fails with [`Error::MergeFailed`].
    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Option<Vec<u8>>;

    /// Combines two consecutive operands (`left` older) into one, if the operator can do so
    /// without the base value. `None` (the default) keeps both.
    fn partial_merge(&self, _key: &[u8], _left: &[u8], _right: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

impl std::fmt::Debug for dyn MergeOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MergeOperator({})", self.name())
    }
}

/// Calls `op.full_merge` on operands collected newest first; `Err` for a failed merge or
/// for operands met with no operator configured.
pub(crate) fn merge_newest_first(
    op: Option<&dyn MergeOperator>,
    key: &[u8],
    base: Option<&[u8]>,
    newest_first: &[Vec<u8>],
) -> Result<Vec<u8>> {
    let oldest_first: Vec<&[u8]> = newest_first.iter().rev().map(Vec::as_slice).collect();
    merge_oldest_first(op, key, base, &oldest_first)
}

/// Calls `op.full_merge`; `Err` for a failed merge or when no operator is configured.
pub(crate) fn merge_oldest_first(
    op: Option<&dyn MergeOperator>,
    key: &[u8],
    base: Option<&[u8]>,
    oldest_first: &[&[u8]],
) -> Result<Vec<u8>> {
    let op = op.ok_or_else(no_operator)?;
    op.full_merge(key, base, oldest_first)
        .ok_or_else(|| Error::MergeFailed {
            key: key.to_vec(),
            operator: op.name().to_string(),
        })
}

/// The error for merge operands in a family without a merge operator.
pub(crate) fn no_operator() -> Error {
    Error::InvalidArgument(
        "the column family holds merge operands but has no merge operator: set \
         Options::merge_operator (or CfOptions::merge_operator) when opening it"
            .to_string(),
    )
}

/// Merge operators RocksDB users know, with RocksDB's semantics.
pub mod merge_operators {
    use super::MergeOperator;

    /// 64-bit counters: values and operands are 8-byte little-endian unsigned integers, and
    /// merging adds them, wrapping on overflow (RocksDB's `uint64add`). As in RocksDB, a value
    /// or operand that is not 8 bytes long counts as 0 rather than failing the merge.
    ///
    /// ```
    /// use shaledb::{merge_operators::UInt64Add, Db, Options};
    /// use std::sync::Arc;
    /// let dir = tempfile::tempdir().unwrap();
    /// let opts = Options { merge_operator: Some(Arc::new(UInt64Add)), ..Default::default() };
    /// let db = Db::open(dir.path(), opts).unwrap();
    /// db.merge(b"hits", 5u64.to_le_bytes()).unwrap();
    /// db.merge(b"hits", 2u64.to_le_bytes()).unwrap();
    /// assert_eq!(db.get(b"hits").unwrap().as_deref(), Some(&7u64.to_le_bytes()[..]));
    /// ```
    #[derive(Debug, Clone, Copy, Default)]
    pub struct UInt64Add;

    fn decode(bytes: &[u8]) -> u64 {
        <[u8; 8]>::try_from(bytes).map_or(0, u64::from_le_bytes)
    }

    impl MergeOperator for UInt64Add {
        fn name(&self) -> &str {
            "UInt64AddOperator"
        }

        fn full_merge(
            &self,
            _key: &[u8],
            existing: Option<&[u8]>,
            operands: &[&[u8]],
        ) -> Option<Vec<u8>> {
            let sum = operands.iter().fold(existing.map_or(0, decode), |acc, op| {
                acc.wrapping_add(decode(op))
            });
            Some(sum.to_le_bytes().to_vec())
        }

        fn partial_merge(&self, _key: &[u8], left: &[u8], right: &[u8]) -> Option<Vec<u8>> {
            Some(
                decode(left)
                    .wrapping_add(decode(right))
                    .to_le_bytes()
                    .to_vec(),
            )
        }
    }

    /// Appends operands to the value with a delimiter between them (RocksDB's
    /// `StringAppendOperator`): `existing + d + op1 + d + op2 ...`, and just `op1 + d + op2 ...`
    /// when there is no existing value.
    ///
    /// ```
    /// use shaledb::{merge_operators::StringAppend, Db, Options};
    /// use std::sync::Arc;
    /// let dir = tempfile::tempdir().unwrap();
    /// let opts = Options {
    ///     merge_operator: Some(Arc::new(StringAppend::new(","))),
    ///     ..Default::default()
    /// };
    /// let db = Db::open(dir.path(), opts).unwrap();
    /// db.merge(b"tags", b"red").unwrap();
    /// db.merge(b"tags", b"blue").unwrap();
    /// assert_eq!(db.get(b"tags").unwrap().as_deref(), Some(&b"red,blue"[..]));
    /// ```
    #[derive(Debug, Clone)]
    pub struct StringAppend {
        delimiter: Vec<u8>,
    }

    impl StringAppend {
        /// An operator joining with `delimiter` (may be empty).
        pub fn new(delimiter: impl Into<Vec<u8>>) -> Self {
            StringAppend {
                delimiter: delimiter.into(),
            }
        }
    }

    impl MergeOperator for StringAppend {
        fn name(&self) -> &str {
            "StringAppendOperator"
        }

        fn full_merge(
            &self,
            _key: &[u8],
            existing: Option<&[u8]>,
            operands: &[&[u8]],
        ) -> Option<Vec<u8>> {
            let parts: Vec<&[u8]> = existing
                .into_iter()
                .chain(operands.iter().copied())
                .collect();
            Some(parts.join(&self.delimiter[..]))
        }

        fn partial_merge(&self, _key: &[u8], left: &[u8], right: &[u8]) -> Option<Vec<u8>> {
            Some([left, right].join(&self.delimiter[..]))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn uint64add_sums_wrapping_and_counts_bad_lengths_as_zero() {
            let op = UInt64Add;
            let one = 1u64.to_le_bytes();
            let max = u64::MAX.to_le_bytes();
            assert_eq!(
                op.full_merge(b"k", Some(&max), &[&one, &one]),
                Some(1u64.to_le_bytes().to_vec())
            );
            assert_eq!(
                op.full_merge(b"k", None, &[&5u64.to_le_bytes(), b"bad"]),
                Some(5u64.to_le_bytes().to_vec())
            );
            assert_eq!(
                op.full_merge(b"k", Some(b"short"), &[&one]),
                Some(1u64.to_le_bytes().to_vec())
            );
            assert_eq!(
                op.partial_merge(b"k", &2u64.to_le_bytes(), &3u64.to_le_bytes()),
                Some(5u64.to_le_bytes().to_vec())
            );
        }

        #[test]
        fn string_append_joins_with_the_delimiter() {
            let op = StringAppend::new("--");
            assert_eq!(
                op.full_merge(b"k", Some(b"a"), &[b"b", b"c"]),
                Some(b"a--b--c".to_vec())
            );
            assert_eq!(op.full_merge(b"k", None, &[b"b"]), Some(b"b".to_vec()));
            assert_eq!(op.full_merge(b"k", None, &[]), Some(Vec::new()));
            assert_eq!(op.partial_merge(b"k", b"x", b"y"), Some(b"x--y".to_vec()));
            let none = StringAppend::new("");
            assert_eq!(
                none.full_merge(b"k", Some(b"a"), &[b"b"]),
                Some(b"ab".to_vec())
            );
        }
    }
}
