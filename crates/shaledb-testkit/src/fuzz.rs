//! Fuzz target bodies, shared by the cargo-fuzz targets in `fuzz/` and by the corpus replay
//! test (`tests/fuzz_corpus.rs`), so CI re-checks every committed input without the fuzzer.
//!
//! Each function feeds arbitrary bytes to one on-disk parser. The property is the engine's
//! contract for untrusted bytes: no panic, no unbounded allocation, errors as values. Where the
//! input happens to be valid, cheap consistency checks run too.

use shaledb::fs::{FileSystem, MemFileSystem};
use shaledb::internals::{
    parse_internal_key, write_batch_from_data, BackupMeta, BlobFileBuilder, BlobFileReader,
    BlobRef, Block, BlockIter, BlockReadOptions, IndexBlockIter, IndexForm, InternalIterator,
    LogRead, LogReader, LookupKey, Table, VersionEdit, WalMarker, MAX_SEQUENCE,
};
use shaledb::{CompressionType, Db, Options, ReadOptions, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// A block decoder: build, then walk both ways and seek, as a key/value block and as an
/// index block of every form.
pub fn block(data: &[u8]) {
    let Ok(block) = Block::new(data.to_vec()) else {
        return;
    };
    let block = Arc::new(block);
    for form in [IndexForm::LEGACY, IndexForm::v4(false), IndexForm::v4(true)] {
        index_block(&block, form, data);
    }
    let mut it = BlockIter::new(block.clone());
    let mut keys = Vec::new();
    it.seek_to_first();
    while it.valid() && keys.len() < 100_000 {
        keys.push(it.key().to_vec());
        let _ = it.value();
        it.next();
    }
    let _ = it.status();
    it.seek_to_last();
    let mut n = 0;
    while it.valid() && n < 100_000 {
        it.prev();
        n += 1;
    }
    for k in keys.iter().take(64) {
        it.seek(k);
        let _ = it.status();
        // A get's search, through the block's hash index if it has one (its buckets are
        // fuzzed too; a damaged index may misplace a key, never panic).
        let mut get = BlockIter::new(block.clone());
        get.seek_for_get(k);
        let _ = (get.valid(), get.status());
    }
    let mut bytewise = BlockIter::new_bytewise(block);
    bytewise.seek(data.get(..data.len().min(8)).unwrap_or_default());
    let _ = bytewise.status();
}

/// An index block decoder of `form`: walk both ways (no decoded handle may leave a file
/// of `data.len()` bytes) and seek.
fn index_block(block: &Arc<Block>, form: IndexForm, data: &[u8]) {
    let limit = data.len() as u64;
    let mut it = IndexBlockIter::new(block.clone(), form).with_limit(limit);
    let mut keys = Vec::new();
    it.seek_to_first();
    while it.valid() && keys.len() < 100_000 {
        let (offset, size) = it.offset_and_size();
        assert!(offset + size + 5 <= limit, "a handle past the limit");
        keys.push(it.key().to_vec());
        it.next();
    }
    let _ = it.status();
    it.seek_to_last();
    let mut n = 0;
    while it.valid() && n < 100_000 {
        it.prev();
        n += 1;
    }
    for k in keys.iter().take(64) {
        let mut target = k.clone();
        target.extend_from_slice(&[0; 8]);
        it.seek(&target);
        let _ = it.status();
    }
}

/// A whole table file: open, scan, get.
pub fn sst(data: &[u8]) {
    let fs = MemFileSystem::new();
    let path = Path::new("/fuzz/000007.sst");
    fs.write_file_bytes(path, data);
    let Ok(file) = fs.open_random_access(path) else {
        return;
    };
    let Ok(table) = Table::open(file, path.to_path_buf(), 7, data.len() as u64, None) else {
        return;
    };
    let table = Arc::new(table);
    let checked = BlockReadOptions {
        verify_checksums: true,
        fill_cache: false,
    };
    let mut it = table.iter(checked);
    it.seek_to_first();
    let mut keys = Vec::new();
    while it.valid() && keys.len() < 100_000 {
        keys.push(it.key().to_vec());
        it.next();
    }
    let _ = it.status();
    // Backwards, and seeks stepping back: with a two-level index these cross index
    // partitions both ways.
    it.seek_to_last();
    let mut n = 0;
    while it.valid() && n < 100_000 {
        it.prev();
        n += 1;
    }
    let _ = it.status();
    for k in keys.iter().step_by(5).take(32) {
        it.seek(k);
        if it.valid() {
            it.prev();
        }
        let _ = it.status();
    }
    for k in keys.iter().take(64) {
        // Keys from a damaged table may not parse: look those up whole, as user keys.
        let lookup = match parse_internal_key(k) {
            Some(p) => LookupKey::new(p.user_key, p.sequence),
            None => LookupKey::new(k, MAX_SEQUENCE),
        };
        let _ = table.get(&lookup, checked);
        // The filter by user key and by prefix (FixedPrefix(3): the partitioned seed's
        // extractor); with filter partitions each checks the partition the key would be in.
        let user = parse_internal_key(k).map_or(&k[..], |p| p.user_key);
        let _ = table.may_contain(user);
        let _ = table.may_contain_prefix(user.get(..3).unwrap_or(user), "rocksdb.FixedPrefix.3");
    }
    let unchecked = BlockReadOptions {
        verify_checksums: false,
        fill_cache: false,
    };
    let _ = table.get(&LookupKey::new(b"k", 5), unchecked);
    let _ = table.verify_checksums();
    let _ = table.approximate_offset_of(b"zzzzzzzzz");
}

/// A whole blob file (number 7): open, list every record, read each back. A read that
/// succeeds with its checksum verified must give the same value without; a read under another
/// key, or with a reference that disagrees with its record, must fail.
pub fn blob_file(data: &[u8]) {
    let fs = MemFileSystem::new();
    let path = Path::new("/fuzz/000007.blob");
    fs.write_file_bytes(path, data);
    let Ok(file) = fs.open_random_access(path) else {
        return;
    };
    let Ok(reader) = BlobFileReader::open(file, path.to_path_buf(), 7, data.len() as u64) else {
        return;
    };
    for item in reader.records().take(100_000) {
        let Ok((key, r)) = item else {
            break;
        };
        let checked = reader.read(&key, &r, true);
        if let Ok(v) = &checked {
            let unchecked = reader.read(&key, &r, false);
            assert_eq!(unchecked.as_ref().ok(), Some(v), "unchecked read differs");
        }
        let mut longer = key.clone();
        longer.push(b'x');
        let mut changed = key.clone();
        if let Some(last) = changed.last_mut() {
            *last ^= 1;
            assert!(
                reader.read(&changed, &r, false).is_err(),
                "read another key"
            );
        }
        assert!(
            reader.read(&longer, &r, false).is_err(),
            "read a longer key"
        );
        let other_codec = match r.compression {
            CompressionType::None => CompressionType::Zstd,
            _ => CompressionType::None,
        };
        let disagreeing = [
            BlobRef {
                size: r.size + 1,
                ..r
            },
            BlobRef {
                compression: other_codec,
                ..r
            },
        ];
        for w in disagreeing {
            assert!(reader.read(&key, &w, false).is_err(), "read through {w:?}");
        }
        // Misplaced references: anything but a panic.
        for offset in [r.offset.wrapping_sub(1), r.offset + 1, u64::MAX] {
            let _ = reader.read(&key, &BlobRef { offset, ..r }, false);
        }
    }
}

/// A small finished blob file and what it holds: the blob targets and their seeds start from
/// it.
#[derive(Debug, Clone)]
pub struct BlobSample {
    /// The file's bytes (blob file number 7).
    pub bytes: Vec<u8>,
    /// Each record's user key, value and reference, in file order.
    pub records: Vec<(Vec<u8>, Vec<u8>, BlobRef)>,
}

impl BlobSample {
    /// A blob file (number 7) written with `codec`: a compressible value, an incompressible
    /// one, an empty one and a short one, under distinct keys no value contains.
    pub fn build(codec: CompressionType) -> BlobSample {
        let mem = MemFileSystem::new();
        let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
        let dir = Path::new("/sample");
        let made = fs.create_dir_all(dir).map_err(shaledb::Error::from);
        let mut b = made
            .and_then(|()| BlobFileBuilder::create(&fs, dir, 7, 0, codec, None))
            .unwrap_or_else(|e| panic!("creating the sample blob file: {e}"));
        let mut noise = 0x9e37_79b9_7f4a_7c15u64;
        let incompressible: Vec<u8> = (0..64)
            .map(|_| {
                noise ^= noise << 13;
                noise ^= noise >> 7;
                noise ^= noise << 17;
                (noise >> 32) as u8
            })
            .collect();
        let values: [(&[u8], Vec<u8>); 4] = [
            (
                b"apple",
                b"the quick brown fox jumps over the lazy dog; ".repeat(5),
            ),
            (b"banana", incompressible),
            (b"cherry", Vec::new()),
            (b"damson", b"v".to_vec()),
        ];
        let mut records = Vec::new();
        for (k, v) in values {
            let r = b
                .add(k, &v)
                .unwrap_or_else(|e| panic!("adding to the sample blob file: {e}"));
            records.push((k.to_vec(), v, r));
        }
        let meta = b
            .finish()
            .unwrap_or_else(|e| panic!("finishing the sample blob file: {e}"));
        let bytes = mem
            .read_file_bytes(dir.join("000007.blob"))
            .unwrap_or_default();
        assert_eq!(bytes.len() as u64, meta.file_size);
        BlobSample { bytes, records }
    }

    /// Opens the sample as blob file 7.
    pub fn open(&self) -> shaledb::Result<BlobFileReader> {
        let fs = MemFileSystem::new();
        let path = Path::new("/sample/000007.blob");
        fs.write_file_bytes(path, &self.bytes);
        let file = fs.open_random_access(path)?;
        BlobFileReader::open(file, path.to_path_buf(), 7, self.bytes.len() as u64)
    }
}

/// The Snappy sample the `blob_ref` target reads through.
pub fn blob_sample() -> &'static BlobSample {
    static SAMPLE: OnceLock<BlobSample> = OnceLock::new();
    SAMPLE.get_or_init(|| BlobSample::build(CompressionType::Snappy))
}

/// The blob reference decoder: a decoded reference (or table entry: a reference and a TTL
/// family's write time) has exactly the input as its encoding, and reading it from the sample
/// file under any of its keys either fails or is exactly that key's own reference, returning
/// its value.
pub fn blob_ref(data: &[u8]) {
    if let Some((r, write_time)) = BlobRef::decode_entry(data) {
        let mut again = Vec::new();
        r.encode_entry_to(write_time, &mut again);
        assert_eq!(again, data, "an entry has one encoding");
        assert_eq!(BlobRef::decode(data).is_some(), write_time.is_none());
    }
    let Some(r) = BlobRef::decode(data) else {
        return;
    };
    let mut again = Vec::new();
    r.encode_to(&mut again);
    assert_eq!(again, data, "a reference has one encoding");
    let _ = r.record_bytes(data);
    let sample = blob_sample();
    let Ok(reader) = sample.open() else {
        panic!("the sample blob file does not open");
    };
    for (key, value, real) in &sample.records {
        for verify in [true, false] {
            if let Ok(v) = reader.read(key, &r, verify) {
                assert_eq!(&r, real, "a reference read another record");
                assert_eq!(&v, value, "a reference read a wrong value");
            }
        }
    }
}

/// The WAL / MANIFEST record reader, to the end of the input.
pub fn wal(data: &[u8]) {
    let fs = MemFileSystem::new();
    let path = Path::new("/fuzz/000001.log");
    fs.write_file_bytes(path, data);
    let Ok(file) = fs.open_sequential(path) else {
        return;
    };
    let mut reader = LogReader::new(file, path.to_path_buf());
    // Every read consumes input; bound the loop anyway.
    for _ in 0..(data.len() + 16) {
        match reader.read() {
            Ok(LogRead::Eof) => {
                // The log ends at the end of the file or where zeros run to it (preallocated
                // space): a reader resumed there reads nothing more.
                let at = usize::try_from(reader.position()).unwrap_or(usize::MAX);
                assert!(at <= data.len(), "end {at} past the file's {}", data.len());
                assert!(data[at..].iter().all(|&b| b == 0), "end {at} before data");
                return;
            }
            Err(_) => return,
            Ok(LogRead::Record { data, .. }) => {
                // A marker read back from its encoding is the same marker.
                if let Some(Ok(marker)) = WalMarker::decode(&data) {
                    let again = WalMarker::decode(&marker.encode());
                    assert_eq!(again, Some(Ok(marker)));
                }
                let _ = write_batch_from_data(data.clone());
                let _ = VersionEdit::decode(&data);
            }
            Ok(LogRead::Damaged { .. }) => {}
        }
    }
}

/// The version-edit decoder; a decoded edit must re-encode to something that decodes equal,
/// and an ingested table (tag 18) must read at its recorded sequence numbers.
pub fn version_edit(data: &[u8]) {
    if let Ok(edit) = VersionEdit::decode(data) {
        for (_, f) in &edit.new_files {
            // An ingested table (tag 18): all its keys read at one sequence number.
            if let Some(seq) = f.global_seqno {
                assert_eq!(
                    (f.smallest_seqno, f.largest_seqno),
                    (seq, seq),
                    "tag 18 checked"
                );
            }
        }
        let mut again = Vec::new();
        edit.encode(&mut again);
        assert_eq!(
            VersionEdit::decode(&again).as_ref(),
            Ok(&edit),
            "a decoded edit must round trip"
        );
    }
}

/// The backup meta-file decoder (docs/format/backup.md); a decoded meta file re-encodes to
/// exactly its bytes and names one MANIFEST.
pub fn backup_meta(data: &[u8]) {
    if let Ok(m) = BackupMeta::decode(data, Path::new("meta/1")) {
        assert_eq!(
            m.encode(),
            data,
            "a decoded meta file must re-encode to its bytes"
        );
        assert!(
            m.manifest_number().is_some(),
            "a decoded meta file has a MANIFEST"
        );
        for f in &m.files {
            assert!(f.shared_name().len() > f.name.len() || !f.is_shared());
        }
    }
}

/// The write-batch decoder; a decoded batch iterates exactly its count of entries.
pub fn write_batch(data: &[u8]) {
    if let Ok(b) = write_batch_from_data(data.to_vec()) {
        assert_eq!(b.iter().count(), b.len(), "count matches entries");
        let mut copy = WriteBatch::new();
        copy.append(&b);
        assert_eq!(copy.len(), b.len());
    }
}

/// Operations read from the input, applied to a database on a crashable in-memory filesystem
/// and to a `BTreeMap`: every read must agree with the model; after a simulated power loss
/// (all writes here are synced) nothing may be lost.
pub fn api(data: &[u8]) {
    let fs = MemFileSystem::new();
    let opts = Options {
        fs: Arc::new(fs.clone()),
        write_buffer_size: 4096,
        target_file_size_base: 4096,
        max_bytes_for_level_base: 16 << 10,
        level0_file_num_compaction_trigger: 2,
        max_background_jobs: 1,
        ..Default::default()
    };
    let dir = Path::new("/fuzzdb");
    let Ok(mut db) = Db::open(dir, opts.clone()) else {
        panic!("open of a fresh database failed");
    };
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let sync = WriteOptions {
        sync: true,
        ..Default::default()
    };
    let mut input = data.iter().copied();
    let mut next = || input.next();
    while let Some(op) = next() {
        let k = vec![b'k', next().unwrap_or(0) % 32];
        match op % 8 {
            0 | 1 => {
                let len = usize::from(next().unwrap_or(0));
                let v = vec![next().unwrap_or(0); len];
                if db.put_opt(&sync, &k, &v).is_ok() {
                    model.insert(k, v);
                }
            }
            2 if op & 0x80 != 0 => {
                // A range delete of up to 8 keys from k.
                let end = vec![b'k', k[1].saturating_add(next().unwrap_or(0) % 8)];
                if db.delete_range_opt(&sync, &k, &end).is_ok() {
                    let doomed: Vec<Vec<u8>> = model
                        .range(k.clone()..end)
                        .map(|(k, _)| k.clone())
                        .collect();
                    for d in doomed {
                        model.remove(&d);
                    }
                }
            }
            2 => {
                if db.delete_opt(&sync, &k).is_ok() {
                    model.remove(&k);
                }
            }
            3 => {
                let got = db.get(&k).ok().flatten();
                assert_eq!(
                    got.as_deref(),
                    model.get(&k).map(Vec::as_slice),
                    "get disagrees with the model"
                );
            }
            4 => {
                let got: Vec<(Vec<u8>, Vec<u8>)> =
                    db.iter_collect(&ReadOptions::default()).unwrap_or_default();
                let want: Vec<_> = model.iter().map(|(a, b)| (a.clone(), b.clone())).collect();
                assert_eq!(got, want, "scan disagrees with the model");
            }
            5 => {
                let _ = db.flush();
            }
            6 => {
                let _ = db.compact_range(None, None);
            }
            _ => {
                // Power loss (everything acknowledged was synced), or a clean reopen.
                if op & 0x80 != 0 {
                    fs.crash();
                } else {
                    let _ = db.close();
                }
                drop(db);
                db = match Db::open(dir, opts.clone()) {
                    Ok(d) => d,
                    Err(e) => panic!("reopen failed: {e}"),
                };
            }
        }
    }
    for (k, v) in &model {
        assert_eq!(
            db.get(k).ok().flatten().as_deref(),
            Some(v.as_slice()),
            "lost a synced write"
        );
    }
}

/// Collects a full scan (helper for the API target).
trait IterCollect {
    fn iter_collect(&self, ro: &ReadOptions) -> shaledb::Result<Vec<(Vec<u8>, Vec<u8>)>>;
}

impl IterCollect for Db {
    fn iter_collect(&self, ro: &ReadOptions) -> shaledb::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut it = self.iter(ro);
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status()?;
        Ok(out)
    }
}

/// The decoder of a table's `shaledb.blob.references` property: a value it accepts has one
/// encoding, with file numbers strictly ascending and every count at least 1; the file count
/// it reads never makes it allocate beyond what the value's length allows.
pub fn blob_references(data: &[u8]) {
    let Some(refs) = shaledb::internals::decode_blob_references(data) else {
        return;
    };
    assert_eq!(
        shaledb::internals::encode_blob_references(&refs),
        data,
        "a property value has one encoding"
    );
    assert!(
        refs.len() <= data.len() / 3,
        "more files than the value can hold"
    );
    for pair in refs.windows(2) {
        assert!(pair[0].file_number < pair[1].file_number, "numbers ascend");
    }
    assert!(
        refs.iter().all(|r| r.count >= 1),
        "every file is referenced"
    );
}

/// A fuzz target body.
pub type Target = fn(&[u8]);

/// Every target by name, for the corpus replay.
pub const TARGETS: &[(&str, Target)] = &[
    ("block", block),
    ("sst", sst),
    ("wal", wal),
    ("version_edit", version_edit),
    ("write_batch", write_batch),
    ("api", api),
    ("blob_file", blob_file),
    ("blob_ref", blob_ref),
    ("backup_meta", backup_meta),
    ("blob_references", blob_references),
];
