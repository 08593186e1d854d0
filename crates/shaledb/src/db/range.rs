//! `Db::range`, `Db::range_opt`, `Db::prefix`: Rust ranges of keys as double-ended iterators.
//!
//! Every bound is turned into the iterator's inclusive-lower / exclusive-upper pair exactly
//! (the smallest key above `k` is `k ++ [0]`), so `DbIterator` enforces them in both
//! directions. The back end's iterator is built only when `next_back` is first called, over the
//! same pinned read view (super version and sequence) as the front's, so both ends read the
//! same data and meet where the last key taken from one end is reached from the other.

use super::{Db, DbInner, SuperVersion};
use crate::error::Result;
use crate::iter::db_iter::DbIterator;
use crate::key::SequenceNumber;
use crate::options::ReadOptions;
use crate::value::Value;
use std::ops::Bound;
use std::sync::Arc;

impl Db {
    /// The entries with keys in `range`, in order, as `(key, value)` items. Takes any Rust
    /// range of byte strings (`..`, `a..b`, `a..=b`, `a..`, `..b`, with `&[u8]`, `Vec<u8>`,
    /// `&str`, ...) or a pair of [`Bound`]s. Reads the latest state as of this call. The
    /// iterator is double-ended: `.rev()` walks the range from its end. An IO or corruption
    /// error appears as an `Err` item and ends the sequence.
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// for k in ["a", "b", "c", "d"] {
    ///     db.put(k, k).unwrap();
    /// }
    /// let keys: Vec<Vec<u8>> = db.range("b"..="d").rev().map(|r| r.unwrap().0).collect();
    /// assert_eq!(keys, vec![b"d".to_vec(), b"c".to_vec(), b"b".to_vec()]);
    /// ```
    pub fn range<R: KeyRange>(&self, range: R) -> RangeIter {
        self.range_opt(&ReadOptions::default(), range)
    }

    /// Like [`Db::range`], reading with `ro`: as of `ro.snapshot` (or now), with its checksum
    /// and cache settings. If `ro` also sets `iterate_lower_bound` or `iterate_upper_bound`,
    /// the keys visited are those inside both `range` and those bounds (their intersection).
    ///
    /// ```
    /// use shaledb::{Db, Options, ReadOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// db.put("a", "old").unwrap();
    /// let ro = ReadOptions { snapshot: Some(db.snapshot()), ..Default::default() };
    /// db.put("a", "new").unwrap();
    /// let items: Vec<_> = db.range_opt(&ro, ..).collect::<Result<_, _>>().unwrap();
    /// assert_eq!(items, vec![(b"a".to_vec(), b"old".into())]);
    /// ```
    pub fn range_opt<R: KeyRange>(&self, ro: &ReadOptions, range: R) -> RangeIter {
        let (start, end) = range.key_bounds();
        let mut ro = ro.clone();
        ro.iterate_lower_bound = tighter_lower(ro.iterate_lower_bound.take(), start);
        ro.iterate_upper_bound = tighter_upper(ro.iterate_upper_bound.take(), end);
        RangeIter::new(self.inner.clone(), ro)
    }

    /// Every entry whose key starts with `prefix`, in order (double-ended, like
    /// [`Db::range`]).
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// for k in ["user:1", "user:2", "users", "v"] {
    ///     db.put(k, "x").unwrap();
    /// }
    /// let n = db.prefix("user:").count();
    /// assert_eq!(n, 2);
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> RangeIter {
        self.prefix_opt(&ReadOptions::default(), prefix)
    }

    /// [`Db::prefix`] reading with `ro` (snapshot, bounds intersected as in
    /// [`Db::range_opt`]).
    ///
    /// When the default family has a prefix extractor that gives every key starting with
    /// `prefix` one prefix ([`PrefixExtractor::same_result_when_appended`], e.g. a
    /// [`FixedPrefix(n)`](crate::FixedPrefix) with `prefix` at least `n` bytes long), walking
    /// forward leaves out the tables whose prefix bloom rules that prefix out, unless
    /// `ro.total_order_seek` is set. Walking from the back reads every table.
    ///
    /// [`PrefixExtractor::same_result_when_appended`]: crate::PrefixExtractor::same_result_when_appended
    pub fn prefix_opt(&self, ro: &ReadOptions, prefix: impl AsRef<[u8]>) -> RangeIter {
        let prefix = prefix.as_ref();
        let end = match prefix_successor(prefix) {
            Some(s) => Bound::Excluded(s),
            None => Bound::Unbounded,
        };
        let use_blooms = !ro.total_order_seek
            && self
                .inner
                .default_cf
                .opts
                .prefix_extractor
                .as_ref()
                .is_some_and(|ex| ex.same_result_when_appended(prefix));
        if !use_blooms {
            return self.range_opt(ro, (Bound::Included(prefix.to_vec()), end));
        }
        let ro = ReadOptions {
            prefix_same_as_start: true,
            ..ro.clone()
        };
        let mut it = self.range_opt(&ro, (Bound::Included(prefix.to_vec()), end));
        it.front_seek = Some(prefix.to_vec());
        it
    }
}

/// The smallest key greater than every key starting with `prefix`, or `None` if there is none
/// (the prefix is empty or all 0xFF bytes).
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut s = prefix[..=keep].to_vec();
    s[keep] += 1;
    Some(s)
}

/// The smallest key greater than `k`.
fn successor(k: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(k.len() + 1);
    s.extend_from_slice(k);
    s.push(0);
    s
}

/// The larger of an inclusive lower bound and a range's start bound, as an inclusive bound.
fn tighter_lower(current: Option<Vec<u8>>, start: Bound<&[u8]>) -> Option<Vec<u8>> {
    let from_range = match start {
        Bound::Included(k) => k.to_vec(),
        Bound::Excluded(k) => successor(k),
        Bound::Unbounded => return current,
    };
    match current {
        Some(c) if c > from_range => Some(c),
        _ => Some(from_range),
    }
}

/// The smaller of an exclusive upper bound and a range's end bound, as an exclusive bound.
fn tighter_upper(current: Option<Vec<u8>>, end: Bound<&[u8]>) -> Option<Vec<u8>> {
    let from_range = match end {
        Bound::Excluded(k) => k.to_vec(),
        Bound::Included(k) => successor(k),
        Bound::Unbounded => return current,
    };
    match current {
        Some(c) if c < from_range => Some(c),
        _ => Some(from_range),
    }
}

/// A range of keys for [`Db::range`]: implemented for every Rust range type over anything that
/// is `AsRef<[u8]>`, and for a pair of `Bound`s.
pub trait KeyRange {
    /// The start and end bounds.
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>);
}

impl KeyRange for std::ops::RangeFull {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::Range<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (
            Bound::Included(self.start.as_ref()),
            Bound::Excluded(self.end.as_ref()),
        )
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::RangeInclusive<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (
            Bound::Included(self.start().as_ref()),
            Bound::Included(self.end().as_ref()),
        )
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::RangeFrom<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Included(self.start.as_ref()), Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::RangeTo<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Excluded(self.end.as_ref()))
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::RangeToInclusive<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Included(self.end.as_ref()))
    }
}

impl<K: AsRef<[u8]>> KeyRange for (Bound<K>, Bound<K>) {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        fn map<K: AsRef<[u8]>>(b: &Bound<K>) -> Bound<&[u8]> {
            match b {
                Bound::Included(k) => Bound::Included(k.as_ref()),
                Bound::Excluded(k) => Bound::Excluded(k.as_ref()),
                Bound::Unbounded => Bound::Unbounded,
            }
        }
        (map(&self.0), map(&self.1))
    }
}

/// The read view both ends of a [`RangeIter`] share.
struct View {
    db: Arc<DbInner>,
    sv: Arc<SuperVersion>,
    seq: SequenceNumber,
    ro: ReadOptions,
}

impl View {
    fn iterator(&self) -> DbIterator {
        let cf = &self.db.default_cf;
        let it = self.db.iterator_at(self.sv.clone(), self.seq, &self.ro, cf);
        super::with_prefix_options(&self.db, it, self.sv.clone(), &self.ro, cf)
    }
}

/// Iterator returned by [`Db::range`], [`Db::range_opt`] and [`Db::prefix`]: `(key, value)`
/// items in key order, or in reverse from the back (`.rev()`, `next_back`). Each value is a
/// [`Value`]: taken from the front, a value read from a table block shares that block rather
/// than being copied (as [`Db::get`] does); `into_vec()` gives an owned `Vec<u8>`.
pub struct RangeIter {
    view: View,
    /// Front cursor, built on the first `next` and then on the item last yielded from the
    /// front (the back stops before its key).
    front: Option<DbIterator>,
    /// Back cursor, likewise from the back.
    back: Option<DbIterator>,
    finished: bool,
    /// The front's first positioning: a seek to this key (a prefix seek when the read options
    /// ask for one) instead of a seek to the lower bound.
    front_seek: Option<Vec<u8>>,
}

impl RangeIter {
    fn new(db: Arc<DbInner>, ro: ReadOptions) -> RangeIter {
        let (sv, seq) = db.read_view(&ro, &db.default_cf);
        // Each end's cursor is built on its first use, over this view.
        RangeIter {
            view: View { db, sv, seq, ro },
            front: None,
            back: None,
            finished: false,
            front_seek: None,
        }
    }

    /// Ends the sequence; an iterator error becomes the last item.
    fn finish(&mut self, status: Result<()>) -> Option<Result<(Vec<u8>, Value)>> {
        self.finished = true;
        status.err().map(Err)
    }
}

impl Iterator for RangeIter {
    type Item = Result<(Vec<u8>, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let fresh = self.front.is_none();
        let view = &self.view;
        let it = self.front.get_or_insert_with(|| view.iterator());
        if fresh {
            match &self.front_seek {
                Some(target) => it.seek(target),
                None => it.seek_to_first(),
            }
        } else {
            it.next();
        }
        if !it.valid() {
            let status = it.status();
            return self.finish(status);
        }
        if let Some(back) = &self.back {
            if it.key() >= back.key() {
                return self.finish(Ok(()));
            }
        }
        let value = match it.value_pinned() {
            Ok(v) => v,
            Err(e) => return self.finish(Err(e)),
        };
        Some(Ok((it.key().to_vec(), value)))
    }
}

impl DoubleEndedIterator for RangeIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let fresh = self.back.is_none();
        let view = &self.view;
        let it = self.back.get_or_insert_with(|| view.iterator());
        if fresh {
            it.seek_to_last();
        } else {
            it.prev();
        }
        if !it.valid() {
            let status = it.status();
            return self.finish(status);
        }
        if let Some(front) = &self.front {
            if it.key() <= front.key() {
                return self.finish(Ok(()));
            }
        }
        let value = match it.value_pinned() {
            Ok(v) => v,
            Err(e) => return self.finish(Err(e)),
        };
        Some(Ok((it.key().to_vec(), value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_successor_skips_trailing_ff() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"\xff\xff"), None);
        assert_eq!(prefix_successor(b""), None);
    }

    #[test]
    fn bounds_intersect_with_read_options() {
        let lo = |c: Option<&[u8]>, b| tighter_lower(c.map(<[u8]>::to_vec), b);
        let hi = |c: Option<&[u8]>, b| tighter_upper(c.map(<[u8]>::to_vec), b);
        assert_eq!(lo(None, Bound::Included(b"b")), Some(b"b".to_vec()));
        assert_eq!(lo(None, Bound::Excluded(b"b")), Some(b"b\0".to_vec()));
        assert_eq!(lo(Some(b"c"), Bound::Included(b"b")), Some(b"c".to_vec()));
        assert_eq!(lo(Some(b"a"), Bound::Excluded(b"b")), Some(b"b\0".to_vec()));
        assert_eq!(lo(Some(b"a"), Bound::Unbounded), Some(b"a".to_vec()));
        assert_eq!(hi(None, Bound::Excluded(b"m")), Some(b"m".to_vec()));
        assert_eq!(hi(None, Bound::Included(b"m")), Some(b"m\0".to_vec()));
        assert_eq!(hi(Some(b"k"), Bound::Included(b"m")), Some(b"k".to_vec()));
        assert_eq!(hi(Some(b"z"), Bound::Excluded(b"m")), Some(b"m".to_vec()));
        assert_eq!(hi(None, Bound::Unbounded), None);
    }
}
