//! Reading every table and blob file repair finds, all of it, checksums verified, to learn
//! what the MANIFEST would have recorded about it (or that it is damaged).

use crate::blob::{BlobFileReader, BlobRef};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, InternalKey, ValueKind};
use crate::sst::{BlockReadOptions, Table};
use crate::version::{filename, BlobFileAddition, FileMetaData};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Blob references of a table: per blob file, (references, their record bytes).
pub(super) type BlobRefs = BTreeMap<u64, (u64, u64)>;

/// A table read to its end without a problem.
#[derive(Debug, Clone)]
pub(super) struct ScannedTable {
    pub meta: FileMetaData,
    /// The family its properties name (`None`: written before tables recorded it).
    pub family: Option<(u32, String)>,
    pub newest_write_time: u64,
    pub blob_refs: BlobRefs,
}

/// Bytes of a file, for the report and the table's size.
pub(super) fn file_size(fs: &dyn FileSystem, path: &Path) -> Result<u64> {
    fs.file_size(path)
        .map_err(|e| Error::io(format!("reading the size of {}", path.display()), e))
}

/// Opens table `number` and reads every block and entry with checksums verified. `Ok(None)`
/// for a table without entries or range tombstones (nothing to keep).
pub(super) fn scan_table(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    number: u64,
    global_seqno: Option<u64>,
) -> Result<Option<ScannedTable>> {
    let path = filename::table_file(dir, number);
    let size = file_size(&**fs, &path)?;
    let file = fs
        .open_random_access(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let table = Table::open(file, path.clone(), number, size, None)?;
    let table = Arc::new(table.with_global_seqno(global_seqno));
    table.verify_checksums()?;
    let mut meta = FileMetaData {
        number,
        file_size: size,
        smallest: InternalKey::default(),
        largest: InternalKey::default(),
        smallest_seqno: u64::MAX,
        largest_seqno: 0,
        num_entries: 0,
        num_deletions: 0,
        num_range_deletions: 0,
        blob_files: Vec::new(),
        file_checksum: None,
        open_table: Default::default(),
        seeks: Default::default(),
        global_seqno: global_seqno.filter(|&s| s > 0),
    };
    let blob_refs = scan_entries(&table, &path, &mut meta)?;
    let props = table.properties();
    if props.num_entries != meta.num_entries {
        return Err(Error::corruption(
            &path,
            0,
            format!(
                "properties count {} entries but the table holds {}",
                props.num_entries, meta.num_entries
            ),
        ));
    }
    if let Some(t) = table.range_tombstones() {
        add_tombstone_bounds(&mut meta, t);
    }
    if meta.num_entries == 0 && meta.num_range_deletions == 0 {
        return Ok(None);
    }
    meta.blob_files = blob_refs.keys().copied().collect();
    let family = props
        .column_family_id
        .map(|id| (id, props.column_family_name.clone()));
    Ok(Some(ScannedTable {
        meta,
        family,
        newest_write_time: props.newest_write_time,
        blob_refs,
    }))
}

/// Walks every entry: key range, sequence numbers, counts and blob references into `meta`.
fn scan_entries(table: &Arc<Table>, path: &Path, meta: &mut FileMetaData) -> Result<BlobRefs> {
    let mut refs = BlobRefs::new();
    let mut it = table.iter(BlockReadOptions {
        verify_checksums: true,
        fill_cache: false,
    });
    it.seek_to_first();
    while it.valid() {
        let ikey = it.key();
        // The block iterator rejects malformed keys itself; this is the belt to its braces.
        let p = parse_internal_key(ikey)
            .ok_or_else(|| Error::corruption(path, 0, "table entry has a malformed key"))?;
        if meta.num_entries == 0 {
            meta.smallest = InternalKey(ikey.to_vec());
        }
        meta.largest = InternalKey(ikey.to_vec());
        meta.smallest_seqno = meta.smallest_seqno.min(p.sequence);
        meta.largest_seqno = meta.largest_seqno.max(p.sequence);
        meta.num_entries += 1;
        if p.kind.is_deletion() {
            meta.num_deletions += 1;
        }
        if p.kind == ValueKind::BlobIndex {
            let (r, _) = BlobRef::decode_entry(it.value()).ok_or_else(|| {
                Error::corruption(path, 0, "table entry holds an undecodable blob reference")
            })?;
            let e = refs.entry(r.file_number).or_default();
            e.0 += 1;
            e.1 += r.record_bytes(p.user_key);
        }
        it.next();
    }
    it.status()?;
    Ok(refs)
}

/// Widens `meta`'s key and sequence ranges to cover the table's range tombstones (as a
/// flush records them).
fn add_tombstone_bounds(meta: &mut FileMetaData, t: &crate::range_del::FragmentedRangeTombstones) {
    if let (Some(small), Some(large), Some((min_seq, max_seq))) =
        (t.smallest_key(), t.largest_key(), t.seq_range())
    {
        if meta.num_entries == 0 || small < meta.smallest {
            meta.smallest = small;
        }
        if meta.num_entries == 0 || large > meta.largest {
            meta.largest = large;
        }
        meta.smallest_seqno = meta.smallest_seqno.min(min_seq);
        meta.largest_seqno = meta.largest_seqno.max(max_seq);
        meta.num_range_deletions = t.num_entries();
    }
}

/// CRC-32C of all `size` bytes of the file at `path` (a kept file's whole-file checksum for
/// the new MANIFEST).
pub(super) fn whole_file_checksum(fs: &dyn FileSystem, path: &Path, size: u64) -> Result<u32> {
    crate::backup::copy::checksum(fs, path, size, None)
}

/// A blob file whose header and footer read.
pub(super) struct ScannedBlob {
    pub addition: BlobFileAddition,
    pub reader: BlobFileReader,
    /// The first damaged record, if any (references to the others still read).
    pub damage: Option<Error>,
}

/// Opens blob file `number` and reads every record with checksums verified.
pub(super) fn scan_blob(fs: &Arc<dyn FileSystem>, dir: &Path, number: u64) -> Result<ScannedBlob> {
    let path = filename::blob_file(dir, number);
    let size = file_size(&**fs, &path)?;
    let file = fs
        .open_random_access(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let reader = BlobFileReader::open(file, path, number, size)?;
    let damage = reader.records().find_map(|r| r.err());
    let addition = BlobFileAddition {
        number,
        blob_count: reader.blob_count(),
        blob_bytes: reader.blob_bytes(),
        file_size: size,
        // Set by the caller: read whole for a kept file, or as written.
        file_checksum: None,
    };
    Ok(ScannedBlob {
        addition,
        reader,
        damage,
    })
}
