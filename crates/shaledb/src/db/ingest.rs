//! `Db::ingest`: adds tables written by `SstFileWriter` to a column family (RocksDB's
//! `IngestExternalFile`).
//!
//! 1. Prepare, with no lock: open every file as a table, verify every block's checksum and
//!    read every key (sequence number 0, user keys strictly ascending, no blob references),
//!    check the files do not overlap each other, then copy (or hard-link) each into the
//!    database directory under a new file number, synced, and sync the directory.
//! 2. Commit, at the front of the writer queue (no write group runs) with new compactions held
//!    off: flush the family's memtables if a file overlaps them, pick each file's level (the
//!    deepest one it fits in with nothing above it overlapping) and sequence number (the next
//!    one when it overlaps data or a snapshot exists, else 0), and log one version edit adding
//!    them all (with the new last sequence number). The edit is the commit point: after a
//!    crash either every file is in the version or none is, and copies no version lists are
//!    deleted at the next open.
//!
//! A file keeps its keys at sequence number 0; the MANIFEST records its global sequence number
//! (tag 18) and the table reader presents every key with it (see `sst::Table`), so neither a
//! copy nor a link is rewritten.

use super::background::EditKind;
use super::{Db, DbInner, DbState};
use crate::column_family::{ColumnFamily, DEFAULT_FAMILY};
use crate::compaction::picker::{self, Busy};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{self, InternalKey, ValueKind, KIND_FOR_SEEK, MAX_SEQUENCE};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sst::{BlockReadOptions, Table};
use crate::sst_file_writer::EXTERNAL_FILE_VERSION;
use crate::version::{filename, FileMetaData, Version, VersionEdit};
use parking_lot::MutexGuard;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// How [`Db::ingest`] adds files (RocksDB's `IngestExternalFileOptions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestOptions {
    /// Hard-link the files into the database (and remove the originals once ingested)
    /// instead of copying them; a file that cannot be linked (another file system) is copied.
    /// Default false.
    pub move_files: bool,
    /// Give the files a new sequence number while a snapshot exists, so the snapshot does not
    /// see them. Default true.
    pub snapshot_consistency: bool,
    /// Allow giving a file a sequence number (needed when it overlaps data in the database or
    /// a snapshot exists); when false such an ingestion fails with `InvalidArgument`.
    /// Default true.
    pub allow_global_seqno: bool,
    /// Allow flushing the memtables when a file overlaps unflushed writes (writes wait
    /// meanwhile); when false such an ingestion fails with `InvalidArgument`. Default true.
    pub allow_blocking_flush: bool,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            move_files: false,
            snapshot_consistency: true,
            allow_global_seqno: true,
            allow_blocking_flush: true,
        }
    }
}

impl Db {
    /// Adds table files written by [`SstFileWriter`](crate::SstFileWriter) to the default
    /// column family, all of them or none: one MANIFEST edit makes them visible together.
    /// Each file is checked (checksums, keys in order, sequence numbers 0), the files must
    /// not overlap one another, and their keys hide older versions of the same keys.
    /// A snapshot taken before the call never sees them.
    ///
    /// ```
    /// use shaledb::{Db, IngestOptions, Options, SstFileWriter};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    /// db.put(b"k", b"old").unwrap();
    /// let mut w = SstFileWriter::create(&Options::default(), dir.path().join("f.sst")).unwrap();
    /// w.put(b"k", b"new").unwrap();
    /// let info = w.finish().unwrap();
    /// let snap = db.snapshot();
    /// db.ingest(&[info.path], &IngestOptions::default()).unwrap();
    /// assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"new"[..]));
    /// let ro = shaledb::ReadOptions { snapshot: Some(snap), ..Default::default() };
    /// assert_eq!(db.get_opt(&ro, b"k").unwrap().as_deref(), Some(&b"old"[..]));
    /// ```
    pub fn ingest<P: AsRef<Path>>(&self, files: &[P], opts: &IngestOptions) -> Result<()> {
        let paths: Vec<PathBuf> = files.iter().map(|p| p.as_ref().to_path_buf()).collect();
        self.inner.ingest(DEFAULT_FAMILY, &paths, opts)
    }

    /// [`ingest`](Self::ingest) into column family `cf`.
    pub fn ingest_cf<P: AsRef<Path>>(
        &self,
        cf: &ColumnFamily,
        files: &[P],
        opts: &IngestOptions,
    ) -> Result<()> {
        let id = self.inner.check_handle(cf)?.id;
        let paths: Vec<PathBuf> = files.iter().map(|p| p.as_ref().to_path_buf()).collect();
        self.inner.ingest(id, &paths, opts)
    }
}

/// One file being ingested.
struct IngestFile {
    /// Where the caller's file is.
    external: PathBuf,
    /// Its number in the database (0 until copied in).
    number: u64,
    smallest: Vec<u8>,
    largest: Vec<u8>,
    first_kind: ValueKind,
    last_kind: ValueKind,
    entries: u64,
    deletions: u64,
    file_size: u64,
    /// CRC-32C of the file's bytes as validated (checked again against the copy).
    file_checksum: u32,
}

impl IngestFile {
    /// The metadata the MANIFEST records for this file at sequence number `seq`.
    fn meta(&self, seq: u64) -> FileMetaData {
        FileMetaData {
            number: self.number,
            file_size: self.file_size,
            smallest: InternalKey::new(&self.smallest, seq, self.first_kind),
            largest: InternalKey::new(&self.largest, seq, self.last_kind),
            smallest_seqno: seq,
            largest_seqno: seq,
            num_entries: self.entries,
            num_deletions: self.deletions,
            num_range_deletions: 0,
            blob_files: Vec::new(),
            global_seqno: Some(seq),
            file_checksum: Some(self.file_checksum),
            open_table: Default::default(),
            seeks: Default::default(),
        }
    }

    fn overlaps(&self, smallest: &[u8], largest: &[u8]) -> bool {
        !(self.largest.as_slice() < smallest || self.smallest.as_slice() > largest)
    }
}

impl DbInner {
    /// `Db::ingest` into family `cf`.
    pub(crate) fn ingest(&self, cf: u32, paths: &[PathBuf], opts: &IngestOptions) -> Result<()> {
        self.check_writable("ingesting files")?;
        if paths.is_empty() {
            return Err(Error::InvalidArgument(
                "ingest: the list of files is empty".to_string(),
            ));
        }
        let family_opts = {
            let st = self.state.lock();
            check_open(&st)?;
            let f = st.family(cf).ok_or_else(|| dropped(cf))?;
            f.data.opts.clone()
        };
        if family_opts.ttl.is_some() {
            // Its values end with their write time; an external file's do not.
            return Err(Error::InvalidArgument(
                "ingest: the column family has a TTL; ingesting into it is not supported"
                    .to_string(),
            ));
        }
        let mut files = paths
            .iter()
            .map(|p| inspect_file(&family_opts, p))
            .collect::<Result<Vec<_>>>()?;
        check_disjoint(&mut files)?;
        if let Err(e) = self.copy_in(&mut files, opts) {
            self.remove_copies(&files);
            return Err(e);
        }
        let mut st = self.state.lock();
        let barrier = self.enter_write_barrier(&mut st);
        // The flush comes before compactions are held off: making room for it may have to
        // wait for a compaction (too many L0 files).
        let mut res = check_open(&st)
            .and_then(|()| self.flush_overlapping_memtables(&mut st, cf, &files, opts))
            .map_err(Committed::No);
        if res.is_ok() {
            st.ingesting += 1;
            res = self.commit_ingest(&mut st, cf, &files, opts);
            st.ingesting -= 1;
        }
        self.leave_write_barrier(&mut st, &barrier);
        drop(st);
        self.notify_state_changed();
        match res {
            Ok(()) => {
                if opts.move_files {
                    // The files are in; the caller's names for them go (as RocksDB does).
                    for f in &files {
                        let _ = self.fs.remove_file(&f.external);
                    }
                }
                Ok(())
            }
            Err(Committed::No(e)) => {
                self.remove_copies(&files);
                Err(e)
            }
            // A failed MANIFEST write may still have reached the disk: the copies stay for
            // the next open to keep (if the edit is there) or delete.
            Err(Committed::Unknown(e)) => Err(e),
        }
    }

    /// Copies (or links) each file into the database directory under a new number, synced,
    /// then syncs the directory.
    fn copy_in(&self, files: &mut [IngestFile], opts: &IngestOptions) -> Result<()> {
        for f in files.iter_mut() {
            let number = self.state.lock().versions.new_file_number();
            let to = filename::table_file(&self.dir, number);
            let linked = opts.move_files && self.fs.link(&f.external, &to).is_ok();
            let copied_crc = match linked {
                true => None,
                false => Some(
                    super::checkpoint::copy_file_to(&*self.fs, &f.external, &to).inspect_err(
                        |_| {
                            let _ = self.fs.remove_file(&to);
                        },
                    )?,
                ),
            };
            f.number = number;
            if let Some(copied) = copied_crc.filter(|&c| c != f.file_checksum) {
                return Err(Error::corruption(
                    &f.external,
                    0,
                    format!(
                        "the file changed while it was ingested: CRC-32C {:#010x} when \
                         validated, {copied:#010x} when copied",
                        f.file_checksum,
                    ),
                ));
            }
            let size = self
                .fs
                .file_size(&to)
                .map_err(|e| Error::io(format!("reading the size of {}", to.display()), e))?;
            if size != f.file_size {
                return Err(Error::corruption(
                    &f.external,
                    0,
                    format!(
                        "the file changed while it was ingested: {} bytes, then {size}",
                        f.file_size
                    ),
                ));
            }
        }
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| Error::io(format!("syncing {}", self.dir.display()), e))
    }

    /// Removes the copies `copy_in` made (best effort: an orphan is deleted at the next open).
    fn remove_copies(&self, files: &[IngestFile]) {
        for f in files.iter().filter(|f| f.number != 0) {
            let _ = self
                .fs
                .remove_file(&filename::table_file(&self.dir, f.number));
        }
    }

    /// Under the write barrier, once the memtables the files overlap are flushed: places the
    /// files and logs the edit.
    fn commit_ingest(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        cf: u32,
        files: &[IngestFile],
        opts: &IngestOptions,
    ) -> std::result::Result<(), Committed> {
        check_open(st).map_err(Committed::No)?;
        let f = st.family(cf).ok_or_else(|| Committed::No(dropped(cf)))?;
        let v = st.versions.current(cf);
        let base_level = picker::base_level(&v, &f.data.opts);
        let last = self.last_sequence.load(Ordering::Acquire);
        let next = last + 1;
        // RocksDB's rule: with a snapshot alive every file takes a new sequence number, so
        // the snapshot (at or below `last`) cannot see it. Without one, no snapshot may be
        // taken until the files are visible: one taken meanwhile would see a file kept at
        // sequence number 0 appear.
        let gate = self.snapshot_gate.write();
        let force = opts.snapshot_consistency && self.snapshots.count() > 0;
        let _gate = (!force).then_some(gate);
        let mut edit = VersionEdit {
            column_family: cf,
            ..Default::default()
        };
        let mut consumed = false;
        for file in files {
            let (level, overlaps) = pick_level(&v, &f.busy, base_level, file);
            let seq = if overlaps || force { next } else { 0 };
            if seq > 0 && !opts.allow_global_seqno {
                return Err(Committed::No(Error::InvalidArgument(format!(
                    "ingest: {} overlaps data in the database or a snapshot exists, so it \
                     needs a sequence number, but allow_global_seqno is false",
                    file.external.display()
                ))));
            }
            if next > MAX_SEQUENCE {
                return Err(Committed::No(Error::InvalidArgument(
                    "ingest: sequence numbers are exhausted".to_string(),
                )));
            }
            consumed |= seq > 0;
            edit.add_file(level, file.meta(seq));
        }
        if consumed {
            edit.last_sequence = Some(next);
        }
        match self.log_and_apply_all(st, &mut vec![edit], EditKind::Other) {
            Ok(true) => {}
            Ok(false) => return Err(Committed::No(dropped(cf))),
            Err(e) => return Err(Committed::Unknown(e)),
        }
        st.install_super_version(cf);
        if consumed {
            // Published like a write: readers from now on read at `next` and see the files.
            self.last_sequence.store(next, Ordering::Release);
        }
        Ok(())
    }

    /// Flushes family `cf`'s memtables (active and frozen) if any file overlaps one of them,
    /// and waits: the files must sort above every unflushed write they overlap.
    fn flush_overlapping_memtables(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        cf: u32,
        files: &[IngestFile],
        opts: &IngestOptions,
    ) -> Result<()> {
        let f = st.family(cf).ok_or_else(|| dropped(cf))?;
        let overlap = std::iter::once(&f.mem)
            .chain(f.imms.iter())
            .any(|m| memtable_overlaps(m, files));
        if !overlap {
            return Ok(());
        }
        if !opts.allow_blocking_flush {
            return Err(Error::InvalidArgument(
                "ingest: a file overlaps writes not yet flushed, and allow_blocking_flush is \
                 false"
                    .to_string(),
            ));
        }
        // At the front of the writer queue no leader is inserting: freezing is safe.
        self.make_room_for_write(st, Some(cf))?;
        loop {
            check_open(st)?;
            if st.family(cf).ok_or_else(|| dropped(cf))?.imms.is_empty() {
                return Ok(());
            }
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            self.done_cv.wait(st);
        }
    }
}

/// An ingestion's failure, and whether its MANIFEST edit may be on disk.
enum Committed {
    No(Error),
    Unknown(Error),
}

fn check_open(st: &DbState) -> Result<()> {
    if st.closed {
        return Err(Error::Closed);
    }
    match &st.bg_error {
        Some(e) => Err(Error::poisoned(e.duplicate())),
        None => Ok(()),
    }
}

fn dropped(cf: u32) -> Error {
    Error::InvalidArgument(format!(
        "ingest: column family {cf} was dropped; nothing was ingested"
    ))
}

/// True if a key of `mem` (or any range tombstone in it) falls within some file's range.
fn memtable_overlaps(mem: &Arc<MemTable>, files: &[IngestFile]) -> bool {
    if mem.is_empty() {
        return false;
    }
    // Conservative: a range tombstone anywhere in the memtable counts as an overlap.
    if mem.range_tombstones().is_some() {
        return true;
    }
    let mut it = mem.iter();
    files.iter().any(|f| {
        it.seek(&key::make_internal_key(
            &f.smallest,
            MAX_SEQUENCE,
            KIND_FOR_SEEK,
        ));
        it.valid() && key::user_key(it.key()) <= f.largest.as_slice()
    })
}

/// The level for `f` and whether it overlaps data in the version: the deepest level where
/// it overlaps no file of that level or above and no running compaction's output range
/// (RocksDB's `AssignLevelAndSeqnoForIngestedFile`, comparing file ranges). Levels between
/// L0 and the base level (dynamic level sizes) are skipped, as RocksDB does.
fn pick_level(v: &Version, busy: &Busy, base_level: usize, f: &IngestFile) -> (usize, bool) {
    let mut target = 0;
    for level in 0..v.num_levels() {
        if level > 0 && level < base_level {
            continue;
        }
        let overlaps = v
            .level_files(level)
            .iter()
            .any(|m| f.overlaps(m.smallest.user_key(), m.largest.user_key()));
        if overlaps {
            return (target, true);
        }
        // A running compaction will write this range here; its inputs, in this level or
        // above, do not overlap the file (checked already), so its outputs hold no key of it.
        if busy.range_busy(level, &f.smallest, &f.largest) {
            break;
        }
        target = level;
    }
    (target, false)
}

/// Opens `path` as an external table and reads all of it: every block's checksum, every key.
fn inspect_file(opts: &Options, path: &Path) -> Result<IngestFile> {
    let fs: &dyn FileSystem = &*opts.fs;
    let reading = |e| Error::io(format!("reading {}", path.display()), e);
    let file = fs.open_random_access(path).map_err(reading)?;
    let file_size = file.len().map_err(reading)?;
    // The whole-file checksum the MANIFEST records: of the bytes validated below (read once
    // in order first, so the validation's reads find them cached).
    let file_checksum = crate::backup::copy::checksum(fs, path, file_size, None)?;
    let table = Table::open(file, path.to_path_buf(), 0, file_size, None).map_err(|e| match e {
        Error::Corruption { detail, .. } if detail.contains("footer names file number") => {
            Error::InvalidArgument(format!(
                "ingest: {} is a database's table, not a file written by SstFileWriter",
                path.display()
            ))
        }
        e => e,
    })?;
    let not_external =
        |why: &str| Error::InvalidArgument(format!("ingest: {} {why}", path.display()));
    match table.properties().external_file_version {
        0 => return Err(not_external("was not written by SstFileWriter")),
        EXTERNAL_FILE_VERSION => {}
        v => {
            return Err(not_external(&format!(
                "has external file version {v}, unknown here"
            )))
        }
    }
    if table.range_tombstones().is_some() {
        return Err(not_external(
            "holds range deletions, which ingestion does not support",
        ));
    }
    table.verify_checksums()?;
    let mut f = scan_keys(&Arc::new(table), path)?;
    f.file_size = file_size;
    f.file_checksum = file_checksum;
    Ok(f)
}

/// Reads every key of an external table: sequence number 0, user keys strictly ascending,
/// no blob references; the count must match the properties.
fn scan_keys(table: &Arc<Table>, path: &Path) -> Result<IngestFile> {
    let ro = BlockReadOptions {
        fill_cache: false,
        ..Default::default()
    };
    let mut it = table.iter(ro);
    it.seek_to_first();
    let mut f = IngestFile {
        external: path.to_path_buf(),
        number: 0,
        smallest: Vec::new(),
        largest: Vec::new(),
        first_kind: ValueKind::Put,
        last_kind: ValueKind::Put,
        entries: 0,
        deletions: 0,
        file_size: 0,
        file_checksum: 0,
    };
    while it.valid() {
        let p = key::parse_internal_key(it.key()).ok_or_else(|| {
            Error::corruption(path, 0, "external file holds a malformed internal key")
        })?;
        if p.sequence != 0 {
            return Err(Error::corruption(
                path,
                0,
                format!(
                    "external file holds a key with sequence number {}",
                    p.sequence
                ),
            ));
        }
        match p.kind {
            ValueKind::Put | ValueKind::Merge | ValueKind::Delete | ValueKind::SingleDelete => {}
            k => {
                return Err(Error::InvalidArgument(format!(
                    "ingest: {} holds a {k:?} entry; only puts, merges and deletions can be \
                     ingested (no blob references)",
                    path.display()
                )))
            }
        }
        if f.entries > 0 && p.user_key <= f.largest.as_slice() {
            return Err(Error::InvalidArgument(format!(
                "ingest: the keys of {} are not strictly ascending at {:?}",
                path.display(),
                String::from_utf8_lossy(p.user_key)
            )));
        }
        if f.entries == 0 {
            f.smallest = p.user_key.to_vec();
            f.first_kind = p.kind;
        }
        f.largest.clear();
        f.largest.extend_from_slice(p.user_key);
        f.last_kind = p.kind;
        f.entries += 1;
        f.deletions += u64::from(p.kind.is_deletion());
        it.next();
    }
    it.status()?;
    if f.entries == 0 || f.entries != table.properties().num_entries {
        return Err(Error::corruption(
            path,
            0,
            format!(
                "external file has {} entries but its properties say {}",
                f.entries,
                table.properties().num_entries
            ),
        ));
    }
    Ok(f)
}

/// Sorts the files by smallest key and refuses any two that overlap.
fn check_disjoint(files: &mut [IngestFile]) -> Result<()> {
    files.sort_by(|a, b| a.smallest.cmp(&b.smallest));
    for w in files.windows(2) {
        if w[0].largest >= w[1].smallest {
            return Err(Error::InvalidArgument(format!(
                "ingest: the key ranges of {} and {} overlap; files ingested together must not",
                w[0].external.display(),
                w[1].external.display()
            )));
        }
    }
    Ok(())
}
