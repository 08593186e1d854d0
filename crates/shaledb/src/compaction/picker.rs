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

/// Golden tests: a version described in text, what the picker chooses. Files are
/// `number:smallest-largest[:bytes]` (bytes default 1000; at L0 a higher number is a newer
/// flush). Other lines: `busy: <file numbers>`, `busy-l0`, `busy-range: L<n> <a>-<b>`,
/// `pointer L<n>: <user key>`. Inputs and outputs only, so the tests hold whether scores are
/// computed per call or once per version.
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
            ..Options::default()
        }
    }

    struct Case {
        version: Version,
        busy: Busy,
        pointers: Vec<Vec<u8>>,
    }

    fn parse(desc: &str) -> Case {
        let o = opts();
        let mut edit = VersionEdit::default();
        let mut busy = Busy::default();
        let mut pointers = vec![Vec::new(); o.num_levels];
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
                            open_table: Default::default(),
                        },
                    );
                }
            } else if head == "busy" {
                busy.files.extend(
                    rest.split_whitespace()
                        .map(|n| n.parse::<u64>().expect("n")),
                );
            } else if head == "busy-l0" {
                busy.l0_running = true;
            } else if head == "busy-range" {
                let (level, range) = rest.split_once(' ').expect("L<n> a-b");
                let (a, b) = range.split_once('-').expect("a-b");
                let level = level.trim_start_matches('L').parse().expect("level");
                busy.output_ranges
                    .push((level, a.as_bytes().to_vec(), b.as_bytes().to_vec()));
            } else if let Some(level) = head.strip_prefix("pointer L") {
                let level: usize = level.parse().expect("level");
                pointers[level] = crate::key::make_internal_key(rest.as_bytes(), 0, ValueKind::Put);
            } else {
                panic!("unknown line {line}");
            }
        }
        let version = apply_for_tests(&Version::empty(o.num_levels), &edit).expect("version");
        Case {
            version,
            busy,
            pointers,
        }
    }

    fn numbers(files: &[Arc<FileMetaData>]) -> String {
        let v: Vec<String> = files.iter().map(|f| f.number.to_string()).collect();
        format!("[{}]", v.join(" "))
    }

    /// "scores: ..." and "pick: ..." for the described version.
    fn run(desc: &str) -> String {
        let case = parse(desc);
        let o = opts();
        let scores: Vec<String> = level_scores(&case.version, &o)
            .iter()
            .enumerate()
            .map(|(l, s)| format!("L{l}={s:.2}"))
            .collect();
        let pick = match pick(&case.version, &o, &case.busy, &case.pointers) {
            None => "none".to_string(),
            Some(c) => format!(
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
            ),
        };
        format!("scores: {}\npick: {pick}", scores.join(" "))
    }

    fn check(cases: &[(&str, &str)]) {
        for (desc, want) in cases {
            assert_eq!(run(desc), want.trim(), "\n--- case ---\n{desc}");
        }
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
}
