//! The commands that read one file directly, without opening the database: `sst-dump`,
//! `wal-dump`, `blob-dump`, `manifest-dump`. Every read goes through the library's
//! `FileSystem` and its readers (`shaledb::internals`), which check every byte and report
//! damage as `Error::Corruption` with the file and offset.

use crate::bytes::Codec;
use crate::error::CliError;
use crate::progress::Spinner;
use shaledb::fs::{FileSystem, RandomAccessFile};
use shaledb::internals::{
    parse_internal_key, write_batch_from_data, write_batch_sequence, BlobFileReader, BlobRef,
    InternalIterator, LogRead, LogReader, Table, TableProperties, ValueKind, VersionEdit,
    WalMarker,
};
use shaledb::BatchEntry;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The name a dump prints for an entry's kind.
pub(crate) fn kind_name(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::Delete => "DELETE",
        ValueKind::Put => "PUT",
        ValueKind::Merge => "MERGE",
        ValueKind::BlobIndex => "BLOB_INDEX",
        ValueKind::SingleDelete => "SINGLE_DELETE",
        ValueKind::RangeDeletion => "RANGE_DELETE",
    }
}

/// A stored value as a dump prints it: a blob reference decoded, anything else as bytes.
pub(crate) fn show_value(codec: Codec, kind: ValueKind, value: &[u8]) -> String {
    if kind != ValueKind::BlobIndex {
        return codec.show(value);
    }
    match BlobRef::decode_entry(value) {
        Some((r, write_time)) => format!(
            "blob(file {}, offset {}, size {}, {}{})",
            r.file_number,
            r.offset,
            r.size,
            r.compression.name(),
            write_time.map_or(String::new(), |t| format!(", written {t}"))
        ),
        None => format!("undecodable blob reference {}", codec.show(value)),
    }
}

/// The number in a file's name (`000012.sst` is 12): the table and blob readers check that
/// the file's own footer or header names the same number.
fn file_number(path: &Path, ext: &str) -> Result<u64, CliError> {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(ext))
        .and_then(|n| n.strip_suffix('.'))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| {
            CliError::msg(format!(
                "cannot tell the file number of {}: a .{ext} file is named by its number, \
                 as in 000012.{ext}",
                path.display()
            ))
        })
}

/// A missing file is the common mistake: say so plainly.
fn check_exists(fs: &dyn FileSystem, path: &Path) -> Result<(), CliError> {
    if fs.exists(path) {
        Ok(())
    } else {
        Err(CliError::msg(format!(
            "there is no file {}",
            path.display()
        )))
    }
}

/// Opens `path` for positional reads, with its size.
fn open_file(
    fs: &dyn FileSystem,
    path: &Path,
) -> Result<(Arc<dyn RandomAccessFile>, u64), CliError> {
    check_exists(fs, path)?;
    let opened = fs
        .file_size(path)
        .and_then(|size| Ok((fs.open_random_access(path)?, size)));
    opened.map_err(|e| CliError::msg(format!("cannot open {}: {e}", path.display())))
}

/// `sst-dump`: properties, block counts, then every entry and range tombstone.
pub(crate) fn sst_dump(
    path: &Path,
    verify: bool,
    codec: Codec,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let fs = shaledb::fs::default_fs();
    let number = file_number(path, "sst")?;
    let (file, size) = open_file(&*fs, path)?;
    let table = Arc::new(Table::open(file, path.to_path_buf(), number, size, None)?);
    if verify {
        let _spinner = Spinner::start("verifying the table");
        table.verify_checksums()?;
    }
    writeln!(out, "file: {}", path.display())?;
    writeln!(out, "file number: {number}")?;
    writeln!(out, "file size: {size}")?;
    write_properties(table.properties(), out)?;
    let range_deletions: Vec<_> = table
        .range_tombstones()
        .map(|t| t.tombstones().collect())
        .unwrap_or_default();
    writeln!(out, "num range deletions: {}", range_deletions.len())?;
    if verify {
        writeln!(out, "checksums: verified")?;
    }
    writeln!(out, "entries:")?;
    let mut it = table.iter(shaledb::internals::BlockReadOptions {
        verify_checksums: true,
        fill_cache: false,
    });
    it.seek_to_first();
    while it.valid() {
        writeln!(out, "{}", entry_line(codec, it.key(), it.value(), path)?)?;
        it.next();
    }
    it.status()?;
    for t in range_deletions {
        let (start, end) = (codec.show(&t.start), codec.show(&t.end));
        writeln!(out, "{start}\t{}\tRANGE_DELETE\t{end}", t.seq)?;
    }
    Ok(())
}

fn write_properties(p: &TableProperties, out: &mut dyn Write) -> Result<(), CliError> {
    let index = match (
        p.index_user_keys,
        p.index_two_level || p.index_partitions > 0,
    ) {
        (true, true) => "user keys, two levels",
        (true, false) => "user keys, one level",
        (false, true) => "internal keys, two levels",
        (false, false) => "internal keys, one level",
    };
    let prefix = if p.prefix_extractor.is_empty() {
        "none"
    } else {
        &p.prefix_extractor
    };
    let lines: [(&str, String); 15] = [
        ("num entries", p.num_entries.to_string()),
        ("num deletions", p.num_deletions.to_string()),
        ("num data blocks", p.num_data_blocks.to_string()),
        ("index partitions", p.index_partitions.to_string()),
        ("filter partitions", p.filter_partitions.to_string()),
        ("data size", p.data_size.to_string()),
        ("index size", p.index_size.to_string()),
        ("filter size", p.filter_size.to_string()),
        ("raw key size", p.raw_key_size.to_string()),
        ("raw value size", p.raw_value_size.to_string()),
        ("compression", p.compression.clone()),
        ("smallest seqno", p.smallest_seqno.to_string()),
        ("largest seqno", p.largest_seqno.to_string()),
        ("index", index.to_string()),
        ("prefix extractor", prefix.to_string()),
    ];
    for (name, value) in lines {
        writeln!(out, "{name}: {value}")?;
    }
    Ok(())
}

/// `key<TAB>sequence<TAB>KIND<TAB>value` for an internal entry of `file`.
fn entry_line(codec: Codec, ikey: &[u8], value: &[u8], file: &Path) -> Result<String, CliError> {
    let k = parse_internal_key(ikey).ok_or_else(|| {
        CliError::msg(format!(
            "an internal key of {} does not parse: {}",
            file.display(),
            codec.show(ikey)
        ))
    })?;
    Ok(format!(
        "{}\t{}\t{}\t{}",
        codec.show(k.user_key),
        k.sequence,
        kind_name(k.kind),
        show_value(codec, k.kind, value)
    ))
}

/// What a log reader found: a record, or damage at an offset.
enum LogItem {
    Record(u64, Vec<u8>),
    Damaged(u64, String),
}

/// Reads every record of the log at `path`, calling `each` on records and damage. Returns
/// the first damage (offset and detail, and whether anything valid followed it).
fn read_log(
    path: &Path,
    mut each: impl FnMut(LogItem) -> Result<(), CliError>,
) -> Result<Option<(u64, String, bool)>, CliError> {
    let fs = shaledb::fs::default_fs();
    check_exists(&*fs, path)?;
    let file = fs
        .open_sequential(path)
        .map_err(|e| CliError::msg(format!("cannot open {}: {e}", path.display())))?;
    let mut reader = LogReader::new(file, path.to_path_buf());
    let mut first_damage: Option<(u64, String, bool)> = None;
    loop {
        let read = reader
            .read()
            .map_err(|e| CliError::msg(format!("reading {} failed: {e}", path.display())))?;
        match read {
            LogRead::Record { data, offset } => {
                if let Some(d) = &mut first_damage {
                    d.2 = true;
                }
                each(LogItem::Record(offset, data))?;
            }
            LogRead::Damaged { offset, detail } => {
                first_damage.get_or_insert((offset, detail.clone(), false));
                each(LogItem::Damaged(offset, detail))?;
            }
            LogRead::Eof => return Ok(first_damage),
        }
    }
}

/// The error for damage found in a log: a torn tail (nothing valid after it) or corruption.
fn log_damage(path: &Path, (offset, detail, more): (u64, String, bool)) -> CliError {
    if more {
        CliError::msg(format!(
            "corruption in {} at offset {offset}: {detail}",
            path.display()
        ))
    } else {
        CliError::msg(format!(
            "{} ends in a damaged record at offset {offset}: {detail} (recovery drops such a \
             torn tail of the newest log)",
            path.display()
        ))
    }
}

/// `wal-dump`: each record's batch (first sequence number, entry count) and its entries.
pub(crate) fn wal_dump(path: &Path, codec: Codec, out: &mut dyn Write) -> Result<(), CliError> {
    let damage = read_log(path, |item| match item {
        LogItem::Record(offset, data) => {
            if let Some(marker) = WalMarker::decode(&data) {
                let line = match marker.map_err(|e| {
                    CliError::msg(format!(
                        "corruption in {} at offset {offset}: {e}",
                        path.display()
                    ))
                })? {
                    WalMarker::TakesOver { from, length } => {
                        format!("takes over from WAL {from}, which held {length} bytes")
                    }
                    WalMarker::Synced { through } => format!("WALs up to {through} synced"),
                };
                writeln!(out, "marker at {offset}: {line}")?;
                return Ok(());
            }
            let batch = write_batch_from_data(data).map_err(|e| {
                CliError::msg(format!(
                    "corruption in {} at offset {offset}: the record is not a write batch: {e}",
                    path.display()
                ))
            })?;
            let seq = write_batch_sequence(&batch);
            let count = batch.len();
            writeln!(out, "record at {offset}: sequence {seq}, {count} entries")?;
            for (i, (cf, entry)) in batch.iter_cf().enumerate() {
                let line = batch_entry_line(codec, entry);
                writeln!(out, "  {}\tcf {cf}\t{line}", seq + i as u64)?;
            }
            Ok(())
        }
        LogItem::Damaged(offset, detail) => Ok(writeln!(out, "damaged at {offset}: {detail}")?),
    })?;
    match damage {
        Some(d) => Err(log_damage(path, d)),
        None => Ok(()),
    }
}

/// `KIND<TAB>key[<TAB>value]` for a batch entry.
fn batch_entry_line(codec: Codec, entry: BatchEntry<'_>) -> String {
    match entry {
        BatchEntry::Put(k, v) => format!("PUT\t{}\t{}", codec.show(k), codec.show(v)),
        BatchEntry::Merge(k, v) => format!("MERGE\t{}\t{}", codec.show(k), codec.show(v)),
        BatchEntry::Delete(k) => format!("DELETE\t{}", codec.show(k)),
        BatchEntry::SingleDelete(k) => format!("SINGLE_DELETE\t{}", codec.show(k)),
        BatchEntry::DeleteRange(b, e) => {
            format!("RANGE_DELETE\t{}\t{}", codec.show(b), codec.show(e))
        }
        BatchEntry::BlobIndex(k, r) => match BlobRef::decode(r) {
            Some(r) => format!(
                "BLOB_INDEX\t{}\tblob file {} offset {} size {}",
                codec.show(k),
                r.file_number,
                r.offset,
                r.size
            ),
            None => format!(
                "BLOB_INDEX\t{}\t(bad reference {})",
                codec.show(k),
                codec.show(r)
            ),
        },
    }
}

/// `blob-dump`: the file's header and footer facts, then `offset<TAB>key<TAB>value` per
/// record (checksums verified, values decompressed).
pub(crate) fn blob_dump(path: &Path, codec: Codec, out: &mut dyn Write) -> Result<(), CliError> {
    let fs = shaledb::fs::default_fs();
    let number = file_number(path, "blob")?;
    let (file, size) = open_file(&*fs, path)?;
    let reader = BlobFileReader::open(file, path.to_path_buf(), number, size)?;
    writeln!(out, "file: {}", path.display())?;
    writeln!(out, "file number: {number}")?;
    writeln!(out, "file size: {size}")?;
    writeln!(out, "column family: {}", reader.cf_id())?;
    writeln!(out, "compression: {}", reader.compression().name())?;
    writeln!(out, "records: {}", reader.blob_count())?;
    writeln!(out, "record bytes: {}", reader.blob_bytes())?;
    for record in reader.records() {
        let (key, r) = record?;
        let value = reader.read(&key, &r, true)?;
        writeln!(
            out,
            "{}\t{}\t{}",
            r.offset,
            codec.show(&key),
            codec.show(&value)
        )?;
    }
    Ok(())
}

/// The MANIFEST that CURRENT in `db` names.
pub(crate) fn current_manifest(db: &Path) -> Result<PathBuf, CliError> {
    let fs = shaledb::fs::default_fs();
    let current = db.join("CURRENT");
    if !fs.exists(&current) {
        return Err(CliError::msg(format!(
            "database at {} does not exist (it has no CURRENT file)",
            db.display()
        )));
    }
    let bytes = fs
        .read_to_vec(&current)
        .map_err(|e| CliError::msg(format!("cannot read {}: {e}", current.display())))?;
    let name = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.strip_suffix('\n'))
        .filter(|s| s.starts_with("MANIFEST-") && !s.contains('/'))
        .ok_or_else(|| {
            CliError::msg(format!(
                "corruption in {} at offset 0: it does not name a MANIFEST",
                current.display()
            ))
        })?;
    Ok(db.join(name))
}

/// `manifest-dump`: every version edit of the MANIFEST at `path`, one field a line.
pub(crate) fn manifest_dump(
    path: &Path,
    codec: Codec,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let damage = read_log(path, |item| match item {
        LogItem::Record(offset, data) => {
            let edit = VersionEdit::decode(&data).map_err(|e| {
                CliError::msg(format!(
                    "corruption in {} at offset {offset}: the record is not a version edit: {e}",
                    path.display()
                ))
            })?;
            writeln!(out, "edit at {offset}:")?;
            for line in edit_lines(&edit, codec) {
                writeln!(out, "  {line}")?;
            }
            Ok(())
        }
        LogItem::Damaged(offset, detail) => Ok(writeln!(out, "damaged at {offset}: {detail}")?),
    })?;
    match damage {
        Some(d) => Err(log_damage(path, d)),
        None => Ok(()),
    }
}

/// An internal key as `key @ sequence KIND`.
fn show_internal_key(codec: Codec, ikey: &[u8]) -> String {
    match parse_internal_key(ikey) {
        Some(k) => format!(
            "{} @ {} {}",
            codec.show(k.user_key),
            k.sequence,
            kind_name(k.kind)
        ),
        None => format!("(unparseable) {}", codec.show(ikey)),
    }
}

/// The fields of an edit that are set, one line each, in a fixed order.
fn edit_lines(e: &VersionEdit, codec: Codec) -> Vec<String> {
    let mut lines = vec![format!("column family: {}", e.column_family)];
    if let Some(name) = &e.column_family_add {
        lines.push(format!("add column family: {name}"));
    }
    if e.column_family_drop {
        lines.push("drop column family".to_string());
    }
    match e.merge_operator.as_deref() {
        Some("") => lines.push("merge operator: none".to_string()),
        Some(op) => lines.push(format!("merge operator: {op}")),
        None => {}
    }
    if e.stores_write_times {
        lines.push("stores write times".to_string());
    }
    let counters = [
        ("log number", e.log_number),
        ("next file number", e.next_file_number),
        ("last sequence", e.last_sequence),
        ("max column family", e.max_column_family.map(u64::from)),
        (
            "atomic group, edits after this",
            e.atomic_group_remaining.map(u64::from),
        ),
    ];
    for (name, value) in counters {
        if let Some(v) = value {
            lines.push(format!("{name}: {v}"));
        }
    }
    file_lines(e, codec, &mut lines);
    lines
}

/// A file's recorded whole-file checksum as a manifest-dump suffix (nothing when unknown).
fn crc_text(crc: Option<u32>) -> String {
    crc.map(|c| format!(", crc32c {c:#010x}"))
        .unwrap_or_default()
}

/// The table and blob file changes of an edit.
fn file_lines(e: &VersionEdit, codec: Codec, lines: &mut Vec<String>) {
    for (level, key) in &e.compact_pointers {
        let key = show_internal_key(codec, key.encoded());
        lines.push(format!("compact pointer: level {level}, {key}"));
    }
    for (level, number) in &e.deleted_files {
        lines.push(format!("delete table: level {level}, file {number}"));
    }
    for (level, f) in &e.new_files {
        let mut line = format!(
            "add table: level {level}, file {}, {} bytes, {} entries, {} deletions, \
             {} range deletions, seqno {}..{}, keys {} .. {}",
            f.number,
            f.file_size,
            f.num_entries,
            f.num_deletions,
            f.num_range_deletions,
            f.smallest_seqno,
            f.largest_seqno,
            show_internal_key(codec, f.smallest.encoded()),
            show_internal_key(codec, f.largest.encoded()),
        );
        if !f.blob_files.is_empty() {
            line.push_str(&format!(", blob files {:?}", f.blob_files));
        }
        line.push_str(&crc_text(f.file_checksum));
        lines.push(line);
    }
    for b in &e.blob_files_added {
        lines.push(format!(
            "add blob file: file {}, {} blobs, {} blob bytes, {} bytes{}",
            b.number,
            b.blob_count,
            b.blob_bytes,
            b.file_size,
            crc_text(b.file_checksum)
        ));
    }
    for g in &e.blob_garbage {
        lines.push(format!(
            "blob garbage: file {}, {} blobs, {} bytes",
            g.number, g.count, g.bytes
        ));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn file_numbers_come_from_names() {
        assert_eq!(file_number(Path::new("/d/000012.sst"), "sst").unwrap(), 12);
        assert_eq!(file_number(Path::new("7.blob"), "blob").unwrap(), 7);
        for bad in ["x.sst", ".sst", "12.blob", "12sst", "1a.sst"] {
            assert!(file_number(Path::new(bad), "sst").is_err(), "{bad}");
        }
    }

    #[test]
    fn blob_references_are_decoded_in_dumps() {
        let r = BlobRef {
            file_number: 9,
            offset: 30,
            size: 100,
            compression: shaledb::CompressionType::None,
        };
        let mut enc = Vec::new();
        r.encode_to(&mut enc);
        assert_eq!(
            show_value(Codec::Text, ValueKind::BlobIndex, &enc),
            "blob(file 9, offset 30, size 100, none)"
        );
        assert_eq!(
            show_value(Codec::Hex, ValueKind::BlobIndex, b"\xff"),
            "undecodable blob reference ff"
        );
        assert_eq!(show_value(Codec::Hex, ValueKind::Put, b"\xff"), "ff");
    }
}
