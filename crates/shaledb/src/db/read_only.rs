//! Read-only and secondary instances: a database opened by another handle (another process,
//! usually) that reads the primary's files and never writes to them.
//!
//! Both take no lock and write nothing in the database directory. Opening reads CURRENT, the
//! MANIFEST it names and the live WALs (into memtables kept in memory, never flushed), then
//! opens every table and blob file of that view and keeps them open: on POSIX an open file
//! stays readable after the primary's compaction unlinks it, so the instance keeps seeing the
//! consistent state it opened, however long it lives. (RocksDB asks secondaries to set
//! `max_open_files = -1` for the same reason; here the table cache simply never evicts a file
//! of the view.)
//!
//! A secondary instance moves to the primary's newer state with `try_catch_up_with_primary`,
//! which reads the view again when CURRENT, the MANIFEST's size or the WALs changed, and swaps
//! it in under the state mutex. It tails the MANIFEST as RocksDB's secondaries do: the edits
//! read so far are kept (`ManifestTail`) and reading goes on where it stopped, so a catch-up
//! costs the new edits plus a rebuild of the live file lists, not a replay of the MANIFEST's
//! history (from the start only when the primary rolled over to a new MANIFEST). The live WALs
//! are read again whole when the MANIFEST changed (they are bounded by the write buffers). Files that only older views used are closed then (the
//! deletion queue evicts them from the table cache; the instance never unlinks).
//!
//! The primary may delete a WAL or MANIFEST between our reading CURRENT and opening them (a
//! flush or a MANIFEST roll-over): a view that fails to read is read again, a few times,
//! before the error is returned.

use super::open::{self, Recovered, WalReplay};
use super::{CfState, Db, DbInner, DbState};
use crate::cache::TableCache;
use crate::column_family::{CfOptions, DEFAULT_FAMILY_NAME};
use crate::error::{Error, Result};
use crate::info_log::{InfoLog, InfoLogConfig};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::version::filename::{self, FileKind};
use crate::version::{DeletionQueue, ManifestTail, VersionSet};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How many times a view is read before its error is returned (the primary may delete a file
/// between our listing and opening it, once per flush or MANIFEST roll-over).
const VIEW_ATTEMPTS: usize = 8;

/// What a database handle may do.
pub(crate) enum Role {
    /// Opened with `Db::open`: reads, writes and background work.
    Primary,
    /// Opened with `Db::open_read_only`: reads of the state at open.
    ReadOnly,
    /// Opened with `Db::open_secondary`: reads, and catches up with the primary on request.
    Secondary(Box<Mutex<Follower>>),
}

/// A secondary's memory of what it last read.
pub(crate) struct Follower {
    /// The files' sizes and names at the last catch-up: unchanged means nothing to do,
    /// unless a WAL was not read to its end.
    seen: Fingerprint,
    /// Options of the families requested at open, by name.
    requested: BTreeMap<String, Options>,
    /// Per WAL read so far: where its next record starts.
    resume: BTreeMap<u64, u64>,
    /// Where the MANIFEST's reading stopped: a catch-up reads on from there.
    manifest: ManifestTail,
}

/// CURRENT's contents, the MANIFEST's size and every WAL's number and size.
#[derive(PartialEq, Eq, Default)]
struct Fingerprint {
    current: Vec<u8>,
    manifest_size: u64,
    wals: Vec<(u64, u64)>,
}

/// One reading of the primary's files: its versions and its unflushed writes.
struct View {
    versions: VersionSet,
    mems: BTreeMap<u32, Arc<MemTable>>,
    last_sequence: u64,
    family_opts: BTreeMap<u32, Arc<Options>>,
    seen: Fingerprint,
    /// Per WAL: where reading can go on.
    resume: BTreeMap<u64, u64>,
    /// Where reading the MANIFEST can go on.
    manifest: ManifestTail,
}

impl Db {
    /// Opens the database at `path` for reading only: no writes, no flushes or compactions,
    /// no lock (so it works while a primary has the database open in another process), and
    /// nothing in the directory is ever changed. The instance sees the state at the moment it
    /// opened (the primary's later writes stay invisible), including writes still in the
    /// primary's WAL. Every column family is opened, those not named with default options.
    /// Writes and other changes fail with [`Error::NotSupported`].
    ///
    /// It keeps every table and blob file of its state open, so files the primary's
    /// compactions delete stay readable (`max_open_files` does not apply).
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let primary = Db::open(dir.path(), Options::default()).unwrap();
    /// primary.put(b"k", b"v").unwrap();
    /// let reader = Db::open_read_only(dir.path(), Options::default()).unwrap();
    /// assert_eq!(reader.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    /// assert!(reader.put(b"k", b"w").is_err());
    /// ```
    pub fn open_read_only(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        Self::open_read_only_cf(path, opts, Vec::<(String, CfOptions)>::new())
    }

    /// [`open_read_only`](Self::open_read_only) with options for named column families
    /// (as [`Db::open_cf`] takes them).
    pub fn open_read_only_cf<I, N>(path: impl AsRef<Path>, opts: Options, families: I) -> Result<Db>
    where
        I: IntoIterator<Item = (N, CfOptions)>,
        N: Into<String>,
    {
        let families = families.into_iter().map(|(n, o)| (n.into(), o)).collect();
        open_follower(path.as_ref(), opts, families, None)
    }

    /// Opens a secondary instance of the database at `path`: a read-only instance (see
    /// [`open_read_only`](Self::open_read_only)) that moves to the primary's newer state
    /// whenever [`try_catch_up_with_primary`](Self::try_catch_up_with_primary) is called.
    /// `secondary_dir` is the instance's own directory (created if missing; the database
    /// directory is never written).
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let primary = Db::open(dir.path().join("db"), Options::default()).unwrap();
    /// let secondary =
    ///     Db::open_secondary(dir.path().join("db"), dir.path().join("sec"), Options::default())
    ///         .unwrap();
    /// primary.put(b"k", b"v").unwrap();
    /// assert_eq!(secondary.get(b"k").unwrap(), None);
    /// secondary.try_catch_up_with_primary().unwrap();
    /// assert_eq!(secondary.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    /// ```
    pub fn open_secondary(
        path: impl AsRef<Path>,
        secondary_dir: impl AsRef<Path>,
        opts: Options,
    ) -> Result<Db> {
        let none = Vec::<(String, CfOptions)>::new();
        Self::open_secondary_cf(path, secondary_dir, opts, none)
    }

    /// [`open_secondary`](Self::open_secondary) with options for named column families.
    pub fn open_secondary_cf<I, N>(
        path: impl AsRef<Path>,
        secondary_dir: impl AsRef<Path>,
        opts: Options,
        families: I,
    ) -> Result<Db>
    where
        I: IntoIterator<Item = (N, CfOptions)>,
        N: Into<String>,
    {
        let families = families.into_iter().map(|(n, o)| (n.into(), o)).collect();
        let secondary_dir = secondary_dir.as_ref();
        opts.fs
            .create_dir_all(secondary_dir)
            .map_err(|e| Error::io(format!("creating {}", secondary_dir.display()), e))?;
        open_follower(path.as_ref(), opts, families, Some(secondary_dir))
    }

    /// Moves a secondary instance to the primary's current state: the tables of its newest
    /// MANIFEST and the writes in its WALs. Readers already running (iterators, gets) finish
    /// on the state they started with. Cheap when the primary wrote nothing since the last
    /// call; when it only wrote (no flush, compaction or family change) the WALs are read on
    /// from where the last call stopped; otherwise the MANIFEST is read on from where the last
    /// call stopped (whole only after the primary rolled over to a new MANIFEST) and the WALs
    /// not yet flushed are read again. Families the primary created since appear (with default options unless
    /// named at open); families it dropped disappear.
    ///
    /// Fails with [`Error::NotSupported`] on any other kind of instance.
    pub fn try_catch_up_with_primary(&self) -> Result<()> {
        let inner = &self.inner;
        let super::read_only::Role::Secondary(follower) = &inner.role else {
            return Err(Error::NotSupported(
                "try_catch_up_with_primary is for instances opened with Db::open_secondary"
                    .to_string(),
            ));
        };
        let mut follower = follower.lock();
        let now = fingerprint(&inner.opts, &inner.dir)?;
        // Sizes alone cannot tell that a WAL grew inside its preallocated space
        // (`Options::wal_preallocate_size`): a WAL whose reading stopped before its end is
        // read on even if nothing changed size.
        let unread = |&(number, size): &(u64, u64)| {
            follower.resume.get(&number).is_some_and(|&at| at < size)
        };
        if now == follower.seen && !now.wals.iter().any(unread) {
            return Ok(());
        }
        let same_manifest = now.current == follower.seen.current
            && now.manifest_size == follower.seen.manifest_size;
        if same_manifest {
            match tail_wals(inner, &now, follower.resume.clone()) {
                Ok(Some(resume)) => {
                    follower.seen = now;
                    follower.resume = resume;
                    return Ok(());
                }
                // Damage stopped a WAL (point-in-time recovery): read everything again.
                Ok(None) => {}
                // A WAL flushed and deleted meanwhile: the MANIFEST moved on, read it again.
                Err(e) if may_be_a_race(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let requested = follower.requested.clone();
        let tail = Some(&follower.manifest);
        let view = read_view_retrying(
            &inner.dir,
            &inner.opts,
            &requested,
            &inner.tables,
            tail,
            || inner.obsolete.clone(),
        )?;
        follower.resume = view.resume.clone();
        follower.manifest = view.manifest.clone();
        follower.seen = install_view(inner, view);
        drop(follower);
        // Files only older views used are closed (never unlinked: see unlink_obsolete).
        inner.purge_obsolete_files();
        Ok(())
    }
}

impl DbInner {
    /// `Error::NotSupported` naming `what` unless this is a primary instance.
    pub(crate) fn check_writable(&self, what: &str) -> Result<()> {
        match self.role {
            Role::Primary => Ok(()),
            Role::ReadOnly => Err(Error::NotSupported(format!(
                "{what} on a database opened with Db::open_read_only"
            ))),
            Role::Secondary(_) => Err(Error::NotSupported(format!(
                "{what} on a secondary instance (Db::open_secondary); write through the primary"
            ))),
        }
    }

    /// True for a primary instance, which owns the files it deletes.
    pub(crate) fn owns_files(&self) -> bool {
        matches!(self.role, Role::Primary)
    }
}

/// Opens a read-only instance, or a secondary one when `secondary_dir` is given.
fn open_follower(
    dir: &Path,
    opts: Options,
    families: Vec<(String, CfOptions)>,
    secondary_dir: Option<&Path>,
) -> Result<Db> {
    opts.validate()?;
    let opts = opts.resolve_memory_budget();
    let requested = open::requested_families(&opts, families)?;
    if !opts.fs.exists(&filename::current_file(dir)) {
        return Err(Error::NotFound(dir.to_path_buf()));
    }
    let block_cache = opts.block_cache_for_open();
    // Never evicts: every table of the view stays open (see the module comment).
    let tables = Arc::new(TableCache::for_database(
        dir.to_path_buf(),
        &opts,
        usize::MAX,
        block_cache.clone(),
    ));
    let view = read_view_retrying(dir, &opts, &requested, &tables, None, || {
        Arc::new(DeletionQueue::default())
    })?;
    // A secondary keeps its LOG in its own directory; a read-only instance writes none.
    let info_log = match secondary_dir {
        Some(d) => InfoLog::open(
            opts.fs.clone(),
            d,
            InfoLogConfig::of(&opts),
            opts.statistics.clone(),
        ),
        None => InfoLog::off(),
    };
    let role = match secondary_dir {
        None => Role::ReadOnly,
        Some(_) => Role::Secondary(Box::new(Mutex::new(Follower {
            seen: Fingerprint::default(),
            requested,
            resume: view.resume.clone(),
            manifest: view.manifest.clone(),
        }))),
    };
    let View {
        versions,
        mems,
        last_sequence,
        family_opts,
        seen,
        resume: _,
        manifest: _,
    } = view;
    let inner = DbInner::recovered(Recovered {
        dir,
        opts,
        family_opts,
        versions,
        wal: None,
        wal_number: 0,
        last_sequence,
        tables,
        block_cache,
        shutting_down: AtomicBool::new(false),
        lock: None,
        role,
        info_log,
        rate_limiter: None,
    });
    install_memtables(&mut inner.state.lock(), &mems);
    if let Role::Secondary(f) = &inner.role {
        f.lock().seen = seen;
    }
    Ok(Db {
        inner,
        threads: Mutex::new(Vec::new()),
    })
}

/// Reads a view, again if it fails (the primary may have deleted a file we were about to
/// open); the last error is returned.
fn read_view_retrying(
    dir: &Path,
    opts: &Options,
    requested: &BTreeMap<String, Options>,
    tables: &Arc<TableCache>,
    tail: Option<&ManifestTail>,
    queue: impl Fn() -> Arc<DeletionQueue>,
) -> Result<View> {
    let mut attempt = 1;
    loop {
        match read_view(dir, opts, requested, tables, tail, queue()) {
            Ok(v) => return Ok(v),
            Err(e) if attempt >= VIEW_ATTEMPTS || !may_be_a_race(&e) => return Err(e),
            Err(_) => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(attempt as u64 * 5));
            }
        }
    }
}

/// Errors a concurrent primary can cause by deleting or replacing a file we read.
fn may_be_a_race(e: &Error) -> bool {
    match e {
        Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        Error::Corruption { .. } => true,
        _ => false,
    }
}

/// Reads CURRENT, the MANIFEST (on from `tail` when it is still the same MANIFEST) and the
/// live WALs once, and opens every file of the result.
fn read_view(
    dir: &Path,
    opts: &Options,
    requested: &BTreeMap<String, Options>,
    tables: &Arc<TableCache>,
    tail: Option<&ManifestTail>,
    queue: Arc<DeletionQueue>,
) -> Result<View> {
    let family_options = |name: &str| match requested.get(name) {
        Some(o) => o.clone(),
        None if name == DEFAULT_FAMILY_NAME => opts.clone(),
        None => opts.for_family(&CfOptions::default()),
    };
    let seen = fingerprint(opts, dir)?;
    let fs = opts.fs.clone();
    let tailed = match tail {
        Some(t) => t.catch_up(fs.clone(), dir, opts, &family_options, queue.clone())?,
        None => None,
    };
    let (mut versions, manifest) = match tailed {
        Some(read_on) => read_on,
        None => VersionSet::recover_tailable(fs, dir, opts, &family_options, queue)?,
    };
    open::check_merge_operators(&versions, &family_options)?;
    open::check_write_times(&versions, &family_options)?;
    let names = opts
        .fs
        .list_dir(dir)
        .map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
    let wals = open::check_files_on_disk(dir, &mut versions, &names)?;
    if opts.paranoid_checks {
        for f in versions.families().values() {
            open::check_table_sizes(&opts.fs, dir, &f.current())?;
        }
    }
    open_view_files(&versions, tables)?;
    let family_opts: BTreeMap<u32, Arc<Options>> = versions
        .families()
        .iter()
        .map(|(&id, f)| (id, Arc::new(family_options(&f.name))))
        .collect();
    let shutting_down = AtomicBool::new(false);
    let last_sequence = versions.last_sequence();
    let mut replay = WalReplay {
        keep_in_memory: true,
        ..WalReplay::new(
            dir,
            opts,
            &family_opts,
            tables,
            &shutting_down,
            last_sequence,
            &mut versions,
        )
    };
    replay.replay_all(&wals)?;
    let resume = std::mem::take(&mut replay.resume);
    let (mems, last_sequence) = replay.into_memtables();
    Ok(View {
        versions,
        mems,
        last_sequence,
        family_opts,
        seen,
        resume,
        manifest,
    })
}

/// Opens every table and blob file the view lists, so they stay readable after the primary
/// deletes them.
fn open_view_files(versions: &VersionSet, tables: &Arc<TableCache>) -> Result<()> {
    for f in versions.families().values() {
        let v = f.current();
        for t in v.files.iter().flatten() {
            tables.get(t)?;
        }
        for b in &v.blob_files {
            tables.blob_reader(&b.meta.addition)?;
        }
    }
    Ok(())
}

/// CURRENT's contents, the size of the MANIFEST it names and every WAL's size, as one
/// consistent picture: the MANIFEST is looked at again after the WALs are listed, and the whole
/// is taken again if it moved. Otherwise a flush finishing in between would pair the old
/// MANIFEST with a listing that lacks the WAL it just deleted, and a catch-up that tails the
/// WALs left would lose that WAL's unread writes.
fn fingerprint(opts: &Options, dir: &Path) -> Result<Fingerprint> {
    let mut attempt = 1;
    loop {
        let (current, manifest_size) = manifest_state(opts, dir)?;
        let wals = wal_sizes(opts, dir)?;
        if manifest_state(opts, dir)? == (current.clone(), manifest_size) {
            return Ok(Fingerprint {
                current,
                manifest_size,
                wals,
            });
        }
        if attempt >= VIEW_ATTEMPTS {
            return Err(Error::io(
                format!("listing the WALs of {}", dir.display()),
                std::io::Error::new(
                    std::io::ErrorKind::Interrupted,
                    "the primary changed its MANIFEST during every attempt",
                ),
            ));
        }
        attempt += 1;
        std::thread::sleep(std::time::Duration::from_millis(attempt as u64 * 5));
    }
}

/// CURRENT's contents and the size of the MANIFEST it names.
fn manifest_state(opts: &Options, dir: &Path) -> Result<(Vec<u8>, u64)> {
    let fs = &opts.fs;
    let current_path = filename::current_file(dir);
    let current = fs
        .read_to_vec(&current_path)
        .map_err(|e| Error::io(format!("reading {}", current_path.display()), e))?;
    let manifest_name = String::from_utf8_lossy(&current).trim_end().to_string();
    let manifest_size = fs.file_size(&dir.join(&manifest_name)).unwrap_or(0);
    Ok((current, manifest_size))
}

/// Every WAL's number and size, in number order.
fn wal_sizes(opts: &Options, dir: &Path) -> Result<Vec<(u64, u64)>> {
    let fs = &opts.fs;
    let names = fs
        .list_dir(dir)
        .map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
    let mut wals: Vec<(u64, u64)> = names
        .iter()
        .filter_map(|n| match filename::parse_file_name(n) {
            Some((FileKind::Log, number)) => {
                let size = fs.file_size(&dir.join(n)).unwrap_or(0);
                Some((number, size))
            }
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    Ok(wals)
}

/// Swaps a newer view into a secondary instance; returns its fingerprint.
fn install_view(inner: &DbInner, view: View) -> Fingerprint {
    let View {
        versions,
        mems,
        last_sequence,
        family_opts,
        seen,
        resume: _,
        manifest: _,
    } = view;
    let mut st = inner.state.lock();
    st.versions = versions;
    // Families the primary dropped.
    let gone: Vec<u32> = st
        .families
        .keys()
        .copied()
        .filter(|id| st.versions.family(*id).is_none())
        .collect();
    for id in gone {
        if let Some(f) = st.families.remove(&id) {
            f.data.dropped.store(true, Ordering::Release);
        }
    }
    // Families the primary created.
    let weak = inner.self_weak();
    let new: Vec<(u32, String)> = st
        .versions
        .families()
        .iter()
        .filter(|(id, _)| !st.families.contains_key(id))
        .map(|(&id, f)| (id, f.name.clone()))
        .collect();
    for (id, name) in new {
        let o = family_opts
            .get(&id)
            .cloned()
            .unwrap_or_else(|| Arc::new(inner.opts.clone()));
        let data = open::new_family_data(id, name, o, &weak, 0);
        st.families.insert(id, CfState::new(data, 0));
    }
    install_memtables(&mut st, &mems);
    // Published last: a reader that sees the new sequence finds the new memtables.
    inner.last_sequence.store(last_sequence, Ordering::Release);
    seen
}

/// Gives every family its replayed memtable (an empty one if its WALs held nothing) and
/// publishes it with the family's current version.
fn install_memtables(st: &mut DbState, mems: &BTreeMap<u32, Arc<MemTable>>) {
    let ids: Vec<u32> = st.families.keys().copied().collect();
    for id in ids {
        if let Some(f) = st.families.get_mut(&id) {
            f.mem = match mems.get(&id) {
                Some(m) => m.clone(),
                None => Arc::new(MemTable::for_family(0, &f.data.opts)),
            };
        }
        st.install_super_version(id);
    }
}

/// Reads on in the live WALs from where the last catch-up stopped, into the memtables readers
/// already use (the MANIFEST did not change, so neither did the versions or which WALs are
/// live), then publishes the new last sequence number: entries are invisible until then.
/// Returns where to go on next time; `None` (nothing published) if damage stopped a WAL
/// where reading cannot go on, or a WAL it was reading is gone.
fn tail_wals(
    inner: &DbInner,
    now: &Fingerprint,
    resume: BTreeMap<u64, u64>,
) -> Result<Option<BTreeMap<u64, u64>>> {
    let mut st = inner.state.lock();
    let log_number = st.versions.log_number();
    // A live WAL of this view that is gone was flushed: its data is in a table this view does
    // not know, so the MANIFEST must be read again.
    let listed = |number: &u64| now.wals.iter().any(|(n, _)| n == number);
    if resume.keys().any(|n| *n >= log_number && !listed(n)) {
        return Ok(None);
    }
    let wals: Vec<u64> = now
        .wals
        .iter()
        .filter(|&&(number, size)| {
            number >= log_number && resume.get(&number).is_none_or(|&at| at < size)
        })
        .map(|&(number, _)| number)
        .collect();
    let mems: BTreeMap<u32, Arc<MemTable>> = st
        .families
        .iter()
        .map(|(&id, f)| (id, f.mem.clone()))
        .collect();
    let family_opts: BTreeMap<u32, Arc<Options>> = st
        .families
        .iter()
        .map(|(&id, f)| (id, f.data.opts.clone()))
        .collect();
    let shutting_down = AtomicBool::new(false);
    let mut replay = WalReplay {
        keep_in_memory: true,
        mems,
        resume,
        ..WalReplay::new(
            &inner.dir,
            &inner.opts,
            &family_opts,
            &inner.tables,
            &shutting_down,
            inner.last_sequence.load(Ordering::Acquire),
            &mut st.versions,
        )
    };
    replay.replay_all(&wals)?;
    let resume = std::mem::take(&mut replay.resume);
    if wals.iter().any(|w| !resume.contains_key(w)) {
        // Entries already added stay invisible: the sequence number is not published, and
        // the full reading that follows replaces these memtables.
        return Ok(None);
    }
    let (_, last_sequence) = replay.into_memtables();
    inner.last_sequence.store(last_sequence, Ordering::Release);
    Ok(Some(resume))
}
