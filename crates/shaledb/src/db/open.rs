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
use crate::log::{LogRead, LogReader, LogWriter};
use crate::memtable::MemTable;
use crate::options::{Options, WalRecoveryMode};
use crate::version::filename::{self, FileKind};
use crate::version::{VersionEdit, VersionSet};
use crate::write_batch::{BatchEntry, WriteBatch};
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use std::collections::{HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

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
        VersionSet::create_new(&fs, dir)?;
    }
    let mut versions = VersionSet::recover(
        fs.clone(),
        dir,
        opts.num_levels,
        opts.max_manifest_file_size,
    )?;

    // Find WALs to replay and make sure no number found on disk is handed out again.
    let names = fs
        .list_dir(dir)
        .map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
    let mut wals = Vec::new();
    let mut tables_on_disk = HashSet::new();
    for name in &names {
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
    let current_version = versions.current();
    for f in current_version.files.iter().flatten() {
        if !tables_on_disk.contains(&f.number) {
            return Err(Error::corruption(
                filename::table_file(dir, f.number),
                0,
                "a table the MANIFEST lists is missing",
            ));
        }
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
    let mut edit = VersionEdit::default();
    let mut last_sequence = versions.last_sequence();
    {
        let mut mem = Arc::new(MemTable::new(0));
        let mut flush_mem = |mem: &Arc<MemTable>, versions: &mut VersionSet| -> Result<()> {
            if mem.is_empty() {
                return Ok(());
            }
            let spec = OutputSpec {
                fs: &fs,
                dir,
                opts: &opts,
                tables: &tables,
                level: 0,
                max_file_size: u64::MAX,
            };
            let metas = job::write_tables(
                &spec,
                &mut mem.iter(),
                None,
                &mut || versions.new_file_number(),
                &shutting_down,
            )?;
            for m in metas {
                edit.add_file(0, m);
            }
            Ok(())
        };
        let mut stop_all = false;
        let newest = wals.last().copied();
        for &number in &wals {
            if stop_all {
                break;
            }
            let path = filename::log_file(dir, number);
            let file = fs
                .open_sequential(&path)
                .map_err(|e| Error::io(format!("opening WAL {}", path.display()), e))?;
            let mut reader = LogReader::new(file, path.clone());
            let mut damage: Option<(u64, String)> = None;
            loop {
                let read = reader
                    .read()
                    .map_err(|e| Error::io(format!("reading WAL {}", path.display()), e))?;
                let (data, offset) = match read {
                    LogRead::Eof => break,
                    LogRead::Damaged { offset, detail } => match opts.wal_recovery_mode {
                        WalRecoveryMode::AbsoluteConsistency => {
                            return Err(Error::corruption(&path, offset, detail));
                        }
                        WalRecoveryMode::PointInTimeRecovery => {
                            stop_all = true;
                            break;
                        }
                        WalRecoveryMode::SkipAnyCorruptedRecords => continue,
                        WalRecoveryMode::TolerateCorruptedTailRecords => {
                            if damage.is_none() {
                                damage = Some((offset, detail));
                            }
                            continue;
                        }
                    },
                    LogRead::Record { data, offset } => (data, offset),
                };
                if let Some((off, detail)) = &damage {
                    // Intact records after damage: the damage is not a torn tail.
                    return Err(Error::corruption(&path, *off, detail.clone()));
                }
                let batch = match WriteBatch::from_data(data) {
                    Ok(b) => b,
                    Err(detail) => match opts.wal_recovery_mode {
                        WalRecoveryMode::SkipAnyCorruptedRecords => continue,
                        WalRecoveryMode::PointInTimeRecovery => {
                            stop_all = true;
                            break;
                        }
                        _ => {
                            return Err(Error::corruption(
                                &path,
                                offset,
                                format!("bad write batch: {detail}"),
                            ))
                        }
                    },
                };
                let seq = batch.sequence();
                let count = batch.len() as u64;
                if seq == 0 || seq.saturating_add(count) > crate::key::MAX_SEQUENCE {
                    return Err(Error::corruption(
                        &path,
                        offset,
                        format!("write batch has impossible sequence number {seq}"),
                    ));
                }
                for (i, e) in batch.iter().enumerate() {
                    let s = seq + i as u64;
                    match e {
                        BatchEntry::Put(k, v) => mem.add(s, crate::key::ValueKind::Put, k, v),
                        BatchEntry::Delete(k) => mem.add(s, crate::key::ValueKind::Delete, k, &[]),
                    }
                }
                if count > 0 {
                    last_sequence = last_sequence.max(seq + count - 1);
                }
                if mem.approximate_memory_usage() >= opts.write_buffer_size {
                    flush_mem(&mem, &mut versions)?;
                    mem = Arc::new(MemTable::new(0));
                }
            }
            if let Some((off, detail)) = damage {
                if Some(number) != newest {
                    // Older WALs were synced before the next one started: damage there is
                    // real corruption, not a torn write.
                    return Err(Error::corruption(&path, off, detail));
                }
            }
        }
        flush_mem(&mem, &mut versions)?;
    }

    // Start a fresh WAL and record that everything older is in tables.
    let wal_number = versions.new_file_number();
    let wal_path = filename::log_file(dir, wal_number);
    let wal_file = fs
        .create(&wal_path)
        .map_err(|e| Error::io(format!("creating WAL {}", wal_path.display()), e))?;
    edit.log_number = Some(wal_number);
    edit.last_sequence = Some(last_sequence);
    versions.log_and_apply(&mut edit)?;

    let mem = Arc::new(MemTable::new(wal_number));
    let version = versions.current();
    let state = DbState {
        versions,
        mem: mem.clone(),
        imms: VecDeque::new(),
        writers: VecDeque::new(),
        bg_error: None,
        flush_running: false,
        busy: Busy::default(),
        running_compactions: 0,
        manual_compaction: false,
        obsolete_tables: Vec::new(),
        deletions_running: 0,
        live_wals: vec![wal_number],
        level_stats: vec![LevelStats::default(); opts.num_levels],
        stall_count: 0,
        stall_micros: 0,
        closed: false,
    };
    let jobs = opts.max_background_jobs;
    let inner = Arc::new(DbInner {
        dir: dir.to_path_buf(),
        fs: fs.clone(),
        state: Mutex::new(state),
        bg_cv: Condvar::new(),
        super_version: ArcSwap::from_pointee(SuperVersion {
            mem,
            imms: Vec::new(),
            version,
        }),
        last_sequence: AtomicU64::new(last_sequence),
        wal: Mutex::new(Some(LogWriter::new(wal_file))),
        wal_number: AtomicU64::new(wal_number),
        tables,
        block_cache,
        snapshots: Arc::default(),
        shutting_down,
        user_bytes_written: AtomicU64::new(0),
        lock: Mutex::new(Some(lock)),
        opts,
    });
    remove_unreferenced_files(&inner, &names);

    let mut threads = Vec::with_capacity(jobs);
    for i in 0..jobs {
        let bg = inner.clone();
        let t = std::thread::Builder::new()
            .name(format!("shaledb-bg-{i}"))
            .spawn(move || bg.background_thread())
            .map_err(|e| Error::io("starting a background thread", e))?;
        threads.push(t);
    }
    Ok(Db {
        inner,
        threads: Mutex::new(threads),
    })
}

/// Deletes files from before this open that nothing refers to: old WALs (now in tables), old
/// MANIFESTs, temp files and tables no version lists (outputs of an interrupted flush or
/// compaction).
fn remove_unreferenced_files(inner: &DbInner, names: &[String]) {
    let st = inner.state.lock();
    let live = st.versions.live_files();
    let log_number = st.versions.log_number();
    let manifest = st.versions.manifest_number();
    drop(st);
    for name in names {
        let Some((kind, n)) = filename::parse_file_name(name) else {
            continue;
        };
        let obsolete = match kind {
            FileKind::Log => n < log_number,
            FileKind::Table => !live.contains(&n),
            FileKind::Manifest => n != manifest,
            FileKind::Temp => true,
            FileKind::Current | FileKind::Lock => false,
        };
        if obsolete {
            let _ = inner.fs.remove_file(&inner.dir.join(name));
        }
    }
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
