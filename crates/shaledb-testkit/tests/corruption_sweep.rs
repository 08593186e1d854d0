//! Corruption sweep per structure: flip, zero and truncate bytes of each file of a database
//! (table: data, index, filter, properties, metaindex blocks and footer, also of tables with
//! index and filter partitions; WAL headers and payloads; MANIFEST; CURRENT) and check that the damage is reported as `Error::Corruption`
//! naming the file (or, for the WAL's final record only, dropped as a torn tail), and never
//! turned into a wrong value or a false "not found". Tables are checked with
//! `Db::verify_checksums`, which must catch every single-byte change.
//!
//! Repair pass: every damage open refuses (MANIFEST, CURRENT, WAL, a truncated table or blob
//! file) is then repaired (`shaledb::repair`): repair succeeds, the repaired database opens,
//! every value it returns is the one written (never a wrong value, never a key that was not
//! written), and keys are missing only where the report says data was lost. Every such
//! damage is repaired, none sampled: repairs of these small databases take about a
//! millisecond.
#![allow(clippy::field_reassign_with_default)]

use shaledb::fs::MemFileSystem;
use shaledb::{
    repair, repair_cf, CompressionType, Db, Error, FixedPrefix, IndexType, Options, RepairReport,
    WriteOptions,
};
use shaledb_testkit::table_layout::{Region, TableLayout};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DIR: &str = "/db";

fn key(i: usize) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("v{i}-{}", "z".repeat(i % 11)).into_bytes()
}

fn options(fs: &MemFileSystem) -> Options {
    let mut o = Options::default();
    o.fs = Arc::new(fs.clone());
    o.block_size = 128;
    // Index entries between restart points hold delta-encoded handles (table format 4):
    // the sweeps damage those too.
    o.index_block_restart_interval = 3;
    o.max_background_jobs = 1;
    o.disable_auto_compactions = true;
    o
}

fn copy(fs: &MemFileSystem) -> MemFileSystem {
    let c = MemFileSystem::new();
    for p in fs.file_names() {
        if let Some(b) = fs.read_file_bytes(&p) {
            c.write_file_bytes(&p, &b);
        }
    }
    c
}

fn files_with(fs: &MemFileSystem, f: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    fs.file_names()
        .into_iter()
        .filter(|p| f(&p.file_name().unwrap_or_default().to_string_lossy()))
        .collect()
}

/// The variants of damage applied at `offset`: two bit flips and a zeroed byte (if nonzero).
fn damages(bytes: &[u8], offset: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for mask in [0x01u8, 0x80] {
        let mut b = bytes.to_vec();
        b[offset] ^= mask;
        out.push(b);
    }
    if bytes[offset] != 0 {
        let mut b = bytes.to_vec();
        b[offset] = 0;
        out.push(b);
    }
    out
}

fn is_corruption_of(e: &Error, file: &Path) -> bool {
    matches!(e, Error::Corruption { file: f, .. } if f == file)
}

/// Tables compressed with zstd and a dictionary.
fn dictionary_options(fs: &MemFileSystem) -> Options {
    let mut o = options(fs);
    o.compression_per_level = vec![shaledb::CompressionType::Zstd];
    o.max_dict_bytes = 512;
    o
}

/// Tables with a two-level index and filter partitions: partitions of
/// about 64 bytes, so each table has several, and a prefix extractor, so the filter
/// partitions hold prefixes too. Uncompressed, so the sweep can read their layout.
fn partitioned_options(fs: &MemFileSystem) -> Options {
    let mut o = options(fs);
    o.compression_per_level = vec![CompressionType::None];
    o.index_type = IndexType::TwoLevel;
    o.partition_filters = true;
    o.metadata_block_size = 64;
    // Smaller blocks than the other sweeps': more index entries, since entries off a restart
    // point are small and partitions hold more of them.
    o.block_size = 64;
    o.prefix_extractor = Some(Arc::new(FixedPrefix(4)));
    o
}

/// Tables whose data blocks carry hash indexes (table format 5): small blocks with restart
/// intervals of two entries, so each block has several intervals and buckets; uncompressed.
fn hash_index_options(fs: &MemFileSystem) -> Options {
    let mut o = options(fs);
    o.compression_per_level = vec![CompressionType::None];
    o.block_size = 256;
    o.block_restart_interval = 2;
    o.data_block_index_type = shaledb::DataBlockIndexType::BinaryAndHash;
    o.prefix_extractor = Some(Arc::new(FixedPrefix(4)));
    o
}

/// Keys 0..n in tables (two flushes), then keys n..n+m as synced WAL records.
fn build(n: usize, m: usize) -> MemFileSystem {
    build_with(n, m, options)
}

/// [`build`] with the options `opts` makes.
fn build_with(n: usize, m: usize, opts: fn(&MemFileSystem) -> Options) -> MemFileSystem {
    let fs = MemFileSystem::new();
    let db = Db::open(DIR, opts(&fs)).expect("open");
    for i in 0..n {
        db.put(&key(i), &value(i)).expect("put");
        if i == n / 2 {
            db.flush().expect("flush");
        }
    }
    db.flush().expect("flush");
    let sync = WriteOptions {
        sync: true,
        ..Default::default()
    };
    for i in n..n + m {
        db.put_opt(&sync, &key(i), &value(i)).expect("put");
    }
    drop(db);
    fs.crash(); // everything that matters was synced
    fs
}

/// Reads keys 0..total; returns how many are present (a prefix) or panics on a wrong value,
/// a hole, or an error other than corruption of `file`.
fn present_prefix(db: &Db, total: usize, what: &str) -> Result<usize, Error> {
    let mut present = 0;
    for i in 0..total {
        if let Some(v) = db.get(&key(i))? {
            assert_eq!(v, value(i), "{what}: wrong value for key {i}");
            assert_eq!(present, i, "{what}: hole before key {i}");
            present += 1;
        }
    }
    Ok(present)
}

/// The repair pass for a damage open refused: repairs `trial` (with `opts`), opens it and
/// reads keys 0..total (by get and by a scan, which must return only such keys). Returns how
/// many keys are present and the report. Panics on a failed repair or open, a read error,
/// or a wrong value.
fn repair_and_read(
    trial: &MemFileSystem,
    opts: fn(&MemFileSystem) -> Options,
    total: usize,
    what: &str,
) -> (usize, RepairReport) {
    let report = repair(DIR, &opts(trial)).unwrap_or_else(|e| panic!("{what}: repair: {e}"));
    let db = Db::open(DIR, opts(trial))
        .unwrap_or_else(|e| panic!("{what}: open after repair: {e}\n{report}"));
    let mut present = 0;
    for i in 0..total {
        match db.get(&key(i)) {
            Ok(Some(v)) => {
                assert_eq!(v, value(i), "{what}: wrong value for key {i} after repair");
                present += 1;
            }
            Ok(None) => {}
            Err(e) => panic!("{what}: read error after repair: {e}\n{report}"),
        }
    }
    let mut scanned = 0;
    for item in db.range(..) {
        let (k, v) = item.unwrap_or_else(|e| panic!("{what}: scan after repair: {e}"));
        let i = (0..total)
            .find(|&i| key(i) == k)
            .unwrap_or_else(|| panic!("{what}: repair brought an unwritten key {k:?}"));
        assert_eq!(
            v.to_vec(),
            value(i),
            "{what}: scan: wrong value for key {i}"
        );
        scanned += 1;
    }
    assert_eq!(scanned, present, "{what}: scan and gets disagree");
    (present, report)
}

#[test]
fn verify_checksums_catches_every_byte_change_in_every_table() {
    sweep_every_table_byte(options, 4, &mut |_, _, _, _| {});
}

/// The same with zstd dictionaries: the dictionary block and the blocks compressed with it.
#[test]
fn verify_checksums_catches_every_byte_change_in_tables_with_a_dictionary() {
    sweep_every_table_byte(dictionary_options, 4, &mut |_, _, _, _| {});
}

/// The same with a two-level index and filter partitions: every byte of
/// the index partitions, the top-level index, the filter partitions and the filter partition
/// index (and of the rest) is damaged in turn. Besides `verify_checksums`, damaged copies
/// are read (gets of present and absent keys, a multi-get, scans both ways, prefix scans
/// through the prefix blooms): each answer is the intact one or `Corruption` naming the
/// table, never a wrong value or a false "not found". Damaged filter partitions are harmless
/// to reads (a filter partition that fails its checksum answers "may contain").
#[test]
fn partitioned_table_damage_is_caught_and_never_a_wrong_answer() {
    // Per region: damages, and damages some read refused (the others were harmless to reads).
    let mut tally: BTreeMap<Region, (usize, usize)> = BTreeMap::new();
    let mut layouts: BTreeMap<PathBuf, TableLayout> = BTreeMap::new();
    sweep_every_table_byte(partitioned_options, 4, &mut |db, t, intact, offset| {
        let layout = layouts.entry(t.to_path_buf()).or_insert_with(|| {
            let l = TableLayout::parse(intact)
                .unwrap_or_else(|e| panic!("{}: layout: {e}", t.display()));
            assert!(l.two_level, "{l:?}");
            assert_eq!(l.count(Region::Index), 0, "{l:?}");
            assert_eq!(l.count(Region::Filter), 0, "{l:?}");
            assert_eq!(l.count(Region::TopLevelIndex), 1, "{l:?}");
            assert_eq!(l.count(Region::FilterPartitionIndex), 1, "{l:?}");
            let partitions = l.count(Region::IndexPartition);
            assert!(partitions >= 3, "{} index partitions", partitions);
            assert_eq!(l.count(Region::FilterPartition), partitions, "{l:?}");
            l
        });
        let Some(offset) = offset else {
            let refused = reads_are_right_or_corruption(db, t, "intact tables");
            assert!(!refused, "the intact tables refused a read");
            return;
        };
        let region = layout.region_of(offset).expect("every byte is in a block");
        // Every damage of the partitions and their indexes is read back; of the blocks the
        // other sweeps cover (data, properties, metaindex, footer), every 8th byte's.
        let partitions = matches!(
            region,
            Region::IndexPartition
                | Region::TopLevelIndex
                | Region::FilterPartition
                | Region::FilterPartitionIndex
        );
        if !partitions && !offset.is_multiple_of(8) {
            return;
        }
        let what = format!("{} byte {offset} ({region:?})", t.display());
        let refused = reads_are_right_or_corruption(db, t, &what);
        let e = tally.entry(region).or_default();
        e.0 += 1;
        e.1 += usize::from(refused);
    });
    for region in [
        Region::IndexPartition,
        Region::TopLevelIndex,
        Region::FilterPartition,
        Region::FilterPartitionIndex,
        Region::Data,
    ] {
        let (damaged, refused) = tally.get(&region).copied().unwrap_or_default();
        assert!(damaged > 0, "no damage in {region:?}");
        // A damaged data block, index partition or either top level fails its checksum when
        // read; a damaged filter partition only stops filtering.
        if region != Region::FilterPartition {
            assert!(refused > 0, "no read noticed damage in {region:?}");
        }
    }
    eprintln!("partitioned table sweep (damages, refused by reads) per region: {tally:?}");
}

/// The same with data-block hash indexes (format 5): `verify_checksums` reports every damaged
/// byte, and the damaged copies (every 8th byte's) are read every way: each answer is the
/// intact one or `Corruption` naming the table, never a wrong value or a false "not found".
#[test]
fn hash_indexed_table_damage_is_caught_and_never_a_wrong_answer() {
    let (mut read, mut refused) = (0, 0);
    sweep_every_table_byte(
        hash_index_options,
        5,
        &mut |db, t, _, offset| match offset {
            None => assert!(!reads_are_right_or_corruption(db, t, "intact tables")),
            Some(o) if o % 8 == 0 => {
                read += 1;
                let what = format!("{} byte {o}", t.display());
                refused += usize::from(reads_are_right_or_corruption(db, t, &what));
            }
            Some(_) => {}
        },
    );
    assert!(
        refused > read / 2,
        "{refused} of {read} damaged copies refused a read"
    );
}

/// Reads keys 0..120 of [`build_with`] every way and checks each answer: the intact one, or
/// `Corruption` naming table `t`. Returns true if some read was refused.
fn reads_are_right_or_corruption(db: &Db, t: &Path, what: &str) -> bool {
    const N: usize = 120;
    let want = |i: usize| (i < N).then(|| value(i));
    let mut refused = false;
    let mut refuse = |e: Error, read: &str| {
        assert!(
            is_corruption_of(&e, t),
            "{what}: {read}: unexpected error {e}"
        );
        refused = true;
    };
    // Present keys and absent ones after the last, between keys and before the first.
    for i in 0..N + 5 {
        match db.get(&key(i)) {
            Ok(v) => assert_eq!(v.map(|v| v.to_vec()), want(i), "{what}: get key {i}"),
            Err(e) => refuse(e, "get"),
        }
    }
    for absent in ["k0007x", "k0060x", "k", "k011", "zzz"] {
        match db.get(absent) {
            Ok(v) => assert_eq!(v, None, "{what}: get {absent}"),
            Err(e) => refuse(e, "get"),
        }
    }
    let keys: Vec<Vec<u8>> = (0..N + 5).rev().step_by(3).map(key).collect();
    for (k, got) in keys.iter().zip(db.multi_get(&keys)) {
        let i: usize = std::str::from_utf8(&k[1..])
            .ok()
            .and_then(|s| s.parse().ok())
            .expect("key number");
        match got {
            Ok(v) => assert_eq!(v.map(|v| v.to_vec()), want(i), "{what}: multi_get key {i}"),
            Err(e) => refuse(e, "multi_get"),
        }
    }
    // Scans: the expected entries in order up to an error, if any, and all of them without.
    let mut scan = |items: &mut dyn Iterator<Item = shaledb::Result<(Vec<u8>, shaledb::Value)>>,
                    want: &mut dyn Iterator<Item = usize>,
                    read: &str| {
        for item in items {
            match item {
                Ok((k, v)) => {
                    let i = want
                        .next()
                        .unwrap_or_else(|| panic!("{what}: {read}: extra key {k:?}"));
                    assert_eq!((k, v.to_vec()), (key(i), value(i)), "{what}: {read}");
                }
                Err(e) => {
                    refuse(e, read);
                    return;
                }
            }
        }
        assert_eq!(want.next(), None, "{what}: {read}: ended early");
    };
    scan(&mut db.range(..), &mut (0..N), "forward scan");
    scan(&mut db.range(..).rev(), &mut (0..N).rev(), "backward scan");
    // Prefix scans use the prefix blooms (FixedPrefix(4)): k000 to k011, and k012 (absent).
    for p in 0..=N / 10 {
        let prefix = format!("k{p:03}");
        let read = format!("prefix scan {prefix}");
        scan(
            &mut db.prefix(&prefix),
            &mut (p * 10..(p * 10 + 10).min(N)),
            &read,
        );
    }
    refused
}

/// A check run after `verify_checksums` on a database: (database, table, the table's intact
/// bytes, the offset damaged or `None` for the intact database).
type AfterVerify<'a> = dyn FnMut(&Db, &Path, &[u8], Option<usize>) + 'a;

/// Damages every byte of every table (written with `options`, table format `version`) and
/// checks `verify_checksums` reports each. `after` checks more: on the intact database (with
/// each table and its bytes, offset `None`), then on each damaged copy (with the table, its
/// intact bytes and the offset damaged).
fn sweep_every_table_byte(
    options: fn(&MemFileSystem) -> Options,
    version: u32,
    after: &mut AfterVerify<'_>,
) {
    let fs = build_with(120, 0, options);
    let tables = files_with(&fs, |n| n.ends_with(".sst"));
    for t in &tables {
        let bytes = fs.read_file_bytes(t).expect("bytes");
        // The footer's format version: 12 bytes before the 8-byte magic (docs/format).
        let at = bytes.len() - 16;
        let v = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        assert_eq!(v, version, "{}", t.display());
    }
    assert_eq!(tables.len(), 2, "{tables:?}");
    {
        let db = Db::open(DIR, options(&copy(&fs))).expect("open");
        db.verify_checksums().expect("intact tables verify");
        for t in &tables {
            after(&db, t, &fs.read_file_bytes(t).expect("bytes"), None);
        }
    }
    let mut cases = 0;
    for t in &tables {
        let original = fs.read_file_bytes(t).expect("bytes");
        let mut missed = Vec::new();
        for offset in 0..original.len() {
            for bytes in damages(&original, offset) {
                let trial = copy(&fs);
                trial.write_file_bytes(t, &bytes);
                let db = Db::open(DIR, options(&trial)).expect("open does not read tables");
                cases += 1;
                match db.verify_checksums() {
                    Err(e) if is_corruption_of(&e, t) => {}
                    Err(e) => panic!("offset {offset}: unexpected error {e}"),
                    Ok(()) => missed.push(offset),
                }
                after(&db, t, &original, Some(offset));
            }
        }
        for cut in [0, 1, original.len() / 3, original.len() - 1] {
            let trial = copy(&fs);
            trial.write_file_bytes(t, &original[..cut]);
            // paranoid_checks (the default) compares table sizes with the MANIFEST at open.
            match Db::open(DIR, options(&trial)) {
                Err(e) => assert!(is_corruption_of(&e, t), "truncation to {cut}: {e}"),
                Ok(_) => panic!("truncation to {cut} opened with paranoid_checks"),
            }
            {
                // Repair pass: the truncated table is moved aside, the other one's keys stay.
                let fixed = copy(&trial);
                let what = format!("{} truncated to {cut}", t.display());
                let (present, report) = repair_and_read(&fixed, options, 120, &what);
                assert!(report.lost_data(), "{what}: {report}");
                assert!(
                    report.tables_lost.iter().any(|l| &l.file == t),
                    "{what}: {report}"
                );
                assert!(present > 0 && present < 120, "{what}: {present} keys");
            }
            let mut lax = options(&trial);
            lax.paranoid_checks = false;
            let db = Db::open(DIR, lax).expect("open without paranoid checks");
            cases += 1;
            let e = db.verify_checksums().expect_err("truncated table verified");
            assert!(is_corruption_of(&e, t), "truncation to {cut}: {e}");
        }
        assert!(
            missed.is_empty(),
            "{}: changes at offsets {missed:?} of {} not detected",
            t.display(),
            original.len()
        );
    }
    eprintln!("corruption sweep: {cases} damaged tables, all detected by verify_checksums");
}

#[test]
fn wal_damage_is_corruption_or_a_dropped_final_record() {
    let (n, m) = (20, 25);
    let fs = build(n, m);
    let wals = files_with(&fs, |n| n.ends_with(".log"));
    let wal = wals.iter().max().expect("a WAL").clone();
    let original = fs.read_file_bytes(&wal).expect("bytes");
    // Every record has the same layout size here: 7-byte header + batch. Before them, the
    // marker naming the WAL this one took over from (a flush switched to it).
    let rec_len = |i: usize| 7 + 12 + 1 + 1 + key(i).len() + 1 + value(i).len();
    let marker_len = 7 + usize::from(u16::from_le_bytes([original[4], original[5]]));
    assert_eq!(original[7..15], [0xFF; 8], "layout: a marker first");
    let starts: Vec<usize> = (n..n + m)
        .scan(marker_len, |pos, i| {
            let s = *pos;
            *pos += rec_len(i);
            Some(s)
        })
        .collect();
    // The records, then the zeros of the WAL's preallocated space.
    let records_end = starts[m - 1] + rec_len(n + m - 1);
    assert!(original.len() >= records_end, "layout");
    assert!(original[records_end..].iter().all(|&b| b == 0), "layout");
    assert_ne!(original[records_end - 1], 0, "layout");
    let last_start = starts[m - 1];
    // Records wholly before `offset`.
    let before = |offset: usize| {
        starts
            .iter()
            .zip(n..)
            .filter(|(s, i)| *s + rec_len(*i) <= offset)
            .count()
    };
    let (mut detected, mut dropped_tail, mut repaired) = (0, 0, 0);
    // Every byte of the records, and a few of the zeros after them (damage there is a torn
    // tail at worst).
    let zeros = [
        0,
        1,
        7,
        4096,
        (original.len() - records_end).saturating_sub(1),
    ];
    let zero_offsets = zeros.iter().map(|z| records_end + z);
    let mut offsets: Vec<usize> = (0..records_end).chain(zero_offsets).collect();
    offsets.retain(|&o| o < original.len());
    offsets.dedup();
    for offset in offsets {
        let mut variants: Vec<(Vec<u8>, bool)> = damages(&original, offset)
            .into_iter()
            .map(|b| (b, false))
            .collect();
        // Zero the rest of the file from here: zeros mean end of log (preallocated space),
        // so the records before `offset` must all be there.
        variants.push((
            [&original[..offset], &vec![0u8; original.len() - offset][..]].concat(),
            true,
        ));
        for (bytes, zero_tail) in variants {
            let trial = copy(&fs);
            trial.write_file_bytes(&wal, &bytes);
            let what = format!("WAL byte {offset} (zero tail {zero_tail})");
            match Db::open(DIR, options(&trial)) {
                Err(e) => {
                    assert!(is_corruption_of(&e, &wal), "{what}: {e}");
                    detected += 1;
                    // Repair pass: the tables' keys all stay; WAL records are lost only
                    // where the report shows damage.
                    let (present, report) = repair_and_read(&trial, options, n + m, &what);
                    assert!(present >= n, "{what}: table keys lost: {report}");
                    if !report.lost_data() {
                        assert_eq!(present, n + m, "{what}: silent loss: {report}");
                    }
                    assert!(present >= n + before(offset).min(m - 1), "{what}: {report}");
                    repaired += 1;
                }
                Ok(db) => {
                    let present = present_prefix(&db, n + m, &what)
                        .unwrap_or_else(|e| panic!("{what}: read error {e}"));
                    if present < n + m {
                        if zero_tail {
                            assert!(present - n >= before(offset), "{what}: kept {present}");
                            dropped_tail += 1;
                        } else if offset >= last_start {
                            dropped_tail += 1;
                        } else {
                            panic!(
                                "{what}: acknowledged records silently dropped ({} of {m} \
                                 kept) by damage before the final record (at {last_start})",
                                present - n
                            );
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "corruption sweep: WAL of {} bytes: {detected} damages reported (and {repaired} \
         repaired), {dropped_tail} dropped as a torn tail",
        original.len()
    );
}

#[test]
fn manifest_damage_is_reported_never_a_silent_loss() {
    let fs = build(60, 0);
    let manifest = files_with(&fs, |n| n.starts_with("MANIFEST-"))
        .pop()
        .expect("MANIFEST");
    let original = fs.read_file_bytes(&manifest).expect("bytes");
    let mut outcomes = [0usize; 2];
    for offset in 0..original.len() {
        for bytes in damages(&original, offset) {
            let trial = copy(&fs);
            trial.write_file_bytes(&manifest, &bytes);
            let what = format!("MANIFEST byte {offset} of {}", original.len());
            match Db::open(DIR, options(&trial)) {
                Err(e) => {
                    assert!(e.is_corruption(), "{what}: {e}");
                    outcomes[0] += 1;
                    // Repair pass: the tables are intact, so nothing may be missing.
                    let (present, report) = repair_and_read(&trial, options, 60, &what);
                    assert_eq!(present, 60, "{what}: {report}");
                    assert!(!report.lost_data(), "{what}: {report}");
                }
                Ok(db) => {
                    // Opened: then it must have everything, or report corruption on read.
                    match present_prefix(&db, 60, &what) {
                        Ok(p) => assert_eq!(p, 60, "{what}: keys silently lost"),
                        Err(e) => assert!(e.is_corruption(), "{what}: {e}"),
                    }
                    outcomes[1] += 1;
                }
            }
        }
    }
    eprintln!(
        "corruption sweep: MANIFEST: {} damages reported at open, {} harmless",
        outcomes[0], outcomes[1]
    );
}

#[test]
fn current_damage_is_reported_as_corruption_of_current() {
    let fs = build(10, 3);
    let current = PathBuf::from(DIR).join("CURRENT");
    let original = fs.read_file_bytes(&current).expect("bytes");
    let mut variants = Vec::new();
    for offset in 0..original.len() {
        variants.extend(damages(&original, offset));
    }
    for cut in 0..original.len() {
        variants.push(original[..cut].to_vec());
    }
    for bytes in variants {
        let trial = copy(&fs);
        trial.write_file_bytes(&current, &bytes);
        match Db::open(DIR, options(&trial)) {
            Err(e) => {
                let what = format!("CURRENT {:?}", String::from_utf8_lossy(&bytes));
                assert!(is_corruption_of(&e, &current), "{what}: {e}");
                // Repair pass: tables and WAL are intact, every key comes back.
                let (present, report) = repair_and_read(&trial, options, 13, &what);
                assert_eq!(present, 13, "{what}: {report}");
                assert!(!report.lost_data(), "{what}: {report}");
            }
            Ok(_) => panic!(
                "CURRENT {:?} opened a database",
                String::from_utf8_lossy(&bytes)
            ),
        }
    }
    // CURRENT gone while tables and WALs exist: not a new database.
    let trial = copy(&fs);
    let fresh = MemFileSystem::new();
    for p in trial.file_names() {
        if p != current {
            fresh.write_file_bytes(&p, &trial.read_file_bytes(&p).expect("bytes"));
        }
    }
    match Db::open(DIR, options(&fresh)) {
        Err(e) => {
            assert!(e.is_corruption(), "missing CURRENT: {e}");
            let (present, report) = repair_and_read(&fresh, options, 13, "missing CURRENT");
            assert_eq!(present, 13, "missing CURRENT: {report}");
        }
        Ok(db) => panic!(
            "missing CURRENT: opened as a new database ({:?} for key 0)",
            db.get(&key(0))
        ),
    }
}

/// Families and merge operands: a database with keys in the default family, in "x" and
/// counters merged in "counters", each family flushed to its own table.
fn build_with_families() -> MemFileSystem {
    let fs = MemFileSystem::new();
    let db = Db::open_cf(DIR, families_options(&fs), families()).expect("open");
    let (x, counters) = (db.cf("x").expect("x"), db.cf("counters").expect("counters"));
    for i in 0..40 {
        db.put(&key(i), &value(i)).expect("put");
        db.put_cf(&x, &key(i), &value(i + 1000)).expect("put");
        db.merge_cf(&counters, b"c", 1u64.to_le_bytes())
            .expect("merge");
    }
    for cf in [db.default_cf(), x, counters] {
        db.flush_cf(&cf).expect("flush");
    }
    drop(db);
    fs.crash();
    fs
}

fn families_options(fs: &MemFileSystem) -> Options {
    let mut o = options(fs);
    o.create_missing_column_families = true;
    o
}

fn families() -> Vec<(&'static str, shaledb::CfOptions)> {
    let counters = shaledb::CfOptions {
        merge_operator: Some(Arc::new(shaledb::merge_operators::UInt64Add)),
        ..Default::default()
    };
    vec![("x", shaledb::CfOptions::default()), ("counters", counters)]
}

/// Every family's data, or the first error.
fn read_families(db: &Db, what: &str) -> Result<(), Error> {
    let (Some(x), Some(counters)) = (db.cf("x"), db.cf("counters")) else {
        panic!("{what}: a family is missing after a successful open");
    };
    for i in 0..40 {
        let got = db.get(&key(i))?;
        assert_eq!(
            got.as_deref(),
            Some(&value(i)[..]),
            "{what}: default key {i}"
        );
        let got = db.get_cf(&x, &key(i))?;
        assert_eq!(
            got.as_deref(),
            Some(&value(i + 1000)[..]),
            "{what}: x key {i}"
        );
    }
    let c = db.get_cf(&counters, b"c")?;
    assert_eq!(
        c.as_deref(),
        Some(&40u64.to_le_bytes()[..]),
        "{what}: counter"
    );
    Ok(())
}

#[test]
fn manifest_damage_with_families_is_reported_never_a_silent_loss() {
    let fs = build_with_families();
    let manifest = files_with(&fs, |n| n.starts_with("MANIFEST-"))
        .pop()
        .expect("MANIFEST");
    let original = fs.read_file_bytes(&manifest).expect("bytes");
    let mut outcomes = [0usize; 2];
    for offset in 0..original.len() {
        for bytes in damages(&original, offset) {
            let trial = copy(&fs);
            trial.write_file_bytes(&manifest, &bytes);
            let what = format!("MANIFEST byte {offset} of {}", original.len());
            // Without creating missing families: a family lost from the MANIFEST must show.
            let mut o = families_options(&trial);
            o.create_missing_column_families = false;
            match Db::open_cf(DIR, o, families()) {
                Err(e) => {
                    assert!(
                        e.is_corruption() || matches!(e, Error::InvalidArgument(_)),
                        "{what}: {e}"
                    );
                    outcomes[0] += 1;
                    // Repair pass: every family comes back with all its data.
                    let report = repair_cf(DIR, &families_options(&trial), families())
                        .unwrap_or_else(|e| panic!("{what}: repair: {e}"));
                    assert!(!report.lost_data(), "{what}: {report}");
                    let mut o = families_options(&trial);
                    o.create_missing_column_families = false;
                    let db = Db::open_cf(DIR, o, families())
                        .unwrap_or_else(|e| panic!("{what}: open after repair: {e}\n{report}"));
                    read_families(&db, &what)
                        .unwrap_or_else(|e| panic!("{what}: read after repair: {e}\n{report}"));
                }
                Ok(db) => {
                    if let Err(e) = read_families(&db, &what) {
                        assert!(e.is_corruption(), "{what}: {e}");
                    }
                    outcomes[1] += 1;
                }
            }
        }
    }
    assert!(outcomes[0] > 0, "no damage was reported");
    eprintln!(
        "corruption sweep: MANIFEST with families: {} damages reported at open, {} harmless",
        outcomes[0], outcomes[1]
    );
}

/// Range tombstones: a table holding keys 0..60 and a tombstone over keys 20..40 (flushed
/// together). Every damaged byte is reported by `verify_checksums`, and reads of a damaged
/// copy either fail with corruption of the table or return exactly the intact answer: a
/// damaged range-deletion block never brings a deleted key back or hides a live one.
#[test]
fn range_deletion_damage_is_reported_never_a_wrong_answer() {
    let fs = MemFileSystem::new();
    {
        let db = Db::open(DIR, options(&fs)).expect("open");
        for i in 0..60 {
            db.put(&key(i), &value(i)).expect("put");
        }
        db.delete_range(key(20), key(40)).expect("delete_range");
        db.flush().expect("flush");
    }
    fs.crash();
    let tables = files_with(&fs, |n| n.ends_with(".sst"));
    assert_eq!(tables.len(), 1, "{tables:?}");
    let t = &tables[0];
    let want = |i: usize| (!(20..40).contains(&i)).then(|| value(i));
    {
        let db = Db::open(DIR, options(&copy(&fs))).expect("open");
        for i in 0..60 {
            assert_eq!(db.get(&key(i)).expect("get").map(|v| v.to_vec()), want(i));
        }
    }
    let original = fs.read_file_bytes(t).expect("bytes");
    let (mut cases, mut refused) = (0, 0);
    for offset in 0..original.len() {
        for bytes in damages(&original, offset) {
            let trial = copy(&fs);
            trial.write_file_bytes(t, &bytes);
            let db = Db::open(DIR, options(&trial)).expect("open does not read tables");
            cases += 1;
            match db.verify_checksums() {
                Err(e) if is_corruption_of(&e, t) => {}
                other => panic!("offset {offset}: verify_checksums gave {other:?}"),
            }
            for i in 0..60 {
                match db.get(&key(i)) {
                    Ok(v) => assert_eq!(
                        v.map(|v| v.to_vec()),
                        want(i),
                        "offset {offset}: wrong answer for key {i}"
                    ),
                    Err(e) if is_corruption_of(&e, t) => {
                        refused += 1;
                        break;
                    }
                    Err(e) => panic!("offset {offset}: unexpected error {e}"),
                }
            }
        }
    }
    eprintln!("range deletion sweep: {cases} damaged tables, {refused} refused by reads");
}

/// Every value in a blob file (`min_blob_size` 0): two flushes, so two blob files.
fn blob_options(fs: &MemFileSystem) -> Options {
    let mut o = options(fs);
    o.enable_blob_files = true;
    o.min_blob_size = 0;
    o.prefix_extractor = Some(Arc::new(FixedPrefix(4)));
    o
}

#[test]
fn blob_file_damage_is_corruption_never_a_wrong_value() {
    let fs = build_with(120, 0, blob_options);
    let blobs = files_with(&fs, |n| n.ends_with(".blob"));
    assert_eq!(blobs.len(), 2, "{blobs:?}");
    {
        let db = Db::open(DIR, blob_options(&copy(&fs))).expect("open");
        db.verify_checksums().expect("intact blob files verify");
        for b in &blobs {
            assert!(!reads_are_right_or_corruption(&db, b, "intact blob files"));
        }
    }
    let (mut cases, mut refused) = (0, 0);
    for b in &blobs {
        let original = fs.read_file_bytes(b).expect("bytes");
        for offset in 0..original.len() {
            for bytes in damages(&original, offset) {
                let trial = copy(&fs);
                trial.write_file_bytes(b, &bytes);
                let db = Db::open(DIR, blob_options(&trial)).expect("open reads no blob");
                cases += 1;
                match db.verify_checksums() {
                    Err(e) if is_corruption_of(&e, b) => {}
                    Err(e) => panic!("{} byte {offset}: unexpected error {e}", b.display()),
                    Ok(()) => panic!("{} byte {offset}: damage not detected", b.display()),
                }
                let what = format!("{} byte {offset}", b.display());
                refused += usize::from(reads_are_right_or_corruption(&db, b, &what));
            }
        }
        for cut in [0, 1, original.len() / 2, original.len() - 1] {
            let trial = copy(&fs);
            trial.write_file_bytes(b, &original[..cut]);
            match Db::open(DIR, blob_options(&trial)) {
                Err(e) => assert!(is_corruption_of(&e, b), "truncation to {cut}: {e}"),
                Ok(_) => panic!("truncation to {cut} opened with paranoid_checks"),
            }
            {
                // Repair pass: the blob file's values are lost (reported), nothing else.
                let fixed = copy(&trial);
                let what = format!("{} truncated to {cut}", b.display());
                let (present, report) = repair_and_read(&fixed, blob_options, 120, &what);
                assert!(report.blob_values_lost > 0, "{what}: {report}");
                assert_eq!(
                    present as u64 + report.blob_values_lost,
                    120,
                    "{what}: {report}"
                );
            }
            let mut lax = blob_options(&trial);
            lax.paranoid_checks = false;
            let db = Db::open(DIR, lax).expect("open without paranoid checks");
            assert!(reads_are_right_or_corruption(&db, b, "truncated"));
        }
    }
    // Every byte is in a header, a record or the footer, all checksummed: the reads of every
    // key (some of which reach each record) notice every damage.
    assert_eq!(refused, cases, "damages some read did not notice");
    eprintln!("blob corruption sweep: {cases} damaged blob files, {refused} refused by reads");
}
