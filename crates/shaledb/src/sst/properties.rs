//! The properties block: bytewise-sorted string keys, varint64 values (the codec name is raw
//! UTF-8). Unknown keys are ignored so newer writers can add properties.

use super::block::{Block, BlockBuilder, BlockIter};
use super::{BlobReferences, TableProperties};
use crate::coding::{get_varint64, put_varint64, varint_length};
use crate::iter::InternalIterator;
use crate::version::edit::MAX_COLUMN_FAMILY_ID;
use std::collections::BTreeMap;
use std::sync::Arc;

pub(crate) const COMPRESSION: &str = "shaledb.compression";
pub(crate) const DATA_SIZE: &str = "shaledb.data.size";
pub(crate) const FILTER_SIZE: &str = "shaledb.filter.size";
pub(crate) const INDEX_SIZE: &str = "shaledb.index.size";
pub(crate) const LARGEST_SEQNO: &str = "shaledb.largest.seqno";
pub(crate) const NUM_DATA_BLOCKS: &str = "shaledb.num.data.blocks";
pub(crate) const NUM_DELETIONS: &str = "shaledb.num.deletions";
pub(crate) const NUM_ENTRIES: &str = "shaledb.num.entries";
pub(crate) const RAW_KEY_SIZE: &str = "shaledb.raw.key.size";
pub(crate) const RAW_VALUE_SIZE: &str = "shaledb.raw.value.size";
pub(crate) const SMALLEST_SEQNO: &str = "shaledb.smallest.seqno";
pub(crate) const NEWEST_WRITE_TIME: &str = "shaledb.newest.write.time";
pub(crate) const PREFIX_EXTRACTOR: &str = "shaledb.prefix.extractor";
pub(crate) const INDEX_PARTITIONS: &str = "shaledb.index.partitions";
pub(crate) const FILTER_PARTITIONS: &str = "shaledb.filter.partitions";
pub(crate) const INDEX_USER_KEYS: &str = "shaledb.index.user_keys";
pub(crate) const INDEX_TWO_LEVEL: &str = "shaledb.index.two_level";
pub(crate) const COLUMN_FAMILY_ID: &str = "shaledb.column.family.id";
pub(crate) const COLUMN_FAMILY_NAME: &str = "shaledb.column.family.name";
pub(crate) const EXTERNAL_FILE_VERSION: &str = "shaledb.external_sst_file.version";
pub(crate) const BLOB_REFERENCES: &str = "shaledb.blob.references";

fn numeric(p: &TableProperties) -> [(&'static str, u64); 10] {
    [
        (DATA_SIZE, p.data_size),
        (FILTER_SIZE, p.filter_size),
        (INDEX_SIZE, p.index_size),
        (LARGEST_SEQNO, p.largest_seqno),
        (NUM_DATA_BLOCKS, p.num_data_blocks),
        (NUM_DELETIONS, p.num_deletions),
        (NUM_ENTRIES, p.num_entries),
        (RAW_KEY_SIZE, p.raw_key_size),
        (RAW_VALUE_SIZE, p.raw_value_size),
        (SMALLEST_SEQNO, p.smallest_seqno),
    ]
}

/// Encodes the properties block contents (restart interval 1: it is tiny and read once).
pub(crate) fn encode(p: &TableProperties) -> Vec<u8> {
    let mut entries: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    for (k, v) in numeric(p) {
        let mut buf = Vec::new();
        put_varint64(&mut buf, v);
        entries.insert(k, buf);
    }
    // Written only when set, so tables without them keep the bytes they always had.
    for (k, v) in [
        (NEWEST_WRITE_TIME, p.newest_write_time),
        (INDEX_PARTITIONS, p.index_partitions),
        (FILTER_PARTITIONS, p.filter_partitions),
        (INDEX_USER_KEYS, u64::from(p.index_user_keys)),
        (INDEX_TWO_LEVEL, u64::from(p.index_two_level)),
        (EXTERNAL_FILE_VERSION, p.external_file_version),
    ] {
        if v > 0 {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            entries.insert(k, buf);
        }
    }
    entries.insert(COMPRESSION, p.compression.as_bytes().to_vec());
    if !p.prefix_extractor.is_empty() {
        entries.insert(PREFIX_EXTRACTOR, p.prefix_extractor.as_bytes().to_vec());
    }
    if let Some(id) = p.column_family_id {
        let mut buf = Vec::new();
        put_varint64(&mut buf, u64::from(id));
        entries.insert(COLUMN_FAMILY_ID, buf);
        entries.insert(COLUMN_FAMILY_NAME, p.column_family_name.as_bytes().to_vec());
    }
    if !p.blob_references.is_empty() {
        entries.insert(BLOB_REFERENCES, encode_blob_references(&p.blob_references));
    }
    let mut b = BlockBuilder::new(1);
    for (k, v) in &entries {
        b.add(k.as_bytes(), v);
    }
    b.finish()
}

/// Decodes a properties block. The error is a message; the caller adds file and offset.
pub(crate) fn decode(block: Arc<Block>) -> Result<TableProperties, String> {
    let mut p = TableProperties::default();
    let mut it = BlockIter::new_bytewise(block);
    it.seek_to_first();
    while it.valid() {
        let key = it.key();
        let value = it.value();
        if key == COMPRESSION.as_bytes() {
            p.compression = std::str::from_utf8(value)
                .map_err(|_| "compression name is not UTF-8".to_string())?
                .to_string();
        } else if let Some(flag) = flag_slot(&mut p, key) {
            *flag = match value {
                [0] => false,
                [1] => true,
                _ => {
                    return Err(format!(
                        "property {} is not 0 or 1",
                        String::from_utf8_lossy(key)
                    ))
                }
            };
        } else if key == COLUMN_FAMILY_ID.as_bytes() {
            p.column_family_id = match get_varint64(value) {
                Some((v, n)) if n == value.len() && v < u64::from(MAX_COLUMN_FAMILY_ID) => {
                    Some(v as u32)
                }
                _ => return Err("property shaledb.column.family.id has a bad value".to_string()),
            };
        } else if key == COLUMN_FAMILY_NAME.as_bytes() {
            p.column_family_name = std::str::from_utf8(value)
                .map_err(|_| "column family name is not UTF-8".to_string())?
                .to_string();
        } else if key == BLOB_REFERENCES.as_bytes() {
            p.blob_references = decode_blob_references(value)
                .ok_or_else(|| format!("property {BLOB_REFERENCES} has a bad value"))?;
        } else if key == PREFIX_EXTRACTOR.as_bytes() {
            p.prefix_extractor = std::str::from_utf8(value)
                .map_err(|_| "prefix extractor id is not UTF-8".to_string())?
                .to_string();
        } else {
            let slot = match key {
                k if k == DATA_SIZE.as_bytes() => Some(&mut p.data_size),
                k if k == FILTER_SIZE.as_bytes() => Some(&mut p.filter_size),
                k if k == INDEX_SIZE.as_bytes() => Some(&mut p.index_size),
                k if k == LARGEST_SEQNO.as_bytes() => Some(&mut p.largest_seqno),
                k if k == NUM_DATA_BLOCKS.as_bytes() => Some(&mut p.num_data_blocks),
                k if k == NUM_DELETIONS.as_bytes() => Some(&mut p.num_deletions),
                k if k == NUM_ENTRIES.as_bytes() => Some(&mut p.num_entries),
                k if k == RAW_KEY_SIZE.as_bytes() => Some(&mut p.raw_key_size),
                k if k == RAW_VALUE_SIZE.as_bytes() => Some(&mut p.raw_value_size),
                k if k == SMALLEST_SEQNO.as_bytes() => Some(&mut p.smallest_seqno),
                k if k == NEWEST_WRITE_TIME.as_bytes() => Some(&mut p.newest_write_time),
                k if k == INDEX_PARTITIONS.as_bytes() => Some(&mut p.index_partitions),
                k if k == FILTER_PARTITIONS.as_bytes() => Some(&mut p.filter_partitions),
                k if k == EXTERNAL_FILE_VERSION.as_bytes() => Some(&mut p.external_file_version),
                _ => None,
            };
            if let Some(slot) = slot {
                match get_varint64(value) {
                    Some((v, n)) if n == value.len() => *slot = v,
                    _ => {
                        return Err(format!(
                            "property {} has a bad value",
                            String::from_utf8_lossy(key)
                        ))
                    }
                }
            }
        }
        it.next();
    }
    it.status().map_err(|e| e.to_string())?;
    Ok(p)
}

/// `shaledb.blob.references`: varint64 count of blob files, then per file (ascending numbers)
/// varint64 number, count and bytes (docs/format/sstable.md).
pub fn encode_blob_references(refs: &[BlobReferences]) -> Vec<u8> {
    let mut buf = Vec::new();
    put_varint64(&mut buf, refs.len() as u64);
    for r in refs {
        put_varint64(&mut buf, r.file_number);
        put_varint64(&mut buf, r.count);
        put_varint64(&mut buf, r.bytes);
    }
    buf
}

/// Decodes `shaledb.blob.references`; `None` unless it spans the value exactly, every
/// varint is in its shortest form (a value has one encoding, as a blob reference has),
/// numbers ascend strictly and every count is at least 1. The file count is checked against
/// the value's length before anything is allocated for it (each file takes 3 bytes at least).
pub fn decode_blob_references(value: &[u8]) -> Option<Vec<BlobReferences>> {
    let shortest = |bytes: &[u8]| {
        let (v, len) = get_varint64(bytes)?;
        (len == varint_length(v)).then_some((v, len))
    };
    let (n, mut pos) = shortest(value)?;
    if n > (value.len() / 3) as u64 {
        return None;
    }
    let mut next = || {
        let (v, len) = shortest(value.get(pos..)?)?;
        pos += len;
        Some(v)
    };
    let mut refs: Vec<BlobReferences> = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let r = BlobReferences {
            file_number: next()?,
            count: next()?,
            bytes: next()?,
        };
        let ascending = refs.last().is_none_or(|l| l.file_number < r.file_number);
        if !ascending || r.count == 0 {
            return None;
        }
        refs.push(r);
    }
    (pos == value.len()).then_some(refs)
}

/// The property that `key` names if it is one of the 0-or-1 flags.
fn flag_slot<'a>(p: &'a mut TableProperties, key: &[u8]) -> Option<&'a mut bool> {
    match key {
        k if k == INDEX_USER_KEYS.as_bytes() => Some(&mut p.index_user_keys),
        k if k == INDEX_TWO_LEVEL.as_bytes() => Some(&mut p.index_two_level),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let p = TableProperties {
            num_entries: 1,
            num_deletions: 2,
            raw_key_size: 3,
            raw_value_size: 4,
            data_size: 5,
            index_size: 6,
            filter_size: 7,
            num_data_blocks: 8,
            compression: "zstd".into(),
            prefix_extractor: "rocksdb.FixedPrefix.4".into(),
            smallest_seqno: 9,
            largest_seqno: u64::MAX >> 8,
            newest_write_time: 1_764_000_000,
            index_partitions: 10,
            filter_partitions: 11,
            index_user_keys: true,
            index_two_level: true,
            column_family_id: Some(300),
            column_family_name: "counters".into(),
            external_file_version: 1,
            blob_references: vec![
                BlobReferences {
                    file_number: 7,
                    count: 1,
                    bytes: 120,
                },
                BlobReferences {
                    file_number: 1 << 40,
                    count: 3000,
                    bytes: 5 << 30,
                },
            ],
            file_size: 0,
        };
        let block = Arc::new(Block::new(encode(&p)).expect("block"));
        assert_eq!(decode(block).expect("decode"), p);
    }

    /// The blob references property: its exact bytes, and every malformed value refused.
    #[test]
    fn blob_references_bytes_and_bad_values() {
        let refs = [
            BlobReferences {
                file_number: 5,
                count: 2,
                bytes: 300,
            },
            BlobReferences {
                file_number: 9,
                count: 1,
                bytes: 127,
            },
        ];
        let bytes = encode_blob_references(&refs);
        assert_eq!(bytes, [2, 5, 2, 0xac, 0x02, 9, 1, 127]);
        assert_eq!(decode_blob_references(&bytes).as_deref(), Some(&refs[..]));
        for bad in [
            &[][..],                    // no count
            &[1, 5, 2][..],             // a file cut short
            &[1, 5, 2, 7, 0][..],       // trailing byte
            &[1, 5, 0, 7][..],          // zero references
            &[2, 9, 1, 1, 5, 1, 1][..], // numbers descend
            &[2, 5, 1, 1, 5, 1, 1][..], // a number twice
            &[0xff, 0xff, 0x03, 1][..], // a count the value cannot hold
            &[1, 5, 0x82, 0, 7][..],    // a count not in its shortest form (found by fuzzing)
            &[0x81, 0, 5, 2, 7][..],    // the file count likewise
        ] {
            assert_eq!(decode_blob_references(bad), None, "{bad:?}");
        }
        let p = TableProperties {
            blob_references: refs.to_vec(),
            ..Default::default()
        };
        let mut block = encode(&p);
        let at = block
            .windows(BLOB_REFERENCES.len())
            .position(|w| w == BLOB_REFERENCES.as_bytes())
            .expect("written");
        // The value's count byte follows the key: claim 3 files.
        block[at + BLOB_REFERENCES.len()] = 3;
        let err = decode(Arc::new(Block::new(block).expect("block"))).expect_err("bad");
        assert!(err.contains(BLOB_REFERENCES), "{err}");
    }
}
