//! `shaledb::repair`: rebuilds a MANIFEST from the tables and WALs in a database directory
//! whose MANIFEST or CURRENT is lost or damaged (LevelDB's repair.cc, RocksDB's `RepairDB`).
//!
//! Steps, under the database lock:
//! 1. Read what is intact of the newest readable old MANIFEST (`manifest.rs`): families
//!    without tables, dropped families, merge operators, TTL flags, log numbers.
//! 2. Read every blob file and table in full, checksums verified (`scan.rs`). A damaged file
//!    is moved into `lost/` and reported; nothing is ever deleted.
//! 3. Replay every WAL (oldest first), skipping damaged bytes, into one memtable per family,
//!    written out as L0 tables.
//! 4. Rewrite tables that reference unreadable blob values, without those entries.
//! 5. Where a family's tables, placed in L0 newest first by largest sequence number, could
//!    answer a read from an older version (overlapping keys whose sequence ranges
//!    interleave, as files of different levels do), merge them into new tables at the last
//!    level; otherwise keep them in L0 (compaction reshapes the tree later).
//! 6. Write a new empty WAL and a new MANIFEST listing everything kept, sync, and point
//!    CURRENT at it (atomically). The old WALs and MANIFESTs, and tables replaced by merged
//!    ones, are then obsolete: the next open deletes them.
//!
//! Every file repair writes is synced before CURRENT names the MANIFEST listing it, so a
//! crash at any point leaves either the old state (repair can run again, and finds what the
//! interrupted run wrote as more copies of the same entries) or the repaired one.

mod manifest;
mod report;
mod scan;

pub use report::{LostFile, RepairReport, WalSalvage};

use super::open::{lock_error, operator_name, requested_families};
use crate::cache::{BlockCache, TableCache};
use crate::column_family::{CfOptions, DEFAULT_FAMILY, DEFAULT_FAMILY_NAME};
use crate::compaction::job::{self, OutputSpec};
use crate::compaction::picker;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::merging::MergingIterator;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, ValueKind};
use crate::log::{LogRead, LogReader, LogWriter};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::range_del::FragmentedRangeTombstones;
use crate::sst::{BlockReadOptions, Table};
use crate::version::filename::{self, FileKind};
use crate::version::set::set_current_file;
use crate::version::{BlobGarbage, VersionEdit};
use crate::write_batch::{BatchEntry, WriteBatch};
use manifest::OldManifest;
use report::{DROPPED, REPLACED, UNREFERENCED};
use scan::{ScannedBlob, ScannedTable};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The directory, under the database's, that files repair cannot use are moved into.
pub(crate) const LOST_DIR: &str = "lost";

/// Repairs the database at `path` whose MANIFEST or CURRENT is lost or damaged: every intact
/// table is kept, every intact WAL record is written to a table, damaged files are moved
/// into `path/lost/`, and a new MANIFEST lists what was kept. The report says what was kept
/// and what was lost, with files and offsets. Column families other than the default one
/// get default options; give theirs with [`repair_cf`]. Open the repaired database with
/// the options (and `num_levels`) given here.
///
/// Run it only on a closed database (it takes the lock, so an open one gives
/// `Error::Locked`). Repairing an intact database is harmless: it rewrites the MANIFEST.
///
/// ```
/// use shaledb::{Db, Options};
/// let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::default()).unwrap();
/// db.put(b"k", b"v").unwrap();
/// drop(db);
/// std::fs::remove_file(dir.path().join("CURRENT")).unwrap(); // CURRENT lost
/// let report = shaledb::repair(dir.path(), &Options::default()).unwrap();
/// assert!(!report.lost_data(), "{report}");
/// let db = Db::open(dir.path(), Options::default()).unwrap();
/// assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
/// ```
pub fn repair(path: impl AsRef<Path>, opts: &Options) -> Result<RepairReport> {
    run(path.as_ref(), opts, Vec::new())
}

/// [`repair`] with the options of named column families, as [`crate::Db::open_cf`] takes
/// them: tables recovered from WALs are written with them (block size, codecs, blob
/// files), and a family whose MANIFEST is lost is recorded with their merge operator and
/// TTL (unless its tables show values with write times). Families are matched by the names
/// their tables (or the old MANIFEST) record; one known only from WAL records is named
/// `repaired-<id>`.
///
/// ```
/// use shaledb::{merge_operators::UInt64Add, CfOptions, Db, Options};
/// use std::sync::Arc;
/// let dir = tempfile::tempdir().unwrap();
/// let counters = CfOptions {
///     merge_operator: Some(Arc::new(UInt64Add)),
///     ..Default::default()
/// };
/// let opts = Options { create_missing_column_families: true, ..Default::default() };
/// let db = Db::open_cf(dir.path(), opts.clone(), [("counters", counters.clone())]).unwrap();
/// let cf = db.cf("counters").unwrap();
/// db.merge_cf(&cf, b"hits", 2u64.to_le_bytes()).unwrap();
/// db.flush_cf(&cf).unwrap(); // its table names the family
/// drop((cf, db));
/// for name in std::fs::read_dir(dir.path()).unwrap() {
///     let path = name.unwrap().path();
///     if path.to_string_lossy().contains("MANIFEST") {
///         std::fs::remove_file(path).unwrap(); // MANIFEST lost
///     }
/// }
/// let report = shaledb::repair_cf(dir.path(), &opts, [("counters", counters.clone())]).unwrap();
/// assert!(report.families.iter().any(|(_, n)| n == "counters"), "{report}");
/// let db = Db::open_cf(dir.path(), opts, [("counters", counters)]).unwrap();
/// let cf = db.cf("counters").unwrap();
/// assert_eq!(db.get_cf(&cf, b"hits").unwrap().as_deref(), Some(&2u64.to_le_bytes()[..]));
/// ```
pub fn repair_cf<I, N>(path: impl AsRef<Path>, opts: &Options, families: I) -> Result<RepairReport>
where
    I: IntoIterator<Item = (N, CfOptions)>,
    N: Into<String>,
{
    let families = families.into_iter().map(|(n, o)| (n.into(), o)).collect();
    run(path.as_ref(), opts, families)
}

fn run(dir: &Path, opts: &Options, families: Vec<(String, CfOptions)>) -> Result<RepairReport> {
    opts.validate()?;
    let requested = requested_families(opts, families)?;
    let fs = opts.fs.clone();
    if !fs.exists(dir) {
        return Err(Error::NotFound(dir.to_path_buf()));
    }
    let _lock = fs
        .lock(&filename::lock_file(dir))
        .map_err(|e| lock_error(dir, e))?;
    let listing = Listing::read(&*fs, dir)?;
    let mut r = Repairer::new(dir, opts, requested, listing.max_number + 1);
    r.old = manifest::read_newest(&*fs, dir, &listing.manifests)?;
    if let Some(old) = &r.old {
        r.report.old_manifest = Some(old.path.clone());
        r.report.old_manifest_damage = old.damage.clone();
        r.last_sequence = old.last_sequence;
    }
    r.scan_tables(&listing.tables)?;
    // WALs before blob files: their records may refer to blob files written with them
    // (`Options::separate_blobs_at_write`), which have no footer, so the scan below sets
    // them aside once their values are in the blob files of the tables written here.
    for &n in &listing.wals {
        r.replay_wal(n)?;
    }
    let (salvaged, blobs): (Vec<u64>, Vec<u64>) = listing
        .blobs
        .iter()
        .partition(|&&n| r.wal_blobs.has_read(n));
    // Their values are in new blob files now: unreferenced, as intact files go.
    r.report.blob_files_unreferenced.extend(salvaged);
    r.scan_blob_files(&blobs)?;
    r.drop_unreadable_blob_values()?;
    r.order_families()?;
    r.settle_blob_files()?;
    r.write_manifest()?;
    Ok(r.report)
}

/// The database's files by kind, each list ascending by number.
struct Listing {
    tables: Vec<u64>,
    blobs: Vec<u64>,
    wals: Vec<u64>,
    manifests: Vec<(u64, String)>,
    /// The largest number any file has, in the directory or in `lost/`.
    max_number: u64,
}

impl Listing {
    fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Listing> {
        let names = fs
            .list_dir(dir)
            .map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        let mut l = Listing {
            tables: Vec::new(),
            blobs: Vec::new(),
            wals: Vec::new(),
            manifests: Vec::new(),
            max_number: 0,
        };
        for name in &names {
            let Some((kind, n)) = filename::parse_file_name(name) else {
                continue;
            };
            l.max_number = l.max_number.max(n);
            match kind {
                FileKind::Table => l.tables.push(n),
                FileKind::Blob => l.blobs.push(n),
                FileKind::Log => l.wals.push(n),
                FileKind::Manifest => l.manifests.push((n, name.clone())),
                _ => {}
            }
        }
        // Numbers of files moved aside are not handed out again either.
        for name in fs.list_dir(&dir.join(LOST_DIR)).unwrap_or_default() {
            let base = name.split('.').next().unwrap_or_default();
            let base = base.strip_prefix("MANIFEST-").unwrap_or(base);
            if let Ok(n) = base.parse::<u64>() {
                l.max_number = l.max_number.max(n);
            }
        }
        l.tables.sort_unstable();
        l.blobs.sort_unstable();
        l.wals.sort_unstable();
        l.manifests.sort_unstable();
        Ok(l)
    }
}

/// A column family being rebuilt.
struct Family {
    name: String,
    opts: Arc<Options>,
    /// Tables for L0.
    tables: Vec<ScannedTable>,
    /// Tables for the last level (outputs of a merge: their key ranges do not overlap).
    bottom: Vec<ScannedTable>,
    merge_operator: Option<String>,
    stores_write_times: bool,
    blob_files: Vec<crate::version::BlobFileAddition>,
    blob_garbage: Vec<BlobGarbage>,
}

struct Repairer<'a> {
    dir: &'a Path,
    opts: &'a Options,
    fs: Arc<dyn FileSystem>,
    requested: BTreeMap<String, Options>,
    /// Reopens and checks each table repair writes (`write_tables` wants one).
    tables: Arc<TableCache>,
    next_file: u64,
    last_sequence: u64,
    old: Option<OldManifest>,
    families: BTreeMap<u32, Family>,
    /// Blob files whose header and footer read, by number.
    blobs: BTreeMap<u64, ScannedBlob>,
    moved_aside: bool,
    shutting_down: AtomicBool,
    report: RepairReport,
    /// Readers of the blob files WAL records refer to (`Options::separate_blobs_at_write`).
    wal_blobs: crate::blob::WalBlobReaders,
}

impl<'a> Repairer<'a> {
    fn new(
        dir: &'a Path,
        opts: &'a Options,
        requested: BTreeMap<String, Options>,
        next_file: u64,
    ) -> Self {
        let block_cache = Arc::new(BlockCache::new(1 << 20, 0));
        let tables = TableCache::new(opts.fs.clone(), dir.to_path_buf(), 16, block_cache);
        Repairer {
            dir,
            opts,
            fs: opts.fs.clone(),
            requested,
            tables: Arc::new(tables),
            next_file,
            last_sequence: 0,
            old: None,
            families: BTreeMap::new(),
            blobs: BTreeMap::new(),
            moved_aside: false,
            shutting_down: AtomicBool::new(false),
            report: RepairReport::default(),
            wal_blobs: crate::blob::WalBlobReaders::creating_from(next_file),
        }
    }

    /// Family `id`, created on first use (see [`new_family`]).
    fn family(&mut self, id: u32, hint: Option<&str>) -> &mut Family {
        let (old, requested, opts) = (&self.old, &self.requested, self.opts);
        self.families
            .entry(id)
            .or_insert_with(|| new_family(old.as_ref(), requested, opts, id, hint))
    }

    fn is_dropped(&self, id: u32) -> bool {
        self.old.as_ref().is_some_and(|m| m.dropped.contains(&id))
    }

    fn new_file_number(&mut self) -> u64 {
        let n = self.next_file;
        self.next_file += 1;
        n
    }

    /// Moves `path` into `lost/` (under a fresh name if one is taken) and describes it.
    fn move_aside(&mut self, path: &Path, offset: u64, reason: String) -> Result<LostFile> {
        let lost = self.dir.join(LOST_DIR);
        let fs = &self.fs;
        fs.create_dir_all(&lost)
            .map_err(|e| Error::io(format!("creating {}", lost.display()), e))?;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let mut to = lost.join(&*name);
        let mut k = 1;
        while fs.exists(&to) {
            to = lost.join(format!("{name}.{k}"));
            k += 1;
        }
        let bytes = scan::file_size(&**fs, path)?;
        fs.rename(path, &to)
            .map_err(|e| Error::io(format!("moving {} to {}", path.display(), to.display()), e))?;
        self.moved_aside = true;
        Ok(LostFile {
            file: path.to_path_buf(),
            moved_to: to,
            bytes,
            offset,
            reason,
        })
    }

    /// Moves a file aside for error `e` (corruption: other errors stop the repair).
    fn lose(&mut self, path: &Path, e: Error) -> Result<LostFile> {
        match e {
            Error::Corruption { offset, .. } => self.move_aside(path, offset, e.to_string()),
            e => Err(e),
        }
    }

    fn scan_blob_files(&mut self, numbers: &[u64]) -> Result<()> {
        for &n in numbers {
            match scan::scan_blob(&self.fs, self.dir, n) {
                Ok(mut b) => {
                    if b.damage.is_none() {
                        // Kept as found: its checksum from now on is of these bytes.
                        b.addition.file_checksum = Some(scan::whole_file_checksum(
                            &*self.fs,
                            &filename::blob_file(self.dir, n),
                            b.addition.file_size,
                        )?);
                    }
                    self.blobs.insert(n, b);
                }
                Err(e) => {
                    let lost = self.lose(&filename::blob_file(self.dir, n), e)?;
                    self.report.blob_files_lost.push(lost);
                }
            }
        }
        Ok(())
    }

    fn scan_tables(&mut self, numbers: &[u64]) -> Result<()> {
        for &n in numbers {
            let path = filename::table_file(self.dir, n);
            // An ingested table's keys mean the sequence number the old MANIFEST gave it;
            // without that record they read as 0, older than everything else.
            let global = self
                .old
                .as_ref()
                .and_then(|m| m.global_seqnos.get(&n).copied());
            let scanned = scan::scan_table(&self.fs, self.dir, n, global).and_then(|t| {
                t.map(|mut t| {
                    let size = t.meta.file_size;
                    t.meta.file_checksum = Some(scan::whole_file_checksum(&*self.fs, &path, size)?);
                    Ok(t)
                })
                .transpose()
            });
            let t = match scanned {
                Ok(Some(t)) => t,
                Ok(None) => continue, // empty: nothing to keep, the next open deletes it
                Err(e) => {
                    let lost = self.lose(&path, e)?;
                    self.report.tables_lost.push(lost);
                    continue;
                }
            };
            let (id, hint) = match &t.family {
                Some((id, name)) => (*id, Some(name.as_str())),
                None => (DEFAULT_FAMILY, None),
            };
            if self.is_dropped(id) {
                let reason = format!("{DROPPED} column family {id} (the old MANIFEST says so)");
                let lost = self.move_aside(&path, 0, reason)?;
                self.report.tables_lost.push(lost);
                continue;
            }
            self.last_sequence = self.last_sequence.max(t.meta.largest_seqno);
            let f = self.family(id, hint);
            f.stores_write_times |= t.newest_write_time > 0;
            f.tables.push(t);
        }
        Ok(())
    }

    /// Writes `input` and `range_dels` as tables of family `id` at `level` and reads them
    /// back (which also checks them); blob files written go to `self.blobs`.
    fn write(
        &mut self,
        id: u32,
        level: usize,
        input: &mut dyn InternalIterator,
        range_dels: Option<&FragmentedRangeTombstones>,
    ) -> Result<Vec<ScannedTable>> {
        let (opts, name) = {
            let f = self.family(id, None);
            (f.opts.clone(), f.name.clone())
        };
        let bottom = level > 0 && level + 1 == opts.num_levels;
        let spec = OutputSpec {
            fs: &self.fs,
            dir: self.dir,
            opts: &opts,
            tables: &self.tables,
            level,
            base_level: 1,
            bottommost: bottom,
            max_file_size: if level == 0 {
                u64::MAX
            } else {
                picker::target_file_size(&opts, level)
            },
            flush: level == 0,
            cf_id: id,
            cf_name: &name,
            blob_gc: None,
            write_time_blobs: None,
        };
        let next = &mut self.next_file;
        let written = job::write_tables(
            &spec,
            input,
            range_dels,
            None, // keep every entry: repair decides nothing about visibility
            &mut || {
                *next += 1;
                *next - 1
            },
            &self.shutting_down,
        )?;
        // The checksums were computed as the files were written.
        for b in &written.blob_files {
            let mut scanned = scan::scan_blob(&self.fs, self.dir, b.number)?;
            scanned.addition.file_checksum = b.file_checksum;
            self.blobs.insert(b.number, scanned);
        }
        let mut out = Vec::with_capacity(written.tables.len());
        for m in &written.tables {
            self.report.tables_written.push(m.number);
            if let Some(mut t) = scan::scan_table(&self.fs, self.dir, m.number, None)? {
                t.meta.file_checksum = m.file_checksum;
                out.push(t);
            }
        }
        Ok(out)
    }

    /// Replays WAL `number` into memtables, one per family, and writes them as L0 tables.
    fn replay_wal(&mut self, number: u64) -> Result<()> {
        let path = filename::log_file(self.dir, number);
        let file = self
            .fs
            .open_sequential(&path)
            .map_err(|e| Error::io(format!("opening WAL {}", path.display()), e))?;
        let mut reader = LogReader::new(file, path.clone());
        let mut w = WalSalvage {
            number,
            ..Default::default()
        };
        let mut mems: BTreeMap<u32, Arc<MemTable>> = BTreeMap::new();
        loop {
            let read = reader
                .read()
                .map_err(|e| Error::io(format!("reading WAL {}", path.display()), e))?;
            match read {
                LogRead::Eof => break,
                LogRead::Damaged { offset, detail } => w.damage.push((offset, detail)),
                LogRead::Record { data, offset } => {
                    self.apply_record(&mut mems, &mut w, data, offset)?
                }
            }
        }
        for (id, mem) in mems {
            if !mem.is_empty() {
                let t = mem.range_tombstones();
                let tables = self.write(id, 0, &mut mem.iter(), t.as_deref())?;
                self.family(id, None).tables.extend(tables);
            }
        }
        self.report.wals.push(w);
        Ok(())
    }

    /// Inserts one WAL record's entries into `mems`, or notes why it cannot be used.
    fn apply_record(
        &mut self,
        mems: &mut BTreeMap<u32, Arc<MemTable>>,
        w: &mut WalSalvage,
        data: Vec<u8>,
        offset: u64,
    ) -> Result<()> {
        // A marker says what was synced when; every readable write is salvaged anyway.
        if let Some(marker) = crate::log::WalMarker::decode(&data) {
            if let Err(d) = marker {
                w.damage.push((offset, d));
            }
            return Ok(());
        }
        let batch = match WriteBatch::from_data(data) {
            Ok(b) => b,
            Err(d) => {
                w.damage.push((offset, format!("bad write batch: {d}")));
                return Ok(());
            }
        };
        let (seq, count) = (batch.sequence(), batch.len() as u64);
        if seq == 0 || seq.saturating_add(count) > crate::key::MAX_SEQUENCE {
            let d = format!("write batch has impossible sequence number {seq}");
            w.damage.push((offset, d));
            return Ok(());
        }
        // Values written to blob files with the batch (`Options::separate_blobs_at_write`).
        // The entries the loop below applies (not `is_dropped`'s borrow of all of `self`).
        let old = self.old.as_ref();
        let applied = |cf: u32| {
            let dropped = old.is_some_and(|m| m.dropped.contains(&cf));
            let flushed = old
                .and_then(|m| m.families.get(&cf))
                .is_some_and(|f| w.number < f.log_number);
            !dropped && !flushed
        };
        let blobs = match self
            .wal_blobs
            .values_of(&*self.fs, self.dir, &batch, &applied)
        {
            Ok(blobs) => blobs,
            Err(crate::blob::WalBlobFailure::Lost(d) | crate::blob::WalBlobFailure::Damaged(d)) => {
                w.damage.push((offset, d));
                return Ok(());
            }
        };
        let mut applied = false;
        for (i, (cf, e)) in batch.iter_cf().enumerate() {
            let old_log = self.old.as_ref().and_then(|m| m.families.get(&cf));
            if self.is_dropped(cf) || old_log.is_some_and(|f| w.number < f.log_number) {
                continue;
            }
            self.family(cf, None);
            let mem = mems.entry(cf).or_insert_with(|| Arc::new(MemTable::new(0)));
            match (e, blobs.get(i)) {
                (BatchEntry::BlobIndex(k, _), Some(Some(value))) => {
                    mem.add(seq + i as u64, ValueKind::Put, k, value)
                }
                _ => {
                    let (kind, k, v) = e.parts();
                    mem.add(seq + i as u64, kind, k, v);
                }
            }
            applied = true;
        }
        if applied {
            w.records += 1;
            self.last_sequence = self.last_sequence.max(seq + count.max(1) - 1);
        } else {
            w.records_already_in_tables += 1;
        }
        // Bound memory: a family's memtable is written out once it reaches its buffer size.
        let full: Vec<u32> = mems
            .iter()
            .filter(|(id, m)| {
                let limit = self
                    .families
                    .get(id)
                    .map_or(usize::MAX, |f| f.opts.write_buffer_size);
                m.write_buffer_usage() >= limit
            })
            .map(|(&id, _)| id)
            .collect();
        for id in full {
            if let Some(mem) = mems.remove(&id) {
                let t = mem.range_tombstones();
                let tables = self.write(id, 0, &mut mem.iter(), t.as_deref())?;
                self.family(id, None).tables.extend(tables);
            }
        }
        Ok(())
    }

    /// True if blob file `n` is missing or has a damaged record.
    fn blob_unusable(&self, n: u64) -> bool {
        self.blobs.get(&n).is_none_or(|b| b.damage.is_some())
    }

    /// Rewrites each table that references a missing or damaged blob file: values that
    /// still read are stored again, the others' entries are left out (and counted lost).
    fn drop_unreadable_blob_values(&mut self) -> Result<()> {
        let ids: Vec<u32> = self.families.keys().copied().collect();
        for id in ids {
            let tables = std::mem::take(&mut self.family(id, None).tables);
            let mut kept = Vec::with_capacity(tables.len());
            for t in tables {
                if !t.blob_refs.keys().any(|&n| self.blob_unusable(n)) {
                    kept.push(t);
                    continue;
                }
                kept.extend(self.rewrite_without_lost_blobs(id, &t)?);
            }
            self.family(id, None).tables = kept;
        }
        Ok(())
    }

    fn rewrite_without_lost_blobs(
        &mut self,
        id: u32,
        t: &ScannedTable,
    ) -> Result<Vec<ScannedTable>> {
        let path = filename::table_file(self.dir, t.meta.number);
        let table = self.open_table(t)?;
        let mem = Arc::new(MemTable::new(0));
        let mut lost = 0u64;
        let mut it = table.iter(BlockReadOptions::default());
        it.seek_to_first();
        while it.valid() {
            let p = parse_internal_key(it.key())
                .ok_or_else(|| Error::corruption(&path, 0, "table entry has a malformed key"))?;
            let reference = (p.kind == ValueKind::BlobIndex)
                .then(|| crate::blob::BlobRef::decode_entry(it.value()))
                .flatten();
            match reference {
                Some((r, write_time)) if self.blob_unusable(r.file_number) => {
                    // Back into the table as the put it was (with its write time, if any).
                    let value = self
                        .blobs
                        .get(&r.file_number)
                        .and_then(|b| b.reader.read(p.user_key, &r, true).ok())
                        .map(|v| match write_time {
                            Some(t) => crate::clock::stamp(&v, t),
                            None => v,
                        });
                    match value {
                        Some(v) => mem.add(p.sequence, ValueKind::Put, p.user_key, &v),
                        None => lost += 1,
                    }
                }
                _ => mem.add(p.sequence, p.kind, p.user_key, it.value()),
            }
            it.next();
        }
        it.status()?;
        let tombstones = table.range_tombstones().cloned();
        drop(table);
        let out = self.write(id, 0, &mut mem.iter(), tombstones.as_deref())?;
        self.report.blob_values_lost += lost;
        let numbers: Vec<u64> = out.iter().map(|t| t.meta.number).collect();
        let reason = format!(
            "{REPLACED} tables {numbers:?}: {lost} of its values were in damaged or missing \
             blob files and could not be read"
        );
        let moved = self.move_aside(&path, 0, reason)?;
        self.report.tables_lost.push(moved);
        Ok(out)
    }

    fn open_table(&self, t: &ScannedTable) -> Result<Arc<Table>> {
        let path = filename::table_file(self.dir, t.meta.number);
        let file = self
            .fs
            .open_random_access(&path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        Ok(Arc::new(Table::open(
            file,
            path,
            t.meta.number,
            t.meta.file_size,
            None,
        )?))
    }

    /// Merges each family whose tables L0 could not order correctly into new tables at the
    /// last level.
    fn order_families(&mut self) -> Result<()> {
        let ids: Vec<u32> = self.families.keys().copied().collect();
        for id in ids {
            let f = self.family(id, None);
            sort_newest_first(&mut f.tables);
            if l0_order_is_sound(&f.tables) {
                continue;
            }
            let tables = std::mem::take(&mut f.tables);
            let level = f.opts.num_levels.saturating_sub(1);
            self.family(id, None).bottom = self.merge_tables(id, level, &tables)?;
        }
        Ok(())
    }

    /// Writes the union of `tables` as new tables at `level`. Entries equal in key and
    /// sequence number (copies of one write) are kept once, from the newest file.
    fn merge_tables(
        &mut self,
        id: u32,
        level: usize,
        tables: &[ScannedTable],
    ) -> Result<Vec<ScannedTable>> {
        let mut by_number: Vec<&ScannedTable> = tables.iter().collect();
        by_number.sort_by_key(|t| std::cmp::Reverse(t.meta.number));
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        let mut tombstones = Vec::new();
        for t in by_number {
            let table = self.open_table(t)?;
            if let Some(r) = table.range_tombstones() {
                tombstones.push(r.clone());
            }
            children.push(Box::new(table.iter(BlockReadOptions {
                verify_checksums: true,
                fill_cache: false,
            })));
        }
        let merged = FragmentedRangeTombstones::merge(tombstones.iter().map(|t| &**t));
        let mut input = DedupIterator {
            inner: MergingIterator::new(children),
            last: Vec::new(),
        };
        let range_dels = (!merged.is_empty()).then_some(&merged);
        self.write(id, level, &mut input, range_dels)
    }

    /// Blob files: those the kept tables reference go into their family's edit, with what
    /// they hold beyond the references as garbage; damaged ones are moved aside.
    fn settle_blob_files(&mut self) -> Result<()> {
        let mut referenced: BTreeMap<u64, (u32, u64, u64)> = BTreeMap::new();
        for (&id, f) in &self.families {
            for t in f.tables.iter().chain(&f.bottom) {
                for (&n, &(count, bytes)) in &t.blob_refs {
                    let e = referenced.entry(n).or_insert((id, 0, 0));
                    e.1 += count;
                    e.2 += bytes;
                }
            }
        }
        let numbers: Vec<u64> = self.blobs.keys().copied().collect();
        for n in numbers {
            let Some(&(id, count, bytes)) = referenced.get(&n) else {
                self.unreferenced_blob(n)?;
                continue;
            };
            let a = self.blobs[&n].addition;
            self.report.blob_files_kept.push(n);
            let f = self.family(id, None);
            f.blob_files.push(a);
            if a.blob_count > count || a.blob_bytes > bytes {
                f.blob_garbage.push(BlobGarbage {
                    number: n,
                    count: a.blob_count.saturating_sub(count),
                    bytes: a.blob_bytes.saturating_sub(bytes),
                });
            }
        }
        Ok(())
    }

    /// A blob file no kept table references: a damaged one is moved aside, an intact one is
    /// left for the next open to delete (it is garbage), unless repair lost tables, which
    /// may have referenced it: then it is kept beside them in `lost/`.
    fn unreferenced_blob(&mut self, n: u64) -> Result<()> {
        let path = filename::blob_file(self.dir, n);
        let damaged = self
            .blobs
            .get(&n)
            .and_then(|b| b.damage.as_ref())
            .map(|e| e.to_string());
        if let Some(reason) = damaged {
            let lost = self.move_aside(&path, 0, reason)?;
            self.report.blob_files_lost.push(lost);
        } else if self.report.lost_data() {
            let reason = format!(
                "{UNREFERENCED} (moved beside the lost tables, which may have referenced it)"
            );
            let lost = self.move_aside(&path, 0, reason)?;
            self.report.blob_files_unreferenced.push(n);
            self.report.blob_files_lost.push(lost);
        } else {
            self.report.blob_files_unreferenced.push(n);
        }
        Ok(())
    }

    /// Writes an empty WAL and the new MANIFEST, syncs them, and points CURRENT at it.
    fn write_manifest(&mut self) -> Result<()> {
        let fs = self.fs.clone();
        if self.moved_aside {
            let lost = self.dir.join(LOST_DIR);
            fs.sync_dir(&lost)
                .and_then(|_| fs.sync_dir(self.dir))
                .map_err(|e| Error::io("syncing the moves into lost/", e))?;
        }
        self.family(DEFAULT_FAMILY, None);
        // Families the old MANIFEST knows, even those without tables.
        let known: Vec<u32> = self
            .old
            .as_ref()
            .map(|m| m.families.keys().copied().collect())
            .unwrap_or_default();
        for id in known {
            self.family(id, None);
        }
        self.check_names()?;
        let wal_number = self.new_file_number();
        let manifest_number = self.new_file_number();
        let wal_path = filename::log_file(self.dir, wal_number);
        let writing = |p: &Path, e| Error::io(format!("writing {}", p.display()), e);
        let mut wal = fs.create(&wal_path).map_err(|e| writing(&wal_path, e))?;
        wal.sync().map_err(|e| writing(&wal_path, e))?;
        drop(wal);
        let edits = self.edits(wal_number);
        let path = filename::manifest_file(self.dir, manifest_number);
        let file = fs.create(&path).map_err(|e| writing(&path, e))?;
        let mut w = LogWriter::new(file);
        for e in &edits {
            let mut record = Vec::new();
            e.encode(&mut record);
            w.add_record(&record).map_err(|e| writing(&path, e))?;
        }
        w.sync().map_err(|e| writing(&path, e))?;
        set_current_file(&fs, self.dir, manifest_number)?;
        self.fill_report(manifest_number);
        Ok(())
    }

    /// Refuses two families of one name (tables of a dropped family whose name was reused,
    /// with the old MANIFEST lost): the older id's tables are moved aside.
    fn check_names(&mut self) -> Result<()> {
        let mut seen: BTreeMap<String, u32> = BTreeMap::new();
        for (&id, f) in self.families.iter().rev() {
            seen.entry(f.name.clone()).or_insert(id);
        }
        let losers: Vec<u32> = self
            .families
            .iter()
            .filter(|(id, f)| seen.get(&f.name) != Some(id))
            .map(|(&id, _)| id)
            .collect();
        for id in losers {
            let Some(f) = self.families.remove(&id) else {
                continue;
            };
            for t in f.tables.iter().chain(&f.bottom) {
                let path = filename::table_file(self.dir, t.meta.number);
                let reason = format!(
                    "{DROPPED} column family {id}: its name {:?} belongs to a newer family",
                    f.name
                );
                let lost = self.move_aside(&path, 0, reason)?;
                self.report.tables_lost.push(lost);
            }
        }
        if self.moved_aside {
            self.fs
                .sync_dir(self.dir)
                .map_err(|e| Error::io("syncing the database directory", e))?;
        }
        Ok(())
    }

    /// The new MANIFEST's edits: the default family (with the counters) first, then one
    /// adding each other family.
    fn edits(&self, wal_number: u64) -> Vec<VersionEdit> {
        let max_cf = self
            .families
            .keys()
            .copied()
            .chain(self.old.as_ref().map(|m| m.max_column_family))
            .max()
            .unwrap_or(0);
        let mut edits = Vec::new();
        for (&id, f) in &self.families {
            let mut e = VersionEdit {
                column_family: id,
                log_number: Some(wal_number),
                merge_operator: Some(f.merge_operator.clone().unwrap_or_default()),
                stores_write_times: f.stores_write_times,
                ..Default::default()
            };
            if id == DEFAULT_FAMILY {
                e.next_file_number = Some(self.next_file);
                e.last_sequence = Some(self.last_sequence);
                e.max_column_family = Some(max_cf);
            } else {
                e.column_family_add = Some(f.name.clone());
            }
            for t in &f.tables {
                e.add_file(0, t.meta.clone());
            }
            let bottom = f.opts.num_levels.saturating_sub(1);
            for t in &f.bottom {
                e.add_file(bottom, t.meta.clone());
            }
            e.blob_files_added = f.blob_files.clone();
            e.blob_garbage = f.blob_garbage.clone();
            edits.push(e);
        }
        edits
    }

    fn fill_report(&mut self, manifest_number: u64) {
        let r = &mut self.report;
        r.manifest_number = manifest_number;
        r.last_sequence = self.last_sequence;
        r.families = self
            .families
            .iter()
            .map(|(&id, f)| (id, f.name.clone()))
            .collect();
        let mut kept: Vec<u64> = self
            .families
            .values()
            .flat_map(|f| f.tables.iter().chain(&f.bottom).map(|t| t.meta.number))
            .collect();
        kept.sort_unstable();
        r.tables_kept = kept;
        let kept: BTreeSet<u64> = r.tables_kept.iter().copied().collect();
        r.tables_written.retain(|n| kept.contains(n));
        r.tables_written.sort_unstable();
    }
}

/// A family found on disk: named by the old MANIFEST, else by `hint` (a table's property),
/// else `repaired-<id>`; with the options `Db::open_cf` would give it, and the merge operator
/// and TTL flag the old MANIFEST recorded (else those of its options).
fn new_family(
    old: Option<&OldManifest>,
    requested: &BTreeMap<String, Options>,
    opts: &Options,
    id: u32,
    hint: Option<&str>,
) -> Family {
    let old = old.and_then(|m| m.families.get(&id));
    let hint = hint.filter(|h| crate::column_family::check_name(h).is_ok());
    let name = match (id, old, hint) {
        (DEFAULT_FAMILY, ..) => DEFAULT_FAMILY_NAME.to_string(),
        (_, Some(o), _) => o.name.clone(),
        (_, None, Some(h)) => h.to_string(),
        _ => format!("repaired-{id}"),
    };
    let opts = match requested.get(&name) {
        Some(o) => o.clone(),
        None if name == DEFAULT_FAMILY_NAME => opts.clone(),
        None => opts.for_family(&CfOptions::default()),
    };
    let (merge_operator, stores_write_times) = match old {
        Some(o) => (o.merge_operator.clone(), o.stores_write_times),
        None => {
            let op = operator_name(&opts);
            ((!op.is_empty()).then_some(op), opts.ttl.is_some())
        }
    };
    Family {
        name,
        opts: Arc::new(opts),
        tables: Vec::new(),
        bottom: Vec::new(),
        merge_operator,
        stores_write_times,
        blob_files: Vec::new(),
        blob_garbage: Vec::new(),
    }
}

/// L0's order: newest first by largest sequence number, then by file number (as
/// `Version` sorts it).
fn sort_newest_first(tables: &mut [ScannedTable]) {
    tables.sort_by(|a, b| {
        b.meta
            .largest_seqno
            .cmp(&a.meta.largest_seqno)
            .then(b.meta.number.cmp(&a.meta.number))
    });
}

/// True if a read through `tables` in this order (the first version found wins) always
/// finds a key's newest version: every two tables whose key ranges overlap hold sequence
/// ranges that do not interleave, the earlier one's entirely above the later one's.
fn l0_order_is_sound(tables: &[ScannedTable]) -> bool {
    for (i, a) in tables.iter().enumerate() {
        for b in &tables[i + 1..] {
            let overlap = a.meta.smallest.user_key() <= b.meta.largest.user_key()
                && b.meta.smallest.user_key() <= a.meta.largest.user_key();
            if overlap && b.meta.largest_seqno >= a.meta.smallest_seqno {
                return false;
            }
        }
    }
    true
}

/// Skips entries whose internal key equals the one before (the same write found in two
/// files: a WAL replayed again, or a table and its unfinished rewrite).
struct DedupIterator {
    inner: MergingIterator,
    last: Vec<u8>,
}

impl DedupIterator {
    fn skip_copies(&mut self) {
        while self.inner.valid() && self.inner.key() == self.last.as_slice() {
            self.inner.next();
        }
        if self.inner.valid() {
            self.last.clear();
            self.last.extend_from_slice(self.inner.key());
        }
    }
}

impl InternalIterator for DedupIterator {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.inner.seek_to_first();
        if self.inner.valid() {
            self.last.clear();
            self.last.extend_from_slice(self.inner.key());
        }
    }
    fn seek_to_last(&mut self) {
        self.inner.seek_to_last();
    }
    fn seek(&mut self, target: &[u8]) {
        self.inner.seek(target);
        if self.inner.valid() {
            self.last.clear();
            self.last.extend_from_slice(self.inner.key());
        }
    }
    fn next(&mut self) {
        self.inner.next();
        self.skip_copies();
    }
    fn prev(&mut self) {
        self.inner.prev();
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn status(&self) -> Result<()> {
        self.inner.status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::InternalKey;
    use crate::version::FileMetaData;

    fn table(number: u64, small: &str, large: &str, seqs: (u64, u64)) -> ScannedTable {
        ScannedTable {
            meta: FileMetaData {
                number,
                file_size: 1,
                smallest: InternalKey::new(small.as_bytes(), seqs.0, ValueKind::Put),
                largest: InternalKey::new(large.as_bytes(), seqs.1, ValueKind::Put),
                smallest_seqno: seqs.0,
                largest_seqno: seqs.1,
                num_entries: 2,
                num_deletions: 0,
                num_range_deletions: 0,
                blob_files: Vec::new(),
                file_checksum: None,
                open_table: Default::default(),
                seeks: Default::default(),
                global_seqno: None,
            },
            family: None,
            newest_write_time: 0,
            blob_refs: Default::default(),
        }
    }

    fn sound(mut tables: Vec<ScannedTable>) -> bool {
        sort_newest_first(&mut tables);
        l0_order_is_sound(&tables)
    }

    #[test]
    fn flushes_in_l0_order_are_sound() {
        // Successive flushes: each newer than the one before, overlapping keys.
        let t = vec![
            table(5, "a", "z", (1, 10)),
            table(7, "c", "m", (11, 20)),
            table(9, "b", "y", (21, 21)),
        ];
        assert!(sound(t));
        // Key ranges apart: any sequence numbers will do.
        assert!(sound(vec![
            table(1, "a", "c", (1, 50)),
            table(2, "d", "f", (10, 20))
        ]));
    }

    #[test]
    fn files_of_different_levels_with_interleaved_sequences_are_not() {
        // A bottom-level compaction output (zeroed old keys and keys up to 10) and an upper
        // level's file with key m at 5, newer than the output's m at 0: in L0 newest-first
        // order the output comes first and a read of m would find the older version.
        let t = vec![table(20, "a", "z", (0, 10)), table(15, "m", "n", (5, 5))];
        assert!(!sound(t));
        // Two copies of one write (a WAL replayed twice).
        assert!(!sound(vec![
            table(3, "a", "b", (4, 6)),
            table(4, "a", "b", (4, 6))
        ]));
    }
}
