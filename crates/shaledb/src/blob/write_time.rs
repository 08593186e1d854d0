//! Blob files written as values are written (`Options::separate_blobs_at_write`).
//!
//! Each memtable of such a family owns the blob files its references point into: the write
//! group's leader appends a large put's value to the active memtable's current file and puts
//! only the reference in the WAL and the memtable. Nothing else ever appends to these files,
//! and the memtable that owns them is the only one whose entries refer to them, so:
//!
//! - reads of the memtable's references go through the readers kept here (opened when each
//!   file was created, so they keep working whatever happens to the file's name later);
//! - the flush that writes the memtable finishes the files (footer, sync) and adds them to
//!   the MANIFEST in its own edit, counting the references it dropped as their garbage;
//! - a crash before that flush leaves files no MANIFEST lists: recovery reads the values the
//!   WAL's references point at (checking each record), the recovery flush writes them anew,
//!   and the files are deleted with the other unlisted ones.
//!
//! Durability: the leader hands a group's blob bytes to the OS before the WAL record that
//! refers to them, and syncs the files (and the directory entries of new ones) before the WAL
//! when the group or a WAL rotation syncs.

use super::format::{HEADER_LEN, RECORD_HEADER_LEN};
use super::{BlobFileBuilder, BlobFileReader, BlobRef, UnsyncedBlobFile};
use crate::compression::CompressionType;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::options::Options;
use crate::version::{filename, BlobFileAddition};
use crate::write_batch::{BatchEntry, WriteBatch};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What creating and filling a file needs from the database.
pub(crate) struct BlobFileEnv<'a> {
    pub fs: &'a Arc<dyn FileSystem>,
    pub dir: &'a Path,
    /// Hands out a new file number.
    pub new_file_number: &'a dyn Fn() -> u64,
}

/// The blob files one memtable's references point into.
pub(crate) struct WriteTimeBlobs {
    /// The family has a TTL: its puts' values end with their write time, which stays beside
    /// the reference (blob.md, "In a family with a TTL").
    ttl: bool,
    min_blob_size: u64,
    blob_file_size: u64,
    /// A file is closed and the next one started once it holds this many bytes: the write
    /// buffer's size (at most `blob_file_size`), so a memtable's values are spread over files
    /// of the size a flush would have written them in, and a file all of whose blobs were
    /// overwritten goes as a whole, as it would have.
    file_target: u64,
    compression: CompressionType,
    compression_level: Option<i32>,
    bytes_per_sync: u64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The file values are appended to.
    current: Option<BlobFileBuilder>,
    /// Files closed as they filled (synced once `closed_unsynced` is empty) or finished by
    /// the flush.
    finished: Vec<BlobFileAddition>,
    /// Files closed as they filled (footer written), not synced yet: `sync` and `finish`
    /// sync them.
    closed_unsynced: Vec<UnsyncedBlobFile>,
    /// A file was created since the directory was last synced: the directory to sync
    /// before anything durable refers to it.
    dir_unsynced: Option<(Arc<dyn FileSystem>, PathBuf)>,
    /// One reader per file, by creation order.
    readers: Vec<Arc<BlobFileReader>>,
    /// Record bytes appended to every file so far.
    bytes: u64,
    /// Something was appended to `current` since it was last synced.
    unsynced: bool,
    /// Files that could not be finished (a failed append, footer or sync): never added to
    /// the MANIFEST; the flush relocates their values (see `OutputSpec::write_time_blobs`).
    unfinished: Vec<u64>,
    /// Per file, the records (count, bytes) of write groups that failed after appending them:
    /// no entry refers to them, so the flush counts them as garbage from the start.
    orphaned: BTreeMap<u64, (u64, u64)>,
    /// The flush finished the files: nothing more may be appended.
    sealed: bool,
}

impl WriteTimeBlobs {
    /// The write-time blob files of a new memtable of a family with `opts`; `None` if the
    /// family separates values at flush.
    pub(crate) fn for_family(opts: &Options) -> Option<WriteTimeBlobs> {
        (opts.enable_blob_files && opts.separate_blobs_at_write).then(|| WriteTimeBlobs {
            ttl: opts.ttl.is_some(),
            min_blob_size: opts.min_blob_size,
            blob_file_size: opts.blob_file_size,
            file_target: opts
                .blob_file_size
                .min(opts.write_buffer_size as u64)
                .max(1),
            compression: opts.blob_compression,
            compression_level: opts.compression_level,
            bytes_per_sync: opts.bytes_per_sync,
            state: Mutex::new(State::default()),
        })
    }

    /// The value a put's stored value `stored` puts in a blob file, and the write time that
    /// stays beside its reference (in a family with a TTL); `None` if it stays inline (shorter
    /// than `min_blob_size`, or a TTL family's value without its write time).
    pub(crate) fn separable<'v>(&self, stored: &'v [u8]) -> Option<(&'v [u8], Option<u64>)> {
        let (value, write_time) = match self.ttl {
            true => crate::clock::split_stamp(stored).map(|(v, t)| (v, Some(t)))?,
            false => (stored, None),
        };
        (value.len() as u64 >= self.min_blob_size).then_some((value, write_time))
    }

    /// Appends `value` (the value of `user_key` in family `cf_id`) and returns its reference.
    /// The bytes may still be in the file's buffer: [`hand_to_os`](Self::hand_to_os) before
    /// anything that refers to them is written or published.
    pub(crate) fn add(
        &self,
        env: &BlobFileEnv<'_>,
        cf_id: u32,
        user_key: &[u8],
        value: &[u8],
    ) -> Result<BlobRef> {
        let needs_file = self.state.lock().current.is_none();
        // Taken before this memtable's lock: the number comes from under the database's
        // mutex, which is held while this lock is taken to sync (WAL rotation, close).
        let number = needs_file.then(|| (env.new_file_number)());
        let mut st = self.state.lock();
        if st.sealed {
            return Err(Error::InvalidArgument(
                "a value was written to a memtable already being flushed".to_string(),
            ));
        }
        if let (None, Some(number)) = (&st.current, number) {
            let builder = self.create_file(env, number, cf_id)?;
            st.dir_unsynced = Some((env.fs.clone(), env.dir.to_path_buf()));
            let path = filename::blob_file(env.dir, builder.number());
            let file = env.fs.open_random_access(&path).map_err(|e| {
                Error::io(format!("opening blob file {} to read", path.display()), e)
            })?;
            let reader = BlobFileReader::open_unfinished(file, path, builder.number(), u64::MAX)?;
            st.readers.push(Arc::new(reader));
            st.current = Some(builder);
        }
        let Some(builder) = st.current.as_mut() else {
            return Err(Error::InvalidArgument("no blob file open".to_string()));
        };
        let before = builder.file_size();
        let r = match builder.add(user_key, value) {
            Ok(r) => r,
            Err(e) => {
                abandon_current(&mut st);
                return Err(e);
            }
        };
        let grown = builder.file_size() - before;
        let full = builder.file_size() >= self.file_target;
        st.bytes += grown;
        st.unsynced = true;
        if full {
            close_current(&mut st)?;
        }
        Ok(r)
    }

    /// Creates a file and hands its header to the OS, so a reader can open it at once. The
    /// directory is synced by the next `sync` or `finish`, before a synced WAL record or the
    /// MANIFEST refers to the file (a sync per file made large-value fills wait on the device
    /// once per write buffer of values).
    fn create_file(
        &self,
        env: &BlobFileEnv<'_>,
        number: u64,
        cf_id: u32,
    ) -> Result<BlobFileBuilder> {
        let mut b = BlobFileBuilder::create(
            env.fs,
            env.dir,
            number,
            cf_id,
            self.compression,
            self.compression_level,
        )?;
        b.set_writeback_interval(self.bytes_per_sync);
        b.hand_to_os()?;
        Ok(b)
    }

    /// Hands what was appended to the OS (a process crash keeps it; readers see it). A file
    /// that fails is given up (`abandon_current`): what earlier groups handed over is intact.
    pub(crate) fn hand_to_os(&self) -> Result<()> {
        let mut st = self.state.lock();
        let Some(b) = st.current.as_mut() else {
            return Ok(());
        };
        let handed = b.hand_to_os();
        if handed.is_err() {
            abandon_current(&mut st);
        }
        handed
    }

    /// Notes that the write group that appended record `r` (of `user_key`) failed: nothing
    /// will refer to it.
    pub(crate) fn orphan(&self, user_key: &[u8], r: &BlobRef) {
        let mut st = self.state.lock();
        let e = st.orphaned.entry(r.file_number).or_default();
        e.0 += 1;
        e.1 += r.record_bytes(user_key);
    }

    /// The orphaned records (count, bytes) of each file that will be listed, for the flush
    /// to count as garbage.
    pub(crate) fn orphaned(&self) -> BTreeMap<u64, (u64, u64)> {
        let st = self.state.lock();
        let mut orphaned = st.orphaned.clone();
        orphaned.retain(|number, _| !st.unfinished.contains(number));
        orphaned
    }

    /// Makes what was appended durable (before a WAL that refers to it is synced); nothing
    /// to do if nothing was appended since the last time.
    pub(crate) fn sync(&self) -> Result<()> {
        let mut st = self.state.lock();
        if !st.unsynced && st.dir_unsynced.is_none() {
            return Ok(());
        }
        sync_dir(&mut st)?;
        sync_closed(&mut st)?;
        if let Some(b) = st.current.as_mut() {
            b.sync()?;
        }
        st.unsynced = false;
        Ok(())
    }

    /// Record bytes appended so far (a memtable is full once they reach `blob_file_size`).
    pub(crate) fn bytes(&self) -> u64 {
        self.state.lock().bytes
    }

    /// True once the files hold `blob_file_size` bytes: the memtable should be switched.
    pub(crate) fn is_full(&self) -> bool {
        self.bytes() >= self.blob_file_size
    }

    /// The reader of file `number`, if it is one of these.
    pub(crate) fn reader(&self, number: u64) -> Option<Arc<BlobFileReader>> {
        let st = self.state.lock();
        st.readers.iter().find(|r| r.number() == number).cloned()
    }

    /// The numbers of the files, in creation order.
    pub(crate) fn file_numbers(&self) -> Vec<u64> {
        let st = self.state.lock();
        st.readers.iter().map(|r| r.number()).collect()
    }

    /// Finishes every file (footer, sync; no more appends) and returns them for the flush's
    /// edit. Called again (a retried flush), returns the same files.
    pub(crate) fn finish(&self) -> Result<Vec<BlobFileAddition>> {
        let mut st = self.state.lock();
        st.sealed = true;
        finish_current(&mut st)?;
        sync_closed(&mut st)?;
        sync_dir(&mut st)?;
        Ok(st.finished.clone())
    }

    /// The readers of the files that could not be finished: their values are read back and
    /// written anew by the flush.
    pub(crate) fn unfinished_readers(&self) -> Vec<Arc<BlobFileReader>> {
        let st = self.state.lock();
        st.readers
            .iter()
            .filter(|r| st.unfinished.contains(&r.number()))
            .cloned()
            .collect()
    }
}

impl std::fmt::Debug for WriteTimeBlobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteTimeBlobs")
            .field("files", &self.file_numbers())
            .field("bytes", &self.bytes())
            .finish_non_exhaustive()
    }
}

/// Readers of the blob files WAL records refer to, for recovery and repair: what each
/// reference of a batch points at, so the batch can be applied with its values.
#[derive(Default)]
pub(crate) struct WalBlobReaders {
    /// Each file's reader and length.
    readers: BTreeMap<u64, (Arc<BlobFileReader>, u64)>,
    /// For a reader that writes files while it reads WALs (recovery, repair): the first file
    /// number it may hand out, above every file on disk. A reference at or above it names a
    /// blob file the power loss took; a file of that number now is one this reader wrote.
    first_new_number: Option<u64>,
}

/// Why the values of a WAL record's references could not be read.
#[derive(Debug)]
pub(crate) enum WalBlobFailure {
    /// A blob lies (partly) past the end of its file, or the file is missing: written with
    /// the record, it did not survive a power loss (neither was synced).
    Lost(String),
    /// A blob's bytes are there but wrong: damage.
    Damaged(String),
}

impl WalBlobReaders {
    /// Readers for a process that creates files numbered from `first_new_number` on while it
    /// reads the WALs (every file on disk has a lower number).
    pub(crate) fn creating_from(first_new_number: u64) -> Self {
        WalBlobReaders {
            readers: BTreeMap::new(),
            first_new_number: Some(first_new_number),
        }
    }

    /// The value each blob reference of `batch` points at (by entry; `None` for the other
    /// entries; empty if there are none), read from blob files in `dir` and checked before
    /// any entry is applied, so a batch applies whole or not at all. Only entries of the
    /// families `applied` names are read: a family that flushed this WAL (or was dropped)
    /// skips its entries, and their blob files may be long gone.
    pub(crate) fn values_of(
        &mut self,
        fs: &dyn FileSystem,
        dir: &Path,
        batch: &WriteBatch,
        applied: &dyn Fn(u32) -> bool,
    ) -> std::result::Result<Vec<Option<Vec<u8>>>, WalBlobFailure> {
        if !batch
            .iter_cf()
            .any(|(_, e)| matches!(e, BatchEntry::BlobIndex(..)))
        {
            return Ok(Vec::new());
        }
        let mut values = Vec::with_capacity(batch.len());
        for (cf, e) in batch.iter_cf() {
            let BatchEntry::BlobIndex(key, reference) = e else {
                values.push(None);
                continue;
            };
            if !applied(cf) {
                values.push(None);
                continue;
            }
            let (r, write_time) = BlobRef::decode_entry(reference).ok_or_else(|| {
                WalBlobFailure::Damaged("a blob reference does not decode".to_string())
            })?;
            let (reader, len) = self.reader(fs, dir, r.file_number)?;
            let end = (RECORD_HEADER_LEN as u64 + key.len() as u64)
                .saturating_add(r.size)
                .saturating_add(r.offset);
            if end > len {
                return Err(WalBlobFailure::Lost(format!(
                    "the blob of a reference ends at byte {end} of blob file {}, which has {len}",
                    r.file_number
                )));
            }
            let value = reader
                .read(key, &r, true)
                .map_err(|e| WalBlobFailure::Damaged(e.to_string()))?;
            // In a family with a TTL the put's stored value ends with its write time.
            values.push(Some(match write_time {
                Some(t) => crate::clock::stamp(&value, t),
                None => value,
            }));
        }
        Ok(values)
    }

    /// True if a reference read so far pointed into blob file `number`.
    pub(crate) fn has_read(&self, number: u64) -> bool {
        self.readers.contains_key(&number)
    }

    /// The reader and length of blob file `number`, opened as a file that may lack its
    /// footer.
    fn reader(
        &mut self,
        fs: &dyn FileSystem,
        dir: &Path,
        number: u64,
    ) -> std::result::Result<(Arc<BlobFileReader>, u64), WalBlobFailure> {
        if let Some(r) = self.readers.get(&number) {
            return Ok(r.clone());
        }
        let path = filename::blob_file(dir, number);
        if self.first_new_number.is_some_and(|first| number >= first) {
            return Err(WalBlobFailure::Lost(format!(
                "blob file {} was missing when the WALs were first read (its number was \
                 handed out again)",
                path.display()
            )));
        }
        let len = match fs.file_size(&path) {
            Ok(len) => len,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(WalBlobFailure::Lost(format!(
                    "blob file {} is missing",
                    path.display()
                )))
            }
            Err(e) => {
                let e = Error::io(format!("reading the size of {}", path.display()), e);
                return Err(WalBlobFailure::Damaged(e.to_string()));
            }
        };
        let opened = fs
            .open_random_access(&path)
            .map_err(|e| Error::io(format!("opening blob file {}", path.display()), e))
            .and_then(|file| BlobFileReader::open_unfinished(file, path, number, len));
        let reader = match opened {
            Ok(r) => Arc::new(r),
            // Its header never reached the disk.
            Err(e) if len < HEADER_LEN as u64 => return Err(WalBlobFailure::Lost(e.to_string())),
            Err(e) => return Err(WalBlobFailure::Damaged(e.to_string())),
        };
        self.readers.insert(number, (reader.clone(), len));
        Ok((reader, len))
    }
}

/// Gives up the file being appended to after a failed append: its tail may be torn and the
/// builder's size no longer matches the file, so nothing more is appended to it (the next
/// value starts a new file) and it is treated as unfinished: never listed, its values
/// relocated by the flush. Lets writes go on once the failure passes (a full disk).
fn abandon_current(st: &mut State) {
    if let Some(b) = st.current.take() {
        // Dropped: its buffer may still reach the file, past every record referred to.
        st.unfinished.push(b.number());
    }
}

/// Closes the file being appended to, full, without syncing it (a sync per write buffer of
/// values would make large-value fills wait on the device as often as flushes do); `sync`
/// and `finish` sync it. One that fails is remembered as unfinished, as in `finish_current`.
fn close_current(st: &mut State) -> Result<()> {
    let Some(b) = st.current.take() else {
        return Ok(());
    };
    let number = b.number();
    match b.close() {
        Ok((meta, file)) => {
            st.finished.push(BlobFileAddition::from(meta));
            st.closed_unsynced.push(file);
            Ok(())
        }
        Err(e) => {
            st.unfinished.push(number);
            Err(e)
        }
    }
}

/// Syncs the directory if a file was created in it since it was last synced.
fn sync_dir(st: &mut State) -> Result<()> {
    if let Some((fs, dir)) = &st.dir_unsynced {
        fs.sync_dir(dir)
            .map_err(|e| Error::io("syncing the database directory for a blob file", e))?;
        st.dir_unsynced = None;
    }
    Ok(())
}

/// Syncs the files closed since the last sync; one that fails stays to be synced again (the
/// error reaches the write or flush that needed it).
fn sync_closed(st: &mut State) -> Result<()> {
    while let Some(file) = st.closed_unsynced.last_mut() {
        file.sync()?;
        st.closed_unsynced.pop();
    }
    Ok(())
}

/// Finishes the file being appended to, if any. One that fails is remembered as unfinished
/// (its state unknown: it is never listed, its values are relocated by the flush).
fn finish_current(st: &mut State) -> Result<()> {
    let Some(b) = st.current.take() else {
        return Ok(());
    };
    let number = b.number();
    match b.finish().map(BlobFileAddition::from) {
        Ok(addition) => {
            st.finished.push(addition);
            Ok(())
        }
        Err(e) => {
            st.unfinished.push(number);
            Err(e)
        }
    }
}
