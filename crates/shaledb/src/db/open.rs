//! Opening a database: locking, creating or recovering the version set from the MANIFEST,
//! replaying the WALs newer than the last flush, and starting the background threads.
//!
//! Recovered WAL contents are written to L0 tables and a fresh MANIFEST and WAL are started,
//! so after open every older WAL and MANIFEST is obsolete and is deleted.

use super::{Db, DbInner, DbState, SuperVersion};
use crate::cache::BlockCache;
use crate::cache::TableCache;
use crate::compaction::job::{self, OutputSpec};
use crate::compaction::picker::Busy;
use crate::compaction::LevelStats;
use crate::error::{Error, Result};
use crate::fs::FileLock;
use crate::log::{replay_records, LogReader, LogWriter, RecordCheck, ReplayEnd, TailPolicy};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::version::filename::{self, FileKind};
use crate::version::{ObsoleteFile, VersionEdit, VersionSet};
use crate::write_batch::{BatchEntry, WriteBatch};
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use std::collections::{HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::thread::JoinHandle;

fn lock_error(dir: &Path, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::WouldBlock {
        Error::Locked(dir.to_path_buf())
    } else {
        Error::io(format!("locking {}", dir.display()), e)
    }
}

pub(super) fn open(dir: &Path, opts: Options) -> Result<Db> {
    opts.validate()?;
    let fs = opts.fs.clone();
    let lock = create_or_lock(dir, &opts)?;
    let mut versions = VersionSet::recover(fs.clone(), dir, &opts)?;
    let names = fs
        .list_dir(dir)
        .map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
    let wals = check_files_on_disk(dir, &mut versions, &names)?;
    if opts.paranoid_checks {
        check_table_sizes(&fs, dir, &versions.current())?;
    }

    let block_cache = Arc::new(BlockCache::new(
        opts.block_cache_size,
        opts.block_cache_shard_bits,
    ));
    let tables = Arc::new(TableCache::new(
        fs.clone(),
        dir.to_path_buf(),
        opts.max_open_files,
        block_cache.clone(),
    ));
    let shutting_down = AtomicBool::new(false);
    let mut replay = WalReplay {
        dir,
        opts: &opts,
        tables: &tables,
        shutting_down: &shutting_down,
        last_sequence: versions.last_sequence(),
        versions: &mut versions,
        edit: VersionEdit::default(),
        mem: Arc::new(MemTable::new(0)),
    };
    replay.replay_all(&wals)?;
    let (mut edit, last_sequence) = replay.finish()?;

    // Start a fresh WAL and record that everything older is in tables.
    let wal_number = versions.new_file_number();
    let wal_path = filename::log_file(dir, wal_number);
    let mut wal_file = fs
        .create(&wal_path)
        .map_err(|e| Error::io(format!("creating WAL {}", wal_path.display()), e))?;
    wal_file.set_writeback_interval(opts.wal_bytes_per_sync);
    edit.log_number = Some(wal_number);
    edit.last_sequence = Some(last_sequence);
    versions.log_and_apply(&mut edit)?;

    let inner = Arc::new(DbInner::recovered(Recovered {
        dir,
        opts,
        versions,
        wal: LogWriter::new(wal_file),
        wal_number,
        last_sequence,
        tables,
        block_cache,
        shutting_down,
        lock,
    }));
    remove_unreferenced_files(&inner, &names);
    let threads = start_background_threads(&inner)?;
    Ok(Db {
        inner,
        threads: Mutex::new(threads),
    })
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
    if fs.exists(&current) {
        if opts.error_if_exists {
            return Err(Error::AlreadyExists(dir.to_path_buf()));
        }
    } else {
        VersionSet::create_new(fs, dir)?;
    }
    Ok(lock)
}

/// Checks the directory against the recovered MANIFEST and returns the WALs to replay,
/// oldest first. Marks every number found on disk as used so none is handed out again.
fn check_files_on_disk(
    dir: &Path,
    versions: &mut VersionSet,
    names: &[String],
) -> Result<Vec<u64>> {
    let mut wals = Vec::new();
    let mut tables_on_disk = HashSet::new();
    for name in names {
        if let Some((kind, n)) = filename::parse_file_name(name) {
            versions.mark_file_number_used(n);
            match kind {
                FileKind::Log if n >= versions.log_number() => wals.push(n),
                FileKind::Table => {
                    tables_on_disk.insert(n);
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
    for f in versions.current().files.iter().flatten() {
        if !tables_on_disk.contains(&f.number) {
            return Err(Error::corruption(
                filename::table_file(dir, f.number),
                0,
                "a table the MANIFEST lists is missing",
            ));
        }
    }
    Ok(wals)
}

/// WAL recovery: replays logs into a memtable and writes it to L0 tables whenever it fills,
/// collecting the new tables in one edit.
struct WalReplay<'a> {
    dir: &'a Path,
    opts: &'a Options,
    tables: &'a Arc<TableCache>,
    shutting_down: &'a AtomicBool,
    versions: &'a mut VersionSet,
    edit: VersionEdit,
    mem: Arc<MemTable>,
    last_sequence: u64,
}

impl WalReplay<'_> {
    /// Replays `wals` (oldest first) until the end or until the recovery mode says stop.
    fn replay_all(&mut self, wals: &[u64]) -> Result<()> {
        let newest = wals.last().copied();
        for &number in wals {
            if !self.replay_log_file(number, Some(number) == newest)? {
                break;
            }
        }
        Ok(())
    }

    /// Replays one WAL (LevelDB's `RecoverLogFile`). Returns false if recovery must stop
    /// here and ignore later WALs (point-in-time recovery found damage).
    fn replay_log_file(&mut self, number: u64, newest: bool) -> Result<bool> {
        let path = filename::log_file(self.dir, number);
        let file = self
            .opts
            .fs
            .open_sequential(&path)
            .map_err(|e| Error::io(format!("opening WAL {}", path.display()), e))?;
        let mut reader = LogReader::new(file, path.clone());
        let policy = TailPolicy::for_wal(self.opts.wal_recovery_mode);
        let context = format!("reading WAL {}", path.display());
        let end = replay_records(&mut reader, policy, &context, |data, offset| {
            self.apply_record(&path, data, offset)
        })?;
        match end {
            ReplayEnd::Stopped => Ok(false),
            ReplayEnd::Eof {
                torn_tail: Some((off, detail)),
            } if !newest => {
                // Older WALs were synced before the next one started: damage there is
                // real corruption, not a torn write.
                Err(Error::corruption(&path, off, detail))
            }
            ReplayEnd::Eof { .. } => Ok(true),
        }
    }

    /// Inserts one WAL record (a write batch) into the memtable, flushing it when full.
    fn apply_record(&mut self, path: &Path, data: Vec<u8>, offset: u64) -> Result<RecordCheck> {
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
        for (i, e) in batch.iter().enumerate() {
            let s = seq + i as u64;
            match e {
                BatchEntry::Put(k, v) => self.mem.add(s, crate::key::ValueKind::Put, k, v),
                BatchEntry::Delete(k) => self.mem.add(s, crate::key::ValueKind::Delete, k, &[]),
            }
        }
        if count > 0 {
            self.last_sequence = self.last_sequence.max(seq + count - 1);
        }
        if self.mem.approximate_memory_usage() >= self.opts.write_buffer_size {
            self.flush_mem()?;
            self.mem = Arc::new(MemTable::new(0));
        }
        Ok(RecordCheck::Applied)
    }

    /// Writes the replay memtable to L0 tables and adds them to the edit.
    fn flush_mem(&mut self) -> Result<()> {
        if self.mem.is_empty() {
            return Ok(());
        }
        let spec = OutputSpec {
            fs: &self.opts.fs,
            dir: self.dir,
            opts: self.opts,
            tables: self.tables,
            level: 0,
            max_file_size: u64::MAX,
        };
        let versions = &mut *self.versions;
        let metas = job::write_tables(
            &spec,
            &mut self.mem.iter(),
            None,
            &mut || versions.new_file_number(),
            self.shutting_down,
        )?;
        for m in metas {
            self.edit.add_file(0, m);
        }
        Ok(())
    }

    /// Flushes what is left and returns the edit adding the recovered tables and the last
    /// sequence number seen.
    fn finish(mut self) -> Result<(VersionEdit, u64)> {
        self.flush_mem()?;
        Ok((self.edit, self.last_sequence))
    }
}

/// What recovery hands to the new database's shared state.
struct Recovered<'a> {
    dir: &'a Path,
    opts: Options,
    versions: VersionSet,
    wal: LogWriter,
    wal_number: u64,
    last_sequence: u64,
    tables: Arc<TableCache>,
    block_cache: Arc<BlockCache>,
    shutting_down: AtomicBool,
    lock: Box<dyn FileLock>,
}

impl DbInner {
    /// The shared state of a database just recovered: an empty memtable on the fresh WAL.
    fn recovered(r: Recovered<'_>) -> DbInner {
        let mem = Arc::new(MemTable::new(r.wal_number));
        let version = r.versions.current();
        let state = DbState {
            versions: r.versions,
            mem: mem.clone(),
            imms: VecDeque::new(),
            writers: VecDeque::new(),
            bg_error: None,
            flush_running: false,
            busy: Busy::default(),
            running_compactions: 0,
            manual_compaction: false,
            live_wals: vec![r.wal_number],
            manifest_writing: false,
            level_stats: vec![LevelStats::default(); r.opts.num_levels],
            stall_count: 0,
            stall_micros: 0,
            write_delay: super::write_delay::WriteDelay::new(r.opts.delayed_write_rate),
            closed: false,
        };
        let obsolete = state.versions.deletion_queue().clone();
        DbInner {
            dir: r.dir.to_path_buf(),
            fs: r.opts.fs.clone(),
            state: Mutex::new(state),
            work_cv: Condvar::new(),
            done_cv: Condvar::new(),
            stall_cv: Condvar::new(),
            manifest_cv: Condvar::new(),
            obsolete,
            super_version: ArcSwap::from_pointee(SuperVersion {
                mem,
                imms: Vec::new(),
                version,
            }),
            last_sequence: AtomicU64::new(r.last_sequence),
            wal: Mutex::new(Some(r.wal)),
            wal_number: AtomicU64::new(r.wal_number),
            tables: r.tables,
            block_cache: r.block_cache,
            snapshots: Arc::default(),
            shutting_down: r.shutting_down,
            user_bytes_written: AtomicU64::new(0),
            lock: Mutex::new(Some(r.lock)),
            opts: r.opts,
        }
    }
}

/// Starts the `max_background_jobs` flush and compaction threads and the cleaner, which
/// deletes obsolete files.
fn start_background_threads(inner: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    let jobs = inner.opts.max_background_jobs;
    let mut threads = Vec::with_capacity(jobs + 1);
    let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name)
            .spawn(f)
            .map_err(|e| Error::io("starting a background thread", e))
    };
    for i in 0..jobs {
        let bg = inner.clone();
        threads.push(spawn(
            format!("shaledb-bg-{i}"),
            Box::new(move || bg.background_thread()),
        )?);
    }
    let cleaner = inner.clone();
    threads.push(spawn(
        "shaledb-cleaner".to_string(),
        Box::new(move || cleaner.cleaner_thread()),
    )?);
    Ok(threads)
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
            FileKind::Table => !live.contains(&number),
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

/// `Options::paranoid_checks`: every table must be as long as the MANIFEST recorded. A
/// different size means the file was truncated, extended or replaced behind the engine's back;
/// without the check that shows only when a read reaches the table.
fn check_table_sizes(
    fs: &Arc<dyn crate::fs::FileSystem>,
    dir: &Path,
    v: &crate::version::Version,
) -> Result<()> {
    for f in v.files.iter().flatten() {
        let path = filename::table_file(dir, f.number);
        let size = fs
            .file_size(&path)
            .map_err(|e| Error::io(format!("reading the size of {}", path.display()), e))?;
        if size != f.file_size {
            return Err(Error::corruption(
                path,
                size.min(f.file_size),
                format!(
                    "table is {size} bytes on disk but the MANIFEST recorded {} bytes",
                    f.file_size
                ),
            ));
        }
    }
    Ok(())
}
