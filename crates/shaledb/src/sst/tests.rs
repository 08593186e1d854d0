//! Table-level tests: build with `TableBuilder`, read with `Table`, damage files.

use super::format::FOOTER_LEN;
use super::*;
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::fs::{RandomAccessFile, WritableFile};
use crate::iter::InternalIterator;
use crate::key::{make_internal_key, LookupKey, ValueKind};
use crate::value::{LookupResult, Value};
use parking_lot::Mutex;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Block read options for tests.
fn ro(verify_checksums: bool, fill_cache: bool) -> BlockReadOptions {
    BlockReadOptions {
        verify_checksums,
        fill_cache,
    }
}

/// Looks up the user key of the internal key `ikey` as of its sequence number.
fn get(t: &Table, ikey: &[u8], verify_checksums: bool, fill_cache: bool) -> Result<LookupResult> {
    let p = crate::key::parse_internal_key(ikey).expect("test builds valid internal keys");
    t.get(
        &LookupKey::new(p.user_key, p.sequence),
        ro(verify_checksums, fill_cache),
    )
}

/// The found value, or a panic naming what was found instead.
fn found(r: LookupResult) -> Value {
    match r {
        LookupResult::Found(v) => v,
        other => panic!("expected a value, got {other:?}"),
    }
}

/// A writable file appending to a shared in-memory buffer.
struct MemWritable(Arc<Mutex<Vec<u8>>>);

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.0.lock().extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        self.0.lock().len() as u64
    }
}

/// A random-access file over bytes in memory.
struct MemRandom(Vec<u8>);

impl RandomAccessFile for MemRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| self.0.get(start..end))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.len() as u64)
    }
}

/// A writable file on the real filesystem (std::fs), for one end-to-end test.
struct StdWritable(std::fs::File, u64);

impl WritableFile for StdWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        io::Write::write_all(&mut self.0, data)?;
        self.1 += data.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        io::Write::flush(&mut self.0)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn len(&self) -> u64 {
        self.1
    }
}

struct StdRandom(std::fs::File);

impl RandomAccessFile for StdRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.0, buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

const FILE_NUMBER: u64 = 42;

fn path() -> PathBuf {
    PathBuf::from("/test/000042.sst")
}

fn opts(compression: CompressionType) -> TableBuilderOptions {
    TableBuilderOptions {
        block_size: 256,
        restart_interval: 4,
        bloom_bits_per_key: 10,
        compression,
        compression_level: None,
        compress_blob_reference_blocks: false,
        prefix_extractor: None,
        partition_index: false,
        partition_filters: false,
        metadata_block_size: 4096,
        index_restart_interval: 1,
        legacy_format: false,
        data_block_hash_ratio: None,
    }
}

fn ukey(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn ikey(i: usize, seq: u64) -> Vec<u8> {
    make_internal_key(&ukey(i), seq, ValueKind::Put)
}

fn value(i: usize) -> Vec<u8> {
    // Compressible but distinct.
    format!("value-{i}-{}", "x".repeat(i % 40)).into_bytes()
}

/// Entries for keys 0, 2, 4, ... (2n-2), sequence = i + 1.
fn entries(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| (ikey(2 * i, i as u64 + 1), value(2 * i)))
        .collect()
}

fn build(o: TableBuilderOptions, entries: &[(Vec<u8>, Vec<u8>)]) -> (Vec<u8>, TableProperties) {
    build_with_dictionary(o, entries, 0, 0)
}

fn open_bytes(bytes: Vec<u8>, cache: Option<Arc<BlockCache>>) -> Result<Arc<Table>> {
    let len = bytes.len() as u64;
    open_with(bytes, len, FILE_NUMBER, cache)
}

fn open_with(
    bytes: Vec<u8>,
    len: u64,
    file_number: u64,
    cache: Option<Arc<BlockCache>>,
) -> Result<Arc<Table>> {
    Table::open(Arc::new(MemRandom(bytes)), path(), file_number, len, cache).map(Arc::new)
}

fn collect(it: &mut TableIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().expect("iteration status");
    out
}

fn all_compressions() -> [CompressionType; 5] {
    [
        CompressionType::None,
        CompressionType::Snappy,
        CompressionType::Zlib,
        CompressionType::Lz4,
        CompressionType::Zstd,
    ]
}

#[test]
fn round_trip_every_compression() {
    let e = entries(1000);
    for c in all_compressions() {
        let (bytes, props) = build(opts(c), &e);
        assert!(
            props.num_data_blocks > 10,
            "{c:?}: {}",
            props.num_data_blocks
        );
        assert_eq!(props.num_entries, 1000);
        assert_eq!(props.compression, c.name());
        assert_eq!(props.smallest_seqno, 1);
        assert_eq!(props.largest_seqno, 1000);
        let t = open_bytes(bytes, None).expect("open");
        assert_eq!(t.properties(), &props);
        // Recorded sizes match the layout: data blocks start at 0 and are followed directly
        // by the filter; the index is the block before the footer.
        let index = t.index_handle_for_tests();
        assert_eq!(props.index_size, index.size + 5);
        assert_eq!(
            index.offset + index.size + 5 + FOOTER_LEN as u64,
            props.file_size
        );
        assert_eq!(t.approximate_offset_of(&e[0].0), 0);
        assert_eq!(t.file_number(), FILE_NUMBER);
        assert_eq!(t.path(), Path::new("/test/000042.sst"));
        assert_eq!(collect(&mut t.iter(ro(true, true))), e, "{c:?}");
        t.verify_checksums().expect("verify");
        if c != CompressionType::None {
            let raw: u64 = props.raw_key_size + props.raw_value_size;
            assert!(
                props.data_size < raw,
                "{c:?} data {} raw {raw}",
                props.data_size
            );
        }
    }
}

#[test]
fn empty_table() {
    let (bytes, props) = build(opts(CompressionType::Lz4), &[]);
    assert_eq!(props.num_entries, 0);
    let t = open_bytes(bytes, None).expect("open");
    let mut it = t.iter(ro(true, true));
    assert!(collect(&mut it).is_empty());
    it.seek_to_last();
    assert!(!it.valid());
    it.seek(&ikey(1, 1));
    assert!(!it.valid());
    assert_eq!(
        get(&t, &ikey(1, 1), true, true).expect("get"),
        LookupResult::NotPresent
    );
    t.verify_checksums().expect("verify");
}

#[test]
fn iterator_seek_next_prev_exact_keys() {
    let e = entries(500); // user keys key000000, key000002, ..., key000998
    let (bytes, _) = build(opts(CompressionType::Snappy), &e);
    let cache = Arc::new(BlockCache::new(1 << 20, 2));
    let t = open_bytes(bytes, Some(cache)).expect("open");
    let mut it = t.iter(ro(true, true));

    // Backwards over everything.
    let mut back = Vec::new();
    it.seek_to_last();
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().expect("status");
    back.reverse();
    assert_eq!(back, e);

    // Seek to every present and absent user key, at the newest sequence.
    for i in 0..1001 {
        it.seek(&make_internal_key(
            &ukey(i),
            crate::key::MAX_SEQUENCE,
            ValueKind::Put,
        ));
        let want = i.div_ceil(2);
        if want < 500 {
            assert!(it.valid(), "seek {i}");
            assert_eq!(it.key(), &e[want].0[..], "seek {i}");
            assert_eq!(it.value(), &e[want].1[..]);
        } else {
            assert!(!it.valid(), "seek {i}");
        }
    }
    // Older sequence than stored: the stored entry is newer, so we land on the next key.
    it.seek(&ikey(10, 1)); // stored key000010 has seq 6
    assert_eq!(it.key(), &e[6].0[..]);
    // Mixed directions across block boundaries.
    it.seek(&e[100].0);
    for (k, _) in e[..100].iter().rev() {
        it.prev();
        assert_eq!(it.key(), &k[..]);
    }
    it.prev();
    assert!(!it.valid());
    it.seek(&e[400].0);
    for (k, _) in &e[401..] {
        it.next();
        assert_eq!(it.key(), &k[..]);
    }
    it.next();
    assert!(!it.valid());
    it.seek(&e[250].0);
    it.next();
    it.prev();
    it.prev();
    assert_eq!(it.key(), &e[249].0[..]);
    it.status().expect("status");
}

#[test]
fn get_hits_misses_and_deletions() {
    // Several versions of each key, including deletions, some spanning block boundaries.
    let mut e = Vec::new();
    for i in 0..300 {
        let k = ukey(i * 3);
        for seq in (1..=3u64).rev() {
            let s = i as u64 * 10 + seq;
            let kind = if i % 7 == 0 && seq == 3 {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let v = if kind == ValueKind::Delete {
                Vec::new()
            } else {
                format!("v{i}.{seq}").into_bytes()
            };
            e.push((make_internal_key(&k, s, kind), v));
        }
    }
    for c in [CompressionType::None, CompressionType::Zstd] {
        let mut o = opts(c);
        o.block_size = 100;
        let (bytes, props) = build(o, &e);
        assert_eq!(props.num_deletions, 300 / 7 + 1);
        let cache = Arc::new(BlockCache::new(1 << 20, 2));
        let t = open_bytes(bytes, Some(cache.clone())).expect("open");
        for i in 0..300 {
            let k = ukey(i * 3);
            let base = i as u64 * 10;
            // Newest.
            let newest = make_internal_key(&k, crate::key::MAX_SEQUENCE, ValueKind::Put);
            let r = get(&t, &newest, true, true).expect("get");
            if i % 7 == 0 {
                assert_eq!(r, LookupResult::Deleted);
            } else {
                let v = found(r);
                assert_eq!(v, format!("v{i}.3").into_bytes());
                // The block was cached by this read: the value points into it.
                assert!(v.is_pinned());
            }
            // As of a snapshot between versions, read around the cache: an owned copy.
            let r = get(
                &t,
                &make_internal_key(&k, base + 2, ValueKind::Put),
                true,
                false,
            );
            let v = found(r.expect("get"));
            assert_eq!(v, format!("v{i}.2").into_bytes());
            // Older than every version.
            assert_eq!(
                get(&t, &make_internal_key(&k, base, ValueKind::Put), true, true).expect("get"),
                LookupResult::NotPresent
            );
            // Absent keys between and after.
            assert_eq!(
                get(&t, &ikey(i * 3 + 1, 1000), true, true).expect("get"),
                LookupResult::NotPresent
            );
        }
        assert_eq!(
            get(&t, &ikey(100_000, 1), true, true).expect("get"),
            LookupResult::NotPresent
        );
        assert!(cache.usage() > 0);
    }
}

#[test]
fn fill_cache_false_does_not_insert() {
    let e = entries(200);
    let (bytes, _) = build(opts(CompressionType::None), &e);
    let cache = Arc::new(BlockCache::new(1 << 20, 0));
    let t = open_bytes(bytes, Some(cache.clone())).expect("open");
    // Opening caches (and charges) the index and filter blocks, nothing else.
    let meta = cache.usage();
    assert!(meta > 0);
    let v = found(get(&t, &e[5].0, true, false).expect("get"));
    assert_eq!(v, e[5].1);
    assert!(
        !v.is_pinned(),
        "a block read around the cache is not pinned"
    );
    collect(&mut t.iter(ro(true, false)));
    assert_eq!(cache.usage(), meta);
    assert_eq!(found(get(&t, &e[5].0, true, true).expect("get")), e[5].1);
    let used = cache.usage();
    assert!(used > 0);
    // A second table gets its own cache id: no sharing of blocks at equal offsets.
    let (bytes2, _) = build(opts(CompressionType::None), &entries(3));
    let t2 = open_bytes(bytes2, Some(cache.clone())).expect("open");
    assert_eq!(collect(&mut t2.iter(ro(true, true))), entries(3));
    assert!(cache.usage() > used);
}

#[test]
fn bloom_filter_in_table() {
    let n = 10_000;
    let e: Vec<(Vec<u8>, Vec<u8>)> = (0..n).map(|i| (ikey(i, 1), b"v".to_vec())).collect();
    let mut o = opts(CompressionType::None);
    o.block_size = 4096;
    let (bytes, props) = build(o.clone(), &e);
    assert!(props.filter_size > 0);
    let t = open_bytes(bytes, None).expect("open");
    for i in 0..n {
        assert!(t.may_contain(&ukey(i)), "false negative {i}");
    }
    let fp = (n..n + 20_000).filter(|&i| t.may_contain(&ukey(i))).count();
    assert!((fp as f64) / 20_000.0 < 0.02, "false positives {fp}");

    o.bloom_bits_per_key = 0;
    let (bytes, props) = build(o, &e);
    assert_eq!(props.filter_size, 0);
    let t = open_bytes(bytes, None).expect("open");
    assert!(t.may_contain(b"anything"));
    assert_eq!(
        get(&t, &ikey(n + 5, 1), true, true).expect("get"),
        LookupResult::NotPresent
    );
}

#[test]
fn approximate_offsets_increase() {
    let e = entries(2000);
    let (bytes, props) = build(opts(CompressionType::None), &e);
    let t = open_bytes(bytes, None).expect("open");
    assert_eq!(t.approximate_offset_of(&e[0].0), 0);
    let mid = t.approximate_offset_of(&e[1000].0);
    let end = t.approximate_offset_of(&make_internal_key(b"zzz", 1, ValueKind::Put));
    assert!(mid > 0 && mid < end, "{mid} {end}");
    assert!(
        end >= props.data_size && end < props.file_size,
        "{end} {props:?}"
    );
}

#[test]
fn file_size_grows_while_building() {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let mut b = TableBuilder::new(
        opts(CompressionType::None),
        Box::new(MemWritable(buf.clone())),
        path(),
        FILE_NUMBER,
    );
    assert_eq!(b.file_size(), 0);
    let mut last = 0;
    for (k, v) in entries(100) {
        b.add(&k, &v).expect("add");
        assert!(b.file_size() >= last);
        last = b.file_size();
    }
    assert!(last > 1000);
    b.abandon();
}

#[test]
fn real_file_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("000042.sst");
    let f = std::fs::File::create(&p).expect("create");
    let e = entries(300);
    let mut b = TableBuilder::new(
        opts(CompressionType::Lz4),
        Box::new(StdWritable(f, 0)),
        p.clone(),
        FILE_NUMBER,
    );
    for (k, v) in &e {
        b.add(k, v).expect("add");
    }
    let props = b.finish().expect("finish");
    let size = std::fs::metadata(&p).expect("metadata").len();
    assert_eq!(props.file_size, size);
    let f = StdRandom(std::fs::File::open(&p).expect("open"));
    let t = Arc::new(Table::open(Arc::new(f), p, FILE_NUMBER, size, None).expect("open table"));
    assert_eq!(collect(&mut t.iter(ro(true, true))), e);
}

// ---------------------------------------------------------------- corruption

fn assert_corruption<T: std::fmt::Debug>(r: Result<T>, what: &str) {
    match r {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, path(), "{what}"),
        other => panic!("{what}: expected corruption, got {other:?}"),
    }
}

/// Opens the table and reads everything; returns the first error. Panics if a wrong entry is
/// ever returned.
fn read_all(bytes: Vec<u8>, e: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
    let t = open_bytes(bytes, None)?;
    let mut it = t.iter(ro(true, true));
    it.seek_to_first();
    let mut i = 0;
    while it.valid() {
        assert_eq!(
            (it.key(), it.value()),
            (&e[i].0[..], &e[i].1[..]),
            "wrong entry"
        );
        i += 1;
        it.next();
    }
    it.status()?;
    assert_eq!(i, e.len(), "entries silently missing");
    for (k, v) in e {
        match get(&t, k, true, true)? {
            LookupResult::Found(gv) => assert_eq!(&gv, v, "wrong get result"),
            other => panic!("get lost a key without an error: {other:?}"),
        }
    }
    t.verify_checksums()
}

#[test]
fn flipped_data_block_byte_is_corruption() {
    let e = entries(500);
    for c in all_compressions() {
        let (bytes, _) = build(opts(c), &e);
        for pos in [0usize, 10, 100, 1000, 3000] {
            let mut b = bytes.clone();
            b[pos] ^= 0x40;
            assert_corruption(read_all(b, &e), &format!("{c:?} flip at {pos}"));
        }
    }
}

#[test]
fn every_single_byte_flip_is_detected_or_harmless() {
    // Flip each byte of a small table in turn: opening, iterating and getting must never
    // panic and never return a wrong entry; with checksums the damage is always reported.
    let e = entries(40);
    let (bytes, _) = build(opts(CompressionType::Snappy), &e);
    for pos in 0..bytes.len() {
        let mut b = bytes.clone();
        b[pos] ^= 0x01;
        assert_corruption(read_all(b, &e), &format!("flip at {pos}"));
    }
}

#[test]
fn unverified_reads_of_damaged_blocks_never_panic() {
    let e = entries(60);
    let (bytes, props) = build(opts(CompressionType::Lz4), &e);
    for pos in 0..props.data_size as usize {
        for flip in [0x01u8, 0x80] {
            let mut b = bytes.clone();
            b[pos] ^= flip;
            let Ok(t) = open_bytes(b, None) else { continue };
            let mut it = t.iter(ro(false, true));
            it.seek_to_first();
            let mut n = 0;
            while it.valid() && n < 10_000 {
                it.next();
                n += 1;
            }
            it.seek_to_last();
            while it.valid() && n < 20_000 {
                it.prev();
                n += 1;
            }
            for (k, _) in e.iter().step_by(7) {
                let _ = get(&t, k, false, false);
            }
        }
    }
}

#[test]
fn index_block_damage_is_corruption() {
    let e = entries(500);
    let (bytes, _) = build(opts(CompressionType::None), &e);
    let t = open_bytes(bytes.clone(), None).expect("open");
    let start = t.index_handle_for_tests().offset as usize;
    let mut b = bytes.clone();
    b[start + 3] ^= 0x10;
    assert_corruption(open_bytes(b, None), "index flip");
}

#[test]
fn footer_damage_is_corruption() {
    let e = entries(100);
    let (bytes, _) = build(opts(CompressionType::None), &e);
    let footer = bytes.len() - FOOTER_LEN;
    for pos in footer..bytes.len() {
        let mut b = bytes.clone();
        b[pos] ^= 0x04;
        assert_corruption(open_bytes(b, None), &format!("footer flip at {pos}"));
    }
}

#[test]
fn truncated_file_is_corruption() {
    let e = entries(100);
    let (bytes, _) = build(opts(CompressionType::None), &e);
    for cut in [
        0,
        1,
        10,
        FOOTER_LEN - 1,
        FOOTER_LEN,
        bytes.len() / 2,
        bytes.len() - 1,
    ] {
        let b = bytes[..cut].to_vec();
        assert_corruption(open_bytes(b, None), &format!("cut to {cut}"));
    }
    // The caller claims the full size but the file is shorter: reads hit end of file.
    let len = bytes.len() as u64;
    let short = bytes[..bytes.len() - 10].to_vec();
    assert_corruption(open_with(short, len, FILE_NUMBER, None), "short read");
}

#[test]
fn wrong_file_number_is_corruption() {
    let (bytes, _) = build(opts(CompressionType::None), &entries(10));
    let len = bytes.len() as u64;
    match open_with(bytes, len, FILE_NUMBER + 1, None) {
        Err(Error::Corruption { offset, detail, .. }) => {
            assert_eq!(offset, len - FOOTER_LEN as u64 + 40);
            assert!(detail.contains("file number"), "{detail}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn block_moved_to_another_offset_is_rejected() {
    // Two tables with identical first blocks at different offsets would be caught by the
    // offset-bound checksum; simulate by pointing a reader at a valid block via a shifted file.
    let e = entries(100);
    let (bytes, _) = build(opts(CompressionType::None), &e);
    let mut shifted = vec![0u8; 7];
    shifted.extend_from_slice(&bytes);
    let file = MemRandom(shifted);
    let t = open_bytes(bytes, None).expect("open");
    let h = t.first_data_handle_for_tests();
    let moved = BlockHandle {
        offset: h.offset + 7,
        size: h.size,
    };
    let r = super::format::BlockSource::new(&file, &path(), u64::MAX).block(
        moved,
        true,
        "data block",
        None,
    );
    assert_corruption(r, "moved block");
}

#[test]
fn io_errors_are_io_not_corruption() {
    struct Failing;
    impl RandomAccessFile for Failing {
        fn read_exact_at(&self, _: u64, _: &mut [u8]) -> io::Result<()> {
            Err(io::Error::other("disk on fire"))
        }
        fn len(&self) -> io::Result<u64> {
            Ok(1000)
        }
    }
    match Table::open(Arc::new(Failing), path(), FILE_NUMBER, 1000, None) {
        Err(Error::Io { .. }) => {}
        other => panic!("expected IO error, got {other:?}"),
    }
}

/// `n` versions of "k" (sequence `n` down to 1, value `v{seq}`) then one "l".
fn versions_of_one_key(n: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut e: Vec<(Vec<u8>, Vec<u8>)> = (1..=n)
        .rev()
        .map(|s| {
            (
                make_internal_key(b"k", s, ValueKind::Put),
                format!("v{s}").into_bytes(),
            )
        })
        .collect();
    e.push((make_internal_key(b"l", 7, ValueKind::Put), b"l".to_vec()));
    e
}

/// Every version of `versions_of_one_key(n)` is found by get at its sequence, none below,
/// every entry by a seek, and all of them backwards; the table verifies.
fn check_versions_of_one_key(t: &Arc<Table>, e: &[(Vec<u8>, Vec<u8>)], n: u64) {
    for s in 1..=n {
        let r = get(t, &make_internal_key(b"k", s, ValueKind::Put), true, true);
        assert_eq!(found(r.expect("get")), format!("v{s}").into_bytes());
    }
    assert_eq!(
        get(t, &make_internal_key(b"k", 0, ValueKind::Put), true, true).expect("get"),
        LookupResult::NotPresent
    );
    let mut it = t.iter(ro(true, true));
    for (i, (k, _)) in e.iter().enumerate() {
        it.seek(k);
        assert_eq!(it.key(), &k[..], "seek {i}");
    }
    let mut back = Vec::new();
    it.seek_to_last();
    while it.valid() {
        back.push(it.key().to_vec());
        it.prev();
    }
    back.reverse();
    assert_eq!(back, e.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>());
    t.verify_checksums().expect("verify");
}

#[test]
fn many_versions_of_one_key_span_blocks() {
    // Separators between blocks holding the same user key must be the full last key, or
    // lookups would skip versions.
    let e = versions_of_one_key(200);
    let mut o = opts(CompressionType::None);
    o.block_size = 64;
    o.restart_interval = 2;
    let (bytes, props) = build(o, &e);
    assert!(props.num_data_blocks > 20);
    let t = open_bytes(bytes, None).expect("open");
    check_versions_of_one_key(&t, &e, 200);
}

#[test]
fn tables_and_iterators_are_thread_safe() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<Table>();
    assert_send_sync::<Block>();
    assert_send::<TableIterator>();
    assert_send::<TableBuilder>();
}

#[test]
fn large_values_and_incompressible_blocks() {
    // Values bigger than a block, and random bytes that do not compress (stored raw).
    use rand::{RngCore, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let e: Vec<(Vec<u8>, Vec<u8>)> = (0..20)
        .map(|i| {
            let mut v = vec![0u8; 1000 + i * 300];
            rng.fill_bytes(&mut v);
            (ikey(i, 1), v)
        })
        .collect();
    for c in all_compressions() {
        let (bytes, props) = build(opts(c), &e);
        assert_eq!(props.num_data_blocks, 20);
        let t = open_bytes(bytes, None).expect("open");
        assert_eq!(collect(&mut t.iter(ro(true, true))), e);
        // No block cache: every value is an owned copy, exact across the 20 blocks.
        for (k, v) in &e {
            let got = found(get(&t, k, true, true).expect("get"));
            assert_eq!(&got, v);
            assert!(!got.is_pinned());
        }
    }
}

#[test]
fn evicted_index_and_filter_are_read_again() {
    let e = entries(500);
    let (bytes, _) = build(opts(CompressionType::Lz4), &e);
    // A cache too small to keep anything: every index, filter and data block is re-read.
    let cache = Arc::new(BlockCache::new(1, 0));
    let t = open_bytes(bytes, Some(cache.clone())).expect("open");
    for (k, v) in e.iter().step_by(7) {
        let got = found(get(&t, k, true, true).expect("get"));
        assert_eq!(&got, v);
    }
    assert_eq!(collect(&mut t.iter(ro(true, true))), e);
    assert!(cache.usage() <= 64 << 10, "cache kept more than one entry");
}

#[test]
fn get_names_the_file_and_block_of_a_damaged_entry() {
    // Unverified read of a block whose first entry claims a shared prefix at a restart point:
    // the block iterator of a point lookup carries no path, the table adds it.
    let e = entries(100);
    let (mut bytes, _) = build(opts(CompressionType::None), &e);
    assert_eq!(bytes[0], 0, "first entry of the first block shares nothing");
    bytes[0] = 5;
    let t = open_bytes(bytes, None).expect("open");
    match get(&t, &e[0].0, false, true) {
        Err(Error::Corruption {
            file,
            offset,
            detail,
        }) => {
            assert_eq!(file, path());
            assert_eq!(offset, 0, "the damaged block starts the file");
            assert!(detail.contains("shared prefix longer"), "{detail}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

// ---------------------------------------------------------------- batched lookups

/// Table bytes in memory that record the offset of every read.
struct RecordingRandom {
    bytes: Vec<u8>,
    reads: Mutex<Vec<u64>>,
}

impl RandomAccessFile for RecordingRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.reads.lock().push(offset);
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| self.bytes.get(start..end))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.bytes.len() as u64)
    }
}

#[test]
fn multi_get_reads_each_data_block_once_and_agrees_with_get() {
    let (bytes, props) = build(opts(CompressionType::None), &entries(400));
    assert!(props.num_data_blocks > 10, "the test needs many blocks");
    let len = bytes.len() as u64;
    let file = Arc::new(RecordingRandom {
        bytes,
        reads: Mutex::new(Vec::new()),
    });
    let t = Table::open(file.clone(), path(), FILE_NUMBER, len, None).expect("open");
    // Keys present (even) and absent (odd) from 100 to 299, at a sequence that sees all.
    let lookups: Vec<LookupKey> = (100..300).map(|i| LookupKey::new(&ukey(i), 1000)).collect();
    let refs: Vec<&LookupKey> = lookups.iter().collect();

    // One get per key, with no cache, reads a block for every key the filter lets through.
    file.reads.lock().clear();
    let singles: Vec<(LookupResult, u64)> = lookups
        .iter()
        .map(|l| t.get_entry(l, ro(true, false)).expect("get"))
        .collect();
    let single_reads = std::mem::take(&mut *file.reads.lock());
    let blocks: std::collections::BTreeSet<u64> = single_reads.iter().copied().collect();
    assert!(single_reads.len() >= 100 && blocks.len() > 5);

    let mut batched: Vec<(LookupResult, u64)> = (0..refs.len())
        .map(|_| (LookupResult::NotPresent, 0))
        .collect();
    t.multi_get_entries(&refs, ro(true, false), &mut batched)
        .expect("multi_get");
    let batch_reads = std::mem::take(&mut *file.reads.lock());
    let want: Vec<u64> = blocks.into_iter().collect();
    assert_eq!(batch_reads, want, "each block once, in order");
    assert_eq!(batched, singles);
}

/// Builds a table; with zstd, with a dictionary of `max_dict` bytes (0: none) trained on
/// `train` bytes of samples (0: raw content).
fn build_with_dictionary(
    o: TableBuilderOptions,
    entries: &[(Vec<u8>, Vec<u8>)],
    max_dict: usize,
    train: usize,
) -> (Vec<u8>, TableProperties) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let mut b = TableBuilder::new(o, Box::new(MemWritable(buf.clone())), path(), FILE_NUMBER)
        .with_dictionary(max_dict, train);
    for (k, v) in entries {
        b.add(k, v).expect("add");
    }
    assert_eq!(b.num_entries(), entries.len() as u64);
    let props = b.finish().expect("finish");
    let bytes = buf.lock().clone();
    assert_eq!(props.file_size, bytes.len() as u64);
    (bytes, props)
}

/// Rows that look alike (as a table of records does) but differ: what dictionaries are for.
fn rows(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let row = format!(
                "{i}|{}|{}|DELIVER IN PERSON|TRUCK|1996-0{}-1{}|regular deposits {} haggle",
                i * 7 % 1000,
                i * 13 % 97,
                i % 9 + 1,
                i % 10,
                ["furiously", "quickly", "slyly", "carefully"][i % 4]
            );
            (ikey(i, 1), row.into_bytes())
        })
        .collect()
}

fn footer_version(bytes: &[u8]) -> u32 {
    let at = bytes.len() - FOOTER_LEN + 48;
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// `o` writing the index of formats 1 to 3 (`legacy`) or of format 4.
fn with_format(o: TableBuilderOptions, legacy: bool) -> TableBuilderOptions {
    TableBuilderOptions {
        legacy_format: legacy,
        data_block_hash_ratio: None,
        ..o
    }
}

/// The footer version a table gets: `older` (1 to 3) when written `legacy`, else 4.
fn version_for(legacy: bool, older: u32) -> u32 {
    if legacy {
        older
    } else {
        4
    }
}

#[test]
fn zstd_dictionaries_shrink_small_blocks_and_read_back() {
    let e = rows(3000);
    for legacy in [true, false] {
        dictionaries_shrink_small_blocks(&e, legacy);
    }
}

fn dictionaries_shrink_small_blocks(e: &[(Vec<u8>, Vec<u8>)], legacy: bool) {
    let mut o = with_format(opts(CompressionType::Zstd), legacy);
    o.block_size = 1024;
    let (plain, plain_props) = build(o.clone(), e);
    assert_eq!(footer_version(&plain), version_for(legacy, 1));
    for (max_dict, train) in [(4096, 0), (4096, 100 * 1024)] {
        let (bytes, props) = build_with_dictionary(o.clone(), e, max_dict, train);
        assert_eq!(
            footer_version(&bytes),
            version_for(legacy, 2),
            "dict {max_dict}, train {train}"
        );
        assert!(
            props.data_size * 10 < plain_props.data_size * 9,
            "dict {max_dict}, train {train}: {} vs {} bytes of data blocks",
            props.data_size,
            plain_props.data_size
        );
        read_all(bytes.clone(), e)
            .unwrap_or_else(|err| panic!("dict {max_dict}, train {train}: {err:?}"));
        // Reads through the block cache and readahead use the dictionary too.
        let t = open_bytes(bytes, Some(Arc::new(BlockCache::new(1 << 20, 0)))).expect("open");
        assert_eq!(collect(&mut t.iter(ro(true, true))), e);
        assert_eq!(collect(&mut t.iter(ro(true, true))), e);
    }
}

#[test]
fn dictionaries_apply_to_zstd_only_and_survive_failed_training() {
    for legacy in [true, false] {
        // Another codec ignores the dictionary option: format 1, as before.
        let e = rows(500);
        let o = |c| with_format(opts(c), legacy);
        let (bytes, _) = build_with_dictionary(o(CompressionType::Lz4), &e, 4096, 0);
        assert_eq!(footer_version(&bytes), version_for(legacy, 1));
        read_all(bytes, &e).expect("lz4");
        // Three entries are too few samples for zstd's trainer: no dictionary, still readable.
        let few = rows(3);
        let (bytes, _) = build_with_dictionary(o(CompressionType::Zstd), &few, 4096, 8192);
        assert_eq!(footer_version(&bytes), version_for(legacy, 1));
        read_all(bytes, &few).expect("few");
        // An empty table with a dictionary option is an empty table.
        let (bytes, _) = build_with_dictionary(o(CompressionType::Zstd), &[], 4096, 0);
        read_all(bytes, &[]).expect("empty");
    }
}

#[test]
fn every_byte_flip_of_a_dictionary_table_is_detected() {
    let e = rows(60);
    for legacy in [true, false] {
        let o = with_format(opts(CompressionType::Zstd), legacy);
        let (bytes, _) = build_with_dictionary(o, &e, 1024, 0);
        assert_eq!(footer_version(&bytes), version_for(legacy, 2));
        for pos in 0..bytes.len() {
            let mut b = bytes.clone();
            b[pos] ^= 0x01;
            assert_corruption(read_all(b, &e), &format!("legacy {legacy}: flip at {pos}"));
        }
    }
}

#[test]
fn a_footer_and_metaindex_that_disagree_about_the_dictionary_are_corruption() {
    let e = rows(200);
    let o = with_format(opts(CompressionType::Zstd), true);
    let (with, _) = build_with_dictionary(o.clone(), &e, 1024, 0);
    // Format 2 claimed by a table without a dictionary block, and format 1 by one with it:
    // rewrite the version and reseal the footer's checksum.
    let (without, _) = build(o, &e);
    for (mut bytes, version) in [(without, 2u32), (with, 1u32)] {
        let f = bytes.len() - FOOTER_LEN;
        bytes[f + 48..f + 52].copy_from_slice(&version.to_le_bytes());
        let crc = crate::checksum::mask(crate::checksum::crc32c(&bytes[f..f + 52]));
        bytes[f + 52..f + 56].copy_from_slice(&crc.to_le_bytes());
        assert_corruption(open_bytes(bytes, None), &format!("version {version}"));
    }
}

/// Opens `bytes` with the index and filter kept in `cache` (`cache_index_and_filter_blocks`).
fn open_meta_in_cache(bytes: Vec<u8>, cache: Arc<BlockCache>) -> Result<Arc<Table>> {
    let len = bytes.len() as u64;
    Table::open_with_cache_id(
        Arc::new(MemRandom(bytes)),
        path(),
        FILE_NUMBER,
        len,
        Some(cache),
        Table::new_cache_id(),
        true,
    )
    .map(Arc::new)
}

#[test]
fn index_and_filter_in_the_block_cache_are_charged_evicted_and_read_again() {
    let e = entries(2000);
    let (bytes, _) = build(opts(CompressionType::Snappy), &e);
    // Kept in the table: charged to the cache through a pinned reservation.
    let pinned = Arc::new(BlockCache::new(1 << 20, 0));
    let t = open_bytes(bytes.clone(), Some(pinned.clone())).expect("open");
    let reserved = pinned.usage();
    // A held index also keeps its heads, charged with it; an index in the cache has none.
    let heads = t
        .index_heads()
        .map_or(0, crate::sst::index_block::IndexHeads::heap_size);
    assert!(heads > 0, "an index of this size has heads");
    drop(t);
    assert_eq!(pinned.usage(), 0, "the reservation goes with the table");
    // In the cache: the same bytes as evictable entries, no reservation.
    let cache = Arc::new(BlockCache::new(1 << 20, 0));
    let t = open_meta_in_cache(bytes.clone(), cache.clone()).expect("open");
    assert_eq!(
        cache.usage() + heads,
        reserved,
        "index and filter charged as entries"
    );
    for (k, v) in e.iter().step_by(13) {
        assert_eq!(&found(get(&t, k, true, false).expect("get")), v);
    }
    assert_eq!(
        get(&t, &ikey(1, 5), true, false).expect("absent"),
        LookupResult::NotPresent
    );
    // A cache too small for them: every lookup reads them again, and answers the same.
    let tiny = Arc::new(BlockCache::new(1, 0));
    let t = open_meta_in_cache(bytes, tiny.clone()).expect("open");
    for (k, v) in e.iter().step_by(29) {
        assert_eq!(&found(get(&t, k, true, true).expect("get")), v);
    }
    assert_eq!(collect(&mut t.iter(ro(true, true))), e);
    assert!(t.may_contain(&ukey(0)));
    t.verify_checksums().expect("verify");
    assert!(
        tiny.usage() <= 64 << 10,
        "the tiny cache kept more than one entry"
    );
}

mod block_hash;
mod partitioned;
mod secondary_cache;
mod small_index;

/// A table read with a global sequence number (an ingested table): every key is presented
/// with it, a seek below it steps past the key, a lookup below it finds nothing.
#[test]
fn global_sequence_number_is_presented_on_every_read() {
    let entries: Vec<(Vec<u8>, Vec<u8>)> =
        (0..200).map(|i| (ikey(2 * i, 0), value(2 * i))).collect();
    let (bytes, _) = build(opts(CompressionType::None), &entries);
    let len = bytes.len() as u64;
    let table = Table::open(Arc::new(MemRandom(bytes)), path(), FILE_NUMBER, len, None)
        .expect("open")
        .with_global_seqno(Some(70));
    let t = Arc::new(table);
    let mut it = t.iter(ro(true, false));
    let got = collect(&mut it);
    let want: Vec<_> = (0..200).map(|i| (ikey(2 * i, 70), value(2 * i))).collect();
    assert_eq!(got, want);
    // Backward too.
    it.seek_to_last();
    assert_eq!(it.key(), ikey(398, 70));
    it.prev();
    assert_eq!(it.key(), ikey(396, 70));
    // A seek at or above 70 lands on the key; below 70 the key sorts before the target.
    it.seek(&ikey(100, 70));
    assert_eq!(it.key(), ikey(100, 70));
    it.seek(&ikey(100, 69));
    assert_eq!(it.key(), ikey(102, 70));
    it.seek(&ikey(101, 5));
    assert_eq!(it.key(), ikey(102, 70));
    it.seek(&ikey(398, 3));
    assert!(!it.valid());
    it.status().expect("status");
    // Point lookups: visible at 70 and above, with sequence number 70.
    let at = |seq| {
        t.get_entry(&LookupKey::new(&ukey(100), seq), ro(true, false))
            .expect("get")
    };
    let (r, seq) = at(70);
    assert_eq!(found(r).as_ref(), value(100).as_slice());
    assert_eq!(seq, 70);
    assert!(matches!(at(69).0, LookupResult::NotPresent));
    assert!(matches!(at(u64::MAX >> 8).0, LookupResult::Found(_)));
    // Zero means no rewriting at all.
    let plain = Table::open(
        Arc::new(MemRandom(build(opts(CompressionType::None), &entries).0)),
        path(),
        FILE_NUMBER,
        len,
        None,
    )
    .expect("open")
    .with_global_seqno(Some(0));
    let mut it = Arc::new(plain).iter(ro(true, false));
    assert_eq!(collect(&mut it), entries);
}

/// The kinds of the entries of each data block of a table, and each block's stored codec.
fn blocks_by_codec(bytes: &[u8], t: &Table) -> Vec<(CompressionType, Vec<ValueKind>)> {
    use super::block::{Block, BlockIter};
    let mut out = Vec::new();
    for h in t.data_handles_for_tests() {
        let (start, end) = (h.offset as usize, (h.offset + h.size) as usize);
        let codec = CompressionType::from_u8(bytes[end]).expect("codec byte");
        let raw = match codec {
            CompressionType::None => bytes[start..end].to_vec(),
            // A compressed block starts with its decoded length (a varint).
            _ => {
                let (_, n) = crate::coding::get_varint64(&bytes[start..end]).expect("length");
                crate::compression::decompress(codec, &bytes[start + n..end], 1 << 20)
                    .expect("decompress")
            }
        };
        let mut it = BlockIter::new(Arc::new(Block::new(raw).expect("block")));
        let mut kinds = Vec::new();
        it.seek_to_first();
        while it.valid() {
            kinds.push(crate::key::parse_internal_key(it.key()).expect("key").kind);
            it.next();
        }
        out.push((codec, kinds));
    }
    out
}

#[test]
fn blocks_of_blob_references_are_stored_uncompressed_unless_asked() {
    // Keys 0-399 and 800-1199 are blob references (with a tombstone among the second run),
    // 400-799 values; every value compresses.
    let kind_of = |i: usize| match i {
        400..800 => ValueKind::Put,
        1000 => ValueKind::Delete,
        _ => ValueKind::BlobIndex,
    };
    let e: Vec<(Vec<u8>, Vec<u8>)> = (0..1200)
        .map(|i| (make_internal_key(&ukey(i), 1, kind_of(i)), value(i)))
        .collect();
    for compress_references in [false, true] {
        let o = TableBuilderOptions {
            compress_blob_reference_blocks: compress_references,
            ..opts(CompressionType::Snappy)
        };
        let (bytes, _) = build(o, &e);
        let t = open_bytes(bytes.clone(), None).expect("open");
        assert_eq!(collect(&mut t.iter(ro(true, true))), e);
        let blocks = blocks_by_codec(&bytes, &t);
        let mut raw_blocks = 0;
        for (codec, kinds) in &blocks {
            let has_value = kinds.contains(&ValueKind::Put);
            let expected = match has_value || compress_references {
                true => CompressionType::Snappy,
                false => CompressionType::None,
            };
            assert_eq!(*codec, expected, "block of {kinds:?}");
            raw_blocks += usize::from(*codec == CompressionType::None);
        }
        // Most blocks are all references: the rule is not vacuous.
        match compress_references {
            true => assert_eq!(raw_blocks, 0),
            false => assert!(
                raw_blocks * 2 > blocks.len(),
                "{raw_blocks} of {}",
                blocks.len()
            ),
        }
        assert!(blocks.len() > 10, "{} blocks", blocks.len());
    }
}
