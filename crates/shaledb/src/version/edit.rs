//! Version edits and their MANIFEST encoding. See docs/format/manifest.md.
//!
//! A [`VersionEdit`] is the delta between two versions: files added and removed per level plus
//! a few counters. The MANIFEST is a log (crate::log) of encoded edits; replaying them in order
//! rebuilds the current version.
//!
//! Encoding: a sequence of fields, each a varint32 tag followed by a tag-specific payload.
//! Tags with [`TAG_SAFE_TO_IGNORE`] set carry a varint-length-prefixed payload that older
//! readers skip, so optional fields can be added later without breaking them; any other unknown
//! tag is an error because ignoring it could silently lose state.

use crate::coding::{put_length_prefixed, put_varint32, put_varint64, Decoder};
use crate::key::{parse_internal_key, InternalKey, MAX_SEQUENCE};

/// Levels in an edit must be below this; larger values are treated as corruption.
pub(crate) const MAX_LEVELS: usize = 64;

/// Field tags. Numbers are part of the on-disk format: never reuse or renumber.
mod tag {
    pub(super) const LOG_NUMBER: u32 = 1;
    pub(super) const NEXT_FILE_NUMBER: u32 = 2;
    pub(super) const LAST_SEQUENCE: u32 = 3;
    pub(super) const COMPACT_POINTER: u32 = 4;
    pub(super) const DELETED_FILE: u32 = 5;
    pub(super) const NEW_FILE: u32 = 6;
    pub(super) const COLUMN_FAMILY: u32 = 7;
    pub(super) const COLUMN_FAMILY_ADD: u32 = 8;
    pub(super) const COLUMN_FAMILY_DROP: u32 = 9;
    pub(super) const MAX_COLUMN_FAMILY: u32 = 10;
    pub(super) const IN_ATOMIC_GROUP: u32 = 11;
    pub(super) const MERGE_OPERATOR: u32 = 12;
    pub(super) const NEW_FILE_WITH_RANGE_DELETIONS: u32 = 13;
    pub(super) const STORES_WRITE_TIMES: u32 = 14;
    pub(super) const TABLE_BLOB_FILES: u32 = 15;
    pub(super) const BLOB_FILE_ADDITION: u32 = 16;
    pub(super) const BLOB_FILE_GARBAGE: u32 = 17;
    pub(super) const INGESTED_TABLE: u32 = 18;
    /// Optional (bit 13 set): an older engine skips it and the file's checksum is unknown.
    pub(super) const FILE_CHECKSUM: u32 = super::TAG_SAFE_TO_IGNORE | 1;
}

/// The most blob files one table may reference (a larger count read from disk is corruption).
pub(crate) const MAX_BLOB_FILES_PER_TABLE: u64 = 1 << 20;

/// Column family ids must be below this (a larger id read from disk is corruption).
pub(crate) const MAX_COLUMN_FAMILY_ID: u32 = 1 << 30;

/// The longest column family name, in bytes.
pub(crate) const MAX_COLUMN_FAMILY_NAME: usize = 255;

/// Bit set in the tag of an optional field that readers which do not know it may skip. Such
/// a field's payload is always a varint length followed by that many bytes.
pub(crate) const TAG_SAFE_TO_IGNORE: u32 = 1 << 13;

/// What the MANIFEST records about one table file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMetaData {
    /// The file number: the table lives in `{number:06}.sst`.
    pub number: u64,
    /// Size of the file in bytes.
    pub file_size: u64,
    /// Smallest internal key in the file.
    pub smallest: InternalKey,
    /// Largest internal key in the file.
    pub largest: InternalKey,
    /// Smallest sequence number of any entry.
    pub smallest_seqno: u64,
    /// Largest sequence number of any entry.
    pub largest_seqno: u64,
    /// Number of entries (puts and deletes).
    pub num_entries: u64,
    /// Number of delete tombstones.
    pub num_deletions: u64,
    /// Number of range tombstones (entries of the range-deletion block). A file with any is
    /// recorded with tag 13, so readers that build views of every range tombstone open only
    /// these files.
    pub num_range_deletions: u64,
    /// The blob files the table's blob references point into, ascending (recorded with tag
    /// 15): a blob file is live while a live table lists it.
    pub blob_files: Vec<u64>,
    /// `Some(seq)` for a table ingested from an external file (`Db::ingest`, recorded with
    /// tag 18): its footer names file number 0 and every key in it is written with sequence
    /// number 0 but read as `seq` (its global sequence number; 0 keeps the keys as written).
    pub global_seqno: Option<u64>,
    /// CRC-32C of every byte of the file, computed as it was written (or, for an ingested
    /// file, as it was validated); recorded with tag 0x2001. `None`: unknown (a file added by
    /// an engine before file checksums, or a MANIFEST rewritten by one), skipped by checks.
    pub file_checksum: Option<u32>,
    /// The file's open table once a read has opened it (not recorded in the MANIFEST).
    pub open_table: crate::cache::OpenTable,
    /// Gets that searched the file in vain before another (not recorded; see seeks.rs).
    pub seeks: super::seeks::SeekCount,
}

impl FileMetaData {
    /// The file number the table's footer names: its own, or 0 for an ingested file (written
    /// by `SstFileWriter` before it had a number).
    pub(crate) fn footer_number(&self) -> u64 {
        match self.global_seqno {
            Some(_) => 0,
            None => self.number,
        }
    }
}

/// A change to the set of live files and counters, one MANIFEST record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// WAL files numbered below this are no longer needed (their data is in tables).
    pub log_number: Option<u64>,
    /// The next file number to allocate.
    pub next_file_number: Option<u64>,
    /// The last sequence number used.
    pub last_sequence: Option<u64>,
    /// Per level, the key after which the next compaction of that level starts.
    pub compact_pointers: Vec<(usize, InternalKey)>,
    /// Files removed, as (level, file number).
    pub deleted_files: Vec<(usize, u64)>,
    /// Files added, as (level, metadata).
    pub new_files: Vec<(usize, FileMetaData)>,
    /// The column family the log number, compact pointers and files belong to (0, the
    /// default family, when the field is absent).
    pub column_family: u32,
    /// This edit creates column family `column_family` with this name.
    pub column_family_add: Option<String>,
    /// This edit drops column family `column_family`.
    pub column_family_drop: bool,
    /// The largest column family id ever handed out (ids are never reused).
    pub max_column_family: Option<u32>,
    /// This edit belongs to an atomic group and this many edits of the group follow it; replay
    /// applies a group only once all of it is read.
    pub atomic_group_remaining: Option<u32>,
    /// The name of the merge operator the family is opened with from now on (empty: none).
    pub merge_operator: Option<String>,
    /// In the edit creating a family: its values carry write times (the family has a TTL).
    pub stores_write_times: bool,
    /// Blob files added (finished and synced before the edit is written).
    pub blob_files_added: Vec<BlobFileAddition>,
    /// Blobs that became garbage: references to them were dropped by a compaction.
    pub blob_garbage: Vec<BlobGarbage>,
}

/// A finished blob file, as recorded in the MANIFEST (tag 16).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlobFileAddition {
    /// The file number: the file is `{number:06}.blob`.
    pub number: u64,
    /// Records in the file.
    pub blob_count: u64,
    /// Bytes of all records (what garbage is counted in).
    pub blob_bytes: u64,
    /// Length of the file.
    pub file_size: u64,
    /// CRC-32C of every byte of the file, computed as it was written (tag 0x2001); `None`:
    /// unknown, as for [`FileMetaData::file_checksum`].
    pub file_checksum: Option<u32>,
}

impl From<crate::blob::BlobFileMeta> for BlobFileAddition {
    /// A blob file just finished (its checksum computed as it was written).
    fn from(m: crate::blob::BlobFileMeta) -> Self {
        BlobFileAddition {
            number: m.number,
            blob_count: m.blob_count,
            blob_bytes: m.blob_bytes,
            file_size: m.file_size,
            file_checksum: Some(m.file_checksum),
        }
    }
}

/// Blobs of one file no longer referenced (tag 17); added to the file's earlier garbage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlobGarbage {
    /// The blob file.
    pub number: u64,
    /// Records that became garbage.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl VersionEdit {
    /// Records that `f` was added at `level`.
    pub fn add_file(&mut self, level: usize, f: FileMetaData) {
        self.new_files.push((level, f));
    }

    /// Records that file `number` was removed from `level`.
    pub fn delete_file(&mut self, level: usize, number: u64) {
        self.deleted_files.push((level, number));
    }

    /// Appends the encoding of this edit to `dst` (docs/format/manifest.md).
    pub fn encode(&self, dst: &mut Vec<u8>) {
        if self.column_family != 0 {
            put_varint32(dst, tag::COLUMN_FAMILY);
            put_varint32(dst, self.column_family);
        }
        if let Some(name) = &self.column_family_add {
            put_varint32(dst, tag::COLUMN_FAMILY_ADD);
            put_length_prefixed(dst, name.as_bytes());
        }
        if self.column_family_drop {
            put_varint32(dst, tag::COLUMN_FAMILY_DROP);
        }
        if let Some(v) = self.max_column_family {
            put_varint32(dst, tag::MAX_COLUMN_FAMILY);
            put_varint32(dst, v);
        }
        if let Some(v) = self.atomic_group_remaining {
            put_varint32(dst, tag::IN_ATOMIC_GROUP);
            put_varint32(dst, v);
        }
        if self.stores_write_times {
            put_varint32(dst, tag::STORES_WRITE_TIMES);
        }
        if let Some(name) = &self.merge_operator {
            put_varint32(dst, tag::MERGE_OPERATOR);
            put_length_prefixed(dst, name.as_bytes());
        }
        if let Some(v) = self.log_number {
            put_varint32(dst, tag::LOG_NUMBER);
            put_varint64(dst, v);
        }
        if let Some(v) = self.next_file_number {
            put_varint32(dst, tag::NEXT_FILE_NUMBER);
            put_varint64(dst, v);
        }
        if let Some(v) = self.last_sequence {
            put_varint32(dst, tag::LAST_SEQUENCE);
            put_varint64(dst, v);
        }
        for (level, key) in &self.compact_pointers {
            put_varint32(dst, tag::COMPACT_POINTER);
            put_level(dst, *level);
            put_length_prefixed(dst, key.encoded());
        }
        for (level, number) in &self.deleted_files {
            put_varint32(dst, tag::DELETED_FILE);
            put_level(dst, *level);
            put_varint64(dst, *number);
        }
        for (level, f) in &self.new_files {
            let t = if f.num_range_deletions > 0 {
                tag::NEW_FILE_WITH_RANGE_DELETIONS
            } else {
                tag::NEW_FILE
            };
            put_varint32(dst, t);
            put_level(dst, *level);
            put_varint64(dst, f.number);
            put_varint64(dst, f.file_size);
            put_length_prefixed(dst, f.smallest.encoded());
            put_length_prefixed(dst, f.largest.encoded());
            put_varint64(dst, f.smallest_seqno);
            put_varint64(dst, f.largest_seqno);
            put_varint64(dst, f.num_entries);
            put_varint64(dst, f.num_deletions);
            if f.num_range_deletions > 0 {
                put_varint64(dst, f.num_range_deletions);
            }
        }
        for (_, f) in self
            .new_files
            .iter()
            .filter(|(_, f)| !f.blob_files.is_empty())
        {
            put_varint32(dst, tag::TABLE_BLOB_FILES);
            put_varint64(dst, f.number);
            put_varint64(dst, f.blob_files.len() as u64);
            for &b in &f.blob_files {
                put_varint64(dst, b);
            }
        }
        for (_, f) in &self.new_files {
            if let Some(seq) = f.global_seqno {
                put_varint32(dst, tag::INGESTED_TABLE);
                put_varint64(dst, f.number);
                put_varint64(dst, seq);
            }
        }
        for b in &self.blob_files_added {
            put_varint32(dst, tag::BLOB_FILE_ADDITION);
            for v in [b.number, b.blob_count, b.blob_bytes, b.file_size] {
                put_varint64(dst, v);
            }
        }
        for g in &self.blob_garbage {
            put_varint32(dst, tag::BLOB_FILE_GARBAGE);
            for v in [g.number, g.count, g.bytes] {
                put_varint64(dst, v);
            }
        }
        let tables = self
            .new_files
            .iter()
            .map(|(_, f)| (f.number, f.file_checksum));
        let blobs = self
            .blob_files_added
            .iter()
            .map(|b| (b.number, b.file_checksum));
        for (number, crc) in tables.chain(blobs) {
            if let Some(crc) = crc {
                put_file_checksum(dst, number, crc);
            }
        }
    }

    /// Decodes and validates an edit. `Err` describes the first problem and its byte offset:
    /// truncation, an unknown tag without [`TAG_SAFE_TO_IGNORE`], a repeated counter field,
    /// a level >= [`MAX_LEVELS`], an unparseable internal key, a file whose smallest key
    /// sorts after its largest, or a file checksum (tag 0x2001, which this version knows and
    /// so does not skip) that is malformed or names no file the edit adds.
    pub fn decode(src: &[u8]) -> Result<VersionEdit, String> {
        let mut edit = VersionEdit::default();
        let mut table_blob_files = Vec::new();
        let mut ingested = Vec::new();
        let mut checksums = Vec::new();
        let mut d = Decoder::new(src);
        while !d.is_empty() {
            let at = d.position();
            let t = d
                .varint32()
                .ok_or_else(|| format!("bad field tag at byte {at}"))?;
            let field = |what: &str| format!("{what} (tag {t} at byte {at})");
            match t {
                tag::LOG_NUMBER | tag::NEXT_FILE_NUMBER | tag::LAST_SEQUENCE => {
                    let v = d
                        .varint64()
                        .ok_or_else(|| field("truncated or bad number"))?;
                    let slot = match t {
                        tag::LOG_NUMBER => &mut edit.log_number,
                        tag::NEXT_FILE_NUMBER => &mut edit.next_file_number,
                        _ => &mut edit.last_sequence,
                    };
                    if slot.replace(v).is_some() {
                        return Err(field("field appears twice"));
                    }
                }
                tag::COMPACT_POINTER => {
                    let level = get_level(&mut d).map_err(|e| field(&e))?;
                    let key = get_internal_key(&mut d).map_err(|e| field(&e))?;
                    edit.compact_pointers.push((level, key));
                }
                tag::DELETED_FILE => {
                    let level = get_level(&mut d).map_err(|e| field(&e))?;
                    let number = d
                        .varint64()
                        .ok_or_else(|| field("truncated or bad file number"))?;
                    edit.deleted_files.push((level, number));
                }
                tag::NEW_FILE | tag::NEW_FILE_WITH_RANGE_DELETIONS => {
                    let level = get_level(&mut d).map_err(|e| field(&e))?;
                    let mut f = get_file_meta(&mut d).map_err(|e| field(&e))?;
                    if t == tag::NEW_FILE_WITH_RANGE_DELETIONS {
                        f.num_range_deletions = d
                            .varint64()
                            .filter(|&n| n > 0)
                            .ok_or_else(|| field("truncated or zero range deletion count"))?;
                    }
                    edit.new_files.push((level, f));
                }
                tag::COLUMN_FAMILY | tag::MAX_COLUMN_FAMILY => {
                    let id = d
                        .varint32()
                        .filter(|&id| id < MAX_COLUMN_FAMILY_ID)
                        .ok_or_else(|| field("truncated or out-of-range column family id"))?;
                    if t == tag::COLUMN_FAMILY {
                        edit.column_family = id;
                    } else if edit.max_column_family.replace(id).is_some() {
                        return Err(field("field appears twice"));
                    }
                }
                tag::COLUMN_FAMILY_ADD => {
                    let name = d
                        .length_prefixed()
                        .ok_or_else(|| field("truncated column family name"))?;
                    let name = std::str::from_utf8(name)
                        .ok()
                        .filter(|n| !n.is_empty() && n.len() <= MAX_COLUMN_FAMILY_NAME)
                        .ok_or_else(|| {
                            field("column family name is empty, too long or not UTF-8")
                        })?;
                    if edit.column_family_add.replace(name.to_string()).is_some() {
                        return Err(field("field appears twice"));
                    }
                }
                tag::TABLE_BLOB_FILES => {
                    let (table, blobs) = get_table_blob_files(&mut d).map_err(|e| field(&e))?;
                    table_blob_files.push((table, blobs, at));
                }
                tag::INGESTED_TABLE => {
                    let [table, seq] = get_numbers(&mut d).map_err(|e| field(&e))?;
                    ingested.push((table, seq, at));
                }
                tag::BLOB_FILE_ADDITION => {
                    let [number, blob_count, blob_bytes, file_size] =
                        get_numbers(&mut d).map_err(|e| field(&e))?;
                    if blob_bytes > file_size || blob_count > blob_bytes {
                        return Err(field("blob file counts exceed its size"));
                    }
                    edit.blob_files_added.push(BlobFileAddition {
                        number,
                        blob_count,
                        blob_bytes,
                        file_size,
                        file_checksum: None,
                    });
                }
                tag::BLOB_FILE_GARBAGE => {
                    let [number, count, bytes] = get_numbers(&mut d).map_err(|e| field(&e))?;
                    edit.blob_garbage.push(BlobGarbage {
                        number,
                        count,
                        bytes,
                    });
                }
                tag::COLUMN_FAMILY_DROP => edit.column_family_drop = true,
                tag::STORES_WRITE_TIMES => edit.stores_write_times = true,
                tag::MERGE_OPERATOR => {
                    let name = d
                        .length_prefixed()
                        .ok_or_else(|| field("truncated merge operator name"))?;
                    let name = std::str::from_utf8(name)
                        .map_err(|_| field("merge operator name is not UTF-8"))?;
                    if edit.merge_operator.replace(name.to_string()).is_some() {
                        return Err(field("field appears twice"));
                    }
                }
                tag::IN_ATOMIC_GROUP => {
                    let n = d
                        .varint32()
                        .ok_or_else(|| field("truncated or bad atomic group count"))?;
                    if edit.atomic_group_remaining.replace(n).is_some() {
                        return Err(field("field appears twice"));
                    }
                }
                tag::FILE_CHECKSUM => {
                    let (number, crc) = get_file_checksum(&mut d).map_err(|e| field(&e))?;
                    checksums.push((number, crc, at));
                }
                t if t & TAG_SAFE_TO_IGNORE != 0 => {
                    // An optional field from a newer writer: skip its payload.
                    d.length_prefixed()
                        .ok_or_else(|| field("truncated optional field"))?;
                }
                _ => return Err(field("unknown field tag")),
            }
        }
        if edit.column_family_add.is_some() && edit.column_family_drop {
            return Err("edit both adds and drops a column family".to_string());
        }
        for (table, blobs, at) in table_blob_files {
            let f = edit
                .new_files
                .iter_mut()
                .find(|(_, f)| f.number == table && f.blob_files.is_empty())
                .ok_or_else(|| {
                    format!(
                        "blob files of table {table} (tag 15 at byte {at}) name no new file of \
                         the edit, or one twice"
                    )
                })?;
            f.1.blob_files = blobs;
        }
        for (table, seq, at) in ingested {
            set_global_seqno(&mut edit, table, seq, at)?;
        }
        for (number, crc, at) in checksums {
            set_file_checksum(&mut edit, number, crc, at)?;
        }
        Ok(edit)
    }
}

/// Applies tag 18 (at byte `at`): table `table`, a new file of the edit not yet marked, was
/// ingested with global sequence number `seq`, which must be the file's recorded sequence range.
fn set_global_seqno(edit: &mut VersionEdit, table: u64, seq: u64, at: usize) -> Result<(), String> {
    if seq > MAX_SEQUENCE {
        return Err(format!(
            "ingested table {table} (tag 18 at byte {at}) has global sequence number {seq}, \
             above the largest possible"
        ));
    }
    let (_, f) = edit
        .new_files
        .iter_mut()
        .find(|(_, f)| f.number == table && f.global_seqno.is_none())
        .ok_or_else(|| {
            format!(
                "ingested table {table} (tag 18 at byte {at}) names no new file of the edit, or \
                 one twice"
            )
        })?;
    if f.smallest_seqno != seq || f.largest_seqno != seq {
        return Err(format!(
            "ingested table {table} (tag 18 at byte {at}) has global sequence number {seq} but \
             records sequence numbers {}..={}",
            f.smallest_seqno, f.largest_seqno
        ));
    }
    f.global_seqno = Some(seq);
    Ok(())
}

/// Tag 0x2001: `varint64` length, then the file number (`varint64`) and the CRC-32C
/// (`fixed32`, little-endian, not masked).
fn put_file_checksum(dst: &mut Vec<u8>, number: u64, crc: u32) {
    let mut payload = Vec::with_capacity(14);
    put_varint64(&mut payload, number);
    payload.extend_from_slice(&crc.to_le_bytes());
    put_varint32(dst, tag::FILE_CHECKSUM);
    put_length_prefixed(dst, &payload);
}

/// Tag 0x2001's payload: exactly a file number and a CRC-32C.
fn get_file_checksum(d: &mut Decoder<'_>) -> Result<(u64, u32), String> {
    let payload = d.length_prefixed().ok_or("truncated file checksum field")?;
    let mut p = Decoder::new(payload);
    let number = p.varint64().ok_or("truncated or bad file number")?;
    match p.remaining() {
        &[a, b, c, e] => Ok((number, u32::from_le_bytes([a, b, c, e]))),
        rest => Err(format!(
            "file {number}'s checksum is {} bytes, not 4",
            rest.len()
        )),
    }
}

/// Applies tag 0x2001 (at byte `at`): file `number`, a table or blob file the edit adds and
/// whose checksum is not yet set, has CRC-32C `crc`.
fn set_file_checksum(
    edit: &mut VersionEdit,
    number: u64,
    crc: u32,
    at: usize,
) -> Result<(), String> {
    let table = edit
        .new_files
        .iter_mut()
        .map(|(_, f)| (f.number, &mut f.file_checksum));
    let blob = edit
        .blob_files_added
        .iter_mut()
        .map(|b| (b.number, &mut b.file_checksum));
    let slot = table
        .chain(blob)
        .find(|(n, c)| *n == number && c.is_none())
        .ok_or_else(|| {
            format!(
                "checksum of file {number} (tag 0x2001 at byte {at}) names no table or blob \
                 file the edit adds, or one twice"
            )
        })?;
    *slot.1 = Some(crc);
    Ok(())
}

fn put_level(dst: &mut Vec<u8>, level: usize) {
    debug_assert!(level < MAX_LEVELS);
    put_varint32(dst, level as u32);
}

fn get_level(d: &mut Decoder<'_>) -> Result<usize, String> {
    let level = d.varint32().ok_or("truncated or bad level")?;
    let level = level as usize;
    if level >= MAX_LEVELS {
        return Err(format!(
            "level {level} out of range (max {})",
            MAX_LEVELS - 1
        ));
    }
    Ok(level)
}

fn get_internal_key(d: &mut Decoder<'_>) -> Result<InternalKey, String> {
    let bytes = d.length_prefixed().ok_or("truncated internal key")?;
    if parse_internal_key(bytes).is_none() {
        return Err(format!("unparseable internal key {bytes:?}"));
    }
    Ok(InternalKey(bytes.to_vec()))
}

/// `N` varint64s in a row.
fn get_numbers<const N: usize>(d: &mut Decoder<'_>) -> Result<[u64; N], String> {
    let mut out = [0u64; N];
    for v in &mut out {
        *v = d.varint64().ok_or("truncated or bad number")?;
    }
    Ok(out)
}

/// Tag 15's payload: a table number and the blob files it references (ascending, distinct,
/// at least one).
fn get_table_blob_files(d: &mut Decoder<'_>) -> Result<(u64, Vec<u64>), String> {
    let [table, count] = get_numbers(d)?;
    if count == 0 || count > MAX_BLOB_FILES_PER_TABLE || count > d.remaining().len() as u64 {
        return Err(format!(
            "table {table} lists an implausible {count} blob files"
        ));
    }
    let mut blobs = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let b = d.varint64().ok_or("truncated or bad blob file number")?;
        if blobs.last().is_some_and(|&last| last >= b) {
            return Err(format!("table {table}'s blob files are not ascending"));
        }
        blobs.push(b);
    }
    Ok((table, blobs))
}

fn get_file_meta(d: &mut Decoder<'_>) -> Result<FileMetaData, String> {
    let mut num = |what: &str| {
        d.varint64()
            .ok_or_else(|| format!("truncated or bad {what}"))
    };
    let number = num("file number")?;
    let file_size = num("file size")?;
    let smallest = get_internal_key(d)?;
    let largest = get_internal_key(d)?;
    let mut num = |what: &str| {
        d.varint64()
            .ok_or_else(|| format!("truncated or bad {what}"))
    };
    let smallest_seqno = num("smallest sequence number")?;
    let largest_seqno = num("largest sequence number")?;
    let num_entries = num("entry count")?;
    let num_deletions = num("deletion count")?;
    if smallest > largest {
        return Err(format!(
            "file {number}: smallest key {smallest:?} sorts after largest key {largest:?}"
        ));
    }
    Ok(FileMetaData {
        number,
        file_size,
        smallest,
        largest,
        smallest_seqno,
        largest_seqno,
        num_entries,
        num_deletions,
        num_range_deletions: 0,
        blob_files: Vec::new(),
        global_seqno: None,
        file_checksum: None,
        open_table: Default::default(),
        seeks: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::ValueKind;

    fn file(number: u64, small: &[u8], large: &[u8]) -> FileMetaData {
        FileMetaData {
            number,
            file_size: 4096 * number + 17,
            smallest: InternalKey::new(small, 5, ValueKind::Put),
            largest: InternalKey::new(large, 3, ValueKind::Delete),
            smallest_seqno: 3,
            largest_seqno: 5,
            num_entries: 1000,
            num_deletions: 12,
            num_range_deletions: 0,
            blob_files: Vec::new(),
            global_seqno: None,
            file_checksum: None,
            open_table: Default::default(),
            seeks: Default::default(),
        }
    }

    fn full_edit() -> VersionEdit {
        let mut e = VersionEdit {
            log_number: Some(7),
            next_file_number: Some(u64::MAX),
            last_sequence: Some(MAX_SEQUENCE),
            compact_pointers: vec![
                (1, InternalKey::new(b"cp", 9, ValueKind::Put)),
                (63, InternalKey::new(b"", 0, ValueKind::Delete)),
            ],
            ..Default::default()
        };
        e.delete_file(0, 3);
        e.delete_file(2, 1 << 40);
        let mut checked = file(8, b"a", b"z");
        checked.file_checksum = Some(0xdead_beef);
        e.add_file(0, checked);
        e.add_file(6, file(9, b"same", b"same"));
        let mut ranged = file(10, b"b", b"y");
        ranged.num_range_deletions = 3;
        ranged.largest = InternalKey::new(b"y", MAX_SEQUENCE, ValueKind::RangeDeletion);
        ranged.blob_files = vec![4, 5, 1 << 33];
        e.add_file(1, ranged);
        let mut ingested = file(11, b"c", b"d");
        ingested.smallest_seqno = 40;
        ingested.largest_seqno = 40;
        ingested.global_seqno = Some(40);
        e.add_file(5, ingested);
        e.blob_files_added = vec![BlobFileAddition {
            number: 5,
            blob_count: 3,
            blob_bytes: 3000,
            file_size: 3100,
            file_checksum: Some(0),
        }];
        e.blob_garbage = vec![BlobGarbage {
            number: 4,
            count: 1,
            bytes: 999,
        }];
        e
    }

    #[test]
    fn blob_fields_are_checked() {
        let mut e = VersionEdit::default();
        let mut f = file(8, b"a", b"z");
        f.blob_files = vec![3];
        e.add_file(0, f);
        let mut bytes = encoded(&e);
        assert_eq!(VersionEdit::decode(&bytes), Ok(e.clone()));
        // Blob files of a table the edit does not add.
        let mut orphan = Vec::new();
        put_varint32(&mut orphan, tag::TABLE_BLOB_FILES);
        for v in [9, 1, 3] {
            put_varint64(&mut orphan, v);
        }
        let err = VersionEdit::decode(&orphan).expect_err("orphan");
        assert!(err.contains("name no new file"), "{err}");
        // Not ascending.
        let mut desc = encoded(&VersionEdit {
            new_files: vec![(0, file(8, b"a", b"z"))],
            ..Default::default()
        });
        put_varint32(&mut desc, tag::TABLE_BLOB_FILES);
        for v in [8, 2, 5, 5] {
            put_varint64(&mut desc, v);
        }
        let err = VersionEdit::decode(&desc).expect_err("not ascending");
        assert!(err.contains("not ascending"), "{err}");
        // A count larger than the bytes left.
        bytes.truncate(bytes.len() - 1);
        assert!(VersionEdit::decode(&bytes).is_err());
        // An addition whose counts exceed its size.
        let mut big = Vec::new();
        put_varint32(&mut big, tag::BLOB_FILE_ADDITION);
        for v in [5, 10, 2000, 1000] {
            put_varint64(&mut big, v);
        }
        let err = VersionEdit::decode(&big).expect_err("counts beyond size");
        assert!(err.contains("exceed its size"), "{err}");
    }

    #[test]
    fn ingested_table_field_is_exact_and_checked() {
        let mut f = file(8, b"a", b"z");
        f.smallest_seqno = 300;
        f.largest_seqno = 300;
        f.global_seqno = Some(300);
        let mut e = VersionEdit::default();
        e.add_file(2, f.clone());
        let bytes = encoded(&e);
        // Tag 18, table 8, sequence number 300 (varint ac 02), after the new file.
        assert_eq!(&bytes[bytes.len() - 4..], &[18, 8, 0xac, 0x02]);
        assert_eq!(VersionEdit::decode(&bytes), Ok(e.clone()));
        assert_eq!(f.footer_number(), 0);
        // Global sequence number 0 is recorded too (the file is still external).
        let mut zero = file(9, b"a", b"b");
        zero.smallest_seqno = 0;
        zero.largest_seqno = 0;
        zero.global_seqno = Some(0);
        let z = VersionEdit {
            new_files: vec![(6, zero)],
            ..Default::default()
        };
        assert_eq!(VersionEdit::decode(&encoded(&z)), Ok(z));

        let with_tag = |fields: [u64; 2]| {
            let mut plain = f.clone();
            plain.global_seqno = None;
            let mut b = encoded(&VersionEdit {
                new_files: vec![(2, plain)],
                ..Default::default()
            });
            put_varint32(&mut b, tag::INGESTED_TABLE);
            for v in fields {
                put_varint64(&mut b, v);
            }
            b
        };
        let bad: [(Vec<u8>, &str); 4] = [
            (with_tag([7, 300]), "names no new file"),
            (with_tag([8, 299]), "records sequence numbers 300..=300"),
            (
                with_tag([8, MAX_SEQUENCE + 1]),
                "above the largest possible",
            ),
            (
                {
                    let mut b = bytes.clone();
                    b.extend_from_slice(&[18, 8, 0xac, 0x02]);
                    b
                },
                "or one twice",
            ),
        ];
        for (b, want) in bad {
            let err = VersionEdit::decode(&b).expect_err(want);
            assert!(err.contains(want), "{err}");
        }
        assert!(VersionEdit::decode(&with_tag([8, 300])).is_ok());
    }

    #[test]
    fn file_checksums_are_exact_optional_and_checked() {
        let mut f = file(8, b"a", b"z");
        f.file_checksum = Some(0x1234_5678);
        let mut e = VersionEdit::default();
        e.add_file(1, f.clone());
        e.blob_files_added.push(BlobFileAddition {
            number: 300,
            blob_count: 1,
            blob_bytes: 40,
            file_size: 100,
            file_checksum: Some(0xa1b2_c3d4),
        });
        let bytes = encoded(&e);
        // Tag 0x2001 (varint 81 40), length 5, table 8, its CRC little-endian; then tag
        // 0x2001, length 6, blob file 300 (varint ac 02), its CRC.
        let table = [0x81, 0x40, 5, 8, 0x78, 0x56, 0x34, 0x12];
        let blob = [0x81, 0x40, 6, 0xac, 0x02, 0xd4, 0xc3, 0xb2, 0xa1];
        assert_eq!(
            bytes[bytes.len() - 17..],
            [&table[..], &blob[..]].concat()[..]
        );
        assert_eq!(VersionEdit::decode(&bytes), Ok(e.clone()));
        // Unknown (written before file checksums): no field, and the rest is unchanged.
        let mut old = e.clone();
        old.new_files[0].1.file_checksum = None;
        old.blob_files_added[0].file_checksum = None;
        assert_eq!(encoded(&old), bytes[..bytes.len() - 17]);
        assert_eq!(VersionEdit::decode(&encoded(&old)), Ok(old.clone()));

        let with = |payload: &[u8]| {
            let mut b = encoded(&old);
            put_varint32(&mut b, tag::FILE_CHECKSUM);
            put_length_prefixed(&mut b, payload);
            b
        };
        let bad: [(Vec<u8>, &str); 5] = [
            (with(&[9, 1, 2, 3, 4]), "names no table or blob file"),
            (with(&[8, 1, 2, 3]), "is 3 bytes, not 4"),
            (with(&[8, 1, 2, 3, 4, 5]), "is 5 bytes, not 4"),
            (with(&[0x80]), "truncated or bad file number"),
            (
                {
                    let mut b = bytes.clone();
                    b.extend_from_slice(&table);
                    b
                },
                "or one twice",
            ),
        ];
        for (b, want) in bad {
            let err = VersionEdit::decode(&b).expect_err(want);
            assert!(err.contains(want), "{want}: {err}");
        }
        assert_eq!(
            VersionEdit::decode(&with(&[8, 0x78, 0x56, 0x34, 0x12]))
                .map(|d| d.new_files[0].1.file_checksum),
            Ok(Some(0x1234_5678))
        );
    }

    fn encoded(e: &VersionEdit) -> Vec<u8> {
        let mut v = Vec::new();
        e.encode(&mut v);
        v
    }

    #[test]
    fn round_trip_every_field() {
        let e = full_edit();
        let bytes = encoded(&e);
        assert_eq!(VersionEdit::decode(&bytes), Ok(e.clone()));
        // encode appends.
        let mut two = vec![0xAA];
        e.encode(&mut two);
        assert_eq!(&two[1..], &bytes[..]);
        // Each counter alone.
        for e in [
            VersionEdit {
                log_number: Some(0),
                ..Default::default()
            },
            VersionEdit {
                next_file_number: Some(2),
                ..Default::default()
            },
            VersionEdit {
                last_sequence: Some(300),
                ..Default::default()
            },
        ] {
            assert_eq!(VersionEdit::decode(&encoded(&e)), Ok(e));
        }
    }

    #[test]
    fn column_family_fields_round_trip_with_exact_bytes() {
        let add = VersionEdit {
            column_family: 3,
            column_family_add: Some("logs".to_string()),
            max_column_family: Some(3),
            log_number: Some(9),
            ..Default::default()
        };
        assert_eq!(
            encoded(&add),
            vec![7, 3, 8, 4, b'l', b'o', b'g', b's', 10, 3, 1, 9]
        );
        assert_eq!(VersionEdit::decode(&encoded(&add)), Ok(add));
        let drop = VersionEdit {
            column_family: 3,
            column_family_drop: true,
            ..Default::default()
        };
        assert_eq!(encoded(&drop), vec![7, 3, 9]);
        assert_eq!(VersionEdit::decode(&encoded(&drop)), Ok(drop));
        // The default family is implied: no tag 7.
        let mut plain = VersionEdit::default();
        plain.delete_file(1, 300);
        assert_eq!(encoded(&plain), vec![5, 1, 0xac, 0x02]);
    }

    #[test]
    fn bad_column_family_fields_are_rejected() {
        let bad: [(&[u8], &str); 6] = [
            (
                &[7, 0x80, 0x80, 0x80, 0x80, 0x04],
                "out-of-range column family id",
            ),
            (&[8, 0], "column family name is empty"),
            (&[8, 2, 0xff, 0xfe], "not UTF-8"),
            (&[8, 1, b'a', 8, 1, b'b'], "field appears twice"),
            (&[10, 1, 10, 2], "field appears twice"),
            (&[7, 1, 8, 1, b'a', 9], "both adds and drops"),
        ];
        for (bytes, want) in bad {
            let err = VersionEdit::decode(bytes).expect_err("must be rejected");
            assert!(err.contains(want), "{bytes:?}: {err}");
        }
        let long = vec![b'x'; MAX_COLUMN_FAMILY_NAME + 1];
        let mut bytes = vec![8];
        put_length_prefixed(&mut bytes, &long);
        assert!(VersionEdit::decode(&bytes).is_err());
    }

    #[test]
    fn empty_edit_is_empty_bytes() {
        let e = VersionEdit::default();
        assert!(encoded(&e).is_empty());
        assert_eq!(VersionEdit::decode(&[]), Ok(e));
    }

    #[test]
    fn exact_encoding_of_small_edit() {
        let mut e = VersionEdit {
            log_number: Some(5),
            ..Default::default()
        };
        e.delete_file(1, 300);
        assert_eq!(encoded(&e), vec![1, 5, 5, 1, 0xac, 0x02]);
    }

    #[test]
    fn truncation_never_yields_the_original() {
        let e = full_edit();
        let bytes = encoded(&e);
        let mut errors = 0;
        for cut in 0..bytes.len() {
            match VersionEdit::decode(&bytes[..cut]) {
                Ok(d) => assert_ne!(d, e, "cut {cut}"),
                Err(_) => errors += 1,
            }
        }
        // Only cuts at field boundaries decode (to a prefix of the fields): 17 fields, and a
        // table's blob files, global sequence number or checksum cannot be cut from it (tags
        // 15, 18 and 0x2001 come after every new file).
        assert!(errors >= bytes.len() - 17, "{errors} of {}", bytes.len());
        // A cut inside the last new-file field is always an error.
        assert!(VersionEdit::decode(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn unknown_tags() {
        let mut bytes = Vec::new();
        put_varint32(&mut bytes, 99);
        put_varint64(&mut bytes, 1);
        let err = VersionEdit::decode(&bytes).expect_err("unknown tag");
        assert!(err.contains("unknown"), "{err}");

        // A safe-to-ignore field is skipped, whatever its payload.
        let mut bytes = Vec::new();
        put_varint32(&mut bytes, TAG_SAFE_TO_IGNORE | 40);
        put_length_prefixed(&mut bytes, b"future stuff \x00\xff");
        full_edit().encode(&mut bytes);
        put_varint32(&mut bytes, TAG_SAFE_TO_IGNORE | 77);
        put_length_prefixed(&mut bytes, b"");
        assert_eq!(VersionEdit::decode(&bytes), Ok(full_edit()));
        // ...but its payload must be complete.
        let mut bytes = Vec::new();
        put_varint32(&mut bytes, TAG_SAFE_TO_IGNORE | 41);
        put_varint64(&mut bytes, 10);
        bytes.extend_from_slice(b"short");
        assert!(VersionEdit::decode(&bytes).is_err());
    }

    #[test]
    fn invalid_content_is_rejected() {
        // Level out of range.
        let mut bytes = Vec::new();
        put_varint32(&mut bytes, tag::DELETED_FILE);
        put_varint32(&mut bytes, 64);
        put_varint64(&mut bytes, 1);
        assert!(VersionEdit::decode(&bytes)
            .expect_err("level")
            .contains("level"));

        // Smallest after largest.
        let mut e = VersionEdit::default();
        e.add_file(1, file(4, b"z", b"a"));
        assert!(VersionEdit::decode(&encoded(&e))
            .expect_err("order")
            .contains("sorts after"));
        // Same user key: smallest must be the newer (higher sequence) version.
        let mut f = file(4, b"k", b"k");
        std::mem::swap(&mut f.smallest, &mut f.largest);
        let mut e = VersionEdit::default();
        e.add_file(1, f);
        assert!(VersionEdit::decode(&encoded(&e)).is_err());

        // Unparseable internal keys: too short, and a bad kind byte.
        let mut e = VersionEdit::default();
        e.compact_pointers.push((1, InternalKey(b"short".to_vec())));
        assert!(VersionEdit::decode(&encoded(&e)).is_err());
        let mut bad = InternalKey::new(b"k", 1, ValueKind::Put);
        let n = bad.0.len();
        bad.0[n - 8] = 9;
        let mut f = file(4, b"a", b"b");
        f.largest = bad;
        let mut e = VersionEdit::default();
        e.add_file(0, f);
        assert!(VersionEdit::decode(&encoded(&e)).is_err());

        // A counter twice.
        let mut bytes = encoded(&VersionEdit {
            log_number: Some(1),
            ..Default::default()
        });
        bytes.extend(bytes.clone());
        assert!(VersionEdit::decode(&bytes)
            .expect_err("twice")
            .contains("twice"));

        // Bad varints.
        assert!(VersionEdit::decode(&[0xff; 6]).is_err());
        assert!(VersionEdit::decode(&[1, 0x80]).is_err());
    }

    #[test]
    fn random_bytes_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let valid = encoded(&full_edit());
        for _ in 0..5000 {
            let mut bytes = if rng.gen_bool(0.5) {
                valid.clone()
            } else {
                (0..rng.gen_range(0..80))
                    .map(|_| rng.gen_range(0..10))
                    .collect()
            };
            for _ in 0..rng.gen_range(0..4) {
                if !bytes.is_empty() {
                    let i = rng.gen_range(0..bytes.len());
                    bytes[i] = rng.gen();
                }
            }
            if let Ok(e) = VersionEdit::decode(&bytes) {
                // Whatever decodes re-encodes to something that decodes the same.
                assert_eq!(VersionEdit::decode(&encoded(&e)), Ok(e));
            }
        }
    }
}
