//! Opening a database: locking, creating or recovering the version set from the MANIFEST,
//! replaying the WALs newer than the last flush, and starting the background threads.
//!
//! Recovered WAL contents are written to L0 tables and a fresh MANIFEST and WAL are started,
//! so after open every older WAL and MANIFEST is obsolete and is deleted.

use super::background::BackgroundRole;
use super::{CfState, Db, DbInner, DbState, SuperVersion};
use crate::cache::BlockCache;
use crate::cache::TableCache;
use crate::column_family::{CfData, CfOptions, DEFAULT_FAMILY, DEFAULT_FAMILY_NAME};
use crate::compaction::job::{self, DropPolicy, OutputSpec};
use crate::error::{Error, Result};
use crate::fs::FileLock;
use crate::info_log::{InfoLog, InfoLogConfig};
use crate::key::ValueKind;
use crate::log::{
    replay_records, LogRead, LogReader, LogWriter, RecordCheck, ReplayEnd, TailPolicy, WalMarker,
};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::rate_limiter::RateLimiter;
use crate::version::filename::{self, FileKind};
use crate::version::{ObsoleteFile, Version, VersionEdit, VersionSet};
use crate::write_batch::{BatchEntry, WriteBatch};
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

pub(super) fn lock_error(dir: &Path, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::WouldBlock {
        Error::Locked(dir.to_path_buf())
    } else {
        Error::io(format!("locking {}", dir.display()), e)
    }
}

pub(super) fn open(dir: &Path, opts: Options) -> Result<Db> {
    open_with_families(dir, opts, Vec::new())
}

/// The effective options of each family `open_cf` was given, checked.
pub(super) fn requested_families(
    opts: &Options,
    families: Vec<(String, CfOptions)>,
) -> Result<BTreeMap<String, Options>> {
    let mut requested = BTreeMap::new();
    for (name, cf) in families {
        crate::column_family::check_name(&name)?;
        let effective = opts.for_family(&cf);
        effective.validate().map_err(|e| match e {
            Error::InvalidArgument(m) => {
                Error::InvalidArgument(format!("column family {name:?}: {m}"))
            }
            e => e,
        })?;
        if requested.insert(name.clone(), effective).is_some() {
            return Err(Error::InvalidArgument(format!(
                "column family {name:?} is listed twice"
            )));
        }
    }
    Ok(requested)
}

pub(super) fn open_with_families(
    dir: &Path,
    opts: Options,
    families: Vec<(String, CfOptions)>,
) -> Result<Db> {
    opts.validate()?;
    let opts = opts.resolve_memory_budget();
    let requested = requested_families(&opts, families)?;
    let family_options = |name: &str| match requested.get(name) {
        Some(o) => o.clone(),
        None if name == DEFAULT_FAMILY_NAME => opts.clone(),
        None => opts.for_family(&CfOptions::default()),
    };
    let fs = opts.fs.clone();
    let lock = create_or_lock(dir, &opts)?;
    let info_log = InfoLog::open(
        fs.clone(),
        dir,
        InfoLogConfig::of(&opts),
        opts.statistics.clone(),
    );
    let mut versions = VersionSet::recover_with(fs.clone(), dir, &opts, &family_options)?;
    check_merge_operators(&versions, &family_options)?;
    check_write_times(&versions, &family_options)?;
    let missing = missing_families(&requested, &versions, &opts)?;
    let names = fs
        .list_dir(dir)
        .map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
    let wals = check_files_on_disk(dir, &mut versions, &names)?;
    if opts.paranoid_checks {
        for f in versions.families().values() {
            check_table_sizes(&fs, dir, &f.current())?;
        }
    }

    let block_cache = opts.block_cache_for_open();
    let tables = Arc::new(TableCache::for_database(
        dir.to_path_buf(),
        &opts,
        opts.max_open_files,
        block_cache.clone(),
    ));
    let shutting_down = AtomicBool::new(false);
    let family_opts: BTreeMap<u32, Arc<Options>> = versions
        .families()
        .iter()
        .map(|(&id, f)| (id, Arc::new(family_options(&f.name))))
        .collect();
    let replay = WalReplay::for_open(
        dir,
        &opts,
        &family_opts,
        &tables,
        &shutting_down,
        &mut versions,
    );
    let (edits, last_sequence) = replay.recover(&wals, &info_log)?;
    let (wal, wal_number) = start_fresh_wal(
        dir,
        &opts,
        &family_opts,
        &mut versions,
        edits,
        last_sequence,
    )?;

    let rate_limiter = (opts.rate_limit_bytes_per_sec > 0).then(|| {
        Arc::new(RateLimiter::new(
            opts.rate_limit_bytes_per_sec,
            opts.statistics.clone(),
        ))
    });
    let recovered = Recovered {
        dir,
        opts,
        family_opts,
        versions,
        wal: Some(wal),
        wal_number,
        role: super::read_only::Role::Primary,
        last_sequence,
        tables,
        block_cache,
        shutting_down,
        lock: Some(lock),
        info_log,
        rate_limiter,
    };
    start_primary(recovered, &names, missing)
}

/// Starts a recovered primary: removes the files no version refers to (`names` are the
/// directory's entries before recovery), starts the background threads and creates the
/// families `open_cf` asked for that did not exist.
fn start_primary(
    recovered: Recovered<'_>,
    names: &[String],
    new_families: Vec<(String, Options)>,
) -> Result<Db> {
    let inner = DbInner::recovered(recovered);
    inner.log_options();
    remove_unreferenced_files(&inner, names);
    let threads = start_background_threads(&inner)?;
    let db = Db {
        inner,
        threads: Mutex::new(threads),
    };
    for (name, opts) in new_families {
        db.inner.create_family(name, opts)?;
    }
    Ok(db)
}

/// The families `open_cf` was given that the database does not have yet, with their
/// options: refused unless `Options::create_missing_column_families` says to create them.
fn missing_families(
    requested: &BTreeMap<String, Options>,
    versions: &VersionSet,
    opts: &Options,
) -> Result<Vec<(String, Options)>> {
    let missing: Vec<(String, Options)> = requested
        .iter()
        .filter(|(n, _)| !versions.families().values().any(|f| &f.name == *n))
        .map(|(n, o)| (n.clone(), o.clone()))
        .collect();
    if !missing.is_empty() && !opts.create_missing_column_families {
        let names: Vec<&String> = missing.iter().map(|(n, _)| n).collect();
        return Err(Error::InvalidArgument(format!(
            "column families {names:?} do not exist (set \
             Options::create_missing_column_families to create them)"
        )));
    }
    Ok(missing)
}

/// Starts a fresh WAL and records in the MANIFEST, for every family, that everything older
/// is in tables: `edits` (the replay's, one per family) gain the new log number and the last
/// sequence number. Every older WAL is obsolete once this returns.
fn start_fresh_wal(
    dir: &Path,
    opts: &Options,
    family_opts: &BTreeMap<u32, Arc<Options>>,
    versions: &mut VersionSet,
    mut edits: Vec<VersionEdit>,
    last_sequence: u64,
) -> Result<(LogWriter, u64)> {
    let wal_number = versions.new_file_number();
    let wal_path = filename::log_file(dir, wal_number);
    let wal_file = super::create_wal_file(opts, &wal_path)
        .map_err(|e| Error::io(format!("creating WAL {}", wal_path.display()), e))?;
    let wal = super::new_wal_writer(wal_file, opts);
    for e in &mut edits {
        e.log_number = Some(wal_number);
        e.last_sequence = Some(last_sequence);
        e.merge_operator = family_opts.get(&e.column_family).map(|o| operator_name(o));
    }
    versions.log_and_apply_all(&mut edits)?;
    Ok((wal, wal_number))
}

/// The name of `opts`' merge operator, empty if none (as recorded in the MANIFEST).
pub(super) fn operator_name(opts: &Options) -> String {
    opts.merge_operator
        .as_ref()
        .map_or_else(String::new, |m| m.name().to_string())
}

/// Refuses to open a family with a TTL if its values carry no write times, or without one if
/// they do: the values would be misread.
pub(super) fn check_write_times(
    versions: &VersionSet,
    family_options: &dyn Fn(&str) -> Options,
) -> Result<()> {
    for f in versions.families().values() {
        let wants = family_options(&f.name).ttl.is_some();
        if wants != f.stores_write_times {
            let (was, now) = if f.stores_write_times {
                ("with a ttl", "without one")
            } else {
                ("without a ttl", "with one")
            };
            return Err(Error::InvalidArgument(format!(
                "column family {:?} was created {was} but is opened {now}: whether a family's \
                 values carry write times is fixed when it is created (any ttl duration may \
                 be given on reopen)",
                f.name
            )));
        }
    }
    Ok(())
}

/// Refuses to open a family without the merge operator its data was written with, or with
/// another one: its merge operands would be unreadable or read as something else.
pub(super) fn check_merge_operators(
    versions: &VersionSet,
    family_options: &dyn Fn(&str) -> Options,
) -> Result<()> {
    for f in versions.families().values() {
        let Some(stored) = &f.merge_operator else {
            continue;
        };
        let given = operator_name(&family_options(&f.name));
        if given.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "column family {:?} was written with merge operator {stored:?}: open it with \
                 a merge_operator named {stored:?} (Options::merge_operator for the default \
                 family, CfOptions::merge_operator through Db::open_cf for others)",
                f.name
            )));
        }
        if &given != stored {
            return Err(Error::InvalidArgument(format!(
                "column family {:?} was written with merge operator {stored:?} but is opened \
                 with {given:?}",
                f.name
            )));
        }
    }
    Ok(())
}

/// The column family names stored in the database at `dir`, the default family first.
pub(super) fn list_families(dir: &Path, opts: &Options) -> Result<Vec<String>> {
    // Any level count will do: only names are read.
    let any_levels = Options {
        num_levels: crate::version::edit::MAX_LEVELS,
        ..opts.clone()
    };
    if !opts.fs.exists(&filename::current_file(dir)) {
        return Err(Error::NotFound(dir.to_path_buf()));
    }
    let versions = VersionSet::recover(opts.fs.clone(), dir, &any_levels)?;
    Ok(versions
        .families()
        .values()
        .map(|f| f.name.clone())
        .collect())
}

/// Creates the directory and an empty database if allowed and needed, and takes the lock.
fn create_or_lock(dir: &Path, opts: &Options) -> Result<Box<dyn FileLock>> {
    let fs = &opts.fs;
    let current = filename::current_file(dir);
    if !fs.exists(&current) {
        if !opts.create_if_missing {
            return Err(Error::NotFound(dir.to_path_buf()));
        }
        // WALs and tables are only created once CURRENT is durable: without it they are a
        // damaged database, not room for a new one (which would delete them as garbage).
        if let Ok(names) = fs.list_dir(dir) {
            if names.iter().any(|n| {
                matches!(
                    filename::parse_file_name(n),
                    Some((FileKind::Log | FileKind::Table, _))
                )
            }) {
                return Err(Error::corruption(
                    &current,
                    0,
                    "CURRENT is missing but the directory holds WAL or table files",
                ));
            }
        }
        fs.create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    let lock = fs
        .lock(&filename::lock_file(dir))
        .map_err(|e| lock_error(dir, e))?;
    check_direct_io(fs, dir, opts)?;
    if fs.exists(&current) {
        if opts.error_if_exists {
            return Err(Error::AlreadyExists(dir.to_path_buf()));
        }
    } else {
        VersionSet::create_new(fs, dir, opts.ttl.is_some())?;
    }
    Ok(lock)
}

/// Fails with `InvalidArgument` if direct IO is asked for and the filesystem refuses it, so
/// the problem shows at open rather than as a failed read or flush later.
fn check_direct_io(fs: &Arc<dyn crate::fs::FileSystem>, dir: &Path, opts: &Options) -> Result<()> {
    let refused = |option: &str, e: std::io::Error| {
        Error::InvalidArgument(format!(
            "{option} is set, but direct IO is not available for {}: {e}",
            dir.display()
        ))
    };
    if opts.use_direct_reads {
        fs.open_random_access_direct(&filename::lock_file(dir))
            .map_err(|e| refused("use_direct_reads", e))?;
    }
    if opts.use_direct_io_for_flush_and_compaction {
        let probe = dir.join("DIRECT_IO_PROBE");
        fs.create_direct(&probe)
            .map_err(|e| refused("use_direct_io_for_flush_and_compaction", e))?;
        fs.remove_file(&probe)
            .map_err(|e| Error::io(format!("removing {}", probe.display()), e))?;
    }
    Ok(())
}

/// Checks the directory against the recovered MANIFEST and returns the WALs to replay,
/// oldest first. Marks every number found on disk as used so none is handed out again.
pub(super) fn check_files_on_disk(
    dir: &Path,
    versions: &mut VersionSet,
    names: &[String],
) -> Result<Vec<u64>> {
    let mut wals = Vec::new();
    let mut tables_on_disk = HashSet::new();
    let mut blobs_on_disk = HashSet::new();
    for name in names {
        if let Some((kind, n)) = filename::parse_file_name(name) {
            versions.mark_file_number_used(n);
            match kind {
                FileKind::Log if n >= versions.log_number() => wals.push(n),
                FileKind::Table => {
                    tables_on_disk.insert(n);
                }
                FileKind::Blob => {
                    blobs_on_disk.insert(n);
                }
                _ => {}
            }
        }
    }
    wals.sort_unstable();
    // The WAL the MANIFEST's log number names exists until a later, durable edit moves the
    // log number past it. If it is gone, the MANIFEST lost edits (e.g. damage that looked
    // like a torn tail) and replaying would silently drop flushed data.
    let log_number = versions.log_number();
    if log_number != 0 && wals.first() != Some(&log_number) {
        return Err(Error::corruption(
            filename::log_file(dir, log_number),
            0,
            "the WAL named by the MANIFEST's log number is missing: the MANIFEST lost edits",
        ));
    }
    for f in versions
        .families()
        .values()
        .flat_map(|f| f.current().files.clone())
        .flatten()
    {
        if !tables_on_disk.contains(&f.number) {
            return Err(Error::corruption(
                filename::table_file(dir, f.number),
                0,
                "a table the MANIFEST lists is missing",
            ));
        }
    }
    for b in versions
        .families()
        .values()
        .flat_map(|f| f.current().blob_files.clone())
    {
        let number = b.meta.addition.number;
        if !blobs_on_disk.contains(&number) {
            return Err(Error::corruption(
                filename::blob_file(dir, number),
                0,
                "a blob file the MANIFEST lists is missing",
            ));
        }
    }
    Ok(wals)
}

/// The next record of a WAL read outside its replay, its IO errors naming the file.
fn read_record(reader: &mut LogReader) -> Result<LogRead> {
    let read = reader.read();
    read.map_err(|e| Error::io(format!("reading WAL {}", reader.path().display()), e))
}

/// WAL recovery: replays logs into one memtable per family and writes a family's memtable
/// to L0 tables whenever it fills, collecting the new tables in one edit per family.
pub(super) struct WalReplay<'a> {
    pub(super) dir: &'a Path,
    pub(super) opts: &'a Options,
    pub(super) family_opts: &'a BTreeMap<u32, Arc<Options>>,
    pub(super) tables: &'a Arc<TableCache>,
    pub(super) shutting_down: &'a AtomicBool,
    pub(super) versions: &'a mut VersionSet,
    pub(super) edits: BTreeMap<u32, VersionEdit>,
    pub(super) mems: BTreeMap<u32, Arc<MemTable>>,
    /// The WAL being replayed.
    pub(super) wal_number: u64,
    pub(super) last_sequence: u64,
    /// Read-only and secondary instances write nothing: full memtables are not flushed, and
    /// the replayed memtables become the instance's (see read_only.rs).
    pub(super) keep_in_memory: bool,
    /// Per WAL: where a later reading can go on (after its last record, or at its torn
    /// tail), or where this one starts (a secondary's catch-up). Absent: from the start.
    pub(super) resume: BTreeMap<u64, u64>,
    /// Blob files the WALs' references point into (`Options::separate_blobs_at_write`),
    /// opened on first use.
    pub(super) blob_readers: crate::blob::WalBlobReaders,
    /// Where and why replay stopped before the last WAL's end, leaving writes that were
    /// never synced (`torn_before_later_data`), for the LOG.
    pub(super) stopped: Option<String>,
}

impl<'a> WalReplay<'a> {
    /// A replay into empty memtables, from sequence number `last_sequence`, writing full
    /// memtables to L0 tables (followers set `keep_in_memory`, and their memtables and resume
    /// offsets when they catch up).
    pub(super) fn new(
        dir: &'a Path,
        opts: &'a Options,
        family_opts: &'a BTreeMap<u32, Arc<Options>>,
        tables: &'a Arc<TableCache>,
        shutting_down: &'a AtomicBool,
        last_sequence: u64,
        versions: &'a mut VersionSet,
    ) -> Self {
        WalReplay {
            dir,
            opts,
            family_opts,
            tables,
            shutting_down,
            last_sequence,
            versions,
            edits: BTreeMap::new(),
            mems: BTreeMap::new(),
            wal_number: 0,
            keep_in_memory: false,
            resume: BTreeMap::new(),
            blob_readers: Default::default(),
            stopped: None,
        }
    }

    /// The replay of a primary's open: full memtables are written to L0 tables, numbered
    /// from the version set's next file number.
    fn for_open(
        dir: &'a Path,
        opts: &'a Options,
        family_opts: &'a BTreeMap<u32, Arc<Options>>,
        tables: &'a Arc<TableCache>,
        shutting_down: &'a AtomicBool,
        versions: &'a mut VersionSet,
    ) -> Self {
        // Flushes during replay number their files from here; a WAL's reference to a number
        // at or above it points at a blob file the power loss took.
        let blob_readers = crate::blob::WalBlobReaders::creating_from(versions.next_file_number());
        let last_sequence = versions.last_sequence();
        WalReplay {
            blob_readers,
            ..WalReplay::new(
                dir,
                opts,
                family_opts,
                tables,
                shutting_down,
                last_sequence,
                versions,
            )
        }
    }

    /// Replays `wals` and writes what is left in memory to L0 tables: one edit per family
    /// and the last sequence number. Where replay stopped early goes to the LOG.
    fn recover(mut self, wals: &[u64], info_log: &InfoLog) -> Result<(Vec<VersionEdit>, u64)> {
        self.replay_all(wals)?;
        if let Some(why) = self.stopped.take() {
            crate::info_log::info_log!(info_log, Warn, "WAL recovery stopped: {why}");
        }
        self.finish()
    }
}

impl WalReplay<'_> {
    /// Replays `wals` (oldest first) until the end or until the recovery mode says stop.
    pub(super) fn replay_all(&mut self, wals: &[u64]) -> Result<()> {
        for (i, &number) in wals.iter().enumerate() {
            if !self.replay_log_file(number, &wals[i + 1..])? {
                break;
            }
        }
        Ok(())
    }

    /// True if every WAL in `later` holds no record (no bytes, or only the zeros of its
    /// preallocated space): nothing was written after the WAL before them, so its tail was
    /// the last write attempt.
    fn all_empty(&self, later: &[u64]) -> Result<bool> {
        for &number in later {
            let path = filename::log_file(self.dir, number);
            let size = self.opts.fs.file_size(&path);
            if size.map_err(|e| Error::io(format!("reading WAL {}", path.display()), e))? == 0 {
                continue;
            }
            if read_record(&mut self.wal_reader(number)?)? != LogRead::Eof {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Replays one WAL (LevelDB's `RecoverLogFile`), followed by the WALs `later`. Returns
    /// false if recovery must stop here and ignore later WALs (point-in-time recovery found
    /// damage).
    fn replay_log_file(&mut self, number: u64, later: &[u64]) -> Result<bool> {
        let path = filename::log_file(self.dir, number);
        let start = self.resume.remove(&number).unwrap_or(0);
        let opened = match start {
            0 => self.opts.fs.open_sequential(&path),
            _ => crate::fs::sequential_from_block_of(&*self.opts.fs, &path, start),
        };
        let file = opened.map_err(|e| Error::io(format!("opening WAL {}", path.display()), e))?;
        self.wal_number = number;
        let mut reader = LogReader::new_at(file, path.clone(), start);
        let policy = TailPolicy::for_wal(self.opts.wal_recovery_mode);
        let context = format!("reading WAL {}", path.display());
        let end = replay_records(&mut reader, policy, &context, |data, offset| {
            self.apply_record(&path, data, offset)
        })?;
        // A WAL is cut back to its records when the next one takes over
        // (`LogWriter::finish`), so zeros ending a WAL that a WAL holding data follows are
        // records lost in a power loss (or damage): a torn tail, decided below. Not for a
        // read-only or secondary instance: it reads a live primary's WALs at different
        // moments, and may see this WAL before the cut and the next one after it.
        let end = match (end, reader.zero_tail()) {
            (ReplayEnd::Eof { torn_tail: None }, Some(at))
                if !self.keep_in_memory && !later.is_empty() =>
            {
                let lost = "zeros to the end of the file (a WAL holding data follows)";
                Self::tail_by_policy(policy, at, lost.to_string(), || self.all_empty(later))?
            }
            (ReplayEnd::Eof { torn_tail: None }, None)
                if !self.keep_in_memory && !later.is_empty() =>
            {
                match self.cut_short(number, reader.position(), later[0])? {
                    Some((at, lost)) => Self::tail_by_policy(policy, at, lost, || Ok(false))?,
                    None => ReplayEnd::Eof { torn_tail: None },
                }
            }
            (end, _) => end,
        };
        // A torn tail may be a record still being written (a secondary reads a live log):
        // reading goes on from its start.
        match &end {
            ReplayEnd::Eof {
                torn_tail: Some((off, _)),
            } => self.resume.insert(number, *off),
            ReplayEnd::Eof { torn_tail: None } => self.resume.insert(number, reader.position()),
            ReplayEnd::Stopped => None,
        };
        match end {
            ReplayEnd::Stopped => Ok(false),
            ReplayEnd::Eof {
                torn_tail: Some((off, detail)),
            } if !self.all_empty(later)? => match policy {
                // Absolute consistency refuses any loss, even of writes never synced.
                TailPolicy::Strict => Err(Error::corruption(&path, off, detail)),
                _ => self.torn_before_later_data(&path, number, off, detail, later),
            },
            ReplayEnd::Eof { .. } => Ok(true),
        }
    }

    /// What a WAL found to end early (at `at`, described by `lost`) becomes under `policy`:
    /// salvage goes on, point-in-time recovery stops (or goes on if `nothing_after` says no
    /// later WAL holds data), the others see a torn tail.
    fn tail_by_policy(
        policy: TailPolicy,
        at: u64,
        lost: String,
        nothing_after: impl FnOnce() -> Result<bool>,
    ) -> Result<ReplayEnd> {
        Ok(match policy {
            TailPolicy::SkipDamaged => ReplayEnd::Eof { torn_tail: None },
            TailPolicy::StopAtDamage => match nothing_after()? {
                true => ReplayEnd::Eof { torn_tail: None },
                false => ReplayEnd::Stopped,
            },
            TailPolicy::Strict | TailPolicy::TornTailOnly => ReplayEnd::Eof {
                torn_tail: Some((at, lost)),
            },
        })
    }

    /// Reads the first record of WAL `next`, the one after WAL `number`, whose records ended
    /// cleanly at byte `end`. A WAL started by a memtable switch names the one it took over
    /// from and that one's length then (`WalMarker::TakesOver`): a shorter WAL was cut short
    /// by a power loss (its length was not synced yet) or damaged, returned as the offset and
    /// description of the loss; so is a `next` that took over from a WAL newer than this one,
    /// which is missing (a power loss lost its unsynced directory entry).
    fn cut_short(&self, number: u64, end: u64, next: u64) -> Result<Option<(u64, String)>> {
        let path = filename::log_file(self.dir, next);
        let LogRead::Record { data, .. } = read_record(&mut self.wal_reader(next)?)? else {
            return Ok(None);
        };
        let Some(Ok(WalMarker::TakesOver { from, length })) = WalMarker::decode(&data) else {
            return Ok(None);
        };
        if from < number {
            let detail = format!(
                "this WAL took over from WAL {from}, but the WAL before it is {number}, newer"
            );
            return Err(Error::corruption(&path, 0, detail));
        }
        if from > number {
            // Its directory entry was not synced yet (closed_wals.rs): lost after the end of
            // this one, like a cut.
            let lost = format!("WAL {from}, which WAL {next} took over from, is missing");
            return Ok(Some((end, lost)));
        }
        Ok((end < length).then(|| {
            let lost = format!(
                "the WAL ends at byte {end}, but WAL {next} took over from it when it held \
                 {length} bytes"
            );
            (end, lost)
        }))
    }

    /// A torn tail (damage, zeros, a cut or a lost blob at offset `off`) in WAL `number`,
    /// followed by a WAL holding data. A WAL is synced only after the next one took over
    /// (closed_wals.rs), so this is what a power loss leaves when the older WAL was not
    /// synced yet: nothing after the tear was synced either, and recovery keeps the prefix
    /// before it, ignoring the later WALs (`Ok(false)`), as RocksDB's point-in-time recovery
    /// does. Proof that the WAL was synced makes it lost synced data, `Corruption`: a family
    /// whose log number passed it (with several families, a flush's MANIFEST edit is written
    /// only after the closed WALs are synced; with one, no WAL its log number passed is
    /// read), or a later WAL's `WalMarker::Synced` naming it or a newer WAL.
    fn torn_before_later_data(
        &mut self,
        path: &Path,
        number: u64,
        off: u64,
        detail: String,
        later: &[u64],
    ) -> Result<bool> {
        let flushed_past = self
            .versions
            .families()
            .values()
            .find(|f| f.log_number() > number)
            .map(|f| (f.name.clone(), f.log_number()));
        if let Some((name, log_number)) = flushed_past {
            let detail = format!(
                "{detail}, in a WAL that was synced (column family '{name}' flushed up to WAL \
                 {log_number})"
            );
            return Err(Error::corruption(path, off, detail));
        }
        if let Some(marked_in) = self.synced_marker_after(number, later)? {
            let detail =
                format!("{detail}, in a WAL that was synced (WAL {marked_in} records its sync)");
            return Err(Error::corruption(path, off, detail));
        }
        self.stopped = Some(format!(
            "{} at byte {off}: {detail}; it was never synced, so the writes after it (WALs \
             {later:?}) were not either and are not replayed",
            path.display()
        ));
        Ok(false)
    }

    /// A reader of WAL `number` from its start.
    fn wal_reader(&self, number: u64) -> Result<LogReader> {
        let path = filename::log_file(self.dir, number);
        match self.opts.fs.open_sequential(&path) {
            Ok(file) => Ok(LogReader::new(file, path)),
            Err(e) => Err(Error::io(format!("opening WAL {}", path.display()), e)),
        }
    }

    /// The first of the WALs `later` that holds a `WalMarker::Synced` covering WAL `number`.
    fn synced_marker_after(&self, number: u64, later: &[u64]) -> Result<Option<u64>> {
        for &next in later {
            let mut reader = self.wal_reader(next)?;
            loop {
                match read_record(&mut reader)? {
                    LogRead::Eof => break,
                    LogRead::Damaged { .. } => {}
                    LogRead::Record { data, .. } => {
                        if let Some(Ok(WalMarker::Synced { through })) = WalMarker::decode(&data) {
                            if through >= number {
                                return Ok(Some(next));
                            }
                        }
                    }
                }
            }
        }
        Ok(None)
    }

    /// Inserts one WAL record (a write batch) into its families' memtables, flushing those
    /// that fill. Entries of a family that already flushed this WAL, or that was dropped,
    /// are skipped.
    fn apply_record(&mut self, path: &Path, data: Vec<u8>, offset: u64) -> Result<RecordCheck> {
        // Markers speak of other WALs (`cut_short`, `synced_marker_after`).
        if let Some(marker) = WalMarker::decode(&data) {
            return Ok(match marker {
                Ok(_) => RecordCheck::Applied,
                Err(detail) => RecordCheck::Invalid(detail),
            });
        }
        let batch = match WriteBatch::from_data(data) {
            Ok(b) => b,
            Err(detail) => return Ok(RecordCheck::Invalid(format!("bad write batch: {detail}"))),
        };
        let seq = batch.sequence();
        let count = batch.len() as u64;
        if seq == 0 || seq.saturating_add(count) > crate::key::MAX_SEQUENCE {
            return Err(Error::corruption(
                path,
                offset,
                format!("write batch has impossible sequence number {seq}"),
            ));
        }
        let (versions, wal_number) = (&*self.versions, self.wal_number);
        let applied = |cf: u32| {
            versions
                .family(cf)
                .is_some_and(|f| wal_number >= f.log_number())
        };
        let blobs = match self
            .blob_readers
            .values_of(&*self.opts.fs, self.dir, &batch, &applied)
        {
            Ok(blobs) => blobs,
            Err(crate::blob::WalBlobFailure::Lost(detail)) => {
                return Ok(RecordCheck::DataLost(detail))
            }
            Err(crate::blob::WalBlobFailure::Damaged(detail)) => {
                return Ok(RecordCheck::Invalid(detail))
            }
        };
        let mut touched = Vec::new();
        for (i, (cf, e)) in batch.iter_cf().enumerate() {
            let s = seq + i as u64;
            let Some(family) = self.versions.family(cf) else {
                if cf > self.versions.max_column_family() {
                    return Err(Error::corruption(
                        path,
                        offset,
                        format!("write batch names column family {cf}, which never existed"),
                    ));
                }
                continue; // dropped
            };
            if self.wal_number < family.log_number() {
                continue; // already in the family's tables
            }
            let keep = self.keep_in_memory;
            let family_opts = self.family_opts.get(&cf);
            let mem = self.mems.entry(cf).or_insert_with(|| match family_opts {
                Some(o) if keep => Arc::new(MemTable::for_family(0, o)),
                _ => Arc::new(MemTable::new(0)),
            });
            match (e, blobs.get(i)) {
                (BatchEntry::BlobIndex(k, _), Some(Some(value))) => {
                    mem.add(s, ValueKind::Put, k, value)
                }
                _ => {
                    let (kind, k, v) = e.parts();
                    mem.add(s, kind, k, v);
                }
            }
            if !touched.contains(&cf) {
                touched.push(cf);
            }
        }
        if count > 0 {
            self.last_sequence = self.last_sequence.max(seq + count - 1);
        }
        if self.keep_in_memory {
            touched.clear();
        }
        for cf in touched {
            let limit = self
                .family_opts
                .get(&cf)
                .map_or(self.opts.write_buffer_size, |o| o.write_buffer_size);
            if self
                .mems
                .get(&cf)
                .is_some_and(|m| m.write_buffer_usage() >= limit)
            {
                self.flush_mem(cf)?;
            }
        }
        Ok(RecordCheck::Applied)
    }

    /// Writes family `cf`'s replay memtable to L0 tables and adds them to its edit.
    fn flush_mem(&mut self, cf: u32) -> Result<()> {
        let Some(mem) = self.mems.remove(&cf) else {
            return Ok(());
        };
        if mem.is_empty() {
            return Ok(());
        }
        let opts = self.family_opts.get(&cf).map_or(self.opts, |o| &**o);
        let name = self.versions.family(cf).map(|f| f.name.clone());
        let name = name.unwrap_or_default();
        let spec = OutputSpec {
            fs: &self.opts.fs,
            dir: self.dir,
            opts,
            tables: self.tables,
            level: 0,
            base_level: 1,
            bottommost: false,
            max_file_size: u64::MAX,
            flush: true,
            cf_id: cf,
            cf_name: &name,
            blob_gc: None,
            write_time_blobs: None,
        };
        // No reader exists yet: every version a newer one hides can go.
        let policy = DropPolicy::for_flush(crate::key::MAX_SEQUENCE, self.versions.current(cf));
        let versions = &mut *self.versions;
        let metas = job::write_tables(
            &spec,
            &mut mem.iter(),
            mem.range_tombstones().as_deref(),
            Some(&policy),
            &mut || versions.new_file_number(),
            self.shutting_down,
        )?;
        let edit = self.edits.entry(cf).or_insert_with(|| VersionEdit {
            column_family: cf,
            ..Default::default()
        });
        metas.add_to(edit, 0);
        Ok(())
    }

    /// The replayed memtables by family (for instances that keep them) and the last
    /// sequence number seen.
    pub(super) fn into_memtables(self) -> (BTreeMap<u32, Arc<MemTable>>, u64) {
        (self.mems, self.last_sequence)
    }

    /// Flushes what is left and returns one edit per live family (the recovered tables, if
    /// any) and the last sequence number seen.
    fn finish(mut self) -> Result<(Vec<VersionEdit>, u64)> {
        let ids: Vec<u32> = self.versions.families().keys().copied().collect();
        for &cf in &ids {
            self.flush_mem(cf)?;
        }
        let edits = ids
            .into_iter()
            .map(|cf| {
                self.edits.remove(&cf).unwrap_or_else(|| VersionEdit {
                    column_family: cf,
                    ..Default::default()
                })
            })
            .collect();
        Ok((edits, self.last_sequence))
    }
}

/// What recovery hands to the new database's shared state.
pub(super) struct Recovered<'a> {
    pub(super) dir: &'a Path,
    pub(super) opts: Options,
    pub(super) family_opts: BTreeMap<u32, Arc<Options>>,
    pub(super) versions: VersionSet,
    /// None for instances that never write.
    pub(super) wal: Option<LogWriter>,
    pub(super) wal_number: u64,
    pub(super) last_sequence: u64,
    pub(super) tables: Arc<TableCache>,
    pub(super) block_cache: Arc<BlockCache>,
    pub(super) shutting_down: AtomicBool,
    /// None for instances that do not lock the directory (read-only and secondary).
    pub(super) lock: Option<Box<dyn FileLock>>,
    pub(super) role: super::read_only::Role,
    pub(super) info_log: InfoLog,
    pub(super) rate_limiter: Option<Arc<RateLimiter>>,
}

impl DbInner {
    /// The shared state of a database just recovered: each family with an empty memtable
    /// on the fresh WAL.
    pub(super) fn recovered(r: Recovered<'_>) -> Arc<DbInner> {
        Arc::new_cyclic(|db| {
            let mut families = BTreeMap::new();
            for (&id, f) in r.versions.families() {
                let opts = r
                    .family_opts
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| Arc::new(r.opts.clone()));
                let data = new_family_data(id, f.name.clone(), opts, db, r.wal_number);
                let cf = CfState::new(data, r.wal_number);
                cf.install_super_version(&r.versions);
                families.insert(id, cf);
            }
            let default_cf = match families.get(&DEFAULT_FAMILY) {
                Some(f) => f.data.clone(),
                // Recovery always has the default family; keep a dropped-looking stand-in
                // rather than panic should that ever not hold.
                None => new_family_data(
                    DEFAULT_FAMILY,
                    DEFAULT_FAMILY_NAME.to_string(),
                    Arc::new(r.opts.clone()),
                    db,
                    r.wal_number,
                ),
            };
            let state = DbState {
                versions: r.versions,
                families,
                writers: VecDeque::new(),
                inflight: VecDeque::new(),
                spare_mems: Vec::new(),
                bg_error: None,
                flush_retry: None,
                failed_wal: None,
                compaction_retry: None,
                running_compactions: 0,
                ingesting: 0,
                live_wals: vec![(r.wal_number, 0)],
                manifest_writing: false,
                stall_count: 0,
                stall_micros: 0,
                write_delay: super::write_delay::WriteDelay::new(r.opts.delayed_write_rate),
                low_pri_delay: super::write_delay::WriteDelay::new(r.opts.delayed_write_rate),
                closed: false,
                ttl_swept_at: None,
                pending_events: Vec::new(),
                delivering_events: false,
                stall_condition: Default::default(),
            };
            let obsolete = state.versions.deletion_queue().clone();
            DbInner {
                dir: r.dir.to_path_buf(),
                fs: r.opts.fs.clone(),
                state: Mutex::new(state),
                work_cv: Condvar::new(),
                done_cv: Condvar::new(),
                stall_cv: Condvar::new(),
                inflight_cv: Condvar::new(),
                writers_enqueued: AtomicU64::new(0),
                manifest_cv: Condvar::new(),
                obsolete,
                default_cf,
                last_sequence: AtomicU64::new(r.last_sequence),
                wal: Mutex::new(r.wal),
                wal_number: AtomicU64::new(r.wal_number),
                closed_wals: Default::default(),
                tables: r.tables,
                block_cache: r.block_cache,
                snapshots: Arc::default(),
                snapshot_gate: Default::default(),
                shutting_down: r.shutting_down,
                user_bytes_written: AtomicU64::new(0),
                lock: Mutex::new(r.lock),
                role: r.role,
                info_log: r.info_log,
                stats: r.opts.statistics.clone(),
                output_fs: match &r.rate_limiter {
                    Some(l) => l.wrap(r.opts.fs.clone()),
                    None => r.opts.fs.clone(),
                },
                rate_limiter: r.rate_limiter,
                opts: r.opts,
            }
        })
    }
}

/// A family's shared part, with an empty super version (installed right after).
pub(super) fn new_family_data(
    id: u32,
    name: String,
    opts: Arc<Options>,
    db: &Weak<DbInner>,
    wal_number: u64,
) -> Arc<CfData> {
    let mem = Arc::new(MemTable::for_family(wal_number, &opts));
    Arc::new(CfData {
        id,
        name,
        opts,
        super_version: ArcSwap::from_pointee(SuperVersion {
            mem,
            imms: Vec::new(),
            version: Arc::new(Version::default()),
            older_range_dels: Default::default(),
        }),
        dropped: AtomicBool::new(false),
        db: db.clone(),
        seeks: Default::default(),
    })
}

/// Starts the `max_background_jobs` flush and compaction threads (one more, for urgent
/// compactions, when their priority is lowered: `BackgroundRole`) and the cleaner, which
/// deletes obsolete files.
fn start_background_threads(inner: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    let jobs = inner.opts.max_background_jobs;
    let mut threads = Vec::with_capacity(jobs + 3);
    let spawn = |name: String, lowered: bool, f: Box<dyn FnOnce() + Send>| {
        let db = inner.clone();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                if lowered {
                    db.lower_thread_priority();
                }
                drop(db);
                f()
            })
            .map_err(|e| Error::io("starting a background thread", e))
    };
    let roles = BackgroundRole::of_threads(jobs, inner.opts.background_cpu_priority);
    for (i, role) in roles.into_iter().enumerate() {
        let bg = inner.clone();
        threads.push(spawn(
            role.thread_name(i),
            role.lowered(),
            Box::new(move || bg.background_thread(role)),
        )?);
    }
    let cleaner = inner.clone();
    threads.push(spawn(
        "shaledb-cleaner".to_string(),
        true,
        Box::new(move || cleaner.cleaner_thread()),
    )?);
    if inner.opts.stats_dump_period > 0 && inner.info_log.enabled(crate::InfoLogLevel::Info) {
        let dumper = inner.clone();
        threads.push(spawn(
            "shaledb-stats".to_string(),
            true,
            Box::new(move || dumper.stats_dump_thread()),
        )?);
    }
    Ok(threads)
}

impl DbInner {
    /// Gives the calling background thread `background_cpu_priority`; if the system refuses,
    /// the thread keeps its priority and the info log says why.
    fn lower_thread_priority(&self) {
        let priority = self.opts.background_cpu_priority;
        if let Err(e) = crate::thread_priority::set_current_thread(priority) {
            crate::info_log::info_log!(
                self.info_log,
                Warn,
                "background_cpu_priority {priority:?} not applied: {e}"
            );
        }
    }
}

/// Queues and deletes files from before this open that nothing refers to: old WALs (now in
/// tables), old MANIFESTs, temp files and tables no version lists (outputs of an interrupted
/// flush or compaction).
fn remove_unreferenced_files(inner: &DbInner, names: &[String]) {
    let st = inner.state.lock();
    let live = st.versions.live_files();
    let log_number = st.versions.log_number();
    let manifest = st.versions.manifest_number();
    drop(st);
    for name in names {
        let Some((kind, number)) = filename::parse_file_name(name) else {
            continue;
        };
        let obsolete = match kind {
            FileKind::Log => number < log_number,
            FileKind::Table | FileKind::Blob => !live.contains(&number),
            FileKind::Manifest => number != manifest,
            FileKind::Temp => true,
            FileKind::Current | FileKind::Lock => false,
        };
        if obsolete {
            inner.obsolete.push(ObsoleteFile { kind, number });
        }
    }
    inner.purge_obsolete_files();
}

pub(super) fn destroy(dir: &Path, opts: &Options) -> Result<()> {
    let fs = &opts.fs;
    if !fs.exists(dir) {
        return Ok(());
    }
    let lock = fs
        .lock(&filename::lock_file(dir))
        .map_err(|e| lock_error(dir, e))?;
    let names = fs
        .list_dir(dir)
        .map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
    for name in &names {
        match filename::parse_file_name(name) {
            None if crate::info_log::is_info_log(name) => {
                fs.remove_file(&dir.join(name))
                    .map_err(|e| Error::io(format!("removing {name}"), e))?;
            }
            Some((FileKind::Lock, _)) | None => {}
            Some(_) => {
                fs.remove_file(&dir.join(name))
                    .map_err(|e| Error::io(format!("removing {name}"), e))?;
            }
        }
    }
    drop(lock);
    let _ = fs.remove_file(&filename::lock_file(dir));
    // Leaves the directory if it holds files that are not ours.
    let _ = fs.remove_dir(dir);
    Ok(())
}

/// `Options::paranoid_checks`: every table and blob file must be as long as the MANIFEST
/// recorded. A different size means the file was truncated, extended or replaced behind the
/// engine's back; without the check that shows only when a read reaches the file.
pub(super) fn check_table_sizes(
    fs: &Arc<dyn crate::fs::FileSystem>,
    dir: &Path,
    v: &crate::version::Version,
) -> Result<()> {
    let tables = v
        .files
        .iter()
        .flatten()
        .map(|f| ("table", filename::table_file(dir, f.number), f.file_size));
    let blobs = v.blob_files.iter().map(|b| {
        let a = &b.meta.addition;
        ("blob file", filename::blob_file(dir, a.number), a.file_size)
    });
    for (what, path, recorded) in tables.chain(blobs) {
        check_file_size(&**fs, &path, recorded, what)?;
    }
    Ok(())
}

/// Corruption naming `path` unless the file (a `what`) is `recorded` bytes long, as the
/// MANIFEST says.
pub(super) fn check_file_size(
    fs: &dyn crate::fs::FileSystem,
    path: &Path,
    recorded: u64,
    what: &str,
) -> Result<()> {
    let size = fs
        .file_size(path)
        .map_err(|e| Error::io(format!("reading the size of {}", path.display()), e))?;
    if size != recorded {
        return Err(Error::corruption(
            path,
            size.min(recorded),
            format!("{what} is {size} bytes on disk but the MANIFEST recorded {recorded} bytes"),
        ));
    }
    Ok(())
}
