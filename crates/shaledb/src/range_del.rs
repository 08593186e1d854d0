//! Range tombstones (`Db::delete_range`): a deletion of every key in `[start, end)` written
//! before the tombstone's sequence number.
//!
//! Tombstones live beside the point entries, not among them: in a list per memtable and in a
//! range-deletion block per table (docs/format/sstable.md). Readers and compactions see them
//! *fragmented* (RocksDB's `FragmentedRangeTombstoneList`): cut at every start and end so that
//! fragments never partly overlap, each fragment holding the sequence numbers of every
//! tombstone over it, newest first. A key then has at most one fragment, found by binary
//! search, and "is this entry deleted" is one comparison of sequence numbers.

use crate::error::{Error, Result};
use crate::head_index::HeadIndex;
use crate::iter::InternalIterator;
use crate::key::{self, InternalKey, SequenceNumber, ValueKind, MAX_SEQUENCE};
use crate::sst::{Block, BlockIter};
use std::path::Path;
use std::sync::Arc;

/// One tombstone as written: deletes `[start, end)` below `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    /// First deleted user key.
    pub start: Vec<u8>,
    /// First user key after the range (not deleted).
    pub end: Vec<u8>,
    /// The tombstone's sequence number: it deletes entries with smaller ones.
    pub seq: SequenceNumber,
}

/// A piece of key space `[start, end)` and the tombstones over all of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    /// First user key of the fragment.
    pub start: Vec<u8>,
    /// First user key after the fragment.
    pub end: Vec<u8>,
    /// Sequence numbers of the tombstones covering the fragment, newest first, distinct.
    pub seqs: Vec<SequenceNumber>,
}

impl Fragment {
    /// The newest tombstone over this fragment visible at `read_seq`; 0 if none.
    fn newest_visible(&self, read_seq: SequenceNumber) -> SequenceNumber {
        self.seqs
            .iter()
            .copied()
            .find(|&s| s <= read_seq)
            .unwrap_or(0)
    }
}

/// Tombstones cut into sorted, non-overlapping fragments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FragmentedRangeTombstones {
    fragments: Vec<Fragment>,
    /// Heads of the fragments' starts: point lookups binary-search this compact array (one
    /// cache line holds eight) instead of following a heap key at every step.
    heads: HeadIndex,
}

impl FragmentedRangeTombstones {
    /// Fragments any set of tombstones (overlapping, unordered, duplicated). Empty ranges
    /// (`start >= end`) delete nothing and are left out.
    pub fn new(tombstones: impl IntoIterator<Item = RangeTombstone>) -> Self {
        let mut list: Vec<RangeTombstone> =
            tombstones.into_iter().filter(|t| t.start < t.end).collect();
        if list.is_empty() {
            return Self::default();
        }
        list.sort_by(|a, b| a.start.cmp(&b.start));
        let mut bounds: Vec<&[u8]> = list
            .iter()
            .flat_map(|t| [t.start.as_slice(), t.end.as_slice()])
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        let mut fragments = Vec::new();
        // Tombstones whose range has started: (end, seq).
        let mut active: Vec<(&[u8], SequenceNumber)> = Vec::new();
        let mut next = 0;
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            while next < list.len() && list[next].start.as_slice() <= lo {
                active.push((&list[next].end, list[next].seq));
                next += 1;
            }
            active.retain(|&(end, _)| end > lo);
            if active.is_empty() {
                continue;
            }
            let mut seqs: Vec<SequenceNumber> = active.iter().map(|&(_, s)| s).collect();
            seqs.sort_unstable_by(|a, b| b.cmp(a));
            seqs.dedup();
            fragments.push(Fragment {
                start: lo.to_vec(),
                end: hi.to_vec(),
                seqs,
            });
        }
        Self::from_fragments(fragments)
    }

    /// Sorted, non-overlapping fragments with their search heads.
    fn from_fragments(fragments: Vec<Fragment>) -> Self {
        let starts: Vec<&[u8]> = fragments.iter().map(|f| f.start.as_slice()).collect();
        // Fragments are built sorted; unsorted ones (impossible) are searched without heads.
        let heads = HeadIndex::new(&starts).unwrap_or_default();
        FragmentedRangeTombstones { fragments, heads }
    }

    /// The number of fragments starting at or before `user_key`.
    #[inline]
    fn fragments_starting_by(&self, user_key: &[u8]) -> usize {
        // Fragments with a smaller head start before the key, those with a larger one after
        // it; only equal heads (usually none or one) need their keys compared.
        let (lo, hi) = match self.heads.len() == self.fragments.len() {
            true => self.heads.equal_range(user_key),
            false => (0, self.fragments.len()),
        };
        lo + self.fragments[lo..hi].partition_point(|f| f.start.as_slice() <= user_key)
    }

    /// Fragments the tombstones of several sources together.
    pub fn merge<'a>(sources: impl IntoIterator<Item = &'a FragmentedRangeTombstones>) -> Self {
        Self::new(sources.into_iter().flat_map(|s| s.tombstones()))
    }

    /// True if there are no tombstones.
    pub fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    /// The fragments in key order.
    pub fn fragments(&self) -> &[Fragment] {
        &self.fragments
    }

    /// Number of (fragment, sequence number) pairs: the entries of a range-deletion block.
    pub fn num_entries(&self) -> u64 {
        self.fragments.iter().map(|f| f.seqs.len() as u64).sum()
    }

    /// The fragments as tombstones (one per fragment and sequence number).
    pub fn tombstones(&self) -> impl Iterator<Item = RangeTombstone> + '_ {
        self.fragments.iter().flat_map(|f| {
            f.seqs.iter().map(move |&seq| RangeTombstone {
                start: f.start.clone(),
                end: f.end.clone(),
                seq,
            })
        })
    }

    /// The fragment covering `user_key`, if any.
    fn fragment_at(&self, user_key: &[u8]) -> Option<&Fragment> {
        // The last fragment starting at or before the key.
        let i = self.fragments_starting_by(user_key);
        let f = self.fragments.get(i.checked_sub(1)?)?;
        (user_key < f.end.as_slice()).then_some(f)
    }

    /// The sequence number of the newest tombstone covering `user_key` that a read at
    /// `read_seq` sees; 0 if none. An entry of `user_key` with a smaller sequence number is
    /// deleted for that read.
    pub fn max_covering_seq(&self, user_key: &[u8], read_seq: SequenceNumber) -> SequenceNumber {
        self.fragment_at(user_key)
            .map_or(0, |f| f.newest_visible(read_seq))
    }

    /// [`max_covering_seq`](Self::max_covering_seq) for keys visited in order (iterators):
    /// `hint` remembers the fragment last looked at, so a key in it or in one of the next two
    /// costs a few comparisons instead of a binary search.
    pub fn max_covering_seq_hinted(
        &self,
        user_key: &[u8],
        read_seq: SequenceNumber,
        hint: &std::cell::Cell<usize>,
    ) -> SequenceNumber {
        let frags = &self.fragments;
        let mut i = hint.get();
        if i < frags.len() && frags[i].start.as_slice() <= user_key {
            for _ in 0..3 {
                let f = &frags[i];
                if user_key < f.end.as_slice() {
                    hint.set(i);
                    return f.newest_visible(read_seq);
                }
                match frags.get(i + 1) {
                    // In the gap after fragment i.
                    Some(next) if user_key < next.start.as_slice() => {
                        hint.set(i);
                        return 0;
                    }
                    Some(_) => i += 1,
                    None => {
                        hint.set(i);
                        return 0;
                    }
                }
            }
        }
        let at = frags.partition_point(|f| f.start.as_slice() <= user_key);
        hint.set(at.saturating_sub(1));
        self.max_covering_seq(user_key, read_seq)
    }

    /// The oldest tombstone covering `user_key` newer than `seq` (the one that deletes an
    /// entry at `seq` soonest); 0 if none.
    pub fn oldest_covering_above(&self, user_key: &[u8], seq: SequenceNumber) -> SequenceNumber {
        self.fragment_at(user_key)
            .and_then(|f| f.seqs.iter().rev().copied().find(|&s| s > seq))
            .unwrap_or(0)
    }

    /// The part in `[lower, upper)` (`None`: unbounded), fragments cut at the bounds.
    pub fn clipped(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Self {
        let fragments = self
            .fragments
            .iter()
            .filter_map(|f| {
                let start = match lower {
                    Some(l) if l > f.start.as_slice() => l,
                    _ => f.start.as_slice(),
                };
                let end = match upper {
                    Some(u) if u < f.end.as_slice() => u,
                    _ => f.end.as_slice(),
                };
                (start < end).then(|| Fragment {
                    start: start.to_vec(),
                    end: end.to_vec(),
                    seqs: f.seqs.clone(),
                })
            })
            .collect();
        Self::from_fragments(fragments)
    }

    /// Keeps, per fragment, the sequence numbers `keep(fragment, seq)` accepts; fragments left
    /// with none go.
    pub fn retain(&mut self, mut keep: impl FnMut(&Fragment, SequenceNumber) -> bool) {
        for i in 0..self.fragments.len() {
            let f = &self.fragments[i];
            let seqs: Vec<SequenceNumber> =
                f.seqs.iter().copied().filter(|&s| keep(f, s)).collect();
            self.fragments[i].seqs = seqs;
        }
        self.fragments.retain(|f| !f.seqs.is_empty());
        let starts: Vec<&[u8]> = self.fragments.iter().map(|f| f.start.as_slice()).collect();
        self.heads = HeadIndex::new(&starts).unwrap_or_default();
    }

    /// True if tombstones with sequence numbers in `(above, at_most]` cover every user key in
    /// `[start, end_inclusive]` without a gap.
    pub fn covers_range(
        &self,
        start: &[u8],
        end_inclusive: &[u8],
        above: SequenceNumber,
        at_most: SequenceNumber,
    ) -> bool {
        let i = self.fragments_starting_by(start);
        let Some(first) = i.checked_sub(1) else {
            return false;
        };
        let mut covered_to: &[u8] = start;
        for f in &self.fragments[first..] {
            if f.start.as_slice() > covered_to {
                return false; // a gap
            }
            if !f.seqs.iter().any(|&s| s > above && s <= at_most) {
                return false;
            }
            covered_to = &f.end;
            if covered_to > end_inclusive {
                return true;
            }
        }
        false
    }

    /// The smallest internal key a table holding these tombstones must cover: the first
    /// fragment's start at its newest sequence number. `None` if empty.
    pub fn smallest_key(&self) -> Option<InternalKey> {
        let f = self.fragments.first()?;
        Some(InternalKey::new(
            &f.start,
            f.seqs.first().copied().unwrap_or(0),
            ValueKind::RangeDeletion,
        ))
    }

    /// The largest internal key a table holding these tombstones must cover: the last
    /// fragment's end with the largest trailer, which sorts before every entry of that user
    /// key (the end is exclusive). `None` if empty.
    pub fn largest_key(&self) -> Option<InternalKey> {
        let f = self.fragments.last()?;
        Some(InternalKey::new(
            &f.end,
            MAX_SEQUENCE,
            ValueKind::RangeDeletion,
        ))
    }

    /// Smallest and largest sequence numbers of any tombstone; `None` if empty.
    pub fn seq_range(&self) -> Option<(SequenceNumber, SequenceNumber)> {
        let all = self.fragments.iter().flat_map(|f| f.seqs.iter().copied());
        let min = all.clone().min()?;
        Some((min, all.max().unwrap_or(min)))
    }

    /// The range-deletion block's entries in order: internal key (start, seq, RangeDeletion)
    /// and the fragment's end as the value (docs/format/sstable.md).
    pub fn block_entries(&self) -> impl Iterator<Item = (Vec<u8>, &[u8])> + '_ {
        self.fragments.iter().flat_map(|f| {
            f.seqs.iter().map(move |&seq| {
                (
                    key::make_internal_key(&f.start, seq, ValueKind::RangeDeletion),
                    f.end.as_slice(),
                )
            })
        })
    }

    /// Reads a range-deletion block (at `offset` of table `path`). Every entry must be a range
    /// deletion with a non-empty range; anything else is `Corruption`.
    pub fn decode_block(block: Arc<Block>, path: &Path, offset: u64) -> Result<Self> {
        let mut it = BlockIter::new(block).with_origin(Arc::from(path), offset);
        it.seek_to_first();
        let mut list = Vec::new();
        while it.valid() {
            let p = key::parse_internal_key(it.key())
                .filter(|p| p.kind == ValueKind::RangeDeletion)
                .ok_or_else(|| {
                    Error::corruption(path, offset, "range-deletion block holds a non-range key")
                })?;
            if p.user_key >= it.value() {
                return Err(Error::corruption(
                    path,
                    offset,
                    "range-deletion block holds an empty or inverted range",
                ));
            }
            list.push(RangeTombstone {
                start: p.user_key.to_vec(),
                end: it.value().to_vec(),
                seq: p.sequence,
            });
            it.next();
        }
        it.status()?;
        Ok(Self::new(list))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(start: &str, end: &str, seq: u64) -> RangeTombstone {
        RangeTombstone {
            start: start.as_bytes().to_vec(),
            end: end.as_bytes().to_vec(),
            seq,
        }
    }

    fn show(f: &FragmentedRangeTombstones) -> String {
        f.fragments()
            .iter()
            .map(|f| {
                let seqs: Vec<String> = f.seqs.iter().map(u64::to_string).collect();
                format!(
                    "[{},{})@{}",
                    String::from_utf8_lossy(&f.start),
                    String::from_utf8_lossy(&f.end),
                    seqs.join(",")
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn fragments_cut_at_every_bound() {
        let f = FragmentedRangeTombstones::new([
            t("c", "g", 5),
            t("a", "e", 3),
            t("f", "h", 9),
            t("x", "x", 4),
            t("m", "k", 4),
            t("a", "e", 3),
        ]);
        assert_eq!(show(&f), "[a,c)@3 [c,e)@5,3 [e,f)@5 [f,g)@9,5 [g,h)@9");
        assert_eq!(f.num_entries(), 7);
        // Fragmenting fragments changes nothing.
        assert_eq!(FragmentedRangeTombstones::new(f.tombstones()), f);
        assert!(FragmentedRangeTombstones::new([t("b", "a", 1)]).is_empty());
    }

    /// Keys that share 8-byte heads (long common prefixes, trailing zero bytes, the empty
    /// key): the head-accelerated search agrees with a scan of every tombstone.
    #[test]
    fn lookups_agree_with_a_scan_when_heads_tie() {
        let pieces: [&[u8]; 6] = [b"", b"\0", b"prefix00", b"prefix00\0", b"prefix00a", b"z"];
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for a in pieces {
            for b in pieces {
                keys.push([a, b].concat());
            }
        }
        keys.sort();
        keys.dedup();
        let mut tombstones = Vec::new();
        for (i, w) in keys.windows(3).enumerate() {
            if i % 2 == 0 {
                tombstones.push(RangeTombstone {
                    start: w[0].clone(),
                    end: w[2].clone(),
                    seq: 10 + i as u64,
                });
            }
        }
        let f = FragmentedRangeTombstones::new(tombstones.clone());
        let mut probes = keys.clone();
        probes.extend(keys.iter().map(|k| [k.as_slice(), b"\x01"].concat()));
        for k in &probes {
            let want = tombstones
                .iter()
                .filter(|t| t.start.as_slice() <= k.as_slice() && k.as_slice() < t.end.as_slice())
                .map(|t| t.seq)
                .max()
                .unwrap_or(0);
            assert_eq!(f.max_covering_seq(k, MAX_SEQUENCE), want, "key {k:?}");
        }
    }

    #[test]
    fn covering_sequence_numbers() {
        let f = FragmentedRangeTombstones::new([t("c", "g", 5), t("a", "e", 3), t("f", "h", 9)]);
        assert_eq!(f.max_covering_seq(b"a", 100), 3);
        assert_eq!(f.max_covering_seq(b"d", 100), 5);
        assert_eq!(f.max_covering_seq(b"d", 4), 3);
        assert_eq!(f.max_covering_seq(b"d", 2), 0);
        assert_eq!(f.max_covering_seq(b"h", 100), 0);
        assert_eq!(f.max_covering_seq(b"", 100), 0);
        assert_eq!(f.max_covering_seq(b"gz", 100), 9);
        assert_eq!(f.oldest_covering_above(b"d", 1), 3);
        assert_eq!(f.oldest_covering_above(b"d", 3), 5);
        assert_eq!(f.oldest_covering_above(b"d", 5), 0);
        // The hinted lookup agrees with the plain one, in any order of keys.
        let hint = std::cell::Cell::new(0);
        let keys: Vec<&[u8]> = vec![
            b"", b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"gz", b"h", b"z", b"d", b"a", b"h",
            b"c", b"", b"f",
        ];
        for k in keys {
            for read in [2, 4, 7, 100] {
                assert_eq!(
                    f.max_covering_seq_hinted(k, read, &hint),
                    f.max_covering_seq(k, read),
                    "{k:?} at {read}"
                );
            }
        }
    }

    #[test]
    fn clipping_and_retaining() {
        let f = FragmentedRangeTombstones::new([t("c", "g", 5), t("a", "e", 3)]);
        assert_eq!(
            show(&f.clipped(Some(b"b"), Some(b"d"))),
            "[b,c)@3 [c,d)@5,3"
        );
        assert_eq!(show(&f.clipped(None, Some(b"a"))), "");
        assert_eq!(show(&f.clipped(Some(b"f"), None)), "[f,g)@5");
        let mut g = f.clone();
        g.retain(|_, s| s != 3);
        assert_eq!(show(&g), "[c,e)@5 [e,g)@5");
        assert_eq!(
            f.smallest_key().map(|k| k.user_key().to_vec()),
            Some(b"a".to_vec())
        );
        assert_eq!(
            f.largest_key().map(|k| k.user_key().to_vec()),
            Some(b"g".to_vec())
        );
        assert_eq!(f.seq_range(), Some((3, 5)));
    }

    #[test]
    fn range_coverage() {
        let f = FragmentedRangeTombstones::new([t("c", "g", 5), t("a", "e", 3), t("h", "k", 9)]);
        assert!(f.covers_range(b"a", b"f", 0, 10));
        assert!(f.covers_range(b"b", b"fzz", 2, 10));
        assert!(
            !f.covers_range(b"b", b"g", 2, 10),
            "g itself is not deleted"
        );
        assert!(!f.covers_range(b"a", b"f", 3, 10), "[a,c) only has seq 3");
        assert!(f.covers_range(b"c", b"f", 3, 10));
        assert!(!f.covers_range(b"c", b"f", 3, 4), "5 is above the limit");
        assert!(!f.covers_range(b"f", b"i", 0, 10), "gap between g and h");
        assert!(!f.covers_range(b"0", b"b", 0, 10));
    }
}
