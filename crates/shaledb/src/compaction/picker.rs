//! Chooses the next compaction: the level whose size (or L0 file count) most exceeds its
//! target, skipping files that running compactions hold so that compactions of disjoint key
//! ranges can run in parallel.

use super::Compaction;
use crate::key;
use crate::listener::CompactionReason;
use crate::options::Options;
use crate::version::{FileMetaData, Version, VersionScores};
use std::collections::HashSet;
use std::sync::Arc;

/// What is already running, which a new compaction must not touch.
#[derive(Debug, Default)]
pub(crate) struct Busy {
    /// Input files of running compactions.
    pub files: HashSet<u64>,
    /// (output level, smallest user key, largest user key) of running compactions.
    pub output_ranges: Vec<(usize, Vec<u8>, Vec<u8>)>,
    /// True while an L0 compaction runs (L0 files overlap, so only one at a time).
    pub l0_running: bool,
}

impl Busy {
    pub(crate) fn range_busy(&self, level: usize, smallest: &[u8], largest: &[u8]) -> bool {
        self.output_ranges
            .iter()
            .any(|(l, s, e)| *l == level && !(largest < s.as_slice() || smallest > e.as_slice()))
    }

    fn any_busy(&self, files: &[Arc<FileMetaData>]) -> bool {
        files.iter().any(|f| self.files.contains(&f.number))
    }

    /// Marks a compaction's inputs and output range as taken.
    pub(crate) fn add(&mut self, c: &Compaction) {
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
    pub(crate) fn remove(&mut self, c: &Compaction) {
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

/// The options the compaction scores depend on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ScoreTargets {
    /// `Options::level0_file_num_compaction_trigger`.
    pub level0_file_num_compaction_trigger: usize,
    /// `Options::level0_slowdown_writes_trigger`: from here L0 goes before every other level.
    pub level0_slowdown_writes_trigger: usize,
    /// `Options::max_bytes_for_level_base`.
    pub max_bytes_for_level_base: u64,
    /// `Options::max_bytes_for_level_multiplier`.
    pub max_bytes_for_level_multiplier: f64,
    /// `Options::level_compaction_dynamic_level_bytes`.
    pub dynamic_level_bytes: bool,
    /// `Options::write_buffer_size`: the data an L0 table stands for (see
    /// [`level0_table_weight`]).
    pub write_buffer_size: u64,
}

impl ScoreTargets {
    /// The targets `opts` sets.
    pub(crate) fn from_options(opts: &Options) -> Self {
        ScoreTargets {
            level0_file_num_compaction_trigger: opts.level0_file_num_compaction_trigger,
            level0_slowdown_writes_trigger: opts.level0_slowdown_writes_trigger,
            max_bytes_for_level_base: opts.max_bytes_for_level_base,
            max_bytes_for_level_multiplier: opts.max_bytes_for_level_multiplier,
            dynamic_level_bytes: opts.level_compaction_dynamic_level_bytes,
            write_buffer_size: opts.write_buffer_size as u64,
        }
    }

    /// Static target size of `level` (L1 and deeper): base times multiplier^(level - 1).
    pub(crate) fn max_bytes_for_level(&self, level: usize) -> u64 {
        let mut bytes = self.max_bytes_for_level_base as f64;
        for _ in 1..level {
            bytes *= self.max_bytes_for_level_multiplier;
        }
        bytes as u64
    }
}

/// Where L0 compacts to and the target size of every level (`u64::MAX`: no target, for L0
/// and for the empty levels above the base level).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LevelTargets {
    /// The level L0 compacts into: 1, or with dynamic level sizes the highest level the data
    /// needs.
    pub base_level: usize,
    /// Target bytes of each level.
    pub bytes: Vec<u64>,
}

/// The level targets of `v`. Static: L1 is the base level and level n's target is
/// `max_bytes_for_level_base * multiplier^(n-1)`. Dynamic (RocksDB's
/// `level_compaction_dynamic_level_bytes`, same rules as its `CalculateBaseBytes`): the largest
/// level's size is the last level's target, each level above it targets a multiplier-th of the
/// one below, and the first level whose target would fall to `max_bytes_for_level_base` or
/// less becomes the base level; levels above it stay empty. Space amplification then stays
/// near 1 + 1/multiplier at every data size, not only when the last level is full.
pub(crate) fn level_targets(v: &Version, t: &ScoreTargets) -> LevelTargets {
    let n = v.num_levels();
    if !t.dynamic_level_bytes || n < 2 {
        let mut bytes = vec![u64::MAX; n];
        for (level, b) in bytes.iter_mut().enumerate().skip(1) {
            *b = t.max_bytes_for_level(level);
        }
        return LevelTargets {
            base_level: 1,
            bytes,
        };
    }
    dynamic_level_targets(v, t)
}

fn dynamic_level_targets(v: &Version, t: &ScoreTargets) -> LevelTargets {
    let n = v.num_levels();
    let multiplier = t.max_bytes_for_level_multiplier.max(1.0);
    let mut bytes = vec![u64::MAX; n];
    let first_non_empty = (1..n).find(|&l| v.level_bytes(l) > 0);
    let largest = (1..n).map(|l| v.level_bytes(l)).max().unwrap_or(0);
    let Some(first_non_empty) = first_non_empty else {
        // Nothing below L0 yet: L0 compacts straight into the last level.
        return LevelTargets {
            base_level: n - 1,
            bytes,
        };
    };
    let l0_bytes = v.level_bytes(0);
    let base_max = t.max_bytes_for_level_base.max(l0_bytes);
    let base_min = (base_max as f64 / multiplier) as u64;
    // The size the first non-empty level would target if the last level targeted `largest`.
    let mut size = largest as f64;
    for _ in first_non_empty..n - 1 {
        size /= multiplier;
    }
    let mut base_level = first_non_empty;
    let mut base_size = if size as u64 <= base_min {
        // Levels already exist above where the data needs them: keep them, their targets small.
        base_min + 1
    } else {
        while base_level > 1 && size as u64 > base_max {
            base_level -= 1;
            size /= multiplier;
        }
        (size as u64).clamp(1, base_max)
    };
    let mut level_multiplier = multiplier;
    let l0_files = v.level_files(0).len();
    if l0_bytes > base_size
        && (l0_bytes > t.max_bytes_for_level_base
            || l0_files / 2 >= t.level0_file_num_compaction_trigger)
    {
        // A large L0 (a write burst): size the base level for it and spread the growth to the
        // largest level over the levels in between.
        base_size = l0_bytes;
        level_multiplier = if base_level == n - 1 {
            1.0
        } else {
            (largest as f64 / base_size as f64).powf(1.0 / (n - base_level - 1) as f64)
        };
    }
    let mut size = base_size as f64;
    for (level, b) in bytes.iter_mut().enumerate().skip(base_level) {
        if level > base_level {
            size *= level_multiplier;
        }
        // Never below the base target: an hourglass shape would starve L0 of compactions.
        *b = (size.min(u64::MAX as f64) as u64).max(base_max);
    }
    LevelTargets { base_level, bytes }
}

/// How many L0 tables `f` counts as in L0's score: one, or for a table flushed from a memtable
/// whose values went to blob files as they were written (`separate_blobs_at_write`: such a
/// memtable holds only references, and is full only once its blob files reach
/// `blob_file_size`), one per whole write buffer of the blob bytes it refers to.
/// So a table standing for many memtables' worth of values triggers the compaction that
/// drops the references it shadows (and with them whole blob files of overwritten values) as
/// soon as that many tables would have; a table of values separated at flush counts one.
pub(crate) fn level0_table_weight(v: &Version, f: &FileMetaData, write_buffer_size: u64) -> u64 {
    if f.blob_files.is_empty() {
        return 1;
    }
    let blob_bytes: u64 = f
        .blob_files
        .iter()
        .filter_map(|&n| v.blob_file(n))
        .map(|b| b.meta.addition.blob_bytes)
        .sum();
    (blob_bytes / write_buffer_size.max(1)).max(1)
}

/// L0's score: its file count (each table weighted by [`level0_table_weight`]) over the
/// trigger; with dynamic level sizes also its bytes (as RocksDB: past
/// `max_bytes_for_level_base` it qualifies, past the base level's target it scores by the
/// ratio).
fn level0_score(v: &Version, t: &ScoreTargets, targets: &LevelTargets) -> f64 {
    let tables: u64 = v
        .level_files(0)
        .iter()
        .map(|f| level0_table_weight(v, f, t.write_buffer_size))
        .sum();
    let mut score = tables as f64 / t.level0_file_num_compaction_trigger as f64;
    if t.dynamic_level_bytes {
        let bytes = v.level_bytes(0);
        if bytes >= t.max_bytes_for_level_base {
            score = score.max(1.01);
        }
        let base_target = targets
            .bytes
            .get(targets.base_level)
            .copied()
            .unwrap_or(u64::MAX);
        if bytes > base_target {
            score = score.max(bytes as f64 / base_target as f64);
        }
    }
    score
}

/// Computes a version's compaction scores and pending bytes; the version set stores the result
/// in each version it builds.
pub(crate) fn score_version(v: &Version, t: &ScoreTargets) -> VersionScores {
    let n = v.num_levels();
    let targets = level_targets(v, t);
    let level_scores: Vec<f64> = (0..n.saturating_sub(1))
        .map(|level| match level {
            0 => level0_score(v, t, &targets),
            _ => v.level_bytes(level) as f64 / targets.bytes[level] as f64,
        })
        .collect();
    let last_score = match n {
        0 | 1 => 0.0,
        _ => v.level_bytes(n - 1) as f64 / targets.bytes[n - 1] as f64,
    };
    let level0_slowing_writes = v.level_files(0).len() >= t.level0_slowdown_writes_trigger;
    let pick_priorities = pick_priorities(
        &level_scores,
        last_score,
        targets.base_level,
        level0_slowing_writes,
    );
    let mut pending = 0u64;
    if v.level_files(0).len() >= t.level0_file_num_compaction_trigger {
        pending += v.level_bytes(0);
    }
    for level in 1..n.saturating_sub(1) {
        let size = v.level_bytes(level);
        let target = targets.bytes[level];
        if size > target {
            let excess = size - target;
            pending = pending
                .saturating_add((excess as f64 * t.max_bytes_for_level_multiplier) as u64 + excess);
        }
    }
    VersionScores {
        level_scores,
        pick_priorities,
        pending_compaction_bytes: pending,
        base_level: targets.base_level,
    }
}

/// The lowest score a level's priority is divided by: an empty or nearly empty next level
/// raises the priority of the level above it at most a hundredfold (Pebble's floor).
const MIN_NEXT_LEVEL_SCORE: f64 = 0.01;

/// The order in which levels that need compaction are picked (Pebble's adjusted scores): each
/// level's score divided by the score of the level it compacts into (the base level for L0,
/// the next level otherwise), at least [`MIN_NEXT_LEVEL_SCORE`]. Ordering by the raw scores
/// picks L0 as long as it holds more tables than its trigger times the base level's overshoot,
/// so under a steady stream of flushes the base level is never compacted down: it grows far
/// past its target and every L0 compaction rewrites all of it (a 1 GiB random fill with 4 MB
/// write buffers ended with L1 at 420 MB of its 256 MiB, L2 empty). A level whose next level
/// has room ranks high, so the base level moves down first (cheaply: often a trivial move)
/// and L0 compactions merge into a base level near its target; a level whose next level is
/// over target itself waits for that one. Which levels are compacted at all still follows
/// the raw scores (at least 1). With `level0_slowing_writes` (L0 at the slowdown trigger:
/// writes are being slowed for its sake) L0 goes first whatever the ranks.
pub(crate) fn pick_priorities(
    level_scores: &[f64],
    last_score: f64,
    base_level: usize,
    level0_slowing_writes: bool,
) -> Vec<f64> {
    let score_of = |level: usize| level_scores.get(level).copied().unwrap_or(last_score);
    (0..level_scores.len())
        .map(|level| match level {
            0 if level0_slowing_writes => f64::INFINITY,
            _ => {
                let next = if level == 0 { base_level } else { level + 1 };
                level_scores[level] / score_of(next).max(MIN_NEXT_LEVEL_SCORE)
            }
        })
        .collect()
}

/// The level L0 compacts into (see [`level_targets`]).
pub(crate) fn base_level(v: &Version, opts: &Options) -> usize {
    match &v.scores {
        Some(s) => s.base_level,
        None => level_targets(v, &ScoreTargets::from_options(opts)).base_level,
    }
}

/// Output file size for `level`.
pub(crate) fn target_file_size(opts: &Options, level: usize) -> u64 {
    let mut size = opts.target_file_size_base.max(1);
    for _ in 1..level {
        size = size.saturating_mul(opts.target_file_size_multiplier.max(1));
    }
    size
}

/// Compaction score of each level but the last: >= 1 means the level needs compaction. The
/// version's stored scores when the version set built it, else computed from `opts`.
pub(crate) fn level_scores(v: &Version, opts: &Options) -> Vec<f64> {
    match &v.scores {
        Some(s) => s.level_scores.clone(),
        None => score_version(v, &ScoreTargets::from_options(opts)).level_scores,
    }
}

/// Bytes that compaction must still rewrite to bring every level to its target (an estimate
/// used for write stalls). Stored in the version like the scores.
pub(crate) fn pending_compaction_bytes(v: &Version, opts: &Options) -> u64 {
    match &v.scores {
        Some(s) => s.pending_compaction_bytes,
        None => score_version(v, &ScoreTargets::from_options(opts)).pending_compaction_bytes,
    }
}

/// Picks the most urgent compaction that does not conflict with running ones.
pub(crate) fn pick(
    v: &Version,
    opts: &Options,
    busy: &Busy,
    compact_pointers: &[Vec<u8>],
) -> Option<Compaction> {
    let computed;
    let scores = match &v.scores {
        Some(s) => s,
        None => {
            computed = score_version(v, &ScoreTargets::from_options(opts));
            &computed
        }
    };
    let base = scores.base_level;
    let mut due: Vec<(usize, f64)> = (scores.level_scores.iter().enumerate())
        .filter(|&(_, &score)| score >= 1.0)
        .map(|(level, _)| (level, scores.pick_priorities[level]))
        .collect();
    due.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (level, _) in due {
        let c = if level == 0 {
            pick_level0(v, base, busy).map(|c| intra_level0_if_small(c, opts))
        } else {
            pick_level(
                v,
                level,
                busy,
                compact_pointers.get(level).map(|p| p.as_slice()),
            )
        };
        if let Some(mut c) = c {
            c.reason = match level {
                0 => CompactionReason::Level0FilesNum,
                _ => CompactionReason::LevelMaxLevelSize,
            };
            return Some(with_output_settings(c, v, opts, base));
        }
    }
    pick_forced_blob_gc(v, opts, busy)
}

/// `c` with what depends on where it writes: the base level, and whether its inputs and its
/// output share a codec.
fn with_output_settings(mut c: Compaction, v: &Version, opts: &Options, base: usize) -> Compaction {
    c.base_level = base;
    let bottommost = v.nothing_below(c.output_level);
    c.codecs_match = opts.codec_for_output(c.level, base, false)
        == opts.codec_for_output(c.output_level, base, bottommost);
    c
}

/// What [`pick_seek`] found for a seek candidate.
#[derive(Debug)]
pub(crate) enum SeekPick {
    /// The candidate's compaction into the next level.
    Compact(Compaction),
    /// It conflicts with a running compaction: ask again after that one.
    Later,
    /// The table is no longer at that level, or has no level below: forget it.
    Gone,
}

/// The read-triggered compaction of table `number` at `level` (version/seeks.rs): the table
/// and what it overlaps in the next level, as a size-triggered compaction of it would be (all
/// of L0 for an L0 table, into the base level).
pub(crate) fn pick_seek(
    v: &Version,
    opts: &Options,
    busy: &Busy,
    level: usize,
    number: u64,
) -> SeekPick {
    let Some(f) = v.level_files(level).iter().find(|f| f.number == number) else {
        return SeekPick::Gone;
    };
    // An L0 table goes into the base level even when nothing is below (gets then searched
    // other L0 tables after it); a deeper table with nothing below cannot have been charged
    // in this version.
    if level > 0 && v.nothing_below(level) {
        return SeekPick::Gone;
    }
    if busy.files.contains(&number) {
        return SeekPick::Later;
    }
    let base = base_level(v, opts);
    let c = match level {
        0 => pick_level0(v, base, busy),
        _ => {
            let (s, l) = (f.smallest.user_key(), f.largest.user_key());
            compaction_with_overlap(v, level, level + 1, vec![f.clone()], s, l, busy)
        }
    };
    match c {
        Some(mut c) => {
            c.reason = CompactionReason::ReadTriggered;
            SeekPick::Compact(with_output_settings(c, v, opts, base))
        }
        None => SeekPick::Later,
    }
}

/// Blob garbage collection's forced compaction (RocksDB's `kForcedBlobGC`): once the blob
/// files under `blob_garbage_collection_age_cutoff` hold at least
/// `blob_garbage_collection_force_threshold` of garbage, a table below L0 referencing the
/// oldest of them is rewritten in place, which relocates its live blobs (see `BlobGc`), so
/// that file empties out and goes. One table per pick; L0 tables are compacted soon anyway.
fn pick_forced_blob_gc(v: &Version, opts: &Options, busy: &Busy) -> Option<Compaction> {
    if !opts.enable_blob_garbage_collection {
        return None;
    }
    let files = &v.blob_files;
    let k = (files.len() as f64 * opts.blob_garbage_collection_age_cutoff).floor() as usize;
    let old = files.get(..k)?;
    let oldest = old.first()?.meta.addition.number;
    let total: u64 = old.iter().map(|b| b.meta.addition.blob_bytes).sum();
    let garbage: u64 = old.iter().map(|b| b.garbage_bytes).sum();
    if total == 0 || (garbage as f64) < opts.blob_garbage_collection_force_threshold * total as f64
    {
        return None;
    }
    for level in 1..v.num_levels() {
        for f in v.level_files(level) {
            if busy.files.contains(&f.number) || f.blob_files.binary_search(&oldest).is_err() {
                continue;
            }
            let mut c = Compaction::new(level, level, vec![f.clone()], Vec::new());
            c.base_level = base_level(v, opts);
            c.reason = CompactionReason::ForcedBlobGc;
            if !busy.range_busy(level, &c.smallest_user_key, &c.largest_user_key) {
                return Some(c);
            }
        }
    }
    None
}

/// All L0 files plus the overlapping files of the base level: taking every L0 file keeps
/// L0's newest-first invariant simple (newer flushes always hold newer data than the levels
/// below).
fn pick_level0(v: &Version, base_level: usize, busy: &Busy) -> Option<Compaction> {
    if busy.l0_running {
        return None;
    }
    let inputs0 = v.level_files(0).to_vec();
    if inputs0.is_empty() || busy.any_busy(&inputs0) {
        return None;
    }
    let (s, l) = user_range(&inputs0)?;
    compaction_with_overlap(v, 0, base_level, inputs0, &s, &l, busy)
}

/// An L0 compaction of tables of blob references whose L0 tables hold less than a
/// `max_bytes_for_level_multiplier`-th of the bytes of the base-level tables they overlap
/// merges the L0 tables into one L0 table instead (RocksDB's intra-L0 compaction). With the
/// values in blob files the tables hold references of a few dozen bytes, the base level holds
/// every key's, and each L0 compaction would rewrite all of them for a sliver of new ones
/// (K1's 1 KB values: 4 MB write buffers against a 256 MB base level); merged in L0 first,
/// the new references go down once they are worth the multiplier, as between deeper levels.
/// L0 keeps one table plus the newer flushes. Tables of values go down as before: without
/// filters, the merged table costs every read a block of its own (100-byte values in tables:
/// readrandom at half the rate, bench/results/2026-11-27-intra-l0), where a table of
/// references stays in the cache. Safe for the newest-first order of L0 (by largest sequence
/// number): the inputs are every L0 table, so no L0 table is older than the merged one, and
/// every flush after it is newer.
fn intra_level0_if_small(c: Compaction, opts: &Options) -> Compaction {
    let [l0_bytes, below_bytes] = c.input_bytes();
    let multiplier = opts.max_bytes_for_level_multiplier.max(1.0);
    let references = c.inputs[0].iter().all(|f| !f.blob_files.is_empty());
    if c.inputs[0].len() < 2 || !references || l0_bytes as f64 * multiplier >= below_bytes as f64 {
        return c;
    }
    let [inputs0, _] = c.inputs;
    Compaction::new(0, 0, inputs0, Vec::new())
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
        let c = compaction_with_overlap(v, level, level + 1, vec![f.clone()], &s, &l, busy);
        if let Some(c) = c {
            return Some(c);
        }
    }
    None
}

fn compaction_with_overlap(
    v: &Version,
    level: usize,
    output_level: usize,
    inputs0: Vec<Arc<FileMetaData>>,
    smallest: &[u8],
    largest: &[u8],
    busy: &Busy,
) -> Option<Compaction> {
    let inputs1 = v.overlapping_files(output_level, Some(smallest), Some(largest));
    if busy.any_busy(&inputs1) {
        return None;
    }
    let c = Compaction::new(level, output_level, inputs0, inputs1);
    if busy.range_busy(c.output_level, &c.smallest_user_key, &c.largest_user_key) {
        return None;
    }
    Some(c)
}

/// Smallest and largest user keys of `files`.
pub(crate) fn user_range(files: &[Arc<FileMetaData>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let s = files.iter().map(|f| f.smallest.user_key()).min()?;
    let l = files.iter().map(|f| f.largest.user_key()).max()?;
    Some((s.to_vec(), l.to_vec()))
}

/// Golden tests: a version described in text, what the picker chooses. Files are
/// `number:smallest-largest[:bytes]` (bytes default 1000; at L0 a higher number is a newer
/// flush). Other lines: `busy: <file numbers>`, `busy-l0`, `busy-range: L<n> <a>-<b>`,
/// `pointer L<n>: <user key>`, `bottommost-zstd:` (zstd where nothing lies below),
/// `dynamic:` (dynamic level sizes; the result then also names the
/// base level and the level targets). Inputs and outputs only, so the tests hold whether
/// scores are computed per call or once per version.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{InternalKey, ValueKind};
    use crate::version::{set::apply_for_tests, VersionEdit};

    fn opts() -> Options {
        Options {
            level0_file_num_compaction_trigger: 4,
            max_bytes_for_level_base: 10_000,
            max_bytes_for_level_multiplier: 10.0,
            num_levels: 4,
            // One codec on every level, so moves are decided by overlaps alone (except in
            // the tests that set a bottommost codec).
            compression_per_level: vec![crate::CompressionType::None],
            ..Options::default()
        }
    }

    struct Case {
        opts: Options,
        version: Version,
        busy: Busy,
        pointers: Vec<Vec<u8>>,
        /// A seek candidate ("seek: L1 5"), asked of `pick_seek` after `pick`.
        seek: Option<(usize, u64)>,
    }

    fn parse(desc: &str) -> Case {
        let mut o = opts();
        let mut edit = VersionEdit::default();
        let mut busy = Busy::default();
        let mut pointers = vec![Vec::new(); o.num_levels];
        let mut seek = None;
        for line in desc.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (head, rest) = line.split_once(':').expect("`name: values`");
            let rest = rest.trim();
            if let Some(level) = head.strip_prefix('L') {
                let level: usize = level.parse().expect("level");
                for f in rest.split_whitespace() {
                    let parts: Vec<&str> = f.split(':').collect();
                    let number: u64 = parts[0].parse().expect("number");
                    let (a, b) = parts[1].split_once('-').expect("range");
                    let size = parts.get(2).map_or(1000, |s| s.parse().expect("size"));
                    // "b7.8": the table references blob files 7 and 8.
                    let blob_files: Vec<u64> = parts
                        .get(3)
                        .and_then(|b| b.strip_prefix('b'))
                        .map(|b| b.split('.').map(|n| n.parse().expect("blob")).collect())
                        .unwrap_or_default();
                    edit.add_file(
                        level,
                        FileMetaData {
                            number,
                            file_size: size,
                            smallest: InternalKey::new(a.as_bytes(), number * 10, ValueKind::Put),
                            largest: InternalKey::new(b.as_bytes(), number * 10, ValueKind::Put),
                            smallest_seqno: number * 10,
                            largest_seqno: number * 10,
                            num_entries: 1,
                            num_deletions: 0,
                            num_range_deletions: 0,
                            blob_files,
                            global_seqno: None,
                            file_checksum: None,
                            open_table: Default::default(),
                            seeks: Default::default(),
                        },
                    );
                }
            } else if head == "blobs" {
                // "7:900/1000": blob file 7 of 1000 bytes (and records), 900 of them garbage.
                for b in rest.split_whitespace() {
                    let (number, counts) = b.split_once(':').expect("n:garbage/total");
                    let (garbage, total) = counts.split_once('/').expect("garbage/total");
                    let number: u64 = number.parse().expect("number");
                    let (garbage, total): (u64, u64) = (
                        garbage.parse().expect("garbage"),
                        total.parse().expect("total"),
                    );
                    edit.blob_files_added
                        .push(crate::version::BlobFileAddition {
                            number,
                            blob_count: total,
                            blob_bytes: total,
                            file_size: total + 60,
                            file_checksum: None,
                        });
                    edit.blob_garbage.push(crate::version::BlobGarbage {
                        number,
                        count: garbage,
                        bytes: garbage,
                    });
                }
            } else if head == "blob-gc" {
                let (cutoff, threshold) = rest.split_once(' ').expect("cutoff threshold");
                o.enable_blob_garbage_collection = true;
                o.blob_garbage_collection_age_cutoff = cutoff.parse().expect("cutoff");
                o.blob_garbage_collection_force_threshold = threshold.parse().expect("threshold");
            } else if head == "busy" {
                busy.files.extend(
                    rest.split_whitespace()
                        .map(|n| n.parse::<u64>().expect("n")),
                );
            } else if head == "dynamic" {
                o.level_compaction_dynamic_level_bytes = true;
            } else if head == "bottommost-zstd" {
                o.bottommost_compression = Some(crate::CompressionType::Zstd);
            } else if head == "busy-l0" {
                busy.l0_running = true;
            } else if head == "busy-range" {
                let (level, range) = rest.split_once(' ').expect("L<n> a-b");
                let (a, b) = range.split_once('-').expect("a-b");
                let level = level.trim_start_matches('L').parse().expect("level");
                busy.output_ranges
                    .push((level, a.as_bytes().to_vec(), b.as_bytes().to_vec()));
            } else if head == "seek" {
                let (level, number) = rest.split_once(' ').expect("L<n> <number>");
                let level = level.trim_start_matches('L').parse().expect("level");
                seek = Some((level, number.parse().expect("number")));
            } else if let Some(level) = head.strip_prefix("pointer L") {
                let level: usize = level.parse().expect("level");
                pointers[level] = crate::key::make_internal_key(rest.as_bytes(), 0, ValueKind::Put);
            } else {
                panic!("unknown line {line}");
            }
        }
        let version = apply_for_tests(&Version::empty(o.num_levels), &edit).expect("version");
        Case {
            opts: o,
            version,
            busy,
            pointers,
            seek,
        }
    }

    fn describe(c: &Compaction) -> String {
        format!(
            "L{}->L{} {} + {} range {}-{} {}",
            c.level,
            c.output_level,
            numbers(&c.inputs[0]),
            numbers(&c.inputs[1]),
            String::from_utf8_lossy(&c.smallest_user_key),
            String::from_utf8_lossy(&c.largest_user_key),
            if c.is_trivial_move() {
                "move"
            } else {
                "rewrite"
            },
        )
    }

    fn numbers(files: &[Arc<FileMetaData>]) -> String {
        let v: Vec<String> = files.iter().map(|f| f.number.to_string()).collect();
        format!("[{}]", v.join(" "))
    }

    /// "scores: ..." and "pick: ..." for the described version.
    fn run(desc: &str) -> String {
        let case = parse(desc);
        let o = &case.opts;
        let scores: Vec<String> = level_scores(&case.version, o)
            .iter()
            .enumerate()
            .map(|(l, s)| format!("L{l}={s:.2}"))
            .collect();
        let pick = match pick(&case.version, o, &case.busy, &case.pointers) {
            None => "none".to_string(),
            Some(c) => describe(&c),
        };
        let mut out = format!("scores: {}\npick: {pick}", scores.join(" "));
        if let Some((level, number)) = case.seek {
            out += &match pick_seek(&case.version, o, &case.busy, level, number) {
                SeekPick::Compact(c) => format!("\nseek: {} {:?}", describe(&c), c.reason),
                SeekPick::Later => "\nseek: later".to_string(),
                SeekPick::Gone => "\nseek: gone".to_string(),
            };
        }
        if o.level_compaction_dynamic_level_bytes {
            let t = level_targets(&case.version, &ScoreTargets::from_options(o));
            let targets: Vec<String> = (1..o.num_levels)
                .map(|l| match t.bytes[l] {
                    u64::MAX => format!("L{l}=-"),
                    b => format!("L{l}={b}"),
                })
                .collect();
            out += &format!("\nbase: L{} targets: {}", t.base_level, targets.join(" "));
        }
        out
    }

    /// Compares each case's output with the expected text; `PRINT_GOLDEN=1` prints every
    /// case's output first (to read over when writing a new case).
    fn check(cases: &[(&str, &str)]) {
        if std::env::var("PRINT_GOLDEN").is_ok() {
            for (desc, _) in cases {
                println!("=== {desc:?}\n{}", run(desc));
            }
        }
        for (desc, want) in cases {
            assert_eq!(run(desc), want.trim(), "\n--- case ---\n{desc}");
        }
    }

    /// L0 tables of blob references holding less than a multiplier-th (10) of the
    /// base-level bytes they overlap merge into one L0 table; at a tenth or more they go down
    /// as before, and so do tables of values.
    #[test]
    fn small_l0_tables_over_a_large_overlap_merge_within_l0() {
        check(&[
            (
                "L0: 1:a-c:100:b7 2:b-d:100:b8 3:c-e:100:b9 4:x-y:100:b10\nL1: 5:a-m:3000 6:n-z:3000\nblobs: 7:0/100 8:0/100 9:0/100 10:0/100",
                "scores: L0=1.00 L1=0.60 L2=0.00\npick: L0->L0 [4 3 2 1] + [] range a-y rewrite",
            ),
            (
                "L0: 1:a-c:150:b7 2:b-d:150:b8 3:c-e:150:b9 4:x-y:150:b10\nL1: 5:a-m:3000 6:n-z:3000\nblobs: 7:0/100 8:0/100 9:0/100 10:0/100",
                "scores: L0=1.00 L1=0.60 L2=0.00\npick: L0->L1 [4 3 2 1] + [5 6] range a-z rewrite",
            ),
            // Only the overlapped base-level bytes count: 5 lies outside a-e.
            (
                "L0: 1:a-c:100:b7 2:b-d:100:b8 3:c-e:100:b9 4:b-c:100:b10\nL1: 5:m-z:6000 6:a-b:900\nblobs: 7:0/100 8:0/100 9:0/100 10:0/100",
                "scores: L0=1.00 L1=0.69 L2=0.00\npick: L0->L1 [4 3 2 1] + [6] range a-e rewrite",
            ),
            // Tables of values (no blob references) go down whatever their size.
            (
                "L0: 1:a-c:100 2:b-d:100 3:c-e:100 4:x-y:100\nL1: 5:a-m:3000 6:n-z:3000",
                "scores: L0=1.00 L1=0.60 L2=0.00\npick: L0->L1 [4 3 2 1] + [5 6] range a-z rewrite",
            ),
        ]);
    }

    /// An L0 table flushed from a memtable of values written to blob files as they were put
    /// counts one table per write buffer (64 MiB by default) of the blob bytes it refers to;
    /// a table of values separated at flush (about one write buffer of blobs) counts one.
    #[test]
    fn l0_tables_referring_to_many_write_buffers_of_blobs_count_as_many() {
        check(&[
            // 192 MiB of blobs behind table 1: three tables' worth, plus table 2.
            (
                "L0: 1:a-c:1000:b7 2:b-d\nblobs: 7:0/201326592",
                "scores: L0=1.00 L1=0.00 L2=0.00\npick: L0->L1 [2 1] + [] range a-d rewrite",
            ),
            // Just under two write buffers: one table.
            (
                "L0: 1:a-c:1000:b7 2:b-d\nblobs: 7:0/134217727",
                "scores: L0=0.50 L1=0.00 L2=0.00\npick: none",
            ),
            // Blob files shared by two tables count for each (the weight is what the table
            // refers to, not what it alone owns).
            (
                "L0: 1:a-c:1000:b7.8 2:b-d:1000:b8\nblobs: 7:0/67108864 8:0/67108864",
                "scores: L0=0.75 L1=0.00 L2=0.00\npick: none",
            ),
        ]);
    }

    #[test]
    fn scores_and_level_choice() {
        check(&[
            // Nothing needs compaction.
            ("L0: 1:a-c 2:b-d", "scores: L0=0.50 L1=0.00 L2=0.00\npick: none"),
            // L0 at its trigger: all L0 files, newest first, plus every L1 file their range
            // (a-z) overlaps.
            (
                "L0: 1:a-c 2:b-d 3:c-e 4:x-y\nL1: 5:a-b 6:f-g 7:w-z",
                "scores: L0=1.00 L1=0.30 L2=0.00\npick: L0->L1 [4 3 2 1] + [5 6 7] range a-z rewrite",
            ),
            // L1 over its target, L0 under: L1's first file goes down with its overlap.
            (
                "L1: 1:a-c:6000 2:d-f:6000\nL2: 3:b-b 4:e-e",
                "scores: L0=0.00 L1=1.20 L2=0.02\npick: L1->L2 [1] + [3] range a-c rewrite",
            ),
            // The higher score wins: L2 at 1.5 beats L0 at 1.25.
            (
                "L0: 1:a-a 2:b-b 3:c-c 4:d-d 5:e-e\nL2: 6:a-m:90000 7:n-z:60000",
                "scores: L0=1.25 L1=0.00 L2=1.50\npick: L2->L3 [6] + [] range a-m move",
            ),
        ]);
    }

    /// Levels due for compaction are taken in the order of their score over the score of the
    /// level they compact into, so a base level over its target moves down before L0 merges
    /// into it again, and a level whose next level is over target waits for that one.
    #[test]
    fn a_level_is_ranked_by_its_score_over_the_next_levels() {
        check(&[
            // L0 at 2.00 (eight tables) beats L1 at 1.50 by raw score; ranked, L0 is 2.00 /
            // 1.50 = 1.33 and L1 is 1.50 / 0.01 (an empty L2): L1 moves down first.
            (
                "L0: 1:a-a 2:b-b 3:c-c 4:d-d 5:e-e 8:f-f 9:g-g 10:h-h\nL1: 6:a-m:9000 7:n-z:6000",
                "scores: L0=2.00 L1=1.50 L2=0.00\npick: L1->L2 [6] + [] range a-m move",
            ),
            // The same with L2 over its target too (1.50 / 1.20 = 1.25 for L1, L2 over an
            // empty L3 first): L2 goes down before L1 merges into it.
            (
                "L0: 1:a-a 2:b-b 3:c-c 4:d-d 5:e-e 8:f-f 9:g-g 10:h-h\nL1: 6:a-m:9000 7:n-z:6000\nL2: 11:a-f:60000 12:g-z:60000",
                "scores: L0=2.00 L1=1.50 L2=1.20\npick: L2->L3 [11] + [] range a-f move",
            ),
            // At the slowdown trigger (20 tables), L0 goes first whatever the ranks.
            (
                "L0: 1:a-a 2:a-a 3:a-a 4:a-a 5:a-a 8:a-a 9:a-a 10:a-a 13:a-a 14:a-a 15:a-a 16:a-a 17:a-a 18:a-a 19:a-a 20:a-a 21:a-a 22:a-a 23:a-a 24:a-a\nL1: 6:a-m:9000 7:n-z:6000",
                "scores: L0=5.00 L1=1.50 L2=0.00\npick: L0->L1 [24 23 22 21 20 19 18 17 16 15 14 13 10 9 8 5 4 3 2 1] + [6] range a-m rewrite",
            ),
            // L0 at 3.00 over an L1 at 1.10 (2.73) against L1 over an L2 at half its target
            // (2.20): L0 first.
            (
                "L0: 1:a-a 2:b-b 3:c-c 4:d-d 5:e-e 8:f-f 9:g-g 10:h-h 13:i-i 14:j-j 15:k-k 16:l-l\nL1: 6:a-m:6000 7:n-z:5000\nL2: 11:a-f:25000 12:g-z:25000",
                "scores: L0=3.00 L1=1.10 L2=0.50\npick: L0->L1 [16 15 14 13 10 9 8 5 4 3 2 1] + [6] range a-m rewrite",
            ),
        ]);
    }

    #[test]
    fn forced_blob_garbage_collection_rewrites_a_table_of_the_oldest_blob_file() {
        // Blob files 7, 8, 9, 10; with a cutoff of 0.5 the oldest two count: 7 and 8 hold
        // (600 + 200) of 2000 bytes of garbage, 40%.
        let version = "L1: 1:a-c:100:b8 2:d-f:100:b7.9\nL2: 3:g-i:100:b7.10\n\
                       blobs: 7:600/1000 8:200/1000 9:0/1000 10:0/1000";
        check(&[
            // At a threshold of 0.4: the first table below L0 referencing 7 is rewritten in
            // place (its blobs in 7 and 8 are relocated by the compaction).
            (
                format!("{version}\nblob-gc: 0.5 0.4").as_str(),
                "scores: L0=0.00 L1=0.02 L2=0.00\npick: L1->L1 [2] + [] range d-f rewrite",
            ),
            // That table busy: the next one.
            (
                format!("{version}\nblob-gc: 0.5 0.4\nbusy: 2").as_str(),
                "scores: L0=0.00 L1=0.02 L2=0.00\npick: L2->L2 [3] + [] range g-i rewrite",
            ),
            // Under the threshold, with garbage collection off, or a cutoff below one file:
            // nothing.
            (
                format!("{version}\nblob-gc: 0.5 0.41").as_str(),
                "scores: L0=0.00 L1=0.02 L2=0.00\npick: none",
            ),
            (version, "scores: L0=0.00 L1=0.02 L2=0.00\npick: none"),
            (
                format!("{version}\nblob-gc: 0.2 0.1").as_str(),
                "scores: L0=0.00 L1=0.02 L2=0.00\npick: none",
            ),
        ]);
    }

    #[test]
    fn compact_pointer_rotates_through_the_level() {
        check(&[
            (
                "L1: 1:a-c:6000 2:d-f:6000 3:g-i:6000\npointer L1: c",
                "scores: L0=0.00 L1=1.80 L2=0.00\npick: L1->L2 [2] + [] range d-f move",
            ),
            // Past the last file it wraps around to the first.
            (
                "L1: 1:a-c:6000 2:d-f:6000 3:g-i:6000\npointer L1: i",
                "scores: L0=0.00 L1=1.80 L2=0.00\npick: L1->L2 [1] + [] range a-c move",
            ),
        ]);
    }

    /// A seek candidate goes into the next level with what it overlaps there, as a
    /// size-triggered compaction of it would (an L0 one takes all of L0, also with nothing
    /// below); it waits while it or its overlap is busy, and is forgotten once gone from its
    /// level or at the bottom.
    #[test]
    fn seek_candidates_compact_into_the_next_level() {
        check(&[
            (
                "L1: 1:a-c 2:d-f\nL2: 3:a-b 4:c-e 5:x-z\nseek: L1 2",
                "scores: L0=0.00 L1=0.20 L2=0.03\npick: none\nseek: L1->L2 [2] + [4] range c-f rewrite ReadTriggered",
            ),
            (
                "L1: 1:a-c 2:d-f\nL2: 5:x-z\nseek: L1 2",
                "scores: L0=0.00 L1=0.20 L2=0.01\npick: none\nseek: L1->L2 [2] + [] range d-f move ReadTriggered",
            ),
            (
                "L0: 6:b-c 7:a-b\nL1: 1:a-c 2:d-f\nL2: 5:x-z\nseek: L0 7",
                "scores: L0=0.50 L1=0.20 L2=0.01\npick: none\nseek: L0->L1 [7 6] + [1] range a-c rewrite ReadTriggered",
            ),
            (
                "L0: 6:b-c 7:a-b\nseek: L0 7",
                "scores: L0=0.50 L1=0.00 L2=0.00\npick: none\nseek: L0->L1 [7 6] + [] range a-c rewrite ReadTriggered",
            ),
            (
                "L1: 1:a-c 2:d-f\nL2: 4:c-e\nbusy: 4\nseek: L1 2",
                "scores: L0=0.00 L1=0.20 L2=0.01\npick: none\nseek: later",
            ),
            (
                "L1: 1:a-c 2:d-f\nL2: 4:c-e\nbusy: 2\nseek: L1 2",
                "scores: L0=0.00 L1=0.20 L2=0.01\npick: none\nseek: later",
            ),
            (
                "L1: 1:a-c\nL2: 4:c-e\nseek: L1 2",
                "scores: L0=0.00 L1=0.10 L2=0.01\npick: none\nseek: gone",
            ),
            (
                "L1: 1:a-c\nL2: 4:c-e\nseek: L2 4",
                "scores: L0=0.00 L1=0.10 L2=0.01\npick: none\nseek: gone",
            ),
        ]);
    }

    #[test]
    fn running_compactions_are_not_touched() {
        check(&[
            // One L0 compaction at a time.
            (
                "L0: 1:a-a 2:b-b 3:c-c 4:d-d\nbusy-l0:",
                "scores: L0=1.00 L1=0.00 L2=0.00\npick: none",
            ),
            // A busy L1 input is skipped for the next file.
            (
                "L1: 1:a-c:6000 2:d-f:6000\nbusy: 1",
                "scores: L0=0.00 L1=1.20 L2=0.00\npick: L1->L2 [2] + [] range d-f move",
            ),
            // A busy file below blocks the candidate that overlaps it.
            (
                "L1: 1:a-c:6000 2:d-f:6000\nL2: 3:b-b\nbusy: 3",
                "scores: L0=0.00 L1=1.20 L2=0.01\npick: L1->L2 [2] + [] range d-f move",
            ),
            // An output range being written at L2 blocks a candidate writing into it.
            (
                "L1: 1:a-c:6000 2:d-f:6000\nbusy-range: L2 b-b",
                "scores: L0=0.00 L1=1.20 L2=0.00\npick: L1->L2 [2] + [] range d-f move",
            ),
            // L0 blocked, so the next level with a score >= 1 is tried.
            (
                "L0: 1:a-a 2:b-b 3:c-c 4:d-d 5:e-e\nL1: 6:x-z:11000\nbusy-l0:",
                "scores: L0=1.25 L1=1.10 L2=0.00\npick: L1->L2 [6] + [] range x-z move",
            ),
        ]);
    }

    #[test]
    fn trivial_move_only_without_overlap_or_shared_keys() {
        check(&[
            // Disjoint L0 files, nothing below: moved by a MANIFEST edit.
            (
                "L0: 1:a-b 2:c-d 3:e-f 4:g-h",
                "scores: L0=1.00 L1=0.00 L2=0.00\npick: L0->L1 [4 3 2 1] + [] range a-h move",
            ),
            // Two L0 files share the user key "b": merged.
            (
                "L0: 1:a-b 2:b-d 3:e-f 4:g-h",
                "scores: L0=1.00 L1=0.00 L2=0.00\npick: L0->L1 [4 3 2 1] + [] range a-h rewrite",
            ),
        ]);
    }

    #[test]
    fn dynamic_level_sizes_compact_l0_into_the_level_the_data_needs() {
        check(&[
            // Nothing below L0: L0 goes straight to the last level.
            (
                "dynamic:\nL0: 1:a-a 2:b-b 3:c-c 4:d-d",
                "scores: L0=1.00 L1=0.00 L2=0.00\npick: L0->L3 [4 3 2 1] + [] range a-d move\n\
                 base: L3 targets: L1=- L2=- L3=-",
            ),
            // 50,000 bytes in the last level: L2 targets a tenth (below the 10,000 base,
            // so 10,000), L1 would target 500 and is not needed, so L0 goes to L2.
            (
                "dynamic:\nL0: 1:a-a 2:b-b 3:c-c 4:d-d\nL3: 5:a-z:50000",
                "scores: L0=1.00 L1=0.00 L2=0.00\npick: L0->L2 [4 3 2 1] + [] range a-d move\n\
                 base: L2 targets: L1=- L2=10000 L3=50000",
            ),
            // The same version with static targets goes to L1.
            (
                "L0: 1:a-a 2:b-b 3:c-c 4:d-d\nL3: 5:a-z:50000",
                "scores: L0=1.00 L1=0.00 L2=0.00\npick: L0->L1 [4 3 2 1] + [] range a-d move",
            ),
            // L2 over its dynamic target compacts into L3 (statically its target would be
            // 100,000 and it would wait).
            (
                "dynamic:\nL2: 1:a-m:30000\nL3: 2:a-z:50000",
                "scores: L0=0.00 L1=0.00 L2=3.00\npick: L2->L3 [1] + [2] range a-z rewrite\n\
                 base: L2 targets: L1=- L2=10000 L3=50000",
            ),
            // A write burst: L0 holds 24,000 bytes in 3 files (under the file trigger). Its
            // bytes pass the base size, so it qualifies (1.01), and the base level is sized
            // for it, the growth to L3 spread over the levels between.
            (
                "dynamic:\nL0: 1:a-b:8000 2:c-d:8000 3:e-f:8000\nL3: 4:a-z:100000",
                "scores: L0=1.01 L1=0.00 L2=0.00\npick: L0->L2 [3 2 1] + [] range a-f move\n\
                 base: L2 targets: L1=- L2=24000 L3=100000",
            ),
            // Upper levels holding data (written with static targets) are kept: the base
            // level is never above the first non-empty level.
            (
                "dynamic:\nL0: 1:a-a 2:b-b 3:c-c 4:d-d\nL1: 5:a-z:3000\nL3: 6:a-z:50000",
                "scores: L0=1.00 L1=0.30 L2=0.00\npick: L0->L1 [4 3 2 1] + [5] range a-z rewrite\n\
                 base: L1 targets: L1=10000 L2=10010 L3=100100",
            ),
        ]);
    }

    #[test]
    fn files_move_down_only_to_a_level_written_with_their_codec() {
        check(&[
            // L1 over target, nothing below: the bottommost codec differs from L1's, so the
            // file is rewritten rather than moved.
            (
                "bottommost-zstd:\nL1: 1:a-c:11000",
                "scores: L0=0.00 L1=1.10 L2=0.00\npick: L1->L2 [1] + [] range a-c rewrite",
            ),
            // With a level below the output, the output is not bottommost: moved.
            (
                "bottommost-zstd:\nL1: 1:a-c:11000\nL3: 2:x-z",
                "scores: L0=0.00 L1=1.10 L2=0.00\npick: L1->L2 [1] + [] range a-c move",
            ),
        ]);
    }
}
