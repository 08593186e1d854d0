//! The version set: the current [`Version`], the file-number and sequence counters, and the
//! MANIFEST that makes them durable.
//!
//! Every change is a [`VersionEdit`] appended to the MANIFEST (same record format as the WAL)
//! and synced before the new version is installed. Each open starts a fresh MANIFEST holding a
//! snapshot of the whole state, so a torn tail in the old one is never appended to; a MANIFEST
//! that grows past `max_manifest_file_size` is rolled the same way. CURRENT is switched
//! atomically: write a temp file, sync it, rename it over CURRENT, sync the directory. The old
//! MANIFEST is deleted only after that.

use super::edit::{FileMetaData, VersionEdit, MAX_LEVELS};
use super::filename;
use super::filename::FileKind;
use super::lifecycle::{DeletionQueue, FileHandle, ObsoleteFile};
use super::{BlobFile, BlobFileMetaData, Version};
use crate::compaction::picker::{score_version, ScoreTargets};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::key::{self, InternalKey};
use crate::log::{replay_records, LogReader, LogWriter, RecordCheck, ReplayEnd, TailPolicy};
use crate::options::Options;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The id of the default column family, which always exists.
pub(crate) const DEFAULT_FAMILY: u32 = 0;

/// The name of the default column family.
pub(crate) const DEFAULT_FAMILY_NAME: &str = "default";

/// What the version set needs from a family's options.
#[derive(Debug, Clone)]
pub(crate) struct FamilyConfig {
    pub num_levels: usize,
    pub score_targets: ScoreTargets,
}

impl FamilyConfig {
    /// The parts of (a family's effective) `opts` versions depend on.
    pub(crate) fn from_options(opts: &Options) -> Self {
        FamilyConfig {
            num_levels: opts.num_levels,
            score_targets: ScoreTargets::from_options(opts),
        }
    }
}

/// One column family's current version and the state persisted with it.
pub(crate) struct FamilyVersions {
    /// The family's name (unique among live families).
    pub name: String,
    config: FamilyConfig,
    current: Arc<Version>,
    /// WALs numbered below this hold nothing of this family that is not in its tables.
    log_number: u64,
    /// Per level, the largest key of the last compaction: the next one starts after it so
    /// compactions rotate through the key space.
    pub compact_pointers: Vec<Vec<u8>>,
    /// The merge operator the family was last opened with, as recorded in the MANIFEST.
    pub merge_operator: Option<String>,
    /// The family's values carry write times (it was created with a TTL).
    pub stores_write_times: bool,
}

impl FamilyVersions {
    /// The family's current version.
    pub(crate) fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    /// WALs below this number hold nothing of this family that is not in tables.
    pub(crate) fn log_number(&self) -> u64 {
        self.log_number
    }
}

/// The current version of every column family and the counters persisted with them.
pub(crate) struct VersionSet {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    max_manifest_file_size: u64,
    families: BTreeMap<u32, FamilyVersions>,
    /// Configurations registered for families about to be created (see `register_config`).
    pending_configs: BTreeMap<u32, FamilyConfig>,
    /// The largest family id handed out so far; ids of dropped families are not reused.
    max_column_family: u32,
    next_file_number: u64,
    /// The last sequence number recorded in the MANIFEST.
    last_sequence: u64,
    manifest: Option<LogWriter>,
    manifest_number: u64,
    /// Where table handles, and old MANIFESTs, go when they become obsolete.
    obsolete: Arc<DeletionQueue>,
}

/// A family's state while the MANIFEST is replayed (levels are bounded by `MAX_LEVELS` until
/// the family's options say how many it has).
#[derive(Clone)]
struct ReplayFamily {
    name: String,
    levels: Vec<Vec<Arc<FileMetaData>>>,
    blob_files: Vec<BlobFile>,
    log_number: u64,
    compact_pointers: Vec<Vec<u8>>,
    merge_operator: Option<String>,
    stores_write_times: bool,
}

impl ReplayFamily {
    fn new(name: String) -> Self {
        ReplayFamily {
            name,
            levels: vec![Vec::new(); MAX_LEVELS],
            blob_files: Vec::new(),
            log_number: 0,
            compact_pointers: vec![Vec::new(); MAX_LEVELS],
            merge_operator: None,
            stores_write_times: false,
        }
    }
}

/// An edit's merge operator field as the family's recorded operator (empty: none).
fn recorded_operator(field: &str) -> Option<String> {
    (!field.is_empty()).then(|| field.to_string())
}

/// Everything a MANIFEST replay collects.
#[derive(Clone)]
struct Replayed {
    families: BTreeMap<u32, ReplayFamily>,
    max_column_family: u32,
    next_file_number: Option<u64>,
    last_sequence: Option<u64>,
    /// Whether any edit set a log number (a MANIFEST without one is damaged).
    saw_log_number: bool,
    /// The edits of an atomic group read so far; applied together when its last one arrives.
    group: Vec<VersionEdit>,
}

impl Replayed {
    /// The state before the MANIFEST's first edit: the default family alone.
    fn new() -> Self {
        Replayed {
            families: BTreeMap::from([(
                DEFAULT_FAMILY,
                ReplayFamily::new(DEFAULT_FAMILY_NAME.to_string()),
            )]),
            max_column_family: DEFAULT_FAMILY,
            next_file_number: None,
            last_sequence: None,
            saw_log_number: false,
            group: Vec::new(),
        }
    }

    /// Takes the next edit of the MANIFEST: applies it, or buffers it while its atomic group
    /// is incomplete.
    fn add(&mut self, edit: VersionEdit) -> std::result::Result<(), String> {
        let Some(remaining) = edit.atomic_group_remaining else {
            if !self.group.is_empty() {
                return Err("an edit outside an atomic group interrupts the group".to_string());
            }
            return self.apply(&edit);
        };
        if let Some(prev) = self.group.last().and_then(|e| e.atomic_group_remaining) {
            if prev != remaining + 1 {
                return Err(format!(
                    "atomic group edit says {remaining} remain after one that said {prev}"
                ));
            }
        }
        self.group.push(edit);
        if remaining == 0 {
            for e in std::mem::take(&mut self.group) {
                self.apply(&e)?;
            }
        }
        Ok(())
    }

    /// Applies one edit; `Err` describes why it cannot apply.
    fn apply(&mut self, edit: &VersionEdit) -> std::result::Result<(), String> {
        let id = edit.column_family;
        if let Some(name) = &edit.column_family_add {
            if self.families.contains_key(&id) {
                return Err(format!("edit adds column family {id}, which exists"));
            }
            if self.families.values().any(|f| &f.name == name) {
                return Err(format!("edit adds a second column family named {name:?}"));
            }
            self.families.insert(id, ReplayFamily::new(name.clone()));
            self.max_column_family = self.max_column_family.max(id);
        }
        if let Some(n) = edit.max_column_family {
            self.max_column_family = self.max_column_family.max(n);
        }
        if let Some(n) = edit.next_file_number {
            self.next_file_number = Some(n);
        }
        if let Some(n) = edit.last_sequence {
            // Sequence numbers never go back: an edit that records a smaller one than an
            // earlier edit (MANIFESTs written before that was prevented) must not lower it,
            // or new writes after recovery would hide under older, higher-numbered entries.
            self.last_sequence = Some(self.last_sequence.map_or(n, |m| m.max(n)));
        }
        if edit.column_family_drop {
            if id == DEFAULT_FAMILY {
                return Err("edit drops the default column family".to_string());
            }
            return match self.families.remove(&id) {
                Some(_) => Ok(()),
                None => Err(format!(
                    "edit drops column family {id}, which does not exist"
                )),
            };
        }
        let touches_family = edit.log_number.is_some()
            || edit.merge_operator.is_some()
            || edit.stores_write_times
            || !edit.compact_pointers.is_empty()
            || !edit.deleted_files.is_empty()
            || !edit.new_files.is_empty();
        if !touches_family {
            return Ok(());
        }
        let f = self
            .families
            .get_mut(&id)
            .ok_or_else(|| format!("edit changes column family {id}, which does not exist"))?;
        apply_edit(&mut f.levels, &mut f.blob_files, edit, MAX_LEVELS)?;
        if let Some(n) = edit.log_number {
            f.log_number = n;
            self.saw_log_number = true;
        }
        if let Some(name) = &edit.merge_operator {
            f.merge_operator = recorded_operator(name);
        }
        f.stores_write_times |= edit.stores_write_times;
        for (level, k) in &edit.compact_pointers {
            if let Some(p) = f.compact_pointers.get_mut(*level) {
                *p = k.0.clone();
            }
        }
        Ok(())
    }
}

impl VersionSet {
    /// Writes the MANIFEST and CURRENT of a new, empty database.
    /// `default_stores_write_times`: the default family has a TTL.
    pub(crate) fn create_new(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        default_stores_write_times: bool,
    ) -> Result<()> {
        let manifest_number = 1;
        let edit = VersionEdit {
            log_number: Some(0),
            next_file_number: Some(2),
            last_sequence: Some(0),
            stores_write_times: default_stores_write_times,
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

    /// Reads CURRENT and replays the MANIFEST it names, with the same options for every
    /// family (see [`recover_with`](Self::recover_with)).
    pub(crate) fn recover(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        opts: &Options,
    ) -> Result<VersionSet> {
        Self::recover_with(fs, dir, opts, &|_| opts.clone())
    }

    /// Reads CURRENT and replays the MANIFEST it names. `opts` gives the database-wide
    /// settings, `family_options(name)` each family's effective options (levels and the
    /// targets compaction scores are computed against).
    pub(crate) fn recover_with(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        opts: &Options,
        family_options: &dyn Fn(&str) -> Options,
    ) -> Result<VersionSet> {
        let obsolete = Arc::new(DeletionQueue::default());
        let tail = ManifestTail::read_from_start(&fs, dir)?;
        tail.replayed
            .into_versions(&tail.manifest_name, fs, dir, opts, family_options, obsolete)
    }

    /// [`recover_with`](Self::recover_with), queueing the files its versions stop
    /// referencing on `obsolete` (a secondary instance's catch-up keeps one queue), and also
    /// returning where the MANIFEST's reading stopped, so that the instance can read on from
    /// there.
    pub(crate) fn recover_tailable(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        opts: &Options,
        family_options: &dyn Fn(&str) -> Options,
        obsolete: Arc<DeletionQueue>,
    ) -> Result<(VersionSet, ManifestTail)> {
        let tail = ManifestTail::read_from_start(&fs, dir)?;
        let versions = tail.versions(fs, dir, opts, family_options, obsolete)?;
        Ok((versions, tail))
    }

    /// The live families, by id.
    pub(crate) fn families(&self) -> &BTreeMap<u32, FamilyVersions> {
        &self.families
    }

    /// One family, if it is live.
    pub(crate) fn family(&self, id: u32) -> Option<&FamilyVersions> {
        self.families.get(&id)
    }

    /// The family's current version, borrowed (`None` if it was dropped): for a look that
    /// needs no handle, such as a write leader's.
    pub(crate) fn current_ref(&self, id: u32) -> Option<&Version> {
        self.families.get(&id).map(|f| &*f.current)
    }

    /// The family's current version; an empty version if the family was dropped.
    pub(crate) fn current(&self, id: u32) -> Arc<Version> {
        self.families
            .get(&id)
            .map_or_else(|| Arc::new(Version::default()), |f| f.current.clone())
    }

    /// The family's compaction pointers (empty if it was dropped).
    pub(crate) fn compact_pointers(&self, id: u32) -> &[Vec<u8>] {
        self.families
            .get(&id)
            .map_or(&[], |f| f.compact_pointers.as_slice())
    }

    /// The largest column family id ever handed out.
    pub(crate) fn max_column_family(&self) -> u32 {
        self.max_column_family
    }

    /// Allocates a column family id for a family about to be created, and records the
    /// configuration its versions will use.
    pub(crate) fn allocate_family(&mut self, config: FamilyConfig) -> u32 {
        self.max_column_family += 1;
        let id = self.max_column_family;
        self.pending_configs.insert(id, config);
        id
    }

    /// Allocates a file number.
    pub(crate) fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// The number [`new_file_number`](Self::new_file_number) hands out next.
    pub(crate) fn next_file_number(&self) -> u64 {
        self.next_file_number
    }

    /// Makes sure numbers up to `n` are never handed out again (files found on disk).
    pub(crate) fn mark_file_number_used(&mut self, n: u64) {
        if self.next_file_number <= n {
            self.next_file_number = n + 1;
        }
    }

    /// WALs below this number are obsolete: the smallest log number of any family.
    pub(crate) fn log_number(&self) -> u64 {
        self.families
            .values()
            .map(|f| f.log_number)
            .min()
            .unwrap_or(0)
    }

    /// The last sequence number recorded in the MANIFEST.
    pub(crate) fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    /// The live MANIFEST's number.
    pub(crate) fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Applies `edit`: writes it to the MANIFEST (a new one if none is open or the current one
    /// is too large), syncs, and installs the new version. The caller fills in
    /// `last_sequence`; the next file number is filled in here. On error nothing is installed
    /// and the caller must treat the database as failed (the MANIFEST may hold a partial
    /// record). The database runs the three steps itself to release its mutex around the
    /// write ([`prepare_edits`](Self::prepare_edits), [`ManifestWrite::write`],
    /// [`finish_edits`](Self::finish_edits)).
    #[cfg(test)]
    pub(crate) fn log_and_apply(&mut self, edit: &mut VersionEdit) -> Result<()> {
        self.log_and_apply_all(std::slice::from_mut(edit))
    }

    /// [`log_and_apply`](Self::log_and_apply) for several edits written together (one sync).
    pub(crate) fn log_and_apply_all(&mut self, edits: &mut [VersionEdit]) -> Result<()> {
        let mut pending = self.prepare_edits(edits)?;
        let res = pending.write(&self.fs, &self.dir);
        self.finish_edits(pending, edits, res)
    }

    /// First step of [`log_and_apply`](Self::log_and_apply): builds the versions the edits
    /// lead to and the MANIFEST records to write, and takes the MANIFEST writer out of the set.
    /// Until [`finish_edits`](Self::finish_edits) no other edit may be prepared (the database
    /// serializes MANIFEST writers); the current versions stay installed meanwhile.
    pub(crate) fn prepare_edits(&mut self, edits: &mut [VersionEdit]) -> Result<ManifestWrite> {
        let mut versions: Vec<(u32, Option<Version>)> = Vec::with_capacity(edits.len());
        for edit in edits.iter() {
            versions.push((edit.column_family, self.edit_version(edit, &versions)?));
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
        let mut records = Vec::new();
        if let Some(first) = edits.first_mut() {
            first.next_file_number = Some(self.next_file_number);
        }
        // The caller read the last sequence before waiting for its turn to write the
        // MANIFEST; an edit written meanwhile (an ingestion's) may have recorded a larger one.
        for edit in edits.iter_mut() {
            if let Some(n) = &mut edit.last_sequence {
                *n = (*n).max(self.last_sequence);
            }
        }
        if new_manifest {
            for snapshot in self.snapshot_edits(edits, &versions) {
                let mut record = Vec::new();
                snapshot.encode(&mut record);
                records.push(record);
            }
        } else {
            for edit in edits.iter() {
                let mut record = Vec::new();
                edit.encode(&mut record);
                records.push(record);
            }
        }
        Ok(ManifestWrite {
            versions,
            writer: self.manifest.take(),
            manifest_number: self.manifest_number,
            replaced_manifest: (new_manifest && old_manifest != 0).then_some(old_manifest),
            records,
        })
    }

    /// The version `edit` leads to for its family (`None` if it drops the family), given the
    /// versions earlier edits of the same write lead to.
    fn edit_version(
        &self,
        edit: &VersionEdit,
        earlier: &[(u32, Option<Version>)],
    ) -> Result<Option<Version>> {
        let id = edit.column_family;
        if edit.column_family_drop {
            if id == DEFAULT_FAMILY || !self.families.contains_key(&id) {
                return Err(Error::InvalidArgument(format!(
                    "cannot drop column family {id}"
                )));
            }
            return Ok(None);
        }
        let earlier = earlier.iter().rev().find(|(i, _)| *i == id);
        let (mut levels, mut blob_files, num_levels) = if edit.column_family_add.is_some() {
            let config = self.pending_configs.get(&id).ok_or_else(|| {
                Error::InvalidArgument(format!("column family {id} has no configuration"))
            })?;
            (
                vec![Vec::new(); config.num_levels],
                Vec::new(),
                config.num_levels,
            )
        } else if let Some((_, Some(v))) = earlier {
            (v.files.clone(), v.blob_files.clone(), v.num_levels())
        } else {
            let f = self.families.get(&id).ok_or_else(|| {
                Error::InvalidArgument(format!("column family {id} does not exist"))
            })?;
            (
                f.current.files.clone(),
                f.current.blob_files.clone(),
                f.config.num_levels,
            )
        };
        apply_edit(&mut levels, &mut blob_files, edit, num_levels)
            .map_err(Error::InvalidArgument)?;
        let mut version = build_version(levels);
        version.blob_files = blob_files;
        check_levels_disjoint(&version).map_err(Error::InvalidArgument)?;
        Ok(Some(version))
    }

    /// Last step of [`log_and_apply`](Self::log_and_apply): given the result of
    /// [`ManifestWrite::write`], installs the new versions and counters, or on failure leaves
    /// the current versions and drops the MANIFEST writer (a later edit starts a new MANIFEST).
    pub(crate) fn finish_edits(
        &mut self,
        written: ManifestWrite,
        edits: &[VersionEdit],
        res: Result<()>,
    ) -> Result<()> {
        res?;
        let ManifestWrite {
            versions,
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
        for (edit, (id, version)) in edits.iter().zip(versions) {
            if let Some(s) = edit.last_sequence {
                self.last_sequence = self.last_sequence.max(s);
            }
            let Some(version) = version else {
                // Dropped: readers holding its versions keep its files until they let go.
                self.families.remove(&id);
                continue;
            };
            if let Some(name) = &edit.column_family_add {
                // `edit_version` refused an add without a registered configuration.
                let Some(config) = self.pending_configs.remove(&id) else {
                    continue;
                };
                self.families.insert(
                    id,
                    FamilyVersions {
                        name: name.clone(),
                        compact_pointers: vec![Vec::new(); config.num_levels],
                        config,
                        current: Arc::new(Version::default()),
                        log_number: edit.log_number.unwrap_or(0),
                        merge_operator: None,
                        stores_write_times: false,
                    },
                );
            }
            let Some(f) = self.families.get_mut(&id) else {
                continue;
            };
            install_version(f, edit, version, &self.obsolete);
        }
        Ok(())
    }

    /// The queue obsolete files go to; the database purges it.
    pub(crate) fn deletion_queue(&self) -> &Arc<DeletionQueue> {
        &self.obsolete
    }

    /// Edits that recreate the current state, for a checkpoint's MANIFEST.
    pub(crate) fn checkpoint_edits(&self) -> Vec<VersionEdit> {
        self.snapshot_edits(&[], &[])
    }

    /// Edits that recreate the whole state (the first records of a new MANIFEST): the
    /// counters and the default family first, then one edit adding each other family. The
    /// families `edits` change are taken as they will be after `edits`.
    fn snapshot_edits(
        &self,
        edits: &[VersionEdit],
        versions: &[(u32, Option<Version>)],
    ) -> Vec<VersionEdit> {
        let mut ids: Vec<u32> = self.families.keys().copied().collect();
        for e in edits {
            if e.column_family_add.is_some() {
                ids.push(e.column_family);
            }
            if e.column_family_drop {
                ids.retain(|&i| i != e.column_family);
            }
        }
        let last_sequence = edits
            .iter()
            .filter_map(|e| e.last_sequence)
            .fold(self.last_sequence, u64::max);
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let changed: Vec<&VersionEdit> =
                edits.iter().filter(|e| e.column_family == id).collect();
            let version = versions.iter().rev().find(|(i, _)| *i == id);
            let live = self.families.get(&id);
            let mut s = VersionEdit {
                column_family: id,
                ..Default::default()
            };
            s.log_number = changed
                .iter()
                .rev()
                .find_map(|e| e.log_number)
                .or(live.map(|f| f.log_number))
                .or(Some(0));
            s.merge_operator = changed
                .iter()
                .rev()
                .find_map(|e| e.merge_operator.clone())
                .or_else(|| live.and_then(|f| f.merge_operator.clone()));
            s.stores_write_times = changed.iter().any(|e| e.stores_write_times)
                || live.is_some_and(|f| f.stores_write_times);
            if id == DEFAULT_FAMILY {
                s.next_file_number = Some(self.next_file_number);
                s.last_sequence = Some(last_sequence);
                s.max_column_family = Some(self.max_column_family);
            } else {
                s.column_family_add = changed
                    .iter()
                    .find_map(|e| e.column_family_add.clone())
                    .or(live.map(|f| f.name.clone()));
            }
            let mut pointers: Vec<(usize, InternalKey)> = live
                .map(|f| {
                    f.compact_pointers
                        .iter()
                        .enumerate()
                        .filter(|(_, p)| !p.is_empty())
                        .map(|(l, p)| (l, InternalKey(p.clone())))
                        .collect()
                })
                .unwrap_or_default();
            for e in &changed {
                for (level, k) in &e.compact_pointers {
                    pointers.retain(|(l, _)| l != level);
                    pointers.push((*level, k.clone()));
                }
            }
            s.compact_pointers = pointers;
            let v = match (version, live) {
                (Some((_, Some(v))), _) => v,
                (_, Some(f)) => &*f.current,
                _ => continue,
            };
            for (level, files) in v.files.iter().enumerate() {
                for f in files {
                    s.add_file(level, (**f).clone());
                }
            }
            // The blob files with their garbage so far, so the snapshot rebuilds the same list.
            for b in &v.blob_files {
                s.blob_files_added.push(b.meta.addition);
                if b.garbage_count > 0 || b.garbage_bytes > 0 {
                    s.blob_garbage.push(super::BlobGarbage {
                        number: b.meta.addition.number,
                        count: b.garbage_count,
                        bytes: b.garbage_bytes,
                    });
                }
            }
            out.push(s);
        }
        out
    }

    /// Numbers of every table file in any family's current version.
    pub(crate) fn live_files(&self) -> HashSet<u64> {
        self.families
            .values()
            .flat_map(|f| {
                let tables = f.current.files.iter().flatten().map(|f| f.number);
                tables.chain(f.current.blob_files.iter().map(|b| b.meta.addition.number))
            })
            .collect()
    }
}

/// Reads CURRENT: the MANIFEST's name and path.
fn read_current(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    current_path: &Path,
) -> Result<(String, PathBuf)> {
    let current = fs
        .read_to_vec(current_path)
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
                current_path,
                0,
                "CURRENT does not hold a MANIFEST name followed by a newline",
            )
        })?;
    Ok((name.to_string(), dir.join(name)))
}

/// Turns a replayed family into a live one with `config`'s levels. Files at a level the
/// options do not have make open fail (the data would be unreachable).
/// Where the reading of a MANIFEST stopped, with everything its edits built up to there: a
/// secondary instance reads on from `offset` when the MANIFEST grows (RocksDB's secondary
/// tails it the same way) instead of replaying it from the start.
#[derive(Clone)]
pub(crate) struct ManifestTail {
    /// The MANIFEST's file name, as CURRENT gave it.
    manifest_name: String,
    /// Where the first record not yet applied starts: after the last complete edit, or at
    /// the first edit of an atomic group whose last edit was not written yet.
    offset: u64,
    /// The state the edits before `offset` built.
    replayed: Replayed,
}

impl ManifestTail {
    /// Reads the MANIFEST CURRENT names from its start.
    fn read_from_start(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<ManifestTail> {
        let current_path = filename::current_file(dir);
        let (name, manifest_path) = read_current(fs, dir, &current_path)?;
        let start = ManifestTail {
            manifest_name: name,
            offset: 0,
            replayed: Replayed::new(),
        };
        start.read_on(fs, &current_path, &manifest_path)
    }

    /// Reads on in the MANIFEST CURRENT names, if it is still the one read so far: returns
    /// the versions with every edit written since, and where reading stopped now. `None`
    /// when CURRENT names another MANIFEST (it rolled over: read it from the start).
    pub(crate) fn catch_up(
        &self,
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        opts: &Options,
        family_options: &dyn Fn(&str) -> Options,
        obsolete: Arc<DeletionQueue>,
    ) -> Result<Option<(VersionSet, ManifestTail)>> {
        let current_path = filename::current_file(dir);
        let (name, manifest_path) = read_current(&fs, dir, &current_path)?;
        if name != self.manifest_name {
            return Ok(None);
        }
        let tail = self.read_on(&fs, &current_path, &manifest_path)?;
        let versions = tail.versions(fs, dir, opts, family_options, obsolete)?;
        Ok(Some((versions, tail)))
    }

    /// The versions of the state read so far. The tail keeps its replay state to read on
    /// from, so the versions are built from a copy.
    fn versions(
        &self,
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        opts: &Options,
        family_options: &dyn Fn(&str) -> Options,
        obsolete: Arc<DeletionQueue>,
    ) -> Result<VersionSet> {
        self.replayed.clone().into_versions(
            &self.manifest_name,
            fs,
            dir,
            opts,
            family_options,
            obsolete,
        )
    }

    /// Applies the records from `self.offset` to the end of the MANIFEST to a copy of the
    /// state. A torn final record (damage then end of file) is an edit not yet (or never)
    /// completely written: reading stops before it, as before an atomic group still open.
    fn read_on(
        &self,
        fs: &Arc<dyn FileSystem>,
        current_path: &Path,
        manifest_path: &Path,
    ) -> Result<ManifestTail> {
        let opened = match self.offset {
            0 => fs.open_sequential(manifest_path),
            at => crate::fs::sequential_from_block_of(&**fs, manifest_path, at),
        };
        let file = opened.map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                // CURRENT is replaced only after the MANIFEST it names is durable.
                Error::corruption(
                    current_path,
                    0,
                    format!("CURRENT names {}, which is missing", self.manifest_name),
                )
            } else {
                Error::io(format!("opening {}", manifest_path.display()), e)
            }
        })?;
        let mut reader = LogReader::new_at(file, manifest_path.to_path_buf(), self.offset);
        let mut replayed = self.replayed.clone();
        let mut group_start = self.offset;
        let end = replay_records(
            &mut reader,
            TailPolicy::TornTailOnly,
            &format!("reading {}", manifest_path.display()),
            |data, offset| {
                let edit = match VersionEdit::decode(&data) {
                    Ok(edit) => edit,
                    Err(d) => return Ok(RecordCheck::Invalid(format!("bad version edit: {d}"))),
                };
                if replayed.group.is_empty() {
                    group_start = offset;
                }
                Ok(match replayed.add(edit) {
                    Ok(()) => RecordCheck::Applied,
                    Err(d) => RecordCheck::Invalid(d),
                })
            },
        )?;
        let offset = if !replayed.group.is_empty() {
            // An atomic group cut short by the end of the MANIFEST was not acknowledged (its
            // records are written and synced together): none of it applies yet.
            replayed.group.clear();
            group_start
        } else {
            match end {
                ReplayEnd::Eof {
                    torn_tail: Some((at, _)),
                } => at,
                _ => reader.position(),
            }
        };
        Ok(ManifestTail {
            manifest_name: self.manifest_name.clone(),
            offset,
            replayed,
        })
    }
}

impl Replayed {
    /// The versions the edits replayed from MANIFEST `manifest_name` describe.
    fn into_versions(
        self,
        manifest_name: &str,
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        opts: &Options,
        family_options: &dyn Fn(&str) -> Options,
        obsolete: Arc<DeletionQueue>,
    ) -> Result<VersionSet> {
        let manifest_path = dir.join(manifest_name);
        let missing =
            |what: &str| Error::corruption(&manifest_path, 0, format!("MANIFEST has no {what}"));
        if !self.saw_log_number {
            return Err(missing("log number"));
        }
        let next_file_number = self
            .next_file_number
            .ok_or_else(|| missing("next file number"))?;
        let last_sequence = self
            .last_sequence
            .ok_or_else(|| missing("last sequence number"))?;
        let manifest_number = filename::parse_file_name(manifest_name).map_or(0, |(_, n)| n);
        let mut families = BTreeMap::new();
        for (id, f) in self.families {
            let config = FamilyConfig::from_options(&family_options(&f.name));
            families.insert(id, finish_replayed_family(f, config, &obsolete)?);
        }
        Ok(VersionSet {
            fs,
            dir: dir.to_path_buf(),
            max_manifest_file_size: opts.max_manifest_file_size,
            families,
            pending_configs: BTreeMap::new(),
            max_column_family: self.max_column_family,
            next_file_number: next_file_number.max(manifest_number + 1),
            last_sequence,
            manifest: None,
            manifest_number,
            obsolete,
        })
    }
}

fn finish_replayed_family(
    mut f: ReplayFamily,
    config: FamilyConfig,
    obsolete: &Arc<DeletionQueue>,
) -> Result<FamilyVersions> {
    let n = config.num_levels;
    if let Some(level) = (n..MAX_LEVELS).find(|&l| !f.levels[l].is_empty()) {
        return Err(Error::InvalidArgument(format!(
            "column family {:?} has files at level {level} but num_levels is {n}: open it \
             with num_levels of at least {}",
            f.name,
            level + 1
        )));
    }
    f.levels.truncate(n);
    f.compact_pointers.truncate(n);
    let mut version = build_version(f.levels);
    version.blob_files = f.blob_files;
    version.scores = Some(score_version(&version, &config.score_targets));
    version.handles = own_files(&version, None, obsolete);
    Ok(FamilyVersions {
        name: f.name,
        config,
        current: Arc::new(version),
        log_number: f.log_number,
        compact_pointers: f.compact_pointers,
        merge_operator: f.merge_operator,
        stores_write_times: f.stores_write_times,
    })
}

/// Installs a family's new version after its edit is durable.
fn install_version(
    f: &mut FamilyVersions,
    edit: &VersionEdit,
    mut version: Version,
    obsolete: &Arc<DeletionQueue>,
) {
    if let Some(n) = edit.log_number {
        f.log_number = f.log_number.max(n);
    }
    if let Some(name) = &edit.merge_operator {
        f.merge_operator = recorded_operator(name);
    }
    f.stores_write_times |= edit.stores_write_times;
    for (level, k) in &edit.compact_pointers {
        if let Some(p) = f.compact_pointers.get_mut(*level) {
            *p = k.0.clone();
        }
    }
    // Only now, with the edit durable, do new files get handles (so a failed write never
    // queues outputs a MANIFEST record may still name) and removed ones lose theirs.
    version.handles = own_files(&version, Some(&f.current), obsolete);
    version.scores = Some(score_version(&version, &f.config.score_targets));
    f.current = Arc::new(version);
}

/// A prepared MANIFEST write (see [`VersionSet::prepare_edit`]). Its `write` does the IO and
/// touches nothing of the version set, so it runs without the database mutex.
pub(crate) struct ManifestWrite {
    /// Per edit, its family and the version to install once the records are durable
    /// (`None`: the edit drops the family).
    versions: Vec<(u32, Option<Version>)>,
    /// The open MANIFEST to append to; `None` when a new MANIFEST is started.
    writer: Option<LogWriter>,
    /// The MANIFEST written to.
    manifest_number: u64,
    /// The MANIFEST a new one replaces, deleted once CURRENT names the new one.
    replaced_manifest: Option<u64>,
    /// The encoded edits, or for a new MANIFEST the snapshot of the whole state.
    records: Vec<Vec<u8>>,
}

impl ManifestWrite {
    /// Appends and syncs the record; for a new MANIFEST, creates it and then points CURRENT
    /// at it (atomically and durably).
    pub(crate) fn write(&mut self, fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<()> {
        let path = filename::manifest_file(dir, self.manifest_number);
        let writing = |e| Error::io(format!("writing {}", path.display()), e);
        match &mut self.writer {
            Some(w) => add_records(w, &self.records)
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
                add_records(&mut w, &self.records)
                    .and_then(|_| w.sync())
                    .map_err(writing)?;
                set_current_file(fs, dir, self.manifest_number)?;
                self.writer = Some(w);
                Ok(())
            }
        }
    }
}

fn add_records(w: &mut LogWriter, records: &[Vec<u8>]) -> std::io::Result<()> {
    records.iter().try_for_each(|r| w.add_record(r))
}

/// Applies an edit's deletions and additions to per-level file lists and the blob files:
/// added ones join, garbage is counted, and blob files no table references any more leave.
fn apply_edit(
    levels: &mut [Vec<Arc<FileMetaData>>],
    blob_files: &mut Vec<BlobFile>,
    edit: &VersionEdit,
    num_levels: usize,
) -> std::result::Result<(), String> {
    apply_table_changes(levels, edit, num_levels)?;
    apply_blob_changes(levels, blob_files, edit)
}

/// The blob-file part of [`apply_edit`].
fn apply_blob_changes(
    levels: &[Vec<Arc<FileMetaData>>],
    blob_files: &mut Vec<BlobFile>,
    edit: &VersionEdit,
) -> std::result::Result<(), String> {
    for a in &edit.blob_files_added {
        if blob_files
            .iter()
            .any(|b| b.meta.addition.number == a.number)
        {
            return Err(format!("edit adds blob file {} twice", a.number));
        }
        blob_files.push(BlobFile {
            meta: Arc::new(BlobFileMetaData::new(*a)),
            garbage_count: 0,
            garbage_bytes: 0,
        });
    }
    blob_files.sort_by_key(|b| b.meta.addition.number);
    for g in &edit.blob_garbage {
        let b = blob_files
            .iter_mut()
            .find(|b| b.meta.addition.number == g.number)
            .ok_or_else(|| format!("edit adds garbage to blob file {}, not live", g.number))?;
        b.garbage_count = b.garbage_count.saturating_add(g.count);
        b.garbage_bytes = b.garbage_bytes.saturating_add(g.bytes);
        let a = &b.meta.addition;
        if b.garbage_count > a.blob_count || b.garbage_bytes > a.blob_bytes {
            return Err(format!(
                "blob file {} has more garbage than blobs",
                g.number
            ));
        }
    }
    let mut referenced: Vec<u64> = levels
        .iter()
        .flatten()
        .flat_map(|f| f.blob_files.iter().copied())
        .collect();
    referenced.sort_unstable();
    referenced.dedup();
    if let Some(n) = referenced.iter().find(|&&n| {
        blob_files
            .binary_search_by_key(&n, |b| b.meta.addition.number)
            .is_err()
    }) {
        return Err(format!(
            "a table references blob file {n}, which is not live"
        ));
    }
    blob_files.retain(|b| referenced.binary_search(&b.meta.addition.number).is_ok());
    Ok(())
}

/// The table part of [`apply_edit`].
fn apply_table_changes(
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

/// Handles for every file `version` lists (tables and blob files): the previous version's
/// where it had one (the same file, maybe moved to another level), a new one otherwise.
fn own_files(
    version: &Version,
    previous: Option<&Version>,
    queue: &Arc<DeletionQueue>,
) -> Vec<Arc<FileHandle>> {
    let tables = version
        .files
        .iter()
        .flatten()
        .map(|f| (f.number, FileKind::Table));
    let blobs = version
        .blob_files
        .iter()
        .map(|b| (b.meta.addition.number, FileKind::Blob));
    let mut numbers: Vec<(u64, FileKind)> = tables.chain(blobs).collect();
    numbers.sort_unstable_by_key(|&(n, _)| n);
    numbers.dedup_by_key(|&mut (n, _)| n);
    let previous = previous.map_or(&[][..], |v| v.handles.as_slice());
    numbers
        .into_iter()
        .map(
            |(n, kind)| match previous.binary_search_by_key(&n, |h| h.number()) {
                Ok(i) => previous[i].clone(),
                Err(_) => FileHandle::new(kind, n, queue.clone()),
            },
        )
        .collect()
}

/// Refuses a version in which two files of a level below L0 overlap: reads would find only
/// one of them. Checked before an edit is written, so a compaction bug cannot reach the
/// MANIFEST.
fn check_levels_disjoint(v: &Version) -> std::result::Result<(), String> {
    for level in 1..v.num_levels() {
        for pair in v.level_files(level).windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if key::compare_internal(a.largest.encoded(), b.smallest.encoded()).is_ge() {
                return Err(format!(
                    "edit makes files {} and {} overlap at level {level}",
                    a.number, b.number
                ));
            }
        }
    }
    Ok(())
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
        blob_files: Vec::new(),
    }
}

/// Points CURRENT at MANIFEST `manifest_number`, atomically and durably.
pub(crate) fn set_current_file(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    manifest_number: u64,
) -> Result<()> {
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
    let mut blob_files = base.blob_files.clone();
    let num_levels = levels.len();
    apply_edit(&mut levels, &mut blob_files, edit, num_levels)?;
    let mut v = build_version(levels);
    v.blob_files = blob_files;
    Ok(v)
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
            num_range_deletions: 0,
            blob_files: Vec::new(),
            global_seqno: None,
            file_checksum: None,
            open_table: Default::default(),
            seeks: Default::default(),
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

    fn blob_addition(number: u64) -> crate::version::BlobFileAddition {
        crate::version::BlobFileAddition {
            number,
            blob_count: 10,
            blob_bytes: 1000,
            file_size: 1100,
            file_checksum: None,
        }
    }

    fn blob_numbers(v: &Version) -> Vec<(u64, u64, u64)> {
        v.blob_files
            .iter()
            .map(|b| (b.meta.addition.number, b.garbage_count, b.garbage_bytes))
            .collect()
    }

    #[test]
    fn blob_files_live_while_a_table_references_them() {
        // A flush: table 5 references blob files 3 and 4.
        let mut e = VersionEdit::default();
        let mut t = file(5, "a", "m", 10);
        t.blob_files = vec![3, 4];
        e.add_file(0, t);
        e.blob_files_added = vec![blob_addition(4), blob_addition(3)];
        let v = apply_for_tests(&Version::empty(3), &e).expect("apply");
        assert_eq!(blob_numbers(&v), vec![(3, 0, 0), (4, 0, 0)]);
        // A compaction rewrites 5 into 6, which still references 4 (3's blobs were dropped).
        let mut e = VersionEdit::default();
        e.delete_file(0, 5);
        let mut t = file(6, "a", "m", 10);
        t.blob_files = vec![4];
        e.add_file(1, t);
        e.blob_garbage = vec![
            crate::version::BlobGarbage {
                number: 3,
                count: 10,
                bytes: 1000,
            },
            crate::version::BlobGarbage {
                number: 4,
                count: 2,
                bytes: 150,
            },
        ];
        let v = apply_for_tests(&v, &e).expect("apply");
        assert_eq!(blob_numbers(&v), vec![(4, 2, 150)]);
        // The last table referencing 4 goes: so does 4.
        let mut e = VersionEdit::default();
        e.delete_file(1, 6);
        let v2 = apply_for_tests(&v, &e).expect("apply");
        assert!(v2.blob_files.is_empty());
        // Refused: a table naming an unlisted blob file, garbage beyond a file's blobs, a
        // blob file added twice.
        let mut e = VersionEdit::default();
        let mut t = file(7, "n", "p", 11);
        t.blob_files = vec![99];
        e.add_file(0, t);
        let err = apply_for_tests(&v, &e).expect_err("unknown blob file");
        assert!(err.contains("blob file 99, which is not live"), "{err}");
        let e = VersionEdit {
            blob_garbage: vec![crate::version::BlobGarbage {
                number: 4,
                count: 9,
                bytes: 1,
            }],
            ..Default::default()
        };
        let err = apply_for_tests(&v, &e).expect_err("too much garbage");
        assert!(err.contains("more garbage than blobs"), "{err}");
        let e = VersionEdit {
            blob_files_added: vec![blob_addition(4)],
            ..Default::default()
        };
        let err = apply_for_tests(&v, &e).expect_err("added twice");
        assert!(err.contains("adds blob file 4 twice"), "{err}");
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
            num_range_deletions: 0,
            blob_files: Vec::new(),
            global_seqno: None,
            file_checksum: None,
            open_table: Default::default(),
            seeks: Default::default(),
        }
    }

    fn open_set(fs: &Arc<dyn FileSystem>) -> VersionSet {
        let dir = Path::new("/db");
        fs.create_dir_all(dir).expect("mkdir");
        VersionSet::create_new(fs, dir, false).expect("create");
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
        let empty = vs.current(DEFAULT_FAMILY);
        assert_eq!(
            empty.scores,
            Some(crate::version::VersionScores {
                level_scores: vec![0.0, 0.0],
                pick_priorities: vec![0.0, 0.0],
                pending_compaction_bytes: 0,
                base_level: 1,
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
            vs.current(DEFAULT_FAMILY).scores,
            Some(crate::version::VersionScores {
                level_scores: vec![1.0, 1.5],
                // L0 over L1's score, L1 over an empty L2's floor.
                pick_priorities: vec![1.0 / 1.5, 1.5 / 0.01],
                pending_compaction_bytes: 500 + 500 * 10 + 500,
                base_level: 1,
            })
        );
    }

    /// A compaction reads the last sequence, then waits for its turn at the MANIFEST while an
    /// ingestion records a larger one: the MANIFEST must never say the sequence went back
    /// (recovery would hand out numbers that older, ingested entries outrank). Both the
    /// writing side and replay hold the line.
    #[test]
    fn the_last_sequence_never_goes_back_in_the_manifest() {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let mut vs = open_set(&fs);
        let mut ingest = VersionEdit {
            last_sequence: Some(1479),
            ..Default::default()
        };
        ingest.add_file(0, meta(10, 300, b"a", b"c"));
        vs.log_and_apply(&mut ingest).expect("ingest");
        let mut stale = VersionEdit {
            last_sequence: Some(1200),
            ..Default::default()
        };
        stale.add_file(1, meta(11, 300, b"x", b"z"));
        vs.log_and_apply(&mut stale).expect("compaction");
        assert_eq!(stale.last_sequence, Some(1479), "written as the larger");
        assert_eq!(vs.last_sequence(), 1479);
        drop(vs);
        let opts = Options {
            num_levels: 3,
            ..Default::default()
        };
        let again = VersionSet::recover(fs.clone(), Path::new("/db"), &opts).expect("recover");
        assert_eq!(again.last_sequence(), 1479);

        // A MANIFEST written before that fix, with the smaller number last, replays to the
        // larger one.
        let mut replayed = Replayed::new();
        for n in [1479, 1200] {
            let edit = VersionEdit {
                last_sequence: Some(n),
                ..Default::default()
            };
            replayed.add(edit).expect("apply");
        }
        assert_eq!(replayed.last_sequence, Some(1479));
    }

    #[test]
    fn an_edit_making_files_of_a_level_overlap_is_refused() {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let mut vs = open_set(&fs);
        let mut edit = VersionEdit::default();
        edit.add_file(1, meta(10, 300, b"a", b"m"));
        edit.add_file(1, meta(11, 300, b"k", b"z"));
        let e = vs.log_and_apply(&mut edit).expect_err("overlap");
        assert!(
            e.to_string().contains("files 10 and 11 overlap at level 1"),
            "{e}"
        );
        // Disjoint files and overlapping L0 files are fine.
        let mut edit = VersionEdit::default();
        edit.add_file(1, meta(12, 300, b"a", b"j"));
        edit.add_file(1, meta(13, 300, b"k", b"z"));
        edit.add_file(0, meta(14, 300, b"a", b"z"));
        edit.add_file(0, meta(15, 300, b"b", b"y"));
        vs.log_and_apply(&mut edit).expect("disjoint");
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
        let reader = vs.current(DEFAULT_FAMILY);
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

#[cfg(test)]
mod atomic_group_tests {
    use super::*;

    fn replayed() -> Replayed {
        Replayed {
            families: BTreeMap::from([(
                DEFAULT_FAMILY,
                ReplayFamily::new(DEFAULT_FAMILY_NAME.to_string()),
            )]),
            max_column_family: 0,
            next_file_number: None,
            last_sequence: None,
            saw_log_number: false,
            group: Vec::new(),
        }
    }

    fn grouped(log_number: u64, remaining: u32) -> VersionEdit {
        VersionEdit {
            log_number: Some(log_number),
            atomic_group_remaining: Some(remaining),
            ..Default::default()
        }
    }

    fn log_number(r: &Replayed) -> u64 {
        r.families[&DEFAULT_FAMILY].log_number
    }

    #[test]
    fn a_group_applies_only_when_complete() {
        let mut r = replayed();
        r.add(grouped(5, 2)).expect("first");
        r.add(grouped(6, 1)).expect("second");
        assert_eq!(log_number(&r), 0, "nothing applied before the last edit");
        r.add(grouped(7, 0)).expect("last");
        assert_eq!(log_number(&r), 7);
        assert!(r.group.is_empty());
        // A group cut short stays buffered; recovery drops it at the end of the MANIFEST.
        r.add(grouped(9, 1)).expect("cut short");
        assert_eq!(log_number(&r), 7);
        assert_eq!(r.group.len(), 1);
    }

    #[test]
    fn a_broken_group_is_corruption() {
        let mut r = replayed();
        r.add(grouped(5, 2)).expect("first");
        let err = r.add(grouped(6, 0)).expect_err("skipped a count");
        assert!(err.contains("0 remain after one that said 2"), "{err}");
        let mut r = replayed();
        r.add(grouped(5, 1)).expect("first");
        let plain = VersionEdit {
            log_number: Some(6),
            ..Default::default()
        };
        let err = r.add(plain).expect_err("interrupted");
        assert!(err.contains("interrupts"), "{err}");
    }
}
