//! Blob file tests: build with `BlobFileBuilder` on a `MemFileSystem`, read with
//! `BlobFileReader`, check the exact layout of docs/format/blob.md, and damage files byte by
//! byte.

use super::format::{FOOTER_LEN, HEADER_LEN, RECORD_HEADER_LEN};
use super::*;
use crate::checksum::{crc32c, mask};
use crate::compression::Compressor;
use crate::error::{Error, Result};
use crate::fs::{
    FileSystem, FsCall, FsHook, HookedFileSystem, MemFileSystem, RandomAccessFile, WritableFile,
};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const ALL_CODECS: [CompressionType; 5] = [
    CompressionType::None,
    CompressionType::Snappy,
    CompressionType::Zlib,
    CompressionType::Lz4,
    CompressionType::Zstd,
];

const NUMBER: u64 = 7;
const CF: u32 = 3;

fn dir() -> &'static Path {
    Path::new("/db")
}

fn blob_path() -> PathBuf {
    dir().join("000007.blob")
}

/// Deterministic bytes that do not compress (xorshift64).
fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Bytes that compress well with every codec.
fn text_bytes(n: usize) -> Vec<u8> {
    let line = b"lineitem|1996-03-13|DELIVER IN PERSON|TRUCK|egular courts above the|";
    (0..n)
        .map(|i| line[i % line.len()] ^ (i / 4096) as u8)
        .collect()
}

/// A finished blob file: its bytes, what `finish` returned and each record's key, value and
/// reference.
struct Built {
    fs: MemFileSystem,
    bytes: Vec<u8>,
    meta: BlobFileMeta,
    records: Vec<(Vec<u8>, Vec<u8>, BlobRef)>,
}

fn build(codec: CompressionType, entries: &[(Vec<u8>, Vec<u8>)]) -> Built {
    let fs = MemFileSystem::new();
    let shared: Arc<dyn FileSystem> = Arc::new(fs.clone());
    shared.create_dir_all(dir()).expect("mkdir");
    let mut b = BlobFileBuilder::create(&shared, dir(), NUMBER, CF, codec, None).expect("create");
    assert_eq!(b.number(), NUMBER);
    assert_eq!(b.file_size(), HEADER_LEN as u64);
    let mut records = Vec::new();
    for (k, v) in entries {
        let r = b.add(k, v).expect("add");
        assert_eq!(b.file_size(), r.offset + r.record_bytes(k));
        records.push((k.clone(), v.clone(), r));
    }
    let meta = b.finish().expect("finish");
    let bytes = fs.read_file_bytes(blob_path()).expect("the blob file");
    Built {
        fs,
        bytes,
        meta,
        records,
    }
}

/// Opens the file `fs` holds at the blob path as `file_size` bytes long.
fn open_sized(fs: &MemFileSystem, file_size: u64) -> Result<BlobFileReader> {
    let file = fs.open_random_access(&blob_path()).expect("open file");
    BlobFileReader::open(file, blob_path(), NUMBER, file_size)
}

/// Writes `bytes` as the blob file and opens it.
fn open_bytes(fs: &MemFileSystem, bytes: &[u8]) -> Result<BlobFileReader> {
    fs.write_file_bytes(blob_path(), bytes);
    open_sized(fs, bytes.len() as u64)
}

/// The offset of a corruption error in the blob file, or a panic naming what came instead.
fn corruption_offset<T: std::fmt::Debug>(r: Result<T>) -> u64 {
    match r {
        Err(e) => corruption_at(&e),
        Ok(v) => panic!("expected corruption, got {v:?}"),
    }
}

fn corruption_at(e: &Error) -> u64 {
    match e {
        Error::Corruption { offset, file, .. } if file == &blob_path() => *offset,
        other => panic!("expected corruption in the blob file, got {other:?}"),
    }
}

fn entry(k: &str, v: Vec<u8>) -> (Vec<u8>, Vec<u8>) {
    (k.as_bytes().to_vec(), v)
}

#[test]
fn reference_encoding_is_exact_and_round_trips() {
    let r = BlobRef {
        file_number: 5,
        offset: 300,
        size: 1,
        compression: CompressionType::Snappy,
    };
    let mut enc = Vec::new();
    r.encode_to(&mut enc);
    assert_eq!(enc, [5, 0xac, 0x02, 1, 1]);
    assert_eq!(BlobRef::decode(&enc), Some(r));
    for codec in ALL_CODECS {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let r = BlobRef {
                file_number: v,
                offset: v / 3,
                size: u64::MAX - v,
                compression: codec,
            };
            let mut enc = vec![0xee];
            r.encode_to(&mut enc);
            assert!(enc.len() <= BlobRef::MAX_ENCODED_LEN + 1);
            assert_eq!(BlobRef::decode(&enc[1..]), Some(r), "{r:?}");
        }
    }
}

#[test]
fn entries_are_references_with_an_optional_write_time() {
    let r = BlobRef {
        file_number: 9,
        offset: 300,
        size: 70_000,
        compression: CompressionType::Lz4,
    };
    let mut plain = Vec::new();
    r.encode_entry_to(None, &mut plain);
    assert_eq!(plain, [9, 0xac, 0x02, 0xf0, 0xa2, 0x04, 4]);
    assert_eq!(BlobRef::decode_entry(&plain), Some((r, None)));
    let t = 1_764_000_000u64;
    let mut stamped = Vec::new();
    r.encode_entry_to(Some(t), &mut stamped);
    assert_eq!(&stamped[..plain.len()], &plain[..]);
    assert_eq!(
        stamped,
        [9, 0xac, 0x02, 0xf0, 0xa2, 0x04, 4, 0x00, 0x81, 0x24, 0x69, 0, 0, 0, 0],
        "blob.md's example"
    );
    assert_eq!(BlobRef::decode_entry(&stamped), Some((r, Some(t))));
    // A stamped entry is not a reference, and only 0 or 8 bytes may follow one.
    assert_eq!(BlobRef::decode(&stamped), None);
    for extra in (1..8).chain(9..12) {
        let mut e = plain.clone();
        e.extend(std::iter::repeat_n(0u8, extra));
        assert_eq!(BlobRef::decode_entry(&e), None, "{extra} bytes after");
    }
    for n in 0..plain.len() {
        assert_eq!(
            BlobRef::decode_entry(&stamped[..n]),
            None,
            "truncated to {n}"
        );
    }
}

#[test]
fn reference_decoding_rejects_every_truncation_extension_and_unknown_codec() {
    let r = BlobRef {
        file_number: 1 << 40,
        offset: 123_456,
        size: 70_000,
        compression: CompressionType::Zstd,
    };
    let mut enc = Vec::new();
    r.encode_to(&mut enc);
    assert_eq!(enc.len(), 6 + 3 + 3 + 1);
    for n in 0..enc.len() {
        assert_eq!(BlobRef::decode(&enc[..n]), None, "truncated to {n}");
    }
    for extra in 0..=255u8 {
        let mut longer = enc.clone();
        longer.push(extra);
        assert_eq!(BlobRef::decode(&longer), None, "extended by {extra}");
    }
    for codec in 0..=255u8 {
        let mut other = enc.clone();
        *other.last_mut().expect("codec byte") = codec;
        let want = CompressionType::from_u8(codec).map(|compression| BlobRef { compression, ..r });
        assert_eq!(BlobRef::decode(&other), want, "codec {codec}");
    }
    // A varint longer than it needs to be (0 as two bytes) is not the reference's encoding.
    assert_eq!(BlobRef::decode(&[0x80, 0x00, 1, 1, 0]), None);
    assert_eq!(BlobRef::decode(&[0, 1, 1, 0]).map(|r| r.size), Some(1));
}

#[test]
fn the_layout_is_byte_for_byte_as_documented() {
    let b = build(CompressionType::None, &[entry("k1", b"hello".to_vec())]);
    let f = &b.bytes;
    assert_eq!(f.len(), 32 + 17 + 2 + 5 + 28);
    // Header: magic, version 1, file number 7, cf 3, codec 0, three zero bytes, checksum.
    assert_eq!(&f[..8], b"shaleBLB");
    assert_eq!(&f[8..12], &[1, 0, 0, 0]);
    assert_eq!(&f[12..20], &[7, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&f[20..24], &[3, 0, 0, 0]);
    assert_eq!(&f[24..28], &[0, 0, 0, 0]);
    assert_eq!(f[28..32], mask(crc32c(&f[..28])).to_le_bytes());
    // The record at 32: key length 2, stored length 5, value length 5, codec 0, checksum over
    // the fields, key, value and the record's offset; then key and value.
    assert_eq!(&f[32..45], &[2, 0, 0, 0, 5, 0, 0, 0, 5, 0, 0, 0, 0]);
    let mut covered = f[32..45].to_vec();
    covered.extend_from_slice(&f[49..56]);
    covered.extend_from_slice(&32u64.to_le_bytes());
    assert_eq!(f[45..49], mask(crc32c(&covered)).to_le_bytes());
    assert_eq!(&f[49..56], b"k1hello");
    // Footer: one record of 24 bytes, checksum, magic.
    assert_eq!(
        &f[56..72],
        &[1, 0, 0, 0, 0, 0, 0, 0, 24, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(f[72..76], mask(crc32c(&f[56..72])).to_le_bytes());
    assert_eq!(&f[76..], b"shaleBLB");

    let r = b.records[0].2;
    assert_eq!(
        r,
        BlobRef {
            file_number: 7,
            offset: 32,
            size: 5,
            compression: CompressionType::None
        }
    );
    assert_eq!(r.record_bytes(b"k1"), 24);
    assert_eq!(
        b.meta,
        BlobFileMeta {
            number: 7,
            blob_count: 1,
            blob_bytes: 24,
            file_size: 84,
            file_checksum: crate::checksum::crc32c(&b.bytes),
        }
    );
    let reader = open_sized(&b.fs, 84).expect("open");
    assert_eq!(
        (reader.number(), reader.cf_id(), reader.compression()),
        (7, 3, CompressionType::None)
    );
    assert_eq!((reader.blob_count(), reader.blob_bytes()), (1, 24));
    assert_eq!(reader.path(), blob_path());
    assert_eq!(reader.read(b"k1", &r, true).expect("read"), b"hello");
}

/// Values from empty to a few MiB, on both sides of the builder's copy limit, compressible and
/// not: every one reads back with every codec, and the accounting adds up.
#[test]
fn every_codec_round_trips_values_from_empty_to_mebibytes() {
    let entries = vec![
        entry("empty", Vec::new()),
        entry("one", vec![b'x']),
        entry("", random_bytes(100, 7)),
        entry("random-4k", random_bytes(4096, 1)),
        entry("random-64k-minus", random_bytes((64 << 10) - 1, 2)),
        entry("text-64k-plus", text_bytes((64 << 10) + 1)),
        entry("random-1m", random_bytes(1 << 20, 3)),
        entry("text-3m", text_bytes(3 << 20)),
        entry("text-zeros-4m", vec![0; 4 << 20]),
        entry("empty", Vec::new()),
    ];
    for codec in ALL_CODECS {
        let b = build(codec, &entries);
        let recorded: u64 = b.records.iter().map(|(k, _, r)| r.record_bytes(k)).sum();
        assert_eq!(b.meta.blob_count, entries.len() as u64, "{codec:?}");
        assert_eq!(b.meta.blob_bytes, recorded, "{codec:?}");
        assert_eq!(b.meta.file_size, 60 + recorded, "{codec:?}");
        assert_eq!(b.meta.file_size, b.bytes.len() as u64, "{codec:?}");
        let crc = crate::checksum::crc32c(&b.bytes);
        assert_eq!(b.meta.file_checksum, crc, "{codec:?}");
        let reader = open_sized(&b.fs, b.meta.file_size).expect("open");
        assert_eq!(reader.compression(), codec);
        let mut offset = HEADER_LEN as u64;
        for (k, v, r) in &b.records {
            assert_eq!(r.offset, offset, "records are back to back");
            offset += r.record_bytes(k);
            let compressed = codec != CompressionType::None && k.starts_with(b"text");
            assert_eq!(
                r.compression == codec,
                compressed || codec == CompressionType::None
            );
            if r.compression == CompressionType::None {
                assert_eq!(r.size, v.len() as u64, "{codec:?} {k:?}");
            } else {
                assert!(r.size <= (v.len() - v.len() / 8) as u64, "{codec:?} {k:?}");
            }
            for verify in [true, false] {
                let got = reader.read(k, r, verify).expect("read");
                assert!(got == *v, "{codec:?} {k:?}: wrong value");
            }
        }
        let listed: Vec<(Vec<u8>, BlobRef)> =
            reader.records().collect::<Result<_>>().expect("records");
        let want: Vec<(Vec<u8>, BlobRef)> =
            b.records.iter().map(|(k, _, r)| (k.clone(), *r)).collect();
        assert_eq!(listed, want, "{codec:?}");
    }
}

/// A value is stored compressed exactly when that saves at least 12.5%; random bytes never do.
#[test]
fn values_that_do_not_compress_by_an_eighth_are_stored_raw() {
    let mut entries = Vec::new();
    for (i, zeros_percent) in [0usize, 5, 10, 12, 13, 15, 20, 50].into_iter().enumerate() {
        let n = 10_000;
        let mut v = random_bytes(n, i as u64 + 10);
        v[..n * zeros_percent / 100].fill(0);
        entries.push(entry(&format!("k{zeros_percent}"), v));
    }
    for codec in ALL_CODECS.into_iter().skip(1) {
        let b = build(codec, &entries);
        let reader = open_sized(&b.fs, b.meta.file_size).expect("open");
        let mut outcomes = (0, 0);
        for (k, v, r) in &b.records {
            let mut out = Vec::new();
            let saves = Compressor::new(codec, None).compress(v, &mut out)
                && out.len() <= v.len() - v.len() / 8;
            if saves {
                assert_eq!((r.compression, r.size), (codec, out.len() as u64));
                outcomes.0 += 1;
            } else {
                assert_eq!(
                    (r.compression, r.size),
                    (CompressionType::None, v.len() as u64)
                );
                outcomes.1 += 1;
            }
            // The record's own codec byte says the same as the reference.
            assert_eq!(b.bytes[r.offset as usize + 12], r.compression as u8);
            assert!(reader.read(k, r, true).expect("read") == *v);
        }
        assert!(outcomes.0 > 0 && outcomes.1 > 0, "{codec:?}: {outcomes:?}");
    }
}

#[test]
fn a_file_without_records_opens_and_lists_nothing() {
    let b = build(CompressionType::Zstd, &[]);
    assert_eq!(
        b.meta,
        BlobFileMeta {
            number: 7,
            blob_count: 0,
            blob_bytes: 0,
            file_size: 60,
            file_checksum: crate::checksum::crc32c(&b.bytes),
        }
    );
    let reader = open_sized(&b.fs, 60).expect("open");
    assert_eq!(reader.records().count(), 0);
    let r = BlobRef {
        file_number: 7,
        offset: 32,
        size: 0,
        compression: CompressionType::None,
    };
    assert_eq!(corruption_offset(reader.read(b"", &r, true)), 32);
}

/// A small file with a compressed, a raw, an empty and an empty-keyed record.
fn sweep_file() -> Built {
    build(
        CompressionType::Snappy,
        &[
            entry("alpha", text_bytes(300)),
            entry("beta", random_bytes(40, 9)),
            entry("gamma", Vec::new()),
            entry("", b"v".to_vec()),
        ],
    )
}

#[test]
fn a_read_under_another_key_is_corruption() {
    let b = sweep_file();
    let reader = open_sized(&b.fs, b.meta.file_size).expect("open");
    let (_, _, alpha) = &b.records[0];
    assert_eq!(alpha.compression, CompressionType::Snappy);
    for verify in [true, false] {
        // Same length: the header matches, the key does not.
        let at = corruption_offset(reader.read(b"alphb", alpha, verify));
        assert_eq!(at, alpha.offset + RECORD_HEADER_LEN as u64);
        // Another length: the header's key length differs.
        assert_eq!(
            corruption_offset(reader.read(b"beta", alpha, verify)),
            alpha.offset
        );
        assert_eq!(
            corruption_offset(reader.read(b"", alpha, verify)),
            alpha.offset
        );
    }
}

#[test]
fn references_that_do_not_match_their_record_are_corruption() {
    let b = sweep_file();
    let reader = open_sized(&b.fs, b.meta.file_size).expect("open");
    let records_end = b.meta.file_size - FOOTER_LEN as u64;
    for (k, _, r) in &b.records {
        let wrong = [
            BlobRef {
                size: r.size + 1,
                ..*r
            },
            BlobRef {
                size: r.size.wrapping_sub(1),
                ..*r
            },
            BlobRef {
                size: u64::MAX,
                ..*r
            },
            BlobRef {
                offset: r.offset + 1,
                ..*r
            },
            BlobRef {
                offset: r.offset - 1,
                ..*r
            },
            BlobRef { offset: 0, ..*r },
            BlobRef {
                offset: records_end,
                ..*r
            },
            BlobRef {
                offset: u64::MAX,
                ..*r
            },
            BlobRef {
                file_number: 8,
                ..*r
            },
            BlobRef {
                compression: match r.compression {
                    CompressionType::None => CompressionType::Snappy,
                    _ => CompressionType::None,
                },
                ..*r
            },
            BlobRef {
                compression: CompressionType::Zstd,
                ..*r
            },
        ];
        for w in wrong {
            for verify in [true, false] {
                let got = reader.read(k, &w, verify);
                assert!(
                    matches!(got, Err(Error::Corruption { .. })),
                    "{w:?}: {got:?}"
                );
            }
        }
    }
}

/// A compressed record whose value length is past what its codec can produce from the stored
/// bytes is refused before anything is allocated for it; with checksums, by its checksum.
#[test]
fn a_value_length_past_the_codec_bound_is_corruption() {
    let b = sweep_file();
    let (k, _, r) = &b.records[0];
    let mut bytes = b.bytes.clone();
    let at = r.offset as usize + 8;
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let reader = open_bytes(&b.fs, &bytes).expect("open");
    assert_eq!(corruption_offset(reader.read(k, r, false)), r.offset + 8);
    assert_eq!(corruption_offset(reader.read(k, r, true)), r.offset);
    assert_eq!(
        corruption_offset(reader.records().last().expect("an item")),
        r.offset + 8
    );
}

/// Where `open` reports a damaged byte `i` of the header or footer of a file of `len` bytes:
/// the magic where it is, else the checksum that covers the byte.
fn open_error_offset(i: usize, len: usize) -> u64 {
    let footer = len - FOOTER_LEN;
    match i {
        0..=7 => 0,
        8..=31 => 28,
        _ if i >= len - 8 => (len - 8) as u64,
        _ if i >= footer => (len - 12) as u64,
        _ => unreachable!("byte {i} is in the records"),
    }
}

/// Flip one bit of every byte: damage to the header or footer fails `open`; damage to a
/// record fails its read when checksums are verified, and when they are not still fails if it
/// hit the record's header fields or key; other records read as before.
#[test]
fn corruption_sweep_flips_every_byte() {
    let b = sweep_file();
    let len = b.bytes.len();
    let records_end = len - FOOTER_LEN;
    for i in 0..len {
        for bit in [0x01u8, 0x80] {
            let mut bytes = b.bytes.clone();
            bytes[i] ^= bit;
            let opened = open_bytes(&b.fs, &bytes);
            if i < HEADER_LEN || i >= records_end {
                assert_eq!(
                    corruption_offset(opened),
                    open_error_offset(i, len),
                    "byte {i}"
                );
                continue;
            }
            let reader = opened.expect("records are not read at open");
            let hit = b
                .records
                .iter()
                .position(|(k, _, r)| {
                    (r.offset..r.offset + r.record_bytes(k)).contains(&(i as u64))
                })
                .expect("every byte between header and footer is in a record");
            for (n, (k, v, r)) in b.records.iter().enumerate() {
                let checked = reader.read(k, r, true);
                let unchecked = reader.read(k, r, false);
                if n != hit {
                    assert!(checked.expect("an intact record") == *v, "byte {i}");
                    assert!(unchecked.expect("an intact record") == *v, "byte {i}");
                    continue;
                }
                assert_eq!(corruption_offset(checked), r.offset, "byte {i}");
                let within = i - r.offset as usize;
                let in_fields = within < 13;
                let in_key = (RECORD_HEADER_LEN..RECORD_HEADER_LEN + k.len()).contains(&within);
                let in_crc = (13..RECORD_HEADER_LEN).contains(&within);
                match unchecked {
                    Err(Error::Corruption { .. }) => assert!(!in_crc, "byte {i}"),
                    Err(e) => panic!("byte {i}: {e}"),
                    Ok(got) => {
                        assert!(!in_fields && !in_key, "byte {i}: damage not caught");
                        // Unchecked, damage to the stored value may go unseen; damage to the
                        // checksum itself leaves the value intact.
                        assert!(!in_crc || got == *v, "byte {i}");
                    }
                }
            }
            // Listing stops at the damaged record, after the intact ones before it.
            let listed: Vec<Result<(Vec<u8>, BlobRef)>> = reader.records().collect();
            assert_eq!(listed.len(), hit + 1, "byte {i}");
            for (got, (k, _, r)) in listed.iter().zip(&b.records).take(hit) {
                assert_eq!(got.as_ref().ok(), Some(&(k.clone(), *r)), "byte {i}");
            }
            assert!(
                matches!(listed.last(), Some(Err(Error::Corruption { .. }))),
                "byte {i}"
            );
        }
    }
}

/// Truncating the file anywhere fails `open`, with the true size or the MANIFEST's; a reader
/// opened before the file shrank fails every read that reaches past the cut.
#[test]
fn corruption_sweep_truncates_at_every_length() {
    let b = sweep_file();
    let full = b.bytes.len();
    let before = open_sized(&b.fs, full as u64).expect("open");
    for len in 0..full {
        b.fs.write_file_bytes(blob_path(), &b.bytes[..len]);
        let want = if len < 60 { 0 } else { len as u64 - 8 };
        assert_eq!(
            corruption_offset(open_sized(&b.fs, len as u64)),
            want,
            "{len}"
        );
        let want = if len < HEADER_LEN {
            0
        } else {
            (full - FOOTER_LEN) as u64
        };
        assert_eq!(
            corruption_offset(open_sized(&b.fs, full as u64)),
            want,
            "{len}"
        );
        for (k, v, r) in &b.records {
            for verify in [true, false] {
                match before.read(k, r, verify) {
                    Ok(got) => {
                        assert!(r.offset + r.record_bytes(k) <= len as u64, "{len}");
                        assert!(got == *v, "{len}");
                    }
                    Err(e) => assert_eq!(corruption_at(&e), r.offset, "{len}"),
                }
            }
        }
    }
    // The MANIFEST's size smaller than the file: the footer is not where it says.
    b.fs.write_file_bytes(blob_path(), &b.bytes);
    for len in 60..full {
        assert_eq!(
            corruption_offset(open_sized(&b.fs, len as u64)),
            len as u64 - 8
        );
    }
}

/// Bytes appended after the footer (a second footer, or zeros) make the file fail `open`.
#[test]
fn an_extended_file_fails_to_open() {
    let b = sweep_file();
    let len = b.bytes.len();
    let footer = b.bytes[len - FOOTER_LEN..].to_vec();
    let mut twice = b.bytes.clone();
    twice.extend_from_slice(&footer);
    // The second footer is intact, but its record bytes do not fill the space before it.
    assert_eq!(corruption_offset(open_bytes(&b.fs, &twice)), len as u64 + 8);
    for extra in 1..=FOOTER_LEN {
        let mut longer = b.bytes.clone();
        longer.resize(len + extra, 0);
        assert_eq!(
            corruption_offset(open_bytes(&b.fs, &longer)),
            (len + extra - 8) as u64
        );
    }
}

/// Footers with a valid checksum but counts the file cannot hold.
#[test]
fn implausible_footer_counts_are_corruption() {
    let b = sweep_file();
    let len = b.bytes.len();
    let at = (len - FOOTER_LEN) as u64;
    let reseal = |count: u64, bytes: u64| {
        let mut f = b.bytes.clone();
        let footer = format::Footer {
            record_count: count,
            record_bytes: bytes,
        }
        .encode();
        f[len - FOOTER_LEN..].copy_from_slice(&footer);
        f
    };
    let space = b.meta.blob_bytes;
    assert_eq!(
        corruption_offset(open_bytes(&b.fs, &reseal(4, space + 1))),
        at + 8
    );
    assert_eq!(
        corruption_offset(open_bytes(&b.fs, &reseal(4, space - 1))),
        at + 8
    );
    assert_eq!(corruption_offset(open_bytes(&b.fs, &reseal(0, space))), at);
    let most = space / RECORD_HEADER_LEN as u64;
    assert_eq!(
        corruption_offset(open_bytes(&b.fs, &reseal(most + 1, space))),
        at
    );
    assert_eq!(
        corruption_offset(open_bytes(&b.fs, &reseal(u64::MAX, space))),
        at
    );
    // Plausible but wrong counts open, and listing the records finds the difference.
    for count in [1, 3, 5, most] {
        let reader = open_bytes(&b.fs, &reseal(count, space)).expect("open");
        let listed: Vec<_> = reader.records().collect();
        let intact = listed.iter().filter(|r| r.is_ok()).count();
        assert_eq!(intact as u64, count.min(4), "count {count}");
        match listed.last() {
            Some(Err(e)) => assert_eq!(corruption_at(e), at, "count {count}"),
            other => panic!("count {count}: listing ended with {other:?}"),
        }
    }
    // A file with no records whose footer counts one.
    let empty = build(CompressionType::None, &[]);
    let mut f = empty.bytes.clone();
    f[32..60].copy_from_slice(
        &format::Footer {
            record_count: 1,
            record_bytes: 0,
        }
        .encode(),
    );
    assert_eq!(corruption_offset(open_bytes(&empty.fs, &f)), 32);
}

/// Header fields that are wrong under a valid checksum, each reported at its own offset.
#[test]
fn header_fields_are_checked_after_the_checksum() {
    let b = sweep_file();
    let reseal = |at: usize, bytes: &[u8]| {
        let mut f = b.bytes.clone();
        f[at..at + bytes.len()].copy_from_slice(bytes);
        let crc = mask(crc32c(&f[..28])).to_le_bytes();
        f[28..32].copy_from_slice(&crc);
        f
    };
    let cases: [(usize, &[u8]); 6] = [
        (8, &[2, 0, 0, 0]),
        (8, &[0, 0, 0, 0]),
        (12, &[8]),
        (24, &[3]),
        (24, &[0xff]),
        (25, &[0, 0, 1]),
    ];
    for (at, bytes) in cases {
        let got = open_bytes(&b.fs, &reseal(at, bytes));
        assert_eq!(corruption_offset(got), at as u64, "{at} {bytes:?}");
    }
    // Another column family or codec under a valid checksum is a different, valid header.
    let other = reseal(20, &[9]);
    let reader = open_bytes(&b.fs, &other).expect("open");
    assert_eq!(
        (reader.cf_id(), reader.compression()),
        (9, CompressionType::Snappy)
    );
    // A codec the records do not use: the compressed record is refused at its codec byte.
    let zstd = reseal(24, &[7]);
    let reader = open_bytes(&b.fs, &zstd).expect("open");
    let (k, _, r) = &b.records[0];
    assert_eq!(r.compression, CompressionType::Snappy);
    assert_eq!(corruption_offset(reader.read(k, r, true)), r.offset + 12);
    let (k, v, r) = &b.records[1];
    assert_eq!(r.compression, CompressionType::None);
    assert!(reader.read(k, r, true).expect("a raw record") == *v);
}

#[test]
fn the_header_must_name_the_expected_file() {
    let b = sweep_file();
    let file = b.fs.open_random_access(&blob_path()).expect("open file");
    let got = BlobFileReader::open(file, blob_path(), 8, b.meta.file_size);
    assert_eq!(corruption_offset(got), 12);
}

/// A hook that fails appends past `budget` bytes, syncs when `fail_sync`, creates when
/// `fail_create`, and every positional read when `fail_reads`.
#[derive(Default)]
struct Faults {
    budget: Option<u64>,
    fail_sync: bool,
    fail_create: bool,
    fail_reads: bool,
}

struct FaultyWritable {
    inner: Box<dyn WritableFile>,
    budget: Option<u64>,
    fail_sync: bool,
}

impl WritableFile for FaultyWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        if self
            .budget
            .is_some_and(|b| self.inner.len() + data.len() as u64 > b)
        {
            return Err(io::Error::other("injected append failure"));
        }
        self.inner.append(data)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> io::Result<()> {
        if self.fail_sync {
            return Err(io::Error::other("injected sync failure"));
        }
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

struct FailingReads;

impl RandomAccessFile for FailingReads {
    fn read_exact_at(&self, _offset: u64, _buf: &mut [u8]) -> io::Result<()> {
        Err(io::Error::other("injected read failure"))
    }
    fn len(&self) -> io::Result<u64> {
        Ok(0)
    }
}

impl FsHook for Faults {
    fn before(&self, call: FsCall<'_>) -> io::Result<()> {
        match call {
            FsCall::Create(_) if self.fail_create => Err(io::Error::other("injected")),
            _ => Ok(()),
        }
    }
    fn writable(&self, _path: &Path, file: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        Box::new(FaultyWritable {
            inner: file,
            budget: self.budget,
            fail_sync: self.fail_sync,
        })
    }
    fn random_access(
        &self,
        _path: &Path,
        file: Arc<dyn RandomAccessFile>,
    ) -> Arc<dyn RandomAccessFile> {
        match self.fail_reads {
            true => Arc::new(FailingReads),
            false => file,
        }
    }
}

fn faulty(faults: Faults) -> Arc<dyn FileSystem> {
    let mem = MemFileSystem::new();
    mem.create_dir_all(dir()).expect("mkdir");
    Arc::new(HookedFileSystem::new(Arc::new(mem), faults))
}

/// The context of an IO error, or a panic naming what came instead.
fn io_context<T: std::fmt::Debug>(r: Result<T>) -> String {
    match r {
        Err(Error::Io { context, .. }) => context,
        other => panic!("expected an IO error, got {other:?}"),
    }
}

#[test]
fn io_errors_are_io_errors_naming_the_file() {
    let name = "/db/000007.blob";
    let create = |fs: &Arc<dyn FileSystem>| {
        BlobFileBuilder::create(fs, dir(), NUMBER, CF, CompressionType::Lz4, None)
    };
    let fs = faulty(Faults {
        fail_create: true,
        ..Faults::default()
    });
    assert_eq!(
        io_context(create(&fs)),
        format!("creating blob file {name}")
    );
    let fs = faulty(Faults {
        budget: Some(HEADER_LEN as u64 + 10),
        ..Faults::default()
    });
    let mut b = create(&fs).expect("the header fits");
    let writing = format!("writing blob file {name}");
    assert_eq!(io_context(b.add(b"k", &random_bytes(100, 4))), writing);
    // After a failed append the file's tail is unknown: nothing more is written.
    let building = format!("building blob file {name}");
    assert_eq!(io_context(b.add(b"k", b"")), building);
    assert_eq!(io_context(b.finish()), building);
    // A large value goes in its own append; its failure is reported the same way.
    let fs = faulty(Faults {
        budget: Some(HEADER_LEN as u64 + 1000),
        ..Faults::default()
    });
    let mut b = create(&fs).expect("create");
    assert_eq!(io_context(b.add(b"k", &random_bytes(1 << 20, 5))), writing);
    let fs = faulty(Faults {
        fail_sync: true,
        ..Faults::default()
    });
    let mut b = create(&fs).expect("create");
    b.add(b"k", b"v").expect("add");
    assert_eq!(io_context(b.finish()), format!("syncing blob file {name}"));
    // A read that fails (not a short read) is an IO error, not corruption.
    let fs = faulty(Faults {
        fail_reads: true,
        ..Faults::default()
    });
    let mut b = create(&fs).expect("create");
    b.add(b"k", b"v").expect("add");
    let meta = b.finish().expect("finish");
    let file = fs.open_random_access(&blob_path()).expect("open");
    let got = BlobFileReader::open(file, blob_path(), NUMBER, meta.file_size);
    assert_eq!(
        io_context(got),
        format!("reading blob file header of {name}")
    );
}

/// A raw value of 64 KiB or more is read apart from its header and key (`read_split`): it
/// reads back exactly, and damage anywhere in its record is caught as in one read: the
/// checksum (checked reads), the header and the key (always).
#[test]
fn large_raw_values_read_apart_from_their_header_are_checked_the_same() {
    let large = random_bytes(80 << 10, 9);
    let b = build(
        CompressionType::None,
        &[
            entry("small", random_bytes(100, 8)),
            entry("large", large.clone()),
        ],
    );
    let (k, v, r) = &b.records[1];
    assert_eq!(r.compression, CompressionType::None);
    let reader = open_bytes(&b.fs, &b.bytes).expect("open");
    assert!(reader.read(k, r, true).expect("read") == *v);
    assert!(reader.read(k, r, false).expect("read") == *v);
    let start = r.offset as usize;
    let key_at = start + RECORD_HEADER_LEN;
    let value_at = key_at + k.len();
    let end = value_at + large.len();
    for i in [
        start,
        start + 4,
        start + 12,
        start + 13,
        start + 16,
        key_at,
        key_at + 4,
    ]
    .into_iter()
    .chain([value_at, value_at + 1, value_at + 40_000, end - 1])
    {
        let mut bytes = b.bytes.clone();
        bytes[i] ^= 0x10;
        let reader = open_bytes(&b.fs, &bytes).expect("records are not read at open");
        assert_eq!(
            corruption_offset(reader.read(k, r, true)),
            r.offset,
            "byte {i}"
        );
        let in_crc = (start + 13..key_at).contains(&i);
        match reader.read(k, r, false) {
            // Unchecked, damage to the value may go unseen; damage to the checksum leaves the
            // value intact.
            Ok(got) => assert!(
                i >= value_at || (in_crc && got == *v),
                "byte {i}: damage not caught"
            ),
            Err(e) => assert!(!in_crc && i < value_at, "byte {i}: {e}"),
        }
        // The small record is not affected.
        let (sk, sv, sr) = &b.records[0];
        assert!(reader.read(sk, sr, true).expect("small") == *sv);
    }
    // A file cut inside the value: the read of the large record fails, as corruption.
    let reader = open_bytes(&b.fs, &b.bytes).expect("open");
    b.fs.write_file_bytes(blob_path(), &b.bytes[..value_at + 1000]);
    assert!(matches!(
        reader.read(k, r, true),
        Err(Error::Corruption { .. })
    ));
}

/// Records read in file order through an iterator's readahead come from its windows after the
/// first two, and are checked in the window exactly as a direct read checks them: with a byte
/// flipped anywhere in the records, every record's windowed read has the direct read's
/// outcome (the same value, or corruption at the same offset), checksums verified or not.
#[test]
fn records_read_from_a_readahead_window_are_checked_as_direct_reads() {
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..12)
        .map(|i| match i % 3 {
            0 => entry(&format!("text{i}"), text_bytes(200 + i)),
            1 => entry(&format!("rand{i}"), random_bytes(150, i as u64)),
            _ => entry(&format!("e{i}"), Vec::new()),
        })
        .collect();
    let b = build(CompressionType::Snappy, &entries);
    assert!(b
        .records
        .iter()
        .any(|(_, _, r)| r.compression == CompressionType::Snappy));
    assert!(b
        .records
        .iter()
        .any(|(_, _, r)| r.compression == CompressionType::None));
    let outcome = |r: Result<Vec<u8>>| match r {
        Ok(v) => Ok(v),
        Err(e) => Err(corruption_at(&e)),
    };
    let records_end = b.bytes.len() - FOOTER_LEN;
    for i in (HEADER_LEN..records_end).chain([0]) {
        let mut bytes = b.bytes.clone();
        if i != 0 {
            bytes[i] ^= 0x04;
        }
        let reader = open_bytes(&b.fs, &bytes).expect("records are not read at open");
        for verify in [true, false] {
            let mut ra = BlobReadahead::default();
            for (n, (k, v, r)) in b.records.iter().enumerate() {
                let windowed = outcome(reader.read_ahead(k, r, verify, &mut ra));
                assert_eq!(windowed, outcome(reader.read(k, r, verify)), "byte {i}");
                if i == 0 {
                    assert!(windowed.as_ref() == Ok(v), "record {n}");
                }
            }
            assert!(ra.buffered_bytes() > 0, "the scan read through a window");
        }
    }
}
