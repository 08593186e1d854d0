//! Writes a sorted stream of internal entries into table files: used by flushes (one L0 file)
//! and compactions (files cut at the level's target size, dropping what no reader can see).
//!
//! Outputs are synced, their directory entry is synced, and (with `Options::paranoid_checks`,
//! the default) each is reopened and its entry count checked before the caller records it in
//! the MANIFEST.

use super::blob_tally::BlobTally;
use crate::blob::{BlobFileBuilder, BlobRef};
use crate::cache::TableCache;
use crate::clock::{self, Expiry};
use crate::compaction_filter::{CompactionFilter, Decision};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{self, InternalKey, ParsedInternalKey, SequenceNumber, ValueKind};
use crate::merge::MergeOperator;
use crate::options::{Options, PrepopulateBlockCache};
use crate::range_del::FragmentedRangeTombstones;
use crate::sst::{TableBuilder, TableBuilderOptions};
use crate::version::{filename, BlobFileAddition, BlobGarbage, FileMetaData, Version, VersionEdit};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a compaction may drop.
pub(crate) struct DropPolicy {
    /// The oldest sequence number any reader can still ask for.
    pub smallest_snapshot: SequenceNumber,
    /// The version the inputs come from (to tell whether a tombstone still hides anything).
    pub version: Arc<Version>,
    /// The level being written.
    pub output_level: usize,
    /// The family's compaction filter, with the compaction's input level to tell it.
    pub filter: Option<(Arc<dyn CompactionFilter>, usize)>,
    /// The newest live snapshot: values it can see are not filtered.
    pub newest_snapshot: Option<SequenceNumber>,
    /// The family's merge operator: merge operands every reader sees are combined with it.
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// The family's TTL as of the compaction's start: expired values are removed.
    pub expiry: Option<Expiry>,
    /// A flush: the family's other L0 files may hold older versions of any key, so nothing
    /// that relies on the absence of older data is dropped (see [`DropPolicy::for_flush`]).
    pub flush: bool,
}

impl DropPolicy {
    /// What a flush may drop, as RocksDB's flush does: versions of a key that every reader
    /// sees a newer version of, a single delete with the put it deletes, and entries under a
    /// range tombstone every reader sees. No tombstone goes (older L0 files may hold what it
    /// deletes) and no sequence number is zeroed; merge operands, compaction filters and TTL
    /// expiry are left to compactions.
    pub(crate) fn for_flush(
        smallest_snapshot: SequenceNumber,
        version: Arc<Version>,
    ) -> DropPolicy {
        DropPolicy {
            smallest_snapshot,
            version,
            output_level: 0,
            filter: None,
            newest_snapshot: None,
            merge_operator: None,
            expiry: None,
            flush: true,
        }
    }

    /// No level below the output can hold `user_key` (never true for a flush).
    fn is_base_level_for_key(&self, user_key: &[u8]) -> bool {
        !self.flush
            && self
                .version
                .is_base_level_for_key(self.output_level, user_key)
    }

    /// No level below the output can hold a key of `[start, end)` (never true for a flush).
    fn is_base_level_for_range(&self, start: &[u8], end: &[u8]) -> bool {
        !self.flush
            && self
                .version
                .is_base_level_for_range(self.output_level, start, end)
    }

    /// Nothing lies below the output level (never true for a flush).
    fn nothing_below(&self) -> bool {
        !self.flush && self.version.nothing_below(self.output_level)
    }
}

/// Where and how output tables are written.
pub(crate) struct OutputSpec<'a> {
    /// The filesystem.
    pub fs: &'a Arc<dyn FileSystem>,
    /// The database directory.
    pub dir: &'a Path,
    /// The database options.
    pub opts: &'a Options,
    /// Used to reopen and check each output.
    pub tables: &'a TableCache,
    /// The level the outputs go to (chooses the codec).
    pub level: usize,
    /// The level L0 compacts into (chooses the codec with dynamic level sizes).
    pub base_level: usize,
    /// Nothing lies below `level`: `Options::bottommost_compression` applies.
    pub bottommost: bool,
    /// Files are cut once they pass this many bytes, at a user-key boundary.
    pub max_file_size: u64,
    /// A flush (not a compaction): `Options::prepopulate_block_cache` may apply.
    pub flush: bool,
    /// The column family written (recorded in blob file headers).
    pub cf_id: u32,
    /// The family's name, recorded in each table's properties with `cf_id`.
    pub cf_name: &'a str,
    /// Blob garbage collection: references into blob files numbered below `relocate_below`
    /// have their values read (from `version`) and written anew.
    pub blob_gc: Option<BlobGc<'a>>,
    /// A flush of a memtable whose values went to blob files when written: references into
    /// a file it could not finish are relocated (read through its reader, written anew).
    pub write_time_blobs: Option<&'a crate::blob::WriteTimeBlobs>,
}

/// Which blobs a compaction relocates (`Options::enable_blob_garbage_collection`).
#[derive(Clone, Copy)]
pub(crate) struct BlobGc<'a> {
    pub version: &'a Version,
    pub relocate_below: u64,
}

impl<'a> BlobGc<'a> {
    /// The blob files of `version` under `age_cutoff` (a fraction of them, oldest first);
    /// `None` if that is none.
    pub(crate) fn oldest(version: &'a Version, age_cutoff: f64) -> Option<BlobGc<'a>> {
        let files = &version.blob_files;
        let k = (files.len() as f64 * age_cutoff).floor() as usize;
        let relocate_below = match files.get(k) {
            _ if k == 0 => return None,
            Some(b) => b.meta.addition.number,
            None => u64::MAX,
        };
        Some(BlobGc {
            version,
            relocate_below,
        })
    }
}

struct Output {
    builder: TableBuilder,
    meta: FileMetaData,
    /// The last key added; becomes `meta.largest` when the output is finished (kept in one
    /// buffer rather than copied into `meta` per entry).
    largest: Vec<u8>,
    /// In a family with a TTL: the newest write time of the values added.
    newest_write_time: u64,
    /// Per blob file: the references added (count, record bytes), recorded in the table's
    /// properties so a whole-file drop can count them as garbage without reading the table.
    blob_refs: BlobTally,
}

/// What one `write_tables` call wrote: tables, the blob files their references point into
/// (finished and synced), and the blobs of input files the outputs no longer reference.
#[derive(Debug, Default)]
pub(crate) struct Written {
    pub tables: Vec<FileMetaData>,
    pub blob_files: Vec<BlobFileAddition>,
    pub blob_garbage: Vec<BlobGarbage>,
}

impl Written {
    /// Bytes of every file written.
    pub(crate) fn bytes(&self) -> u64 {
        let tables: u64 = self.tables.iter().map(|m| m.file_size).sum();
        tables + self.blob_files.iter().map(|b| b.file_size).sum::<u64>()
    }

    /// Adds the outputs to `edit`, tables at `level`.
    pub(crate) fn add_to(self, edit: &mut VersionEdit, level: usize) {
        for m in self.tables {
            edit.add_file(level, m);
        }
        edit.blob_files_added.extend(self.blob_files);
        edit.blob_garbage.extend(self.blob_garbage);
    }
}

/// Blob files being written by one `write_tables` call, and the references it read and wrote
/// per blob file (what became garbage).
#[derive(Default)]
struct BlobOutputs {
    current: Option<BlobFileBuilder>,
    done: Vec<BlobFileAddition>,
    /// Per blob file: references (count, bytes) read from the inputs, and written.
    read: BlobTally,
    written: BlobTally,
    /// A flush's blob files written with the values that it could not finish (taken once:
    /// the flush finished the others before it started), whose values it relocates.
    relocated: Vec<Arc<crate::blob::BlobFileReader>>,
    /// The last reference read, not counted yet.
    pending: PendingRead,
}

/// A blob reference read from the inputs and not counted yet. Most references are written
/// again unchanged right after they are read, and then their read and their write cancel: the
/// entry is neither counted nor decoded again (a compaction of tables of 1 KB blob values
/// spent a tenth of its time decoding and counting each reference twice).
#[derive(Default)]
struct PendingRead {
    user_key: Vec<u8>,
    entry: Vec<u8>,
    /// The reference and write time decoded from `entry`; `None`: nothing pending.
    decoded: Option<(BlobRef, Option<u64>)>,
}

impl BlobOutputs {
    /// The reader of `number` if it is a file this flush relocates.
    fn relocated_reader(&self, number: u64) -> Option<&Arc<crate::blob::BlobFileReader>> {
        self.relocated.iter().find(|r| r.number() == number)
    }

    /// Holds the reference `decoded` from `entry` (stored under `user_key`), read from the
    /// inputs, counting the one held before as read.
    fn hold_read(&mut self, user_key: &[u8], entry: &[u8], decoded: (BlobRef, Option<u64>)) {
        self.settle_pending();
        let p = &mut self.pending;
        p.user_key.clear();
        p.user_key.extend_from_slice(user_key);
        p.entry.clear();
        p.entry.extend_from_slice(entry);
        p.decoded = Some(decoded);
    }

    /// The held reference if `entry` under `user_key` is it, taken uncounted.
    fn take_pending(&mut self, user_key: &[u8], entry: &[u8]) -> Option<(BlobRef, Option<u64>)> {
        let p = &mut self.pending;
        match p.entry == entry && p.user_key == user_key {
            true => p.decoded.take(),
            false => None,
        }
    }

    /// Counts the held reference as read: its entry was not written as it was.
    fn settle_pending(&mut self) {
        if let Some((r, _)) = self.pending.decoded.take() {
            self.read
                .add(r.file_number, r.record_bytes(&self.pending.user_key));
        }
    }

    /// Garbage of each input blob file: what was read and not written again.
    fn garbage(&mut self) -> Vec<BlobGarbage> {
        self.settle_pending();
        self.read
            .sorted()
            .into_iter()
            .filter_map(|(number, (count, bytes))| {
                let (wc, wb) = self.written.get(number);
                (count > wc).then(|| BlobGarbage {
                    number,
                    count: count - wc,
                    bytes: bytes.saturating_sub(wb),
                })
            })
            .collect()
    }
}

/// Writes the entries of `input` (positioned by this function) and the range tombstones
/// `range_dels` into new tables, with values of at least `min_blob_size` in blob files when
/// the family stores values there. On error every file written is removed.
pub(crate) fn write_tables(
    spec: &OutputSpec<'_>,
    input: &mut dyn InternalIterator,
    range_dels: Option<&FragmentedRangeTombstones>,
    policy: Option<&DropPolicy>,
    new_file_number: &mut dyn FnMut() -> u64,
    shutting_down: &AtomicBool,
) -> Result<Written> {
    let all = KeyRange::default();
    write_range(
        spec,
        input,
        all,
        range_dels,
        policy,
        new_file_number,
        shutting_down,
    )
}

/// A user-key range `[lower, upper)` of a compaction (`None`: unbounded): what one
/// subcompaction writes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct KeyRange<'k> {
    pub lower: Option<&'k [u8]>,
    pub upper: Option<&'k [u8]>,
}

/// `inner` limited to the user keys of `range`: `seek_to_first` seeks to `range.lower`, and
/// it is invalid outside the range.
struct RangeInput<'i, 'k> {
    inner: &'i mut dyn InternalIterator,
    range: KeyRange<'k>,
}

impl RangeInput<'_, '_> {
    fn seek_user_key(&mut self, user_key: &[u8]) {
        self.inner.seek(&key::make_internal_key(
            user_key,
            key::MAX_SEQUENCE,
            key::KIND_FOR_SEEK,
        ));
    }
}

impl InternalIterator for RangeInput<'_, '_> {
    fn valid(&self) -> bool {
        if !self.inner.valid() {
            return false;
        }
        let user_key = key::user_key(self.inner.key());
        self.range.lower.is_none_or(|l| user_key >= l)
            && self.range.upper.is_none_or(|u| user_key < u)
    }
    fn seek_to_first(&mut self) {
        match self.range.lower {
            Some(l) => self.seek_user_key(l),
            None => self.inner.seek_to_first(),
        }
    }
    fn seek_to_last(&mut self) {
        let Some(u) = self.range.upper else {
            return self.inner.seek_to_last();
        };
        self.seek_user_key(u);
        match self.inner.valid() {
            true => self.inner.prev(),
            false => self.inner.seek_to_last(),
        }
    }
    fn seek(&mut self, target: &[u8]) {
        match self.range.lower {
            Some(l) if key::user_key(target) < l => self.seek_user_key(l),
            _ => self.inner.seek(target),
        }
    }
    fn next(&mut self) {
        self.inner.next();
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
    fn pinned_value(&self) -> Option<crate::Value> {
        self.inner.pinned_value()
    }
    fn status(&self) -> Result<()> {
        self.inner.status()
    }
}

/// [`write_tables`] for the entries of `input` in `range` alone, and the range tombstones
/// clipped to it: one subcompaction.
pub(crate) fn write_range(
    spec: &OutputSpec<'_>,
    input: &mut dyn InternalIterator,
    range: KeyRange<'_>,
    range_dels: Option<&FragmentedRangeTombstones>,
    policy: Option<&DropPolicy>,
    new_file_number: &mut dyn FnMut() -> u64,
    shutting_down: &AtomicBool,
) -> Result<Written> {
    let mut bounded;
    let input: &mut dyn InternalIterator = match (range.lower, range.upper) {
        (None, None) => input,
        _ => {
            bounded = RangeInput {
                inner: input,
                range,
            };
            &mut bounded
        }
    };
    let mut done: Vec<FileMetaData> = Vec::new();
    let mut current: Option<Output> = None;
    let mut blobs = match spec.write_time_blobs {
        Some(w) => BlobOutputs {
            // Its files may hold records of write groups that failed: no reference will
            // count them, so they are garbage from the start.
            read: BlobTally::from_counts(w.orphaned()),
            relocated: w.unfinished_readers(),
            ..Default::default()
        },
        None => BlobOutputs::default(),
    };
    let res = write_inner(
        spec,
        input,
        range,
        range_dels,
        policy,
        new_file_number,
        shutting_down,
        &mut done,
        &mut current,
        &mut blobs,
    );
    if let Err(e) = res {
        if let Some(o) = current.take() {
            o.builder.abandon();
            spec.tables.evict(o.meta.number);
            let _ = spec
                .fs
                .remove_file(&filename::table_file(spec.dir, o.meta.number));
        }
        for f in &done {
            spec.tables.evict(f.number);
            let _ = spec
                .fs
                .remove_file(&filename::table_file(spec.dir, f.number));
        }
        let unfinished = blobs.current.take().map(|b| b.number());
        for n in blobs.done.iter().map(|b| b.number).chain(unfinished) {
            let _ = spec.fs.remove_file(&filename::blob_file(spec.dir, n));
        }
        return Err(e);
    }
    let blob_garbage = blobs.garbage();
    Ok(Written {
        tables: done,
        blob_files: blobs.done,
        blob_garbage,
    })
}

#[allow(clippy::too_many_arguments)]
fn write_inner(
    spec: &OutputSpec<'_>,
    input: &mut dyn InternalIterator,
    range: KeyRange<'_>,
    range_dels: Option<&FragmentedRangeTombstones>,
    policy: Option<&DropPolicy>,
    new_file_number: &mut dyn FnMut() -> u64,
    shutting_down: &AtomicBool,
    done: &mut Vec<FileMetaData>,
    current: &mut Option<Output>,
    blobs: &mut BlobOutputs,
) -> Result<()> {
    let mut keys = KeyTracker {
        // Without tombstones nothing is asked per entry (an empty set still cost each entry
        // a search: 3% of a blob fill's background time).
        range_dels: range_dels.filter(|t| !t.is_empty()),
        ..KeyTracker::default()
    };
    let mut counter = 0u32;
    let mut out = Outputs {
        spec,
        new_file_number,
        done,
        current,
        range_dels: tombstones_to_keep(range_dels, policy),
        lower: range.lower.map(<[u8]>::to_vec),
        upper: range.upper,
        blobs,
        blob_entry: Default::default(),
    };
    input.seek_to_first();
    while input.valid() {
        counter = counter.wrapping_add(1);
        if counter.is_multiple_of(1024) && shutting_down.load(Ordering::Relaxed) {
            return Err(Error::Closed);
        }
        let ikey = input.key();
        // Table blocks reject malformed keys with their file and offset before they get here
        // (sst/block.rs); this guards inputs that carry no file (memtables, tests).
        let p = key::parse_internal_key(ikey).ok_or_else(|| {
            Error::corruption(
                spec.dir,
                0,
                "compaction input holds an unparseable internal key",
            )
        })?;
        if p.kind == ValueKind::BlobIndex {
            out.read_blob_reference(p.user_key, input.value())?;
        }
        let (new_user_key, drop) = keys.observe(&p, policy);
        let drop = drop || keys.deleted_for_every_reader(&p, policy);
        if new_user_key {
            // Cut only between user keys so one key's versions never span two files of a level.
            out.cut_if_full(p.user_key)?;
        }
        if let (false, ValueKind::SingleDelete, Some(policy)) = (drop, p.kind, policy) {
            if p.sequence <= policy.smallest_snapshot {
                let (sequence, kind) = (p.sequence, p.kind);
                let tombstone = ikey.to_vec();
                input.next();
                if let Some(n) = input
                    .valid()
                    .then(|| key::parse_internal_key(input.key()))
                    .flatten()
                    .filter(|n| {
                        n.kind == ValueKind::BlobIndex && n.user_key == keys.current_user_key
                    })
                {
                    // The put a single delete may take with it: its blob is read too.
                    out.read_blob_reference(n.user_key, input.value())?;
                }
                if !keys.single_delete_vanishes(input, policy) {
                    out.add(&tombstone, &[], sequence, kind)?;
                }
                continue;
            }
        }
        if let (false, ValueKind::Merge, Some(policy)) = (drop, p.kind, policy) {
            if p.sequence <= policy.smallest_snapshot && policy.merge_operator.is_some() {
                let (user_key, sequence) = (p.user_key.to_vec(), p.sequence);
                keys.collapse_merges(input, policy, &user_key, sequence, &mut out)?;
                continue;
            }
        }
        if let (false, true, Some(policy)) = (drop, new_user_key, policy) {
            if filter_newest_value(spec, policy, &p, input.value(), &mut out)? {
                input.next();
                continue;
            }
        }
        if !drop && keys.zero_sequence(&p, policy) {
            out.add(&keys.zeroed_key, input.value(), 0, p.kind)?;
        } else if !drop {
            out.add(ikey, input.value(), p.sequence, p.kind)?;
        }
        input.next();
    }
    input.status()?;
    out.finish_last()?;
    if !out.done.is_empty() {
        spec.fs
            .sync_dir(spec.dir)
            .map_err(|e| Error::io("syncing the database directory", e))?;
    }
    Ok(())
}

/// At a key's newest entry `p` (stored value `stored`): TTL expiry and the compaction filter
/// for a put; for a blob reference, expiry by the write time beside the reference (the blob
/// is not read), then the filter on the value read from its blob file (kept, the reference
/// stays). Returns true if what to write was written (see [`filter_value`]).
fn filter_newest_value(
    spec: &OutputSpec<'_>,
    policy: &DropPolicy,
    p: &ParsedInternalKey<'_>,
    stored: &[u8],
    out: &mut Outputs<'_, '_>,
) -> Result<bool> {
    if p.kind == ValueKind::Put {
        return filter_value(policy, p, stored, out);
    }
    if p.kind != ValueKind::BlobIndex {
        return Ok(false);
    }
    let filtered = policy.filter.is_some() && policy.newest_snapshot.is_none_or(|s| p.sequence > s);
    if policy.expiry.is_none() && !filtered {
        // Nothing to decide: the reference is not decoded here (once per entry is enough).
        return Ok(false);
    }
    let (_, write_time) = decode_entry(spec, p.user_key, stored)?;
    if let Some(expiry) = policy.expiry {
        let t = write_time.ok_or_else(|| {
            Error::corruption(
                "<compaction input>",
                0,
                "a blob reference of a family with a ttl lacks its write time",
            )
        })?;
        if expiry.expired(t) {
            // Its blob record becomes garbage: the reference is read and not written.
            remove_value(policy, p, out)?;
            return Ok(true);
        }
    }
    if !filtered {
        return Ok(false);
    }
    let value = read_input_blob(spec, &policy.version, p.user_key, stored)?;
    let value = match write_time {
        Some(t) => clock::stamp(&value, t),
        None => value,
    };
    filter_value(policy, p, &value, out)
}

/// Writes entries read ahead as they were.
fn write_unchanged(
    out: &mut Outputs<'_, '_>,
    entries: &[(Vec<u8>, Vec<u8>, SequenceNumber, ValueKind)],
) -> Result<()> {
    for (ikey, value, sequence, kind) in entries {
        out.add(ikey, value, *sequence, *kind)?;
    }
    Ok(())
}

/// At a key's newest value (the put `p`, stored as `value`): removes it if it expired (a
/// family with a TTL), else runs the compaction filter if no snapshot can see it. Returns true
/// if the entry was removed or changed (what to write is written), false if it is to be written
/// as it is.
fn filter_value(
    policy: &DropPolicy,
    p: &ParsedInternalKey<'_>,
    value: &[u8],
    out: &mut Outputs<'_, '_>,
) -> Result<bool> {
    let (value, write_time) = match policy.expiry {
        Some(expiry) => {
            let (v, t) = clock::split_stamp(value).ok_or_else(|| {
                Error::corruption(
                    "<compaction input>",
                    0,
                    "a value of a family with a ttl lacks its write time",
                )
            })?;
            if expiry.expired(t) {
                // Every reader sees an expired value as deleted, whatever its snapshot.
                remove_value(policy, p, out)?;
                return Ok(true);
            }
            (v, Some(t))
        }
        None => (value, None),
    };
    let Some((filter, level)) = &policy.filter else {
        return Ok(false);
    };
    if policy.newest_snapshot.is_some_and(|s| p.sequence <= s) {
        return Ok(false);
    }
    match filter.filter(*level, p.user_key, value) {
        Decision::Keep => Ok(false),
        Decision::Change(v) => {
            // The new value keeps the old one's write time.
            let stored = match write_time {
                Some(t) => clock::stamp(&v, t),
                None => v,
            };
            let ikey = key::make_internal_key(p.user_key, p.sequence, ValueKind::Put);
            out.add(&ikey, &stored, p.sequence, ValueKind::Put)?;
            Ok(true)
        }
        Decision::Remove => {
            remove_value(policy, p, out)?;
            Ok(true)
        }
    }
}

/// Removes a key's newest value (the put `p`): a tombstone in its place hides older versions
/// below; at the key's base level, with no snapshot older than it, there are none and nothing
/// is written.
fn remove_value(
    policy: &DropPolicy,
    p: &ParsedInternalKey<'_>,
    out: &mut Outputs<'_, '_>,
) -> Result<()> {
    let base = p.sequence <= policy.smallest_snapshot && policy.is_base_level_for_key(p.user_key);
    if !base {
        let ikey = key::make_internal_key(p.user_key, p.sequence, ValueKind::Delete);
        out.add(&ikey, &[], p.sequence, ValueKind::Delete)?;
    }
    Ok(())
}

/// The output tables of one `write_tables` call: the finished ones and the one being written.
struct Outputs<'a, 'b> {
    spec: &'a OutputSpec<'a>,
    new_file_number: &'b mut dyn FnMut() -> u64,
    done: &'b mut Vec<FileMetaData>,
    current: &'b mut Option<Output>,
    /// The range tombstones the outputs keep; each output gets the part in its key range.
    range_dels: FragmentedRangeTombstones,
    /// The user key the current output's range starts at (`None`: the first output of an
    /// unbounded range).
    lower: Option<Vec<u8>>,
    /// Where the last output's range ends (`None`: unbounded).
    upper: Option<&'a [u8]>,
    blobs: &'b mut BlobOutputs,
    /// The internal key and reference of the last value moved to a blob file, kept to be
    /// reused: a flush of 1 KB values allocated both for every entry.
    blob_entry: (Vec<u8>, Vec<u8>),
}

impl Outputs<'_, '_> {
    /// Before the first entry of `next_user_key`: finishes the current output if it reached
    /// the target size. Its range (and its share of the range tombstones) ends there.
    fn cut_if_full(&mut self, next_user_key: &[u8]) -> Result<()> {
        let full = self
            .current
            .as_ref()
            .is_some_and(|o| o.builder.file_size() >= self.spec.max_file_size);
        if full {
            if let Some(o) = self.current.take() {
                let t = self
                    .range_dels
                    .clipped(self.lower.as_deref(), Some(next_user_key));
                self.done.push(finish_output(self.spec, o, t)?);
                self.lower = Some(next_user_key.to_vec());
            }
        }
        Ok(())
    }

    /// Finishes the last output with the rest of the range tombstones, opening one for them
    /// if every entry was dropped.
    fn finish_last(&mut self) -> Result<()> {
        let t = self.range_dels.clipped(self.lower.as_deref(), self.upper);
        if self.current.is_none() && !t.is_empty() {
            *self.current = Some(open_output(self.spec, (self.new_file_number)())?);
        }
        if let Some(o) = self.current.take() {
            self.done.push(finish_output(self.spec, o, t)?);
        }
        if let Some(b) = self.blobs.current.take() {
            self.blobs.done.push(finish_blob_file(b)?);
        }
        Ok(())
    }

    /// Counts a blob reference read from the inputs (stored under `user_key`): held until
    /// it is known whether it is written again unchanged (`BlobOutputs::hold_read`).
    fn read_blob_reference(&mut self, user_key: &[u8], reference: &[u8]) -> Result<()> {
        let decoded = decode_entry(self.spec, user_key, reference)?;
        if self.blobs.relocated_reader(decoded.0.file_number).is_some() {
            // Relocated, and its file never listed: no garbage to count.
            return Ok(());
        }
        self.blobs.hold_read(user_key, reference, decoded);
        Ok(())
    }

    /// Appends one entry, with a put's value moved to a blob file if the family stores
    /// values of its size there.
    fn add(&mut self, ikey: &[u8], value: &[u8], sequence: u64, kind: ValueKind) -> Result<()> {
        let opts = self.spec.opts;
        let user_key = key::user_key(ikey);
        match kind {
            ValueKind::Put if opts.enable_blob_files => {
                // In a family with a TTL the write time stays in the table, beside the
                // reference, so expiry is decided without reading the blob.
                let (user_value, write_time) = match opts.ttl {
                    Some(_) => clock::split_stamp(value)
                        .map(|(v, t)| (v, Some(t)))
                        .ok_or_else(|| {
                            Error::corruption(
                                "<compaction input>",
                                0,
                                "a value of a family with a ttl lacks its write time",
                            )
                        })?,
                    None => (value, None),
                };
                if (user_value.len() as u64) < opts.min_blob_size {
                    return self.add_entry(ikey, value, sequence, kind);
                }
                let r = self.blob_builder()?.add(user_key, user_value)?;
                let (mut blob_key, mut reference) = std::mem::take(&mut self.blob_entry);
                reference.clear();
                r.encode_entry_to(write_time, &mut reference);
                blob_key.clear();
                key::append_internal_key(&mut blob_key, user_key, sequence, ValueKind::BlobIndex);
                let added = self.add_entry(&blob_key, &reference, sequence, ValueKind::BlobIndex);
                self.blob_entry = (blob_key, reference);
                added?;
                self.note_reference(user_key, &r);
                if self
                    .blobs
                    .current
                    .as_ref()
                    .is_some_and(|b| b.file_size() >= opts.blob_file_size)
                {
                    if let Some(b) = self.blobs.current.take() {
                        self.blobs.done.push(finish_blob_file(b)?);
                    }
                }
                Ok(())
            }
            ValueKind::BlobIndex => {
                // The reference just read, if it is this one: its read is not counted yet.
                let held = self.blobs.take_pending(user_key, value);
                let (r, write_time) = match held {
                    Some(decoded) => decoded,
                    None => decode_entry(self.spec, user_key, value)?,
                };
                if let Some(reader) = self.blobs.relocated_reader(r.file_number).cloned() {
                    let value = reader.read(user_key, &r, true)?;
                    let value = match write_time {
                        Some(t) => clock::stamp(&value, t),
                        None => value,
                    };
                    let put_key = key::make_internal_key(user_key, sequence, ValueKind::Put);
                    return self.add(&put_key, &value, sequence, ValueKind::Put);
                }
                if let Some(gc) = self
                    .spec
                    .blob_gc
                    .filter(|g| r.file_number < g.relocate_below)
                {
                    // Relocated: the value goes where a put of it would (a new blob file, or
                    // the table if it is now below min_blob_size or blobs are off), and its
                    // record here is garbage.
                    if held.is_some() {
                        self.blobs.read.add(r.file_number, r.record_bytes(user_key));
                    }
                    let spec = self.spec;
                    let value = gc.version.read_blob(
                        spec.tables,
                        user_key,
                        &r,
                        COMPACTION_BLOB_READS,
                        None,
                    )?;
                    let value = match write_time {
                        Some(t) => clock::stamp(&value, t),
                        None => value,
                    };
                    let put_key = key::make_internal_key(user_key, sequence, ValueKind::Put);
                    return self.add(&put_key, &value, sequence, ValueKind::Put);
                }
                self.add_entry(ikey, value, sequence, kind)?;
                self.note_reference(user_key, &r);
                if held.is_none() {
                    // Not the reference read last, so its read was counted: count it written
                    // again. Every path writes a kept reference right after reading it today;
                    // this keeps the counts right should one not.
                    self.blobs
                        .written
                        .add(r.file_number, r.record_bytes(user_key));
                }
                Ok(())
            }
            _ => self.add_entry(ikey, value, sequence, kind),
        }
    }

    /// Records that the current output references `r`'s blob file (stored under `user_key`).
    fn note_reference(&mut self, user_key: &[u8], r: &BlobRef) {
        // The output's `meta.blob_files` are these files, listed when it is finished.
        if let Some(o) = self.current.as_mut() {
            o.blob_refs.add(r.file_number, r.record_bytes(user_key));
        }
    }

    /// The blob file being written, opened if there is none.
    fn blob_builder(&mut self) -> Result<&mut BlobFileBuilder> {
        if self.blobs.current.is_none() {
            let number = (self.new_file_number)();
            let spec = self.spec;
            let mut builder = BlobFileBuilder::create(
                spec.fs,
                spec.dir,
                number,
                spec.cf_id,
                spec.opts.blob_compression,
                spec.opts.compression_level,
            )?;
            builder.set_writeback_interval(spec.opts.bytes_per_sync);
            self.blobs.current = Some(builder);
        }
        self.blobs
            .current
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument("no blob file open".into()))
    }

    /// Appends one entry (internal key `ikey` with this sequence number and kind) to the
    /// current output, opening one if needed.
    fn add_entry(
        &mut self,
        ikey: &[u8],
        value: &[u8],
        sequence: u64,
        kind: ValueKind,
    ) -> Result<()> {
        if self.current.is_none() {
            *self.current = Some(open_output(self.spec, (self.new_file_number)())?);
        }
        let Some(o) = self.current.as_mut() else {
            return Ok(());
        };
        o.builder.add(ikey, value)?;
        if matches!(kind, ValueKind::Put | ValueKind::BlobIndex) && self.spec.opts.ttl.is_some() {
            if let Some((_, t)) = clock::split_stamp(value) {
                o.newest_write_time = o.newest_write_time.max(t);
            }
        }
        let m = &mut o.meta;
        if m.num_entries == 0 {
            m.smallest = InternalKey(ikey.to_vec());
        }
        o.largest.clear();
        o.largest.extend_from_slice(ikey);
        m.smallest_seqno = m.smallest_seqno.min(sequence);
        m.largest_seqno = m.largest_seqno.max(sequence);
        m.num_entries += 1;
        if kind.is_deletion() {
            m.num_deletions += 1;
        }
        Ok(())
    }
}

/// Follows the merged input one entry at a time (user keys ascending, each key's versions
/// newest first) and decides what the output keeps.
#[derive(Default)]
struct KeyTracker<'r> {
    /// The inputs' range tombstones.
    range_dels: Option<&'r FragmentedRangeTombstones>,
    /// The current user key (its buffer reused from key to key); meaningless until `started`.
    current_user_key: Vec<u8>,
    started: bool,
    /// Sequence number of the newest put or delete of the current user key seen so far (MAX
    /// at a new key). Merge operands do not count: they need what is below them.
    last_sequence_for_key: SequenceNumber,
    /// Nothing lies below the output level (decided at the first entry that asks).
    bottommost: Option<bool>,
    /// The key `zero_sequence` approved, with sequence number 0.
    zeroed_key: Vec<u8>,
}

impl KeyTracker<'_> {
    /// True if a range tombstone every reader sees deletes the entry.
    fn deleted_for_every_reader(
        &self,
        p: &ParsedInternalKey<'_>,
        policy: Option<&DropPolicy>,
    ) -> bool {
        match (self.range_dels, policy) {
            (Some(t), Some(policy)) => {
                t.max_covering_seq(p.user_key, policy.smallest_snapshot) > p.sequence
            }
            _ => false,
        }
    }

    /// True if the put `p`, about to be written, can be written with sequence number 0 (left
    /// in `zeroed_key`), as RocksDB does at the bottommost level: identical trailers compress
    /// better. That needs every reader to see `p` (at or below the oldest snapshot; then every
    /// older version of its key is dropped after it, so it is the key's last entry), nothing
    /// below the output level, and no range tombstone in the inputs covering the key (one
    /// older than `p` would cover it once its number is 0; tombstones elsewhere that cover
    /// the key are newer than `p`, since a key never moves below an older tombstone over it).
    fn zero_sequence(&mut self, p: &ParsedInternalKey<'_>, policy: Option<&DropPolicy>) -> bool {
        let Some(policy) = policy else {
            return false;
        };
        let value_kind = matches!(p.kind, ValueKind::Put | ValueKind::BlobIndex);
        if !value_kind || p.sequence == 0 || p.sequence > policy.smallest_snapshot {
            return false;
        }
        let bottommost = *self
            .bottommost
            .get_or_insert_with(|| policy.nothing_below());
        if !bottommost
            || self
                .range_dels
                .is_some_and(|t| t.max_covering_seq(p.user_key, key::MAX_SEQUENCE) > 0)
        {
            return false;
        }
        self.zeroed_key.clear();
        key::append_internal_key(&mut self.zeroed_key, p.user_key, 0, p.kind);
        true
    }

    /// Returns (this entry starts a new user key, the output drops this entry).
    fn observe(&mut self, p: &ParsedInternalKey<'_>, policy: Option<&DropPolicy>) -> (bool, bool) {
        let new_user_key = !self.started || self.current_user_key != p.user_key;
        if new_user_key {
            self.started = true;
            self.current_user_key.clear();
            self.current_user_key.extend_from_slice(p.user_key);
            self.last_sequence_for_key = SequenceNumber::MAX;
        }
        let Some(policy) = policy else {
            return (new_user_key, false);
        };
        let drop = if p.kind == ValueKind::SingleDelete && p.sequence <= policy.smallest_snapshot {
            // Never dropped as hidden, as in RocksDB: it pairs with one put, which may lie
            // below the output level, while the newer version that hides it here may be a
            // put its own single delete takes away (now or in a later compaction), which would
            // bring the older put back. `single_delete_vanishes` decides.
            false
        } else if self.last_sequence_for_key <= policy.smallest_snapshot {
            // A newer version of this key is visible to every reader.
            true
        } else {
            // Nothing below can hold an older version for this tombstone to hide. (A single
            // delete every reader sees is decided by `single_delete_vanishes`.)
            p.kind == ValueKind::Delete
                && p.sequence <= policy.smallest_snapshot
                && policy.is_base_level_for_key(p.user_key)
        };
        if p.kind != ValueKind::Merge {
            self.last_sequence_for_key = p.sequence;
        }
        (new_user_key, drop)
    }

    /// At a merge operand every reader sees (sequence `newest`, the input on it): reads the
    /// key's operands below it down to a put or delete (both below every snapshot too, so no
    /// reader can tell them apart from their merge) and writes one put with the merged value
    /// (RocksDB's MergeHelper). Without a base and above the key's base level, operands are
    /// combined with `partial_merge` where the operator can. If the operator fails, the
    /// entries are written as they were. Leaves the input on the next key's first entry.
    fn collapse_merges(
        &mut self,
        input: &mut dyn InternalIterator,
        policy: &DropPolicy,
        user_key: &[u8],
        newest: SequenceNumber,
        out: &mut Outputs<'_, '_>,
    ) -> Result<()> {
        let mut entries: Vec<(Vec<u8>, Vec<u8>, SequenceNumber, ValueKind)> = Vec::new();
        let mut base: Option<Option<usize>> = None; // Some(None): deleted; Some(Some(i)): put
        while input.valid() {
            let Some(n) = key::parse_internal_key(input.key()) else {
                break; // the main loop reports it
            };
            if n.user_key != user_key {
                break;
            }
            if self.deleted_for_every_reader(&n, Some(policy)) {
                // A range tombstone deletes it and all below: the operands have no base.
                base = Some(None);
                break;
            }
            let (sequence, kind) = (n.sequence, n.kind);
            if kind == ValueKind::BlobIndex {
                out.read_blob_reference(n.user_key, input.value())?;
            }
            entries.push((input.key().to_vec(), input.value().to_vec(), sequence, kind));
            input.next();
            match kind {
                ValueKind::Merge => {}
                ValueKind::Put | ValueKind::BlobIndex => {
                    base = Some(Some(entries.len() - 1));
                    break;
                }
                ValueKind::Delete | ValueKind::SingleDelete | ValueKind::RangeDeletion => {
                    base = Some(None);
                    break;
                }
            }
        }
        // Whatever is older than what was read is hidden from every reader.
        self.last_sequence_for_key = newest;
        let Some(op) = policy.merge_operator.as_deref() else {
            return write_unchanged(out, &entries);
        };
        let operands: Vec<&[u8]> = entries
            .iter()
            .filter(|e| e.3 == ValueKind::Merge)
            .rev()
            .map(|e| e.1.as_slice())
            .collect();
        let base = match base {
            Some(b) => Some(b),
            None if policy.is_base_level_for_key(user_key) => Some(None),
            None => None,
        };
        if let Some(base) = base {
            let base_entry = base.and_then(|i| entries.get(i));
            let blob_value = match base_entry {
                Some(e) if e.3 == ValueKind::BlobIndex => {
                    Some(read_input_blob(out.spec, &policy.version, user_key, &e.1)?)
                }
                _ => None,
            };
            let existing = blob_value.as_deref().or(base_entry.map(|e| e.1.as_slice()));
            if let Some(v) = op.full_merge(user_key, existing, &operands) {
                let ikey = key::make_internal_key(user_key, newest, ValueKind::Put);
                return out.add(&ikey, &v, newest, ValueKind::Put);
            }
            return write_unchanged(out, &entries);
        }
        // No base: fold the operands, oldest first, into one.
        let mut acc = operands.first().map(|o| o.to_vec());
        for right in operands.iter().skip(1) {
            acc = acc.and_then(|left| op.partial_merge(user_key, &left, right));
        }
        match acc {
            Some(v) => {
                let ikey = key::make_internal_key(user_key, newest, ValueKind::Merge);
                out.add(&ikey, &v, newest, ValueKind::Merge)
            }
            None => write_unchanged(out, &entries),
        }
    }

    /// For a single delete every reader sees (the input now past it): if the next entry is
    /// the put it deletes, both vanish (the input moves past the put, which still hides
    /// whatever is older); otherwise the tombstone vanishes alone when nothing below the output
    /// level can hold the key. Returns whether the tombstone vanishes.
    fn single_delete_vanishes(
        &mut self,
        input: &mut dyn InternalIterator,
        policy: &DropPolicy,
    ) -> bool {
        let put_below = input
            .valid()
            .then(|| key::parse_internal_key(input.key()))
            .flatten()
            .filter(|n| {
                n.user_key == self.current_user_key.as_slice()
                    && matches!(n.kind, ValueKind::Put | ValueKind::BlobIndex)
            })
            .map(|n| n.sequence);
        if let Some(seq) = put_below {
            self.last_sequence_for_key = seq;
            input.next();
            return true;
        }
        policy.is_base_level_for_key(&self.current_user_key)
    }
}

/// Compactions read blobs checked and around the cache (RocksDB's compactions do not fill
/// the blob cache either).
const COMPACTION_BLOB_READS: crate::version::BlobReadOptions<'static> =
    crate::version::BlobReadOptions {
        verify_checksums: true,
        cache: None,
        fill_cache: false,
    };

/// The value an input's blob reference points at (a merge base, or a value for the
/// compaction filter), read from the blob files of the compaction's version.
fn read_input_blob(
    spec: &OutputSpec<'_>,
    version: &Version,
    user_key: &[u8],
    reference: &[u8],
) -> Result<Vec<u8>> {
    let r = decode_reference(spec, user_key, reference)?;
    version.read_blob(spec.tables, user_key, &r, COMPACTION_BLOB_READS, None)
}

/// Decodes a blob reference read from the inputs; corruption if it does not decode.
fn decode_reference(spec: &OutputSpec<'_>, user_key: &[u8], reference: &[u8]) -> Result<BlobRef> {
    crate::db::decode_blob_ref(spec.dir, user_key, reference)
}

/// Decodes a `BlobIndex` entry read from the inputs: its reference, and its write time (in a
/// family with a TTL; carried along as it is, like a put's stored value).
fn decode_entry(
    spec: &OutputSpec<'_>,
    user_key: &[u8],
    entry: &[u8],
) -> Result<(BlobRef, Option<u64>)> {
    crate::db::decode_blob_entry(spec.dir, user_key, entry)
}

/// Finishes a blob file (footer, sync) and describes it for the MANIFEST.
fn finish_blob_file(b: BlobFileBuilder) -> Result<BlobFileAddition> {
    b.finish().map(BlobFileAddition::from)
}

fn open_output(spec: &OutputSpec<'_>, number: u64) -> Result<Output> {
    let path = filename::table_file(spec.dir, number);
    let mut file = match spec.opts.use_direct_io_for_flush_and_compaction {
        true => spec.fs.create_direct(&path),
        false => spec.fs.create(&path),
    }
    .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    file.set_writeback_interval(spec.opts.bytes_per_sync);
    let opts = TableBuilderOptions {
        block_size: spec.opts.block_size,
        restart_interval: spec.opts.block_restart_interval,
        bloom_bits_per_key: spec.opts.bloom_bits_per_key,
        compression: spec
            .opts
            .codec_for_output(spec.level, spec.base_level, spec.bottommost),
        compression_level: spec.opts.compression_level,
        compress_blob_reference_blocks: spec.opts.compress_blob_reference_blocks,
        prefix_extractor: spec.opts.prefix_extractor.clone(),
        partition_index: spec.opts.index_type == crate::IndexType::TwoLevel,
        partition_filters: spec.opts.partition_filters,
        metadata_block_size: spec.opts.metadata_block_size,
        index_restart_interval: spec.opts.index_block_restart_interval,
        legacy_format: false,
        data_block_hash_ratio: spec.opts.data_block_hash_ratio(),
    };
    let mut builder = TableBuilder::new(opts, file, path, number)
        .with_dictionary(spec.opts.max_dict_bytes, spec.opts.zstd_max_train_bytes);
    builder.set_column_family(spec.cf_id, spec.cf_name);
    if spec.flush && spec.opts.prepopulate_block_cache == PrepopulateBlockCache::FlushOnly {
        let (cache, cache_id) = spec.tables.reserve_cache_id(number);
        builder = builder.warm_cache(cache, cache_id);
    }
    Ok(Output {
        builder,
        meta: FileMetaData {
            number,
            file_size: 0,
            smallest: InternalKey::default(),
            largest: InternalKey::default(),
            smallest_seqno: SequenceNumber::MAX,
            largest_seqno: 0,
            num_entries: 0,
            num_deletions: 0,
            num_range_deletions: 0,
            blob_files: Vec::new(),
            global_seqno: None,
            file_checksum: None,
            open_table: Default::default(),
            seeks: Default::default(),
        },
        largest: Vec::new(),
        newest_write_time: 0,
        blob_refs: BlobTally::default(),
    })
}

/// The range tombstones a write keeps: all of them in a flush; in a compaction, per fragment,
/// those some reader may still need: every one newer than the oldest snapshot, and the newest
/// of the others unless nothing below the output level can hold a key they delete.
fn tombstones_to_keep(
    range_dels: Option<&FragmentedRangeTombstones>,
    policy: Option<&DropPolicy>,
) -> FragmentedRangeTombstones {
    let mut t = range_dels.cloned().unwrap_or_default();
    if let Some(policy) = policy {
        let oldest = policy.smallest_snapshot;
        t.retain(|f, seq| {
            if seq > oldest {
                return true;
            }
            // Seen by every reader: an older one under it hides nothing more.
            let newest_seen_by_all = f.seqs.iter().copied().find(|&s| s <= oldest);
            newest_seen_by_all == Some(seq) && !policy.is_base_level_for_range(&f.start, &f.end)
        });
    }
    t
}

/// An output's references per blob file as its table records them.
fn blob_references(refs: &BlobTally) -> Vec<crate::sst::BlobReferences> {
    let reference = |(file_number, (count, bytes)): (u64, (u64, u64))| crate::sst::BlobReferences {
        file_number,
        count,
        bytes,
    };
    refs.sorted().into_iter().map(reference).collect()
}

fn finish_output(
    spec: &OutputSpec<'_>,
    o: Output,
    range_dels: FragmentedRangeTombstones,
) -> Result<FileMetaData> {
    let mut meta = o.meta;
    let mut builder = o.builder;
    meta.largest = InternalKey(o.largest);
    if o.newest_write_time > 0 {
        builder.set_newest_write_time(o.newest_write_time);
    }
    let references = blob_references(&o.blob_refs);
    meta.blob_files = references.iter().map(|r| r.file_number).collect();
    builder.set_blob_references(references);
    if let (Some(small), Some(large), Some((min_seq, max_seq))) = (
        range_dels.smallest_key(),
        range_dels.largest_key(),
        range_dels.seq_range(),
    ) {
        // The file's key range covers its tombstones too, so reads and compactions that
        // overlap a tombstone find the file.
        if meta.num_entries == 0 || small < meta.smallest {
            meta.smallest = small;
        }
        if meta.num_entries == 0 || large > meta.largest {
            meta.largest = large;
        }
        meta.smallest_seqno = meta.smallest_seqno.min(min_seq);
        meta.largest_seqno = meta.largest_seqno.max(max_seq);
        meta.num_range_deletions = range_dels.num_entries();
        builder.set_range_tombstones(range_dels);
    }
    let (props, crc) = builder.finish_with_checksum()?;
    meta.file_size = props.file_size;
    meta.file_checksum = Some(crc);
    if !spec.opts.paranoid_checks {
        return Ok(meta);
    }
    // paranoid_checks: read the new table back (footer, index, filter, properties, all
    // checksummed) before anything refers to it.
    let table = spec.tables.get(&meta)?;
    if table.properties().num_entries != meta.num_entries {
        return Err(Error::corruption(
            table.path(),
            0,
            format!(
                "new table holds {} entries but {} were written",
                table.properties().num_entries,
                meta.num_entries
            ),
        ));
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, parse_internal_key};
    use crate::range_del::RangeTombstone;
    use crate::version::{set::apply_for_tests, VersionEdit};

    /// A drop policy with no filter, merge operator or TTL.
    fn policy(smallest_snapshot: u64, version: Arc<Version>, output_level: usize) -> DropPolicy {
        DropPolicy {
            smallest_snapshot,
            version,
            output_level,
            filter: None,
            newest_snapshot: None,
            merge_operator: None,
            expiry: None,
            flush: false,
        }
    }

    /// A version whose level `level` holds one file covering `small`..=`large`.
    fn version_with(level: usize, small: &str, large: &str) -> Arc<Version> {
        let mut e = VersionEdit::default();
        e.add_file(
            level,
            FileMetaData {
                number: 1,
                file_size: 100,
                smallest: InternalKey::new(small.as_bytes(), 1, ValueKind::Put),
                largest: InternalKey::new(large.as_bytes(), 1, ValueKind::Put),
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
            },
        );
        Arc::new(apply_for_tests(&Version::empty(4), &e).expect("version"))
    }

    /// Runs entries written "key@seq" (put) or "key@seq-del" (tombstone), in merged order,
    /// through the tracker; returns what is kept, in the same notation.
    fn kept(entries: &str, policy: Option<&DropPolicy>) -> String {
        let mut t = KeyTracker::default();
        let mut out = Vec::new();
        for e in entries.split_whitespace() {
            let (k, rest) = e.split_once('@').expect("key@seq");
            let (seq, kind) = match rest.strip_suffix("-del") {
                Some(s) => (s, ValueKind::Delete),
                None => (rest, ValueKind::Put),
            };
            let ikey = make_internal_key(k.as_bytes(), seq.parse().expect("seq"), kind);
            let p = parse_internal_key(&ikey).expect("key");
            if !t.observe(&p, policy).1 {
                out.push(e);
            }
        }
        out.join(" ")
    }

    const INPUT: &str = "a@9 a@7 a@3 b@8-del b@4 c@6-del d@2-del e@5 e@1-del";

    #[test]
    fn flush_keeps_everything() {
        assert_eq!(kept(INPUT, None), INPUT);
    }

    #[test]
    fn versions_hidden_from_every_snapshot_are_dropped() {
        // Oldest snapshot at 100: only the newest version of each key is visible to anyone;
        // nothing below the output level, so tombstones hiding nothing go too.
        let p = policy(100, Arc::new(Version::empty(4)), 1);
        assert_eq!(kept(INPUT, Some(&p)), "a@9 e@5");
        // A snapshot at 7 still sees a@7 (a@9 is too new for it) but not a@3; b's tombstone
        // at 8 is newer than the snapshot, so it and b@4 (what the snapshot sees) stay.
        let p = DropPolicy {
            smallest_snapshot: 7,
            ..p
        };
        assert_eq!(kept(INPUT, Some(&p)), "a@9 a@7 b@8-del b@4 e@5");
        // At snapshot 0 nothing is hidden from everyone: all kept.
        let p = DropPolicy {
            smallest_snapshot: 0,
            ..p
        };
        assert_eq!(kept(INPUT, Some(&p)), INPUT);
    }

    #[test]
    fn tombstones_stay_while_a_deeper_level_may_hold_the_key() {
        // L3 holds c..d: the tombstones of c and d still hide something there, e's does not.
        let p = policy(100, version_with(3, "c", "d"), 1);
        assert_eq!(kept(INPUT, Some(&p)), "a@9 c@6-del d@2-del e@5");
        // Writing into L3 itself: nothing deeper, so they go.
        let p = DropPolicy {
            output_level: 3,
            ..p
        };
        assert_eq!(kept(INPUT, Some(&p)), "a@9 e@5");
        // A file at a shallower level than the output does not count.
        let p = policy(100, version_with(1, "a", "z"), 2);
        assert_eq!(kept(INPUT, Some(&p)), "a@9 e@5");
    }

    /// Runs entries written "key@seq" (put), "key@seq-del" (delete) or "key@seq-sd" (single
    /// delete) through `write_tables` with `policy` and returns the output tables' entries in
    /// the same notation.
    fn compacted(entries: &str, policy: &DropPolicy) -> String {
        use crate::memtable::MemTable;
        use crate::sst::BlockReadOptions;
        let mem = Arc::new(MemTable::new(0));
        for e in entries.split_whitespace() {
            let (k, rest) = e.split_once('@').expect("key@seq");
            let (seq, kind) = if let Some(s) = rest.strip_suffix("-del") {
                (s, ValueKind::Delete)
            } else if let Some(s) = rest.strip_suffix("-sd") {
                (s, ValueKind::SingleDelete)
            } else {
                (rest, ValueKind::Put)
            };
            mem.add(seq.parse().expect("seq"), kind, k.as_bytes(), b"v");
        }
        let (written, tables) = write_memtable(&mem, policy);
        let mut out = Vec::new();
        for m in written.tables {
            let t = tables.get(&m).expect("table");
            let mut it = t.iter(BlockReadOptions::default());
            it.seek_to_first();
            while it.valid() {
                let p = parse_internal_key(it.key()).expect("key");
                let suffix = match p.kind {
                    ValueKind::Delete => "-del",
                    ValueKind::SingleDelete => "-sd",
                    _ => "",
                };
                out.push(format!(
                    "{}@{}{suffix}",
                    String::from_utf8_lossy(p.user_key),
                    p.sequence
                ));
                it.next();
            }
        }
        out.join(" ")
    }

    /// Runs `mem`'s entries through `write_tables` with `policy` into an in-memory directory;
    /// returns what it wrote and the cache to open the tables with.
    fn write_memtable(
        mem: &Arc<crate::memtable::MemTable>,
        policy: &DropPolicy,
    ) -> (Written, crate::cache::TableCache) {
        use crate::cache::{BlockCache, TableCache};
        use crate::fs::MemFileSystem;
        let fs: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let dir = Path::new("/job");
        fs.create_dir_all(dir).expect("mkdir");
        let tables = TableCache::new(
            fs.clone(),
            dir.to_path_buf(),
            10,
            Arc::new(BlockCache::new(1 << 20, 0)),
        );
        let opts = Options::default();
        let spec = OutputSpec {
            fs: &fs,
            dir,
            opts: &opts,
            tables: &tables,
            level: policy.output_level,
            base_level: 1,
            bottommost: false,
            max_file_size: u64::MAX,
            flush: false,
            cf_id: 0,
            cf_name: "default",
            blob_gc: None,
            write_time_blobs: None,
        };
        let mut next = 10;
        let written = write_tables(
            &spec,
            &mut mem.iter(),
            None,
            Some(policy),
            &mut || {
                next += 1;
                next
            },
            &AtomicBool::new(false),
        )
        .expect("write");
        (written, tables)
    }

    #[test]
    fn blob_references_dropped_are_garbage_and_those_kept_are_not() {
        use crate::memtable::MemTable;
        use crate::CompressionType;
        let mem = Arc::new(MemTable::new(0));
        let blob = |key: &str, seq: u64, file_number: u64, size: u64| {
            let r = BlobRef {
                file_number,
                offset: seq * 1000,
                size,
                compression: CompressionType::None,
            };
            let mut entry = Vec::new();
            r.encode_entry_to(None, &mut entry);
            mem.add(seq, ValueKind::BlobIndex, key.as_bytes(), &entry);
            r.record_bytes(key.as_bytes())
        };
        // Hidden from every reader: a@3 and c@1; d@5 goes with the single delete above it.
        let (_a5, a3, _b4) = (
            blob("a", 5, 7, 100),
            blob("a", 3, 7, 200),
            blob("b", 4, 8, 300),
        );
        let (_c2, c1) = (blob("c", 2, 8, 400), blob("c", 1, 7, 500));
        mem.add(6, ValueKind::SingleDelete, b"d", b"");
        let d5 = blob("d", 5, 8, 50);
        blob("e", 4, 9, 60);
        // The last entry read is dropped: counted when the outputs are finished.
        let (_f2, f1) = (blob("f", 2, 9, 70), blob("f", 1, 9, 80));
        let (written, tables) = write_memtable(&mem, &policy(100, version_with(3, "a", "z"), 1));
        let garbage = |number, count, bytes| BlobGarbage {
            number,
            count,
            bytes,
        };
        assert_eq!(
            written.blob_garbage,
            vec![garbage(7, 2, a3 + c1), garbage(8, 1, d5), garbage(9, 1, f1)]
        );
        // The kept references are in the output, and its blob files are theirs.
        let [table] = written.tables.as_slice() else {
            panic!("{} tables", written.tables.len());
        };
        assert_eq!(table.blob_files, vec![7, 8, 9]);
        let t = tables.get(table).expect("table");
        let mut it = t.iter(crate::sst::BlockReadOptions::default());
        let mut kept = Vec::new();
        it.seek_to_first();
        while it.valid() {
            let p = parse_internal_key(it.key()).expect("key");
            let (r, _) = BlobRef::decode_entry(it.value()).expect("reference");
            kept.push((
                String::from_utf8_lossy(p.user_key).into_owned(),
                p.sequence,
                r.size,
            ));
            it.next();
        }
        let want = [
            ("a", 5, 100),
            ("b", 4, 300),
            ("c", 2, 400),
            ("e", 4, 60),
            ("f", 2, 70),
        ];
        assert_eq!(kept, want.map(|(k, s, z)| (k.to_string(), s, z)).to_vec());
    }

    #[test]
    fn a_single_delete_vanishes_with_its_put_even_above_the_base_level() {
        // L3 holds a..z, so ordinary tombstones must stay; the single delete and its put go
        // together, and the put still hides the older version below it.
        let deeper = policy(100, version_with(3, "a", "z"), 1);
        assert_eq!(compacted("b@9 k@8-sd k@7 k@3 z@1", &deeper), "b@9 z@1");
        assert_eq!(compacted("k@8-del k@7 k@3", &deeper), "k@8-del");
        // With no put right below, the single delete stays while a deeper level may hold the
        // key, and goes at the base level.
        assert_eq!(compacted("k@8-sd m@5", &deeper), "k@8-sd m@5");
        let base = DropPolicy {
            output_level: 3,
            ..deeper
        };
        // (At the bottom, a put every reader sees is written with sequence number 0.)
        assert_eq!(compacted("k@8-sd m@5", &base), "m@0");
        // A snapshot at 7 still needs the put and does not see the single delete: both stay.
        let snapshot = policy(7, version_with(3, "a", "z"), 1);
        assert_eq!(compacted("k@8-sd k@7 k@3", &snapshot), "k@8-sd k@7");
    }

    #[test]
    fn a_flush_drops_hidden_versions_but_nothing_older_data_may_need() {
        // Nothing below L0 here, and still: no tombstone goes (older L0 files may hold what
        // it deletes) and no sequence number is zeroed.
        let empty = Arc::new(Version::empty(4));
        let flush = DropPolicy::for_flush(100, empty.clone());
        assert_eq!(
            compacted("a@2 k@9 k@8 k@7-del m@5-sd m@4 n@3-del x@6-sd", &flush),
            "a@2 k@9 n@3-del x@6-sd"
        );
        // A snapshot at 8 still sees k@8 (and k@9 is newer than it): only k@7 goes.
        let snapshot = DropPolicy::for_flush(8, empty);
        assert_eq!(compacted("k@9 k@8 k@7-del", &snapshot), "k@9 k@8");
        // The same input compacted at the bottom drops the tombstones and zeroes a@2.
        let bottom = policy(100, Arc::new(Version::empty(4)), 1);
        assert_eq!(
            compacted("a@2 k@9 k@8 k@7-del m@5-sd m@4 n@3-del x@6-sd", &bottom),
            "a@0 k@0"
        );
    }

    #[test]
    fn an_older_single_delete_stays_while_its_put_may_lie_below() {
        // Put k@3 in L3 (not an input), then single delete k@5, put k@7, single delete k@8:
        // the newest pair vanishes, and the single delete of the put below must stay, or k@3
        // would be read again (found by the differential test against RocksDB).
        let deeper = policy(100, version_with(3, "a", "z"), 1);
        assert_eq!(compacted("k@8-sd k@7 k@5-sd", &deeper), "k@5-sd");
        // Hidden by a newer put, it still stays: that put's own single delete may take the
        // put away in a later compaction.
        assert_eq!(compacted("k@8 k@5-sd", &deeper), "k@8 k@5-sd");
        // With its put in the input, it vanishes with it.
        assert_eq!(compacted("k@8 k@5-sd k@3", &deeper), "k@8");
        // At the base level nothing below can hold the key: everything goes.
        let base = DropPolicy {
            output_level: 3,
            ..policy(100, version_with(3, "a", "z"), 1)
        };
        assert_eq!(compacted("k@8-sd k@7 k@5-sd", &base), "");
    }

    #[test]
    fn puts_every_reader_sees_get_sequence_zero_at_the_bottom() {
        let bottom = policy(7, Arc::new(Version::empty(4)), 1);
        // a@9 and c's tombstone are newer than the snapshot at 7 and keep their numbers; the
        // next version of each key is what every reader at or below it sees: zeroed (and the
        // older ones dropped, so the zeroed entry is the key's last).
        assert_eq!(
            compacted("a@9 a@5 a@3 b@6 c@8-del c@2", &bottom),
            "a@9 a@0 b@0 c@8-del c@0"
        );
        // Something below the output level: numbers stay.
        let above = DropPolicy {
            version: version_with(3, "a", "z"),
            ..bottom
        };
        assert_eq!(
            compacted("a@9 a@5 a@3 b@6 c@8-del c@2", &above),
            "a@9 a@5 b@6 c@8-del c@2"
        );
        // A range tombstone in the inputs over the key (here older than the put): zeroing
        // would put the put under it, so its number stays.
        let tombstones = FragmentedRangeTombstones::new([RangeTombstone {
            start: b"b".to_vec(),
            end: b"c".to_vec(),
            seq: 4,
        }]);
        let mut t = KeyTracker {
            range_dels: Some(&tombstones),
            ..KeyTracker::default()
        };
        let policy = DropPolicy {
            version: Arc::new(Version::empty(4)),
            ..above
        };
        for (k, zeroed) in [("a", true), ("b", false), ("c", true)] {
            let ikey = make_internal_key(k.as_bytes(), 6, ValueKind::Put);
            let p = parse_internal_key(&ikey).expect("key");
            assert_eq!(t.zero_sequence(&p, Some(&policy)), zeroed, "{k}");
        }
    }
}
