//! Subcompactions (RocksDB's `max_subcompactions`): a compaction out of L0 (or a manual one)
//! split into user-key ranges that threads write side by side. Leveled compaction runs one
//! L0 compaction at a time, and a fill whose writes outpace it waits for that one thread.
//!
//! The ranges are cut at input files' bounds, chosen so that each holds about the same input
//! bytes; every version of a user key falls into one range, so each range is compacted exactly
//! as the whole would be, and the outputs of the ranges, in order, are the compaction's.

use super::job::{KeyRange, Written};
use crate::version::BlobGarbage;

/// Up to `n - 1` keys from `candidates` (sorted, distinct user keys) that split the inputs into
/// ranges of about `total / n` bytes each, by `bytes_below(key)`: the input bytes before `key`
/// (nondecreasing in `key`). A boundary leaves at least an eighth of a range's share on each
/// side; none if the inputs cannot be split that way.
pub(crate) fn pick_boundaries(
    candidates: &[Vec<u8>],
    n: usize,
    total: u64,
    bytes_below: &dyn Fn(&[u8]) -> u64,
) -> Vec<Vec<u8>> {
    if n < 2 || candidates.is_empty() || total == 0 {
        return Vec::new();
    }
    let below: Vec<u64> = candidates.iter().map(|k| bytes_below(k)).collect();
    let share = total / n as u64;
    let min_gap = share / 8;
    let mut chosen = Vec::new();
    let mut last = 0u64;
    for j in 1..n as u64 {
        let target = total / n as u64 * j;
        let best = below
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b >= last + min_gap && b + min_gap <= total && b > last)
            .min_by_key(|&(_, &b)| b.abs_diff(target));
        if let Some((i, &b)) = best {
            chosen.push(candidates[i].clone());
            last = b;
        }
    }
    chosen
}

/// The user-key ranges that `boundaries` (sorted) cut the key space into.
pub(crate) fn ranges(boundaries: &[Vec<u8>]) -> Vec<KeyRange<'_>> {
    let lowers = std::iter::once(None).chain(boundaries.iter().map(|b| Some(b.as_slice())));
    let uppers = boundaries
        .iter()
        .map(|b| Some(b.as_slice()))
        .chain(std::iter::once(None));
    lowers
        .zip(uppers)
        .map(|(lower, upper)| KeyRange { lower, upper })
        .collect()
}

/// The outputs of the ranges, in key order, as one compaction's: their tables and blob files
/// in order, the garbage of each input blob file summed over the ranges.
pub(crate) fn merge_written(parts: Vec<Written>) -> Written {
    let mut out = Written::default();
    for p in parts {
        out.tables.extend(p.tables);
        out.blob_files.extend(p.blob_files);
        for g in p.blob_garbage {
            match out.blob_garbage.iter_mut().find(|o| o.number == g.number) {
                Some(o) => {
                    o.count += g.count;
                    o.bytes += g.bytes;
                }
                None => out.blob_garbage.push(g),
            }
        }
    }
    out.blob_garbage.sort_by_key(|g: &BlobGarbage| g.number);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(names: &[&str]) -> Vec<Vec<u8>> {
        names.iter().map(|k| k.as_bytes().to_vec()).collect()
    }

    /// Inputs of 100 bytes per letter from "a" to "z" (2,600 bytes).
    fn uniform(k: &[u8]) -> u64 {
        u64::from(k[0].saturating_sub(b'a')) * 100
    }

    #[test]
    fn boundaries_split_the_bytes_evenly_at_candidate_keys() {
        let c = keys(&["c", "f", "h", "m", "n", "q", "t", "x"]);
        assert_eq!(pick_boundaries(&c, 2, 2600, &uniform), keys(&["n"]));
        assert_eq!(pick_boundaries(&c, 3, 2600, &uniform), keys(&["h", "q"]));
        assert_eq!(
            pick_boundaries(&c, 4, 2600, &uniform),
            keys(&["h", "n", "t"])
        );
        // One range asked, no candidates, or nothing to split: no boundary.
        assert!(pick_boundaries(&c, 1, 2600, &uniform).is_empty());
        assert!(pick_boundaries(&[], 2, 2600, &uniform).is_empty());
        assert!(pick_boundaries(&c, 2, 0, &uniform).is_empty());
    }

    #[test]
    fn a_boundary_never_leaves_a_range_nearly_empty() {
        // All the bytes lie after "y": every candidate would leave the first range empty.
        let skewed = |k: &[u8]| if k > b"y".as_slice() { 1000 } else { 0 };
        let c = keys(&["c", "m", "x"]);
        assert!(pick_boundaries(&c, 2, 1000, &skewed).is_empty());
        // Candidates only near the ends: too close to split.
        let c = keys(&["a", "b"]);
        assert!(pick_boundaries(&c, 2, 2600, &uniform).is_empty());
        // Two boundaries at one key are one.
        let c = keys(&["n"]);
        assert_eq!(pick_boundaries(&c, 4, 2600, &uniform), keys(&["n"]));
    }

    #[test]
    fn ranges_cover_the_key_space_in_order() {
        let b = keys(&["g", "p"]);
        let r: Vec<_> = ranges(&b).iter().map(|r| (r.lower, r.upper)).collect();
        assert_eq!(
            r,
            vec![
                (None, Some(b"g".as_slice())),
                (Some(b"g".as_slice()), Some(b"p".as_slice())),
                (Some(b"p".as_slice()), None),
            ]
        );
        let all: Vec<_> = ranges(&[]).iter().map(|r| (r.lower, r.upper)).collect();
        assert_eq!(all, vec![(None, None)]);
    }

    #[test]
    fn merged_outputs_keep_range_order_and_sum_garbage_per_file() {
        use crate::version::BlobFileAddition;
        let table =
            |number| std::sync::Arc::unwrap_or_clone(super::super::tests::file(number, b"a", b"b"));
        let blob = |n| BlobFileAddition {
            number: n,
            ..Default::default()
        };
        let g = |number, count, bytes| BlobGarbage {
            number,
            count,
            bytes,
        };
        let a = Written {
            tables: vec![table(11), table(12)],
            blob_files: vec![blob(13)],
            blob_garbage: vec![g(7, 1, 100), g(5, 2, 40)],
        };
        let b = Written {
            tables: vec![table(14)],
            blob_files: vec![],
            blob_garbage: vec![g(7, 3, 300)],
        };
        let m = merge_written(vec![a, b]);
        let numbers: Vec<u64> = m.tables.iter().map(|t| t.number).collect();
        assert_eq!(numbers, vec![11, 12, 14]);
        assert_eq!(m.blob_files.len(), 1);
        assert_eq!(m.blob_garbage, vec![g(5, 2, 40), g(7, 4, 400)]);
    }
}
