//! Chooses the next compaction: the level whose size (or L0 file count) most exceeds its
//! target, skipping files that running compactions hold so that compactions of disjoint key
//! ranges can run in parallel.

use super::Compaction;
use crate::key;
use crate::options::Options;
use crate::version::{FileMetaData, Version, VersionScores};
use std::collections::HashSet;
use std::sync::Arc;

/// What is already running, which a new compaction must not touch.
#[derive(Debug, Default)]
pub struct Busy {
    /// Input files of running compactions.
    pub files: HashSet<u64>,
    /// (output level, smallest user key, largest user key) of running compactions.
    pub output_ranges: Vec<(usize, Vec<u8>, Vec<u8>)>,
    /// True while an L0 compaction runs (L0 files overlap, so only one at a time).
    pub l0_running: bool,
}

impl Busy {
    fn range_busy(&self, level: usize, smallest: &[u8], largest: &[u8]) -> bool {
        self.output_ranges
            .iter()
            .any(|(l, s, e)| *l == level && !(largest < s.as_slice() || smallest > e.as_slice()))
    }

    fn any_busy(&self, files: &[Arc<FileMetaData>]) -> bool {
        files.iter().any(|f| self.files.contains(&f.number))
    }

    /// Marks a compaction's inputs and output range as taken.
    pub fn add(&mut self, c: &Compaction) {
        self.files.extend(c.input_numbers());
        self.output_ranges.push((
            c.output_level,
            c.smallest_user_key.clone(),
            c.largest_user_key.clone(),
        ));
        if c.level == 0 {
            self.l0_running = true;
        }
    }

    /// Releases what `add` took.
    pub fn remove(&mut self, c: &Compaction) {
        for n in c.input_numbers() {
            self.files.remove(&n);
        }
        if let Some(i) = self.output_ranges.iter().position(|(l, s, e)| {
            *l == c.output_level && *s == c.smallest_user_key && *e == c.largest_user_key
        }) {
            self.output_ranges.swap_remove(i);
        }
        if c.level == 0 {
            self.l0_running = false;
        }
    }
}

/// Target size of `level` (L1 and deeper).
pub fn max_bytes_for_level(opts: &Options, level: usize) -> u64 {
    ScoreTargets::from_options(opts).max_bytes_for_level(level)
}

/// The options the compaction scores depend on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreTargets {
    /// `Options::level0_file_num_compaction_trigger`.
    pub level0_file_num_compaction_trigger: usize,
    /// `Options::max_bytes_for_level_base`.
    pub max_bytes_for_level_base: u64,
    /// `Options::max_bytes_for_level_multiplier`.
    pub max_bytes_for_level_multiplier: f64,
}

impl ScoreTargets {
    /// The targets `opts` sets.
    pub fn from_options(opts: &Options) -> Self {
        ScoreTargets {
            level0_file_num_compaction_trigger: opts.level0_file_num_compaction_trigger,
            max_bytes_for_level_base: opts.max_bytes_for_level_base,
            max_bytes_for_level_multiplier: opts.max_bytes_for_level_multiplier,
        }
    }

    /// Target size of `level` (L1 and deeper).
    pub fn max_bytes_for_level(&self, level: usize) -> u64 {
        let mut bytes = self.max_bytes_for_level_base as f64;
        for _ in 1..level {
            bytes *= self.max_bytes_for_level_multiplier;
        }
        bytes as u64
    }
}

/// Computes a version's compaction scores and pending bytes; the version set stores the result
/// in each version it builds.
pub fn score_version(v: &Version, t: &ScoreTargets) -> VersionScores {
    let n = v.num_levels();
    let level_scores = (0..n.saturating_sub(1))
        .map(|level| {
            if level == 0 {
                v.level_files(0).len() as f64 / t.level0_file_num_compaction_trigger as f64
            } else {
                v.level_bytes(level) as f64 / t.max_bytes_for_level(level) as f64
            }
        })
        .collect();
    let mut pending = 0u64;
    if v.level_files(0).len() >= t.level0_file_num_compaction_trigger {
        pending += v.level_bytes(0);
    }
    for level in 1..n.saturating_sub(1) {
        let size = v.level_bytes(level);
        let target = t.max_bytes_for_level(level);
        if size > target {
            let excess = size - target;
            pending = pending
                .saturating_add((excess as f64 * t.max_bytes_for_level_multiplier) as u64 + excess);
        }
    }
    VersionScores {
        level_scores,
        pending_compaction_bytes: pending,
    }
}

/// Output file size for `level`.
pub fn target_file_size(opts: &Options, level: usize) -> u64 {
    let mut size = opts.target_file_size_base.max(1);
    for _ in 1..level {
        size = size.saturating_mul(opts.target_file_size_multiplier.max(1));
    }
    size
}

/// Compaction score of each level but the last: >= 1 means the level needs compaction. The
/// version's stored scores when the version set built it, else computed from `opts`.
pub fn level_scores(v: &Version, opts: &Options) -> Vec<f64> {
    match &v.scores {
        Some(s) => s.level_scores.clone(),
        None => score_version(v, &ScoreTargets::from_options(opts)).level_scores,
    }
}

/// Bytes that compaction must still rewrite to bring every level to its target (an estimate
/// used for write stalls). Stored in the version like the scores.
pub fn pending_compaction_bytes(v: &Version, opts: &Options) -> u64 {
    match &v.scores {
        Some(s) => s.pending_compaction_bytes,
        None => score_version(v, &ScoreTargets::from_options(opts)).pending_compaction_bytes,
    }
}

/// Picks the most urgent compaction that does not conflict with running ones.
pub fn pick(
    v: &Version,
    opts: &Options,
    busy: &Busy,
    compact_pointers: &[Vec<u8>],
) -> Option<Compaction> {
    let computed;
    let scores = match &v.scores {
        Some(s) => &s.level_scores,
        None => {
            computed = level_scores(v, opts);
            &computed
        }
    };
    let mut scored: Vec<(usize, f64)> = scores.iter().copied().enumerate().collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (level, score) in scored {
        if score < 1.0 {
            break;
        }
        let c = if level == 0 {
            pick_level0(v, busy)
        } else {
            pick_level(
                v,
                level,
                busy,
                compact_pointers.get(level).map(|p| p.as_slice()),
            )
        };
        if c.is_some() {
            return c;
        }
    }
    None
}

/// All L0 files plus the overlapping L1 files: taking every L0 file keeps L0's newest-first
/// invariant simple (newer flushes always hold newer data than L1).
fn pick_level0(v: &Version, busy: &Busy) -> Option<Compaction> {
    if busy.l0_running {
        return None;
    }
    let inputs0 = v.level_files(0).to_vec();
    if inputs0.is_empty() || busy.any_busy(&inputs0) {
        return None;
    }
    let (s, l) = user_range(&inputs0)?;
    compaction_with_overlap(v, 0, inputs0, &s, &l, busy)
}

fn pick_level(
    v: &Version,
    level: usize,
    busy: &Busy,
    pointer: Option<&[u8]>,
) -> Option<Compaction> {
    let files = v.level_files(level);
    if files.is_empty() {
        return None;
    }
    // Start after the compact pointer and wrap around.
    let start = match pointer {
        Some(p) if !p.is_empty() => files
            .iter()
            .position(|f| key::compare_internal(f.largest.encoded(), p).is_gt())
            .unwrap_or(0),
        _ => 0,
    };
    for i in 0..files.len() {
        let f = &files[(start + i) % files.len()];
        if busy.files.contains(&f.number) {
            continue;
        }
        let s = f.smallest.user_key().to_vec();
        let l = f.largest.user_key().to_vec();
        if let Some(c) = compaction_with_overlap(v, level, vec![f.clone()], &s, &l, busy) {
            return Some(c);
        }
    }
    None
}

fn compaction_with_overlap(
    v: &Version,
    level: usize,
    inputs0: Vec<Arc<FileMetaData>>,
    smallest: &[u8],
    largest: &[u8],
    busy: &Busy,
) -> Option<Compaction> {
    let inputs1 = v.overlapping_files(level + 1, Some(smallest), Some(largest));
    if busy.any_busy(&inputs1) {
        return None;
    }
    let c = Compaction::new(level, level + 1, inputs0, inputs1);
    if busy.range_busy(c.output_level, &c.smallest_user_key, &c.largest_user_key) {
        return None;
    }
    Some(c)
}

/// Smallest and largest user keys of `files`.
pub fn user_range(files: &[Arc<FileMetaData>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let s = files.iter().map(|f| f.smallest.user_key()).min()?;
    let l = files.iter().map(|f| f.largest.user_key()).max()?;
    Some((s.to_vec(), l.to_vec()))
}
