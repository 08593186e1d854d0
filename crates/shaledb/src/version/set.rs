//! The version set: the current [`Version`], the file-number and sequence counters, and the
//! MANIFEST that makes them durable.
//!
//! Every change is a [`VersionEdit`] appended to the MANIFEST (same record format as the WAL)
//! and synced before the new version is installed. Each open starts a fresh MANIFEST holding a
//! snapshot of the whole state, so a torn tail in the old one is never appended to; a MANIFEST
//! that grows past `max_manifest_file_size` is rolled the same way. CURRENT is switched
//! atomically: write a temp file, sync it, rename it over CURRENT, sync the directory. The old
//! MANIFEST is deleted only after that.

use super::edit::{FileMetaData, VersionEdit};
use super::filename;
use super::lifecycle::{DeletionQueue, ObsoleteFile, TableHandle};
use super::Version;
use crate::compaction::picker::{score_version, ScoreTargets};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::key;
use crate::log::{replay_records, LogReader, LogWriter, RecordCheck, TailPolicy};
use crate::options::Options;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The current version and the counters persisted with it.
pub struct VersionSet {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    num_levels: usize,
    max_manifest_file_size: u64,
    /// What each new version's compaction scores are computed against.
    score_targets: ScoreTargets,
    current: Arc<Version>,
    next_file_number: u64,
    /// The last sequence number recorded in the MANIFEST.
    last_sequence: u64,
    /// WALs numbered below this hold nothing that is not in tables.
    log_number: u64,
    manifest: Option<LogWriter>,
    manifest_number: u64,
    /// Per level, the largest key of the last compaction: the next one starts after it so
    /// compactions rotate through the key space.
    pub compact_pointers: Vec<Vec<u8>>,
    /// Where table handles, and old MANIFESTs, go when they become obsolete.
    obsolete: Arc<DeletionQueue>,
}

impl VersionSet {
    /// Writes the MANIFEST and CURRENT of a new, empty database.
    pub fn create_new(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<()> {
        let manifest_number = 1;
        let edit = VersionEdit {
            log_number: Some(0),
            next_file_number: Some(2),
            last_sequence: Some(0),
            ..Default::default()
        };
        let path = filename::manifest_file(dir, manifest_number);
        let file = fs
            .create(&path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        let mut w = LogWriter::new(file);
        let mut rec = Vec::new();
        edit.encode(&mut rec);
        w.add_record(&rec)
            .and_then(|_| w.sync())
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        set_current_file(fs, dir, manifest_number)
    }

    /// Reads CURRENT and replays the MANIFEST it names. Uses `opts.num_levels`,
    /// `opts.max_manifest_file_size` and the options compaction scores depend on.
    pub fn recover(fs: Arc<dyn FileSystem>, dir: &Path, opts: &Options) -> Result<VersionSet> {
        let num_levels = opts.num_levels;
        let score_targets = ScoreTargets::from_options(opts);
        let current_path = filename::current_file(dir);
        let current = fs
            .read_to_vec(&current_path)
            .map_err(|e| Error::io(format!("reading {}", current_path.display()), e))?;
        let name = std::str::from_utf8(&current)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .filter(|s| {
                matches!(
                    filename::parse_file_name(s),
                    Some((filename::FileKind::Manifest, _))
                )
            })
            .ok_or_else(|| {
                Error::corruption(
                    &current_path,
                    0,
                    "CURRENT does not hold a MANIFEST name followed by a newline",
                )
            })?;
        let manifest_path = dir.join(name);
        let file = fs.open_sequential(&manifest_path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                // CURRENT is replaced only after the MANIFEST it names is durable.
                Error::corruption(
                    &current_path,
                    0,
                    format!("CURRENT names {name}, which is missing"),
                )
            } else {
                Error::io(format!("opening {}", manifest_path.display()), e)
            }
        })?;
        let mut reader = LogReader::new(file, manifest_path.clone());

        let mut levels: Vec<Vec<Arc<FileMetaData>>> = vec![Vec::new(); num_levels];
        let mut log_number = None;
        let mut next_file_number = None;
        let mut last_sequence = None;
        let mut compact_pointers = vec![Vec::new(); num_levels];
        // A torn final record (damage then end of file) is an edit that was never
        // acknowledged: it is ignored. Damage followed by intact edits is corruption.
        replay_records(
            &mut reader,
            TailPolicy::TornTailOnly,
            &format!("reading {}", manifest_path.display()),
            |data, _offset| {
                let edit = match VersionEdit::decode(&data) {
                    Ok(edit) => edit,
                    Err(d) => return Ok(RecordCheck::Invalid(format!("bad version edit: {d}"))),
                };
                if let Err(d) = apply_edit(&mut levels, &edit, num_levels) {
                    return Ok(RecordCheck::Invalid(d));
                }
                if let Some(n) = edit.log_number {
                    log_number = Some(n);
                }
                if let Some(n) = edit.next_file_number {
                    next_file_number = Some(n);
                }
                if let Some(n) = edit.last_sequence {
                    last_sequence = Some(n);
                }
                for (level, k) in &edit.compact_pointers {
                    if let Some(p) = compact_pointers.get_mut(*level) {
                        *p = k.0.clone();
                    }
                }
                Ok(RecordCheck::Applied)
            },
        )?;
        let missing =
            |what: &str| Error::corruption(&manifest_path, 0, format!("MANIFEST has no {what}"));
        let log_number = log_number.ok_or_else(|| missing("log number"))?;
        let next_file_number = next_file_number.ok_or_else(|| missing("next file number"))?;
        let last_sequence = last_sequence.ok_or_else(|| missing("last sequence number"))?;
        let manifest_number = filename::parse_file_name(name).map_or(0, |(_, n)| n);

        let obsolete = Arc::new(DeletionQueue::default());
        let mut version = build_version(levels);
        version.scores = Some(score_version(&version, &score_targets));
        version.handles = own_files(&version, None, &obsolete);
        Ok(VersionSet {
            fs,
            dir: dir.to_path_buf(),
            num_levels,
            max_manifest_file_size: opts.max_manifest_file_size,
            score_targets,
            current: Arc::new(version),
            next_file_number: next_file_number.max(manifest_number + 1),
            last_sequence,
            log_number,
            manifest: None,
            manifest_number,
            compact_pointers,
            obsolete,
        })
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    /// Allocates a file number.
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Makes sure numbers up to `n` are never handed out again (files found on disk).
    pub fn mark_file_number_used(&mut self, n: u64) {
        if self.next_file_number <= n {
            self.next_file_number = n + 1;
        }
    }

    /// WALs below this number are obsolete.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// The last sequence number recorded in the MANIFEST.
    pub fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    /// The live MANIFEST's number.
    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Applies `edit`: writes it to the MANIFEST (a new one if none is open or the current one
    /// is too large), syncs, and installs the new version. The caller fills in
    /// `last_sequence`; the next file number is filled in here. On error nothing is installed
    /// and the caller must treat the database as failed (the MANIFEST may hold a partial
    /// record). The database runs the three steps itself to release its mutex around the
    /// write ([`prepare_edit`](Self::prepare_edit), [`ManifestWrite::write`],
    /// [`finish_edit`](Self::finish_edit)).
    pub fn log_and_apply(&mut self, edit: &mut VersionEdit) -> Result<()> {
        let mut pending = self.prepare_edit(edit)?;
        let res = pending.write(&self.fs, &self.dir);
        self.finish_edit(pending, edit, res)
    }

    /// First step of [`log_and_apply`](Self::log_and_apply): builds the version `edit` leads
    /// to and the MANIFEST record(s) to write, and takes the MANIFEST writer out of the set.
    /// Until [`finish_edit`](Self::finish_edit) no other edit may be prepared (the database
    /// serializes MANIFEST writers); the current version stays installed meanwhile.
    pub fn prepare_edit(&mut self, edit: &mut VersionEdit) -> Result<ManifestWrite> {
        let mut levels = self.current.files.clone();
        apply_edit(&mut levels, edit, self.num_levels).map_err(Error::InvalidArgument)?;
        if let Some(n) = edit.log_number {
            debug_assert!(n >= self.log_number);
        }
        let new_manifest = match &self.manifest {
            None => true,
            Some(w) => w.file_len() > self.max_manifest_file_size,
        };
        let old_manifest = self.manifest_number;
        if new_manifest {
            self.manifest = None;
            self.manifest_number = self.new_file_number();
        }
        edit.next_file_number = Some(self.next_file_number);
        let version = build_version(levels);
        let mut record = Vec::new();
        if new_manifest {
            let mut snapshot = self.snapshot_edit(&version, edit);
            snapshot.next_file_number = Some(self.next_file_number);
            snapshot.encode(&mut record);
        } else {
            edit.encode(&mut record);
        }
        Ok(ManifestWrite {
            version,
            writer: self.manifest.take(),
            manifest_number: self.manifest_number,
            replaced_manifest: (new_manifest && old_manifest != 0).then_some(old_manifest),
            record,
        })
    }

    /// Last step of [`log_and_apply`](Self::log_and_apply): given the result of
    /// [`ManifestWrite::write`], installs the new version and counters, or on failure leaves
    /// the current version and drops the MANIFEST writer (a later edit starts a new MANIFEST).
    pub fn finish_edit(
        &mut self,
        written: ManifestWrite,
        edit: &VersionEdit,
        res: Result<()>,
    ) -> Result<()> {
        res?;
        let ManifestWrite {
            mut version,
            writer,
            replaced_manifest,
            ..
        } = written;
        self.manifest = writer;
        if let Some(old) = replaced_manifest {
            // CURRENT no longer names it, durably.
            self.obsolete.push(ObsoleteFile {
                kind: filename::FileKind::Manifest,
                number: old,
            });
        }
        if let Some(n) = edit.log_number {
            self.log_number = n;
        }
        if let Some(s) = edit.last_sequence {
            self.last_sequence = self.last_sequence.max(s);
        }
        for (level, k) in &edit.compact_pointers {
            if let Some(p) = self.compact_pointers.get_mut(*level) {
                *p = k.0.clone();
            }
        }
        // Only now, with the edit durable, do new files get handles (so a failed write never
        // queues outputs a MANIFEST record may still name) and removed ones lose theirs.
        version.handles = own_files(&version, Some(&self.current), &self.obsolete);
        version.scores = Some(score_version(&version, &self.score_targets));
        self.current = Arc::new(version);
        Ok(())
    }

    /// The queue obsolete files go to; the database purges it.
    pub fn deletion_queue(&self) -> &Arc<DeletionQueue> {
        &self.obsolete
    }

    /// An edit that recreates the whole state of `version` (the first record of a MANIFEST).
    fn snapshot_edit(&self, version: &Version, edit: &VersionEdit) -> VersionEdit {
        let mut s = VersionEdit {
            log_number: Some(edit.log_number.unwrap_or(self.log_number)),
            last_sequence: Some(
                edit.last_sequence
                    .unwrap_or(self.last_sequence)
                    .max(self.last_sequence),
            ),
            ..Default::default()
        };
        for (level, p) in self.compact_pointers.iter().enumerate() {
            if !p.is_empty() {
                s.compact_pointers
                    .push((level, key::InternalKey(p.clone())));
            }
        }
        for (level, k) in &edit.compact_pointers {
            s.compact_pointers.retain(|(l, _)| l != level);
            s.compact_pointers.push((*level, k.clone()));
        }
        for (level, files) in version.files.iter().enumerate() {
            for f in files {
                s.add_file(level, (**f).clone());
            }
        }
        s
    }

    /// Numbers of every table file in the current version.
    pub fn live_files(&self) -> HashSet<u64> {
        self.current
            .files
            .iter()
            .flatten()
            .map(|f| f.number)
            .collect()
    }
}

/// A prepared MANIFEST write (see [`VersionSet::prepare_edit`]). Its `write` does the IO and
/// touches nothing of the version set, so it runs without the database mutex.
pub struct ManifestWrite {
    /// The version to install once the record is durable.
    version: Version,
    /// The open MANIFEST to append to; `None` when a new MANIFEST is started.
    writer: Option<LogWriter>,
    /// The MANIFEST written to.
    manifest_number: u64,
    /// The MANIFEST a new one replaces, deleted once CURRENT names the new one.
    replaced_manifest: Option<u64>,
    /// The encoded edit, or for a new MANIFEST the snapshot of the whole state.
    record: Vec<u8>,
}

impl ManifestWrite {
    /// Appends and syncs the record; for a new MANIFEST, creates it and then points CURRENT
    /// at it (atomically and durably).
    pub fn write(&mut self, fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<()> {
        let path = filename::manifest_file(dir, self.manifest_number);
        let writing = |e| Error::io(format!("writing {}", path.display()), e);
        match &mut self.writer {
            Some(w) => w
                .add_record(&self.record)
                .and_then(|_| w.sync())
                .map_err(|e| {
                    // A partial record may be in the file: never append to it again.
                    self.writer = None;
                    writing(e)
                }),
            None => {
                let file = fs
                    .create(&path)
                    .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
                let mut w = LogWriter::new(file);
                w.add_record(&self.record)
                    .and_then(|_| w.sync())
                    .map_err(writing)?;
                set_current_file(fs, dir, self.manifest_number)?;
                self.writer = Some(w);
                Ok(())
            }
        }
    }
}

/// Applies an edit's deletions and additions to per-level file lists.
fn apply_edit(
    levels: &mut [Vec<Arc<FileMetaData>>],
    edit: &VersionEdit,
    num_levels: usize,
) -> std::result::Result<(), String> {
    for (level, number) in &edit.deleted_files {
        let files = levels
            .get_mut(*level)
            .ok_or_else(|| format!("edit deletes a file at level {level} of {num_levels}"))?;
        let before = files.len();
        files.retain(|f| f.number != *number);
        if files.len() == before {
            return Err(format!(
                "edit deletes file {number} which is not at level {level}"
            ));
        }
    }
    for (level, f) in &edit.new_files {
        let files = levels
            .get_mut(*level)
            .ok_or_else(|| format!("edit adds a file at level {level} of {num_levels}"))?;
        files.push(Arc::new(f.clone()));
    }
    Ok(())
}

/// Handles for every file `version` lists: the previous version's where it had one (the same
/// file, maybe moved to another level), a new one otherwise.
fn own_files(
    version: &Version,
    previous: Option<&Version>,
    queue: &Arc<DeletionQueue>,
) -> Vec<Arc<TableHandle>> {
    let mut numbers: Vec<u64> = version.files.iter().flatten().map(|f| f.number).collect();
    numbers.sort_unstable();
    numbers.dedup();
    let previous = previous.map_or(&[][..], |v| v.handles.as_slice());
    numbers
        .into_iter()
        .map(
            |n| match previous.binary_search_by_key(&n, |h| h.number()) {
                Ok(i) => previous[i].clone(),
                Err(_) => TableHandle::new(n, queue.clone()),
            },
        )
        .collect()
}

/// Sorts each level: L0 newest first, deeper levels by smallest key.
fn build_version(mut levels: Vec<Vec<Arc<FileMetaData>>>) -> Version {
    for (level, files) in levels.iter_mut().enumerate() {
        if level == 0 {
            files.sort_by(|a, b| {
                b.largest_seqno
                    .cmp(&a.largest_seqno)
                    .then(b.number.cmp(&a.number))
            });
        } else {
            files.sort_by(|a, b| {
                match key::compare_internal(a.smallest.encoded(), b.smallest.encoded()) {
                    Ordering::Equal => a.number.cmp(&b.number),
                    o => o,
                }
            });
        }
    }
    Version {
        files: levels,
        handles: Vec::new(),
        scores: None,
    }
}

/// Points CURRENT at MANIFEST `manifest_number`, atomically and durably.
pub fn set_current_file(fs: &Arc<dyn FileSystem>, dir: &Path, manifest_number: u64) -> Result<()> {
    let tmp = filename::temp_file(dir, manifest_number);
    let contents = format!("{}\n", filename::manifest_name(manifest_number));
    let res = (|| -> std::io::Result<()> {
        let mut f = fs.create(&tmp)?;
        f.append(contents.as_bytes())?;
        f.sync()?;
        drop(f);
        fs.rename(&tmp, &filename::current_file(dir))?;
        fs.sync_dir(dir)
    })();
    res.map_err(|e| {
        let _ = fs.remove_file(&tmp);
        Error::io("updating CURRENT", e)
    })
}

/// The version `edit` makes of `base` (deletions, then additions, each level sorted): what
/// `log_and_apply` and MANIFEST replay compute, without a MANIFEST. For unit tests of the
/// picker and of edit application.
#[cfg(test)]
pub(crate) fn apply_for_tests(
    base: &Version,
    edit: &VersionEdit,
) -> std::result::Result<Version, String> {
    let mut levels = base.files.clone();
    let num_levels = levels.len();
    apply_edit(&mut levels, edit, num_levels)?;
    Ok(build_version(levels))
}

#[cfg(test)]
mod apply_tests {
    use super::*;
    use crate::key::{InternalKey, ValueKind};

    fn file(number: u64, small: &str, large: &str, seq: u64) -> FileMetaData {
        FileMetaData {
            number,
            file_size: 100,
            smallest: InternalKey::new(small.as_bytes(), seq, ValueKind::Put),
            largest: InternalKey::new(large.as_bytes(), seq, ValueKind::Put),
            smallest_seqno: seq,
            largest_seqno: seq,
            num_entries: 1,
            num_deletions: 0,
            open_table: Default::default(),
        }
    }

    /// Each level as "number number ...", levels separated by " | ".
    fn layout(v: &Version) -> String {
        v.files
            .iter()
            .map(|fs| {
                fs.iter()
                    .map(|f| f.number.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join(" | ")
    }

    #[test]
    fn additions_are_sorted_per_level() {
        let mut e = VersionEdit::default();
        // L0 newest first by largest sequence number (file number breaks ties), deeper
        // levels by smallest key, whatever order the edit lists them in.
        e.add_file(0, file(7, "a", "z", 50));
        e.add_file(0, file(9, "a", "z", 70));
        e.add_file(0, file(8, "a", "z", 70));
        e.add_file(2, file(4, "m", "p", 1));
        e.add_file(2, file(3, "q", "t", 1));
        e.add_file(2, file(5, "a", "c", 1));
        let v = apply_for_tests(&Version::empty(3), &e).expect("apply");
        assert_eq!(layout(&v), "9 8 7 |  | 5 4 3");
    }

    #[test]
    fn deletions_apply_before_additions_and_must_exist() {
        let mut e = VersionEdit::default();
        e.add_file(1, file(1, "a", "c", 1));
        e.add_file(1, file(2, "d", "f", 1));
        let base = apply_for_tests(&Version::empty(3), &e).expect("apply");
        // A compaction: 1 and 2 replaced by 3 at L2; a trivial move deletes and adds one
        // number at two levels in one edit.
        let mut e = VersionEdit::default();
        e.delete_file(1, 1);
        e.add_file(2, file(3, "a", "c", 1));
        e.delete_file(1, 2);
        e.add_file(2, file(2, "d", "f", 1));
        let v = apply_for_tests(&base, &e).expect("apply");
        assert_eq!(layout(&v), " |  | 3 2");
        assert_eq!(layout(&base), " | 1 2 | ", "the base version is unchanged");

        let mut e = VersionEdit::default();
        e.delete_file(2, 1);
        assert_eq!(
            apply_for_tests(&base, &e).map(|v| layout(&v)),
            Err("edit deletes file 1 which is not at level 2".to_string())
        );
        let mut e = VersionEdit::default();
        e.add_file(3, file(9, "a", "b", 1));
        assert_eq!(
            apply_for_tests(&base, &e).map(|v| layout(&v)),
            Err("edit adds a file at level 3 of 3".to_string())
        );
        let mut e = VersionEdit::default();
        e.delete_file(5, 1);
        assert_eq!(
            apply_for_tests(&base, &e).map(|v| layout(&v)),
            Err("edit deletes a file at level 5 of 3".to_string())
        );
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFileSystem;
    use crate::key::{InternalKey, ValueKind};

    fn meta(number: u64, size: u64, small: &[u8], large: &[u8]) -> FileMetaData {
        FileMetaData {
            number,
            file_size: size,
            smallest: InternalKey::new(small, 1, ValueKind::Put),
            largest: InternalKey::new(large, 1, ValueKind::Put),
            smallest_seqno: 1,
            largest_seqno: 1,
            num_entries: 1,
            num_deletions: 0,
            open_table: Default::default(),
        }
    }

    fn open_set(fs: &Arc<dyn FileSystem>) -> VersionSet {
        let dir = Path::new("/db");
        fs.create_dir_all(dir).expect("mkdir");
        VersionSet::create_new(fs, dir).expect("create");
        let opts = Options {
            num_levels: 3,
            level0_file_num_compaction_trigger: 2,
            max_bytes_for_level_base: 1000,
            max_bytes_for_level_multiplier: 10.0,
            ..Default::default()
        };
        VersionSet::recover(fs.clone(), dir, &opts).expect("recover")
    }

    #[test]
    fn each_installed_version_carries_its_scores() {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let mut vs = open_set(&fs);
        let empty = vs.current();
        assert_eq!(
            empty.scores,
            Some(crate::version::VersionScores {
                level_scores: vec![0.0, 0.0],
                pending_compaction_bytes: 0,
            })
        );
        let mut edit = VersionEdit::default();
        edit.add_file(0, meta(10, 300, b"a", b"c"));
        edit.add_file(0, meta(11, 200, b"b", b"d"));
        edit.add_file(1, meta(12, 1500, b"a", b"z"));
        vs.log_and_apply(&mut edit).expect("apply");
        // L0: 2 files / trigger 2; L1: 1500 / 1000. Pending: all of L0 (at the trigger) plus
        // L1's excess 500 times (multiplier + 1).
        assert_eq!(
            vs.current().scores,
            Some(crate::version::VersionScores {
                level_scores: vec![1.0, 1.5],
                pending_compaction_bytes: 500 + 500 * 10 + 500,
            })
        );
    }

    #[test]
    fn a_table_is_queued_once_when_no_version_lists_it_any_more() {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let mut vs = open_set(&fs);
        let queue = vs.deletion_queue().clone();
        let mut edit = VersionEdit::default();
        edit.add_file(0, meta(10, 300, b"a", b"c"));
        vs.log_and_apply(&mut edit).expect("apply");
        // The first write started a new MANIFEST; the one it replaced is queued.
        assert_eq!(
            queue.take(),
            vec![ObsoleteFile {
                kind: filename::FileKind::Manifest,
                number: 1
            }]
        );
        queue.purged();
        // A move to L1 keeps the file: nothing is queued.
        let mut edit = VersionEdit::default();
        edit.delete_file(0, 10);
        edit.add_file(1, meta(10, 300, b"a", b"c"));
        vs.log_and_apply(&mut edit).expect("move");
        assert!(queue.take().is_empty());
        // A reader holds the version listing it while a compaction replaces it.
        let reader = vs.current();
        let mut edit = VersionEdit::default();
        edit.delete_file(1, 10);
        edit.add_file(1, meta(13, 300, b"a", b"c"));
        vs.log_and_apply(&mut edit).expect("replace");
        assert!(queue.take().is_empty());
        drop(reader);
        assert_eq!(
            queue.take(),
            vec![ObsoleteFile {
                kind: filename::FileKind::Table,
                number: 10
            }]
        );
    }
}
