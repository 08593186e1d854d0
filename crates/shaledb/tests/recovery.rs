//! Recovery: torn WAL tails are dropped record by record, acknowledged synced writes survive a
//! simulated power loss, and each recovery mode behaves as documented.
#![allow(clippy::field_reassign_with_default)] // options are built field by field for readability

use shaledb::fs::MemFileSystem;

use shaledb::{Db, Error, Options, WalRecoveryMode, WriteOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn mem_options(fs: &MemFileSystem) -> Options {
    let mut o = Options::default();
    o.fs = Arc::new(fs.clone());
    o.max_background_jobs = 1;
    o
}

fn sync() -> WriteOptions {
    WriteOptions {
        sync: true,
        disable_wal: false,
        ..Default::default()
    }
}

/// A copy of every file of `fs` (as it is now) in a new filesystem.
fn clone_fs(fs: &MemFileSystem) -> MemFileSystem {
    let copy = MemFileSystem::new();
    for p in fs.file_names() {
        if let Some(bytes) = fs.read_file_bytes(&p) {
            copy.write_file_bytes(&p, &bytes);
        }
    }
    copy
}

fn wal_files(fs: &MemFileSystem, dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = fs
        .file_names()
        .into_iter()
        .filter(|p| p.starts_with(dir) && p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

fn key(i: usize) -> Vec<u8> {
    format!("key-{i:04}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat(i % 17)).into_bytes()
}

#[test]
fn truncating_the_last_wal_record_at_every_offset_keeps_exactly_the_complete_records() {
    let dir = Path::new("/db");
    let fs = MemFileSystem::new();
    let n = 20;
    synced_puts_then_power_loss(&fs, mem_options(&fs), n);
    let wals = wal_files(&fs, dir);
    assert_eq!(wals.len(), 1, "one live WAL expected: {wals:?}");
    let wal = fs.read_file_bytes(&wals[0]).expect("wal bytes");
    // The records, then the zeros of the WAL's preallocated space.
    let end = wal.iter().rposition(|&b| b != 0).expect("records") + 1;
    // The last record: 7-byte header + batch (12-byte header, kind, varint key len, key,
    // varint value len, value). Keys and values here are short, so varints are one byte.
    let last = 7 + 12 + 1 + 1 + key(n - 1).len() + 1 + value(n - 1).len();
    let start = end - last;
    // Cut off, and cut short inside the preallocated space (zeros after the cut).
    for (cut, zeros_after) in (start..=end).flat_map(|c| [(c, false), (c, true)]) {
        let trial = clone_fs(&fs);
        let mut bytes = wal[..cut].to_vec();
        if zeros_after {
            bytes.resize(wal.len(), 0);
        }
        trial.write_file_bytes(&wals[0], &bytes);
        let db = Db::open(dir, mem_options(&trial)).expect("reopen after truncation");
        for i in 0..n - 1 {
            assert_eq!(
                db.get(&key(i)).expect("get").as_deref(),
                Some(value(i).as_slice()),
                "cut {cut}: complete record {i} lost"
            );
        }
        let last_present = db.get(&key(n - 1)).expect("get last");
        if cut == end {
            assert_eq!(last_present.as_deref(), Some(value(n - 1).as_slice()));
        } else {
            assert_eq!(last_present, None, "cut {cut}: torn record must not appear");
        }
        db.close().expect("close");
    }
}

#[test]
fn synced_writes_survive_power_loss_and_unsynced_ones_form_a_prefix() {
    let dir = Path::new("/db");
    let fs = MemFileSystem::new();
    let mut o = mem_options(&fs);
    o.write_buffer_size = 8 << 10; // rotate WALs and flush often
    {
        let db = Db::open(dir, o.clone()).expect("open");
        for i in 0..300 {
            let wo = WriteOptions {
                sync: i % 10 == 9,
                disable_wal: false,
                ..Default::default()
            };
            db.put_opt(&wo, &key(i), &value(i)).expect("put");
        }
        fs.crash();
        drop(db);
    }
    let db = Db::open(dir, o).expect("reopen after power loss");
    // Every write up to the last synced one (i = 299) survives; here that is all of them.
    let mut present = Vec::new();
    for i in 0..300 {
        present.push(db.get(&key(i)).expect("get").is_some());
    }
    let first_missing = present.iter().position(|p| !p).unwrap_or(present.len());
    assert!(
        present[first_missing..].iter().all(|p| !p),
        "recovered state has a hole"
    );
    assert_eq!(first_missing, 300, "synced writes were lost");
    for i in 0..300 {
        assert_eq!(db.get(&key(i)).expect("get"), Some(value(i).into()));
    }
}

#[test]
fn reopen_many_times_keeps_everything() {
    let dir = Path::new("/db");
    let fs = MemFileSystem::new();
    let mut o = mem_options(&fs);
    o.write_buffer_size = 4096;
    for round in 0..10 {
        let db = Db::open(dir, o.clone()).expect("open");
        for i in 0..50 {
            db.put(&key(round * 50 + i), &value(round * 50 + i))
                .expect("put");
        }
        if round % 3 == 0 {
            db.flush().expect("flush");
        }
        db.close().expect("close");
    }
    let db = Db::open(dir, o).expect("open");
    for i in 0..500 {
        assert_eq!(
            db.get(&key(i)).expect("get"),
            Some(value(i).into()),
            "key {i}"
        );
    }
    // Old WALs and MANIFESTs are cleaned up.
    let names = fs.file_names();
    let manifests = names
        .iter()
        .filter(|p| p.to_string_lossy().contains("MANIFEST"))
        .count();
    assert_eq!(manifests, 1, "{names:?}");
    assert_eq!(wal_files(&fs, dir).len(), 1, "{names:?}");
}

/// Opens a database at /db with `o`, writes keys 0..n synced, and loses power (every test
/// here uses /db).
fn synced_puts_then_power_loss(fs: &MemFileSystem, o: Options, n: usize) {
    let db = Db::open(Path::new("/db"), o).expect("open");
    for i in 0..n {
        db.put_opt(&sync(), &key(i), &value(i)).expect("put");
    }
    fs.crash();
    drop(db);
}

fn corrupt_middle_of_wal(recovery: WalRecoveryMode) -> (MemFileSystem, Options) {
    let dir = Path::new("/db");
    let fs = MemFileSystem::new();
    let mut o = mem_options(&fs);
    o.wal_recovery_mode = recovery;
    synced_puts_then_power_loss(&fs, o.clone(), 100);
    let wal = wal_files(&fs, dir).remove(0);
    let mut bytes = fs.read_file_bytes(&wal).expect("wal");
    // Damage the payload of a record in the middle (a value byte), with intact records after
    // it in the same block.
    let needle = b"value-50-";
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("record 50 in the WAL");
    bytes[at + 2] ^= 0x40;
    fs.write_file_bytes(&wal, &bytes);
    (fs, o)
}

#[test]
fn corruption_in_the_middle_of_the_wal_fails_open() {
    let (_fs, o) = corrupt_middle_of_wal(WalRecoveryMode::TolerateCorruptedTailRecords);
    match Db::open("/db", o) {
        Err(Error::Corruption { file, .. }) => {
            assert!(file.to_string_lossy().ends_with(".log"), "{file:?}")
        }
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(_) => panic!("open succeeded over a corrupted WAL"),
    }
}

#[test]
fn point_in_time_recovery_stops_at_the_damage() {
    let (_fs, o) = corrupt_middle_of_wal(WalRecoveryMode::PointInTimeRecovery);
    let db = Db::open("/db", o).expect("point-in-time open");
    let present: Vec<bool> = (0..100)
        .map(|i| db.get(&key(i)).expect("get").is_some())
        .collect();
    let first_missing = present
        .iter()
        .position(|p| !p)
        .expect("some writes dropped");
    assert!(first_missing > 10, "too much dropped: {first_missing}");
    assert!(
        present[first_missing..].iter().all(|p| !p),
        "hole after damage"
    );
}

#[test]
fn skip_any_corrupted_records_salvages_the_rest() {
    let (_fs, o) = corrupt_middle_of_wal(WalRecoveryMode::SkipAnyCorruptedRecords);
    let db = Db::open("/db", o).expect("salvage open");
    let present = (0..100)
        .filter(|&i| db.get(&key(i)).expect("get").is_some())
        .count();
    assert!((90..100).contains(&present), "present {present}");
    assert_eq!(db.get(&key(99)).expect("get"), Some(value(99).into()));
}

#[test]
fn absolute_consistency_rejects_a_torn_tail() {
    let dir = Path::new("/db");
    let fs = MemFileSystem::new();
    let mut o = mem_options(&fs);
    ten_synced_puts_then_a_torn_wal_tail(&fs, dir);
    o.wal_recovery_mode = WalRecoveryMode::AbsoluteConsistency;
    assert!(matches!(
        Db::open(dir, o.clone()),
        Err(Error::Corruption { .. })
    ));
    o.wal_recovery_mode = WalRecoveryMode::TolerateCorruptedTailRecords;
    let db = Db::open(dir, o).expect("tolerant open");
    assert_eq!(db.get(&key(8)).expect("get"), Some(value(8).into()));
    assert_eq!(db.get(&key(9)).expect("get"), None);
}

#[test]
fn manifest_corruption_is_reported() {
    let dir = Path::new("/db");
    let fs = MemFileSystem::new();
    let mut o = mem_options(&fs);
    o.write_buffer_size = 4096;
    {
        let db = Db::open(dir, o.clone()).expect("open");
        for i in 0..200 {
            db.put(&key(i), &value(i)).expect("put");
        }
        db.flush().expect("flush");
        db.close().expect("close");
    }
    let manifest = fs
        .file_names()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("MANIFEST"))
        .expect("manifest");
    let mut bytes = fs.read_file_bytes(&manifest).expect("bytes");
    // Damage the first record (the snapshot), which later records follow.
    bytes[10] ^= 0x01;
    fs.write_file_bytes(&manifest, &bytes);
    match Db::open(dir, o) {
        Err(Error::Corruption { file, .. }) => {
            assert!(file.to_string_lossy().contains("MANIFEST"), "{file:?}")
        }
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(_) => panic!("open succeeded over a corrupted MANIFEST"),
    }
}

#[test]
fn current_pointing_nowhere_is_reported() {
    let dir = Path::new("/db");
    let fs = MemFileSystem::new();
    let o = mem_options(&fs);
    Db::open(dir, o.clone())
        .expect("open")
        .close()
        .expect("close");
    fs.write_file_bytes(dir.join("CURRENT"), b"garbage");
    assert!(matches!(Db::open(dir, o), Err(Error::Corruption { .. })));
}

#[test]
fn missing_table_is_reported() {
    let dir = Path::new("/db");
    let fs = MemFileSystem::new();
    let o = mem_options(&fs);
    {
        let db = Db::open(dir, o.clone()).expect("open");
        db.put(b"a", b"1").expect("put");
        db.flush().expect("flush");
        db.close().expect("close");
    }
    let sst = fs
        .file_names()
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .expect("a table");
    o.fs.remove_file(&sst).expect("remove");
    assert!(matches!(Db::open(dir, o), Err(Error::Corruption { .. })));
}

/// A torn tail is tolerated in a WAL followed only by empty WALs (as left by the recovery
/// from a WAL write that failed for lack of space, or by open, crashing before the edit that
/// retires the old WAL). A WAL holding anything after it: the torn WAL may be one a newer WAL
/// took over from and a power loss cut before it was synced (db/closed_wals.rs), so recovery
/// keeps the prefix before the tear and ignores the later WALs; unless a later WAL records
/// that the torn one was synced (a `Synced` marker), which makes the tear corruption.
#[test]
fn a_torn_tail_followed_only_by_empty_wals_is_dropped() {
    let dir = Path::new("/db");
    let fs = MemFileSystem::new();
    let wal = ten_synced_puts_then_a_torn_wal_tail(&fs, dir);
    let empty_later = [dir.join("000900.log"), dir.join("000901.log")];
    fs.write_file_bytes(&empty_later[0], b"");
    fs.write_file_bytes(&empty_later[1], &vec![0u8; 256 << 10]);
    let trial = clone_fs(&fs);
    let db = Db::open(dir, mem_options(&trial)).expect("a torn tail before empty WALs");
    assert_eq!(db.get(&key(8)).expect("get"), Some(value(8).into()));
    assert_eq!(db.get(&key(9)).expect("get"), None);
    drop(db);
    // A later WAL holding a write: never synced, as the torn WAL was not.
    let batch = [
        &[1u8, 0, 0, 0, 0, 0, 0, 0][..], // sequence 1: below the torn WAL's
        &[1, 0, 0, 0, 1, 1, b'z', 1, b'z'],
    ]
    .concat();
    fs.write_file_bytes(&empty_later[1], &log_record(&batch));
    for mode in [
        WalRecoveryMode::TolerateCorruptedTailRecords,
        WalRecoveryMode::PointInTimeRecovery,
    ] {
        let mut o = mem_options(&clone_fs(&fs));
        o.wal_recovery_mode = mode;
        let db = Db::open(dir, o).expect("the prefix before the tear");
        assert_eq!(db.get(&key(8)).expect("get"), Some(value(8).into()));
        assert_eq!(db.get(&key(9)).expect("get"), None, "{mode:?}");
        assert_eq!(db.get(b"z").expect("get"), None, "{mode:?}: after the tear");
    }
    let mut o = mem_options(&clone_fs(&fs));
    o.wal_recovery_mode = WalRecoveryMode::AbsoluteConsistency;
    match Db::open(dir, o) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, wal),
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(_) => panic!("absolute consistency accepted a lost write"),
    }
    // The later WAL records that the torn one was synced: the tear lost synced writes.
    let wal_number: u64 = wal
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("a WAL number");
    let marker = shaledb::internals::WalMarker::Synced {
        through: wal_number,
    };
    fs.write_file_bytes(&empty_later[1], &log_record(&marker.encode()));
    match Db::open(dir, mem_options(&fs)) {
        Err(Error::Corruption { file, detail, .. }) => {
            assert_eq!(file, wal);
            assert!(detail.contains("WAL 901 records its sync"), "{detail}");
        }
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(_) => panic!("a torn tail of a synced WAL was accepted"),
    }
}

/// `payload` as one Full record of the log format (docs/format/wal.md).
fn log_record(payload: &[u8]) -> Vec<u8> {
    const FULL: u8 = 1;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&[FULL]), payload);
    let masked = crc.rotate_right(15).wrapping_add(0xa282_ead8);
    let mut out = masked.to_le_bytes().to_vec();
    out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    out.push(FULL);
    out.extend_from_slice(payload);
    out
}

/// A memtable switch does not sync the WAL it leaves, nor the new WAL's directory entry
/// (db/closed_wals.rs). A power loss that
/// keeps any prefix of each file's unsynced bytes (chosen per file, as the OS's writeback
/// may) reopens at a prefix of the writes, never with a hole where the older WAL was cut
/// short while the newer one kept writes; a synced write after the switch makes every
/// earlier write durable, in both WALs.
#[test]
fn a_wal_left_by_a_switch_is_synced_by_the_next_synced_write() {
    let dir = Path::new("/db");
    // Without preallocation a WAL cut short ends cleanly at a record: only the newer WAL's
    // record of the older one's length shows the cut (`WalMarker::TakesOver`).
    for (synced_after, prealloc) in [(false, 256 << 10), (false, 0), (true, 256 << 10)] {
        let mut older_cut_newer_kept = 0;
        for seed in 0..40 {
            let (mem, hook, db) = twenty_puts_then_a_stalling_flush(Options {
                wal_preallocate_size: prealloc,
                ..Options::default()
            });
            std::thread::scope(|s| {
                // The flush switches to a new WAL, then stalls creating its table.
                let flush = s.spawn(|| db.flush());
                StallFirstTable::wait(&hook.entered);
                for i in 20..40 {
                    let wo = match synced_after && i == 29 {
                        true => sync(),
                        false => WriteOptions::default(),
                    };
                    db.put_opt(&wo, key(i), value(i)).expect("put");
                }
                // The new WAL's directory entry is not synced by the switch; the file
                // system's own journal commit may make it durable at any time.
                shaledb::fs::FileSystem::sync_dir(&mem, dir).expect("sync dir");
                mem.crash_keep_unsynced_prefix(seed);
                StallFirstTable::set(&hook.released);
                assert!(flush.join().expect("flush thread").is_err());
            });
            drop(db);
            let wals = wal_files(&mem, dir);
            assert_eq!(wals.len(), 2, "{wals:?}");
            let (older, newer) = (batches_in(&mem, &wals[0]), batches_in(&mem, &wals[1]));
            if older < 20 && newer > 0 {
                older_cut_newer_kept += 1;
            }
            let db = Db::open(dir, mem_options(&mem)).expect("reopen after power loss");
            let present: Vec<bool> = (0..40)
                .map(|i| db.get(key(i)).expect("get").is_some())
                .collect();
            let kept = present.iter().position(|p| !p).unwrap_or(40);
            assert!(
                present[kept..].iter().all(|p| !p),
                "seed {seed}: a hole after {kept} (WALs held {older} and {newer} writes)"
            );
            if synced_after {
                assert!(kept >= 30, "seed {seed}: synced writes lost: {kept} kept");
            } else if older < 20 {
                assert_eq!(kept, older, "seed {seed}: the prefix up to the cut");
            }
        }
        if !synced_after {
            assert!(older_cut_newer_kept > 0, "no seed cut the older WAL only");
        }
    }
}

/// An older WAL cut exactly at a record boundary (a power loss kept its size only up to
/// there, no zeros after it), a newer WAL holding writes: the newer WAL's first record names
/// the older one's length at the switch, so recovery sees the cut and keeps the prefix before
/// it (or, once a later WAL records the older one's sync, reports corruption).
#[test]
fn an_older_wal_cut_at_a_record_boundary_is_seen_by_the_newer_ones_record_of_its_length() {
    let dir = Path::new("/db");
    let (mem, hook, db) = twenty_puts_then_a_stalling_flush(Options::default());
    // What the OS held before the close would sync the older WAL; cut below.
    let held = std::thread::scope(|s| {
        let flush = s.spawn(|| db.flush());
        StallFirstTable::wait(&hook.entered);
        for i in 20..40 {
            db.put(key(i), value(i)).expect("put");
        }
        let held = clone_fs(&mem);
        StallFirstTable::set(&hook.released);
        assert!(flush.join().expect("flush thread").is_err());
        held
    });
    drop(db);
    let wals = wal_files(&held, dir);
    assert_eq!(wals.len(), 2, "{wals:?}");
    let older = held.read_file_bytes(&wals[0]).expect("older WAL");
    let cut = record_offsets(&held, &wals[0])[12];
    held.write_file_bytes(&wals[0], &older[..cut]);
    let opened = clone_fs(&held);
    let db = Db::open(dir, mem_options(&opened)).expect("open at the prefix");
    for i in 0..40 {
        let want = (i < 12).then(|| value(i).into());
        assert_eq!(db.get(key(i)).expect("get"), want, "key {i}");
    }
    drop(db);
    // The LOG says what was left out and why.
    let log = opened.read_file_bytes(dir.join("LOG")).expect("LOG");
    let log = String::from_utf8_lossy(&log);
    let line = log
        .lines()
        .find(|l| l.contains("WAL recovery stopped"))
        .unwrap_or_else(|| panic!("no line on the stop in {log}"));
    assert!(line.contains("took over from it when it held"), "{line}");
    let mut o = mem_options(&held);
    o.wal_recovery_mode = WalRecoveryMode::AbsoluteConsistency;
    match Db::open(dir, o) {
        Err(Error::Corruption {
            file,
            offset,
            detail,
        }) => {
            assert_eq!((file, offset), (wals[0].clone(), cut as u64));
            assert!(
                detail.contains("took over from it when it held"),
                "{detail}"
            );
        }
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(_) => panic!("absolute consistency accepted a cut WAL"),
    }
}

/// Three WALs, two switches, no sync: a power loss that loses the middle WAL's directory
/// entry (the switches do not sync the directory, db/closed_wals.rs) but keeps the newest
/// one's, made durable by the file system meanwhile. The newest WAL names the missing one as
/// the WAL it took over from: recovery keeps the oldest WAL's writes and ignores the newest.
#[test]
fn a_wal_lost_between_two_others_ends_recovery_at_the_one_before_it() {
    let dir = Path::new("/db");
    let (mem, hook, db) = twenty_puts_then_a_stalling_flush(Options {
        max_write_buffer_number: 4,
        ..Options::default()
    });
    let held = std::thread::scope(|s| {
        let [first, second] = two_flushes_with_puts_behind(s, &db, &mem, &hook.entered);
        let held = clone_fs(&mem);
        StallFirstTable::set(&hook.released);
        assert!(first.join().expect("first flush").is_err());
        assert!(second.join().expect("second flush").is_err());
        held
    });
    drop(db);
    let wals = wal_files(&held, dir);
    assert_eq!(wals.len(), 3, "{wals:?}");
    let without_middle = clone_fs(&held);
    shaledb::fs::FileSystem::remove_file(&without_middle, &wals[1]).expect("remove");
    let db = Db::open(dir, mem_options(&clone_fs(&without_middle))).expect("the prefix");
    for i in 0..60 {
        let want = (i < 20).then(|| value(i).into());
        assert_eq!(db.get(key(i)).expect("get"), want, "key {i}");
    }
    drop(db);
    // All three there: every write.
    let db = Db::open(dir, mem_options(&held)).expect("open");
    for i in 0..60 {
        assert_eq!(
            db.get(key(i)).expect("get"),
            Some(value(i).into()),
            "key {i}"
        );
    }
    drop(db);
    let mut o = mem_options(&without_middle);
    o.wal_recovery_mode = WalRecoveryMode::AbsoluteConsistency;
    match Db::open(dir, o) {
        Err(Error::Corruption { file, detail, .. }) => {
            assert_eq!(file, wals[0]);
            assert!(detail.contains("is missing"), "{detail}");
        }
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(_) => panic!("absolute consistency accepted a missing WAL"),
    }
}

/// On `db` (at /db on `mem`, holding puts of keys 0..20, its next flush stalled until
/// released, `entered` set once it is): a flush, which switches to a second WAL and stalls;
/// puts of keys 20..40; a second flush, which switches to a third WAL and waits behind the
/// first; puts of keys 40..60. Returns the two flushes' threads.
fn two_flushes_with_puts_behind<'scope>(
    s: &'scope std::thread::Scope<'scope, '_>,
    db: &'scope Db,
    mem: &MemFileSystem,
    entered: &(std::sync::Mutex<bool>, std::sync::Condvar),
) -> [std::thread::ScopedJoinHandle<'scope, shaledb::Result<()>>; 2] {
    let first = s.spawn(|| db.flush());
    StallFirstTable::wait(entered);
    for i in 20..40 {
        db.put(key(i), value(i)).expect("put");
    }
    let second = s.spawn(|| db.flush());
    while wal_files(mem, Path::new("/db")).len() < 3 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    for i in 40..60 {
        db.put(key(i), value(i)).expect("put");
    }
    [first, second]
}

/// The file offsets of the records (batches and markers) of the WAL at `path`.
fn record_offsets(fs: &MemFileSystem, path: &Path) -> Vec<usize> {
    use shaledb::fs::FileSystem;
    use shaledb::internals::{LogRead, LogReader};
    let file = fs.open_sequential(path).expect("open WAL");
    let mut reader = LogReader::new(file, path.to_path_buf());
    let mut offsets = Vec::new();
    loop {
        match reader.read().expect("read WAL") {
            LogRead::Record { offset, .. } => offsets.push(offset as usize),
            LogRead::Damaged { .. } => {}
            LogRead::Eof => return offsets,
        }
    }
}

/// A database at /db on a new in-memory file system, opened with `o` (one background job),
/// holding unsynced puts of keys 0..20, whose next flush stalls creating its table until
/// released and then fails (`StallFirstTable`, armed).
fn twenty_puts_then_a_stalling_flush(o: Options) -> (MemFileSystem, StallFirstTable, Db) {
    let hook = StallFirstTable::default();
    let (mem, db) = open_hooked(hook.clone(), o);
    for i in 0..20 {
        db.put(key(i), value(i)).expect("put");
    }
    hook.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    (mem, hook, db)
}

/// A database at /db on a new in-memory file system seen through `hook`, opened with `o`
/// and one background job.
fn open_hooked(hook: impl shaledb::fs::FsHook + 'static, o: Options) -> (MemFileSystem, Db) {
    let mem = MemFileSystem::new();
    let hooked = shaledb::fs::HookedFileSystem::new(Arc::new(mem.clone()), hook);
    let o = Options {
        fs: Arc::new(hooked),
        max_background_jobs: 1,
        ..o
    };
    (mem, Db::open("/db", o).expect("open"))
}

/// `Db::sync_wal` makes every write before it durable: those in a WAL a switch left unsynced
/// (its flush stalled) and those in the current one. A power loss that drops every unsynced
/// byte then keeps exactly the writes before the call. A read-only instance refuses it.
#[test]
fn sync_wal_makes_every_earlier_write_durable_in_every_wal() {
    let dir = Path::new("/db");
    let (mem, hook, db) = twenty_puts_then_a_stalling_flush(Options::default());
    std::thread::scope(|s| {
        let flush = s.spawn(|| db.flush());
        StallFirstTable::wait(&hook.entered);
        for i in 20..40 {
            db.put(key(i), value(i)).expect("put");
        }
        db.sync_wal().expect("sync_wal");
        for i in 40..50 {
            db.put(key(i), value(i)).expect("put");
        }
        mem.crash();
        StallFirstTable::set(&hook.released);
        assert!(flush.join().expect("flush thread").is_err());
    });
    drop(db);
    let db = Db::open(dir, mem_options(&mem)).expect("reopen after power loss");
    for i in 0..50 {
        let want = (i < 40).then(|| value(i).into());
        assert_eq!(db.get(key(i)).expect("get"), want, "key {i}");
    }
    drop(db);
    let ro = Db::open_read_only(dir, mem_options(&mem)).expect("read-only");
    assert!(matches!(ro.sync_wal(), Err(Error::NotSupported(_))));
}

/// The write batches (not markers) readable in the WAL at `path`.
fn batches_in(fs: &MemFileSystem, path: &Path) -> usize {
    use shaledb::fs::FileSystem;
    use shaledb::internals::{LogRead, LogReader, WalMarker};
    let file = fs.open_sequential(path).expect("open WAL");
    let mut reader = LogReader::new(file, path.to_path_buf());
    let mut batches = 0;
    loop {
        match reader.read().expect("read WAL") {
            LogRead::Record { data, .. } if WalMarker::decode(&data).is_none() => batches += 1,
            LogRead::Record { .. } | LogRead::Damaged { .. } => {}
            LogRead::Eof => return batches,
        }
    }
}

/// Blocks the first table creation after `arm` until released, then fails it for lack of
/// space: a flush caught in flight by a full disk.
#[derive(Clone, Default)]
struct StallFirstTable {
    armed: Arc<std::sync::atomic::AtomicBool>,
    entered: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    released: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

impl StallFirstTable {
    fn set(flag: &(std::sync::Mutex<bool>, std::sync::Condvar)) {
        *flag.0.lock().expect("lock") = true;
        flag.1.notify_all();
    }

    fn wait(flag: &(std::sync::Mutex<bool>, std::sync::Condvar)) {
        let mut done = flag.0.lock().expect("lock");
        while !*done {
            done = flag.1.wait(done).expect("wait");
        }
    }
}

impl shaledb::fs::FsHook for StallFirstTable {
    fn before(&self, call: shaledb::fs::FsCall<'_>) -> std::io::Result<()> {
        let shaledb::fs::FsCall::Create(path) = call else {
            return Ok(());
        };
        let is_table = path.extension().is_some_and(|e| e == "sst");
        if !is_table || !self.armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        Self::set(&self.entered);
        Self::wait(&self.released);
        Err(std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            "no space left (test)",
        ))
    }
}

/// `resume` called while a flush is still failing from a full disk the caller has just freed
/// waits for that flush, retries, and answers `Ok` only once writes are accepted again: the
/// in-flight failure neither passes unseen (an `Ok` followed by suspended writes) nor decides
/// the answer.
#[test]
fn resume_waits_for_a_flush_already_in_flight() {
    let hook = StallFirstTable::default();
    let fs = shaledb::fs::HookedFileSystem::new(Arc::new(MemFileSystem::new()), hook.clone());
    let o = Options {
        fs: Arc::new(fs),
        // No automatic retry during the test: only `resume` starts one.
        bgerror_resume_retry_interval: std::time::Duration::from_secs(600),
        ..Options::default()
    };
    let db = Db::open(Path::new("/db"), o).expect("open");
    db.put(b"before", b"1").expect("put");
    hook.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    std::thread::scope(|s| {
        let flush = s.spawn(|| db.flush());
        StallFirstTable::wait(&hook.entered);
        let resume = s.spawn(|| db.resume());
        // Give `resume` time to look at the state while the flush is still in flight.
        std::thread::sleep(std::time::Duration::from_millis(200));
        StallFirstTable::set(&hook.released);
        assert!(flush.join().expect("flush thread").is_err());
        assert!(
            matches!(resume.join().expect("resume thread"), Ok(())),
            "resume after the disk was freed"
        );
    });
    db.put(b"after", b"2")
        .expect("writes are accepted after resume");
    assert_eq!(db.get(b"before").expect("get").as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"after").expect("get").as_deref(), Some(&b"2"[..]));
}

/// Writes keys 0..10 synced into a new database at `dir`, loses power, and cuts the last 3
/// bytes off the (only) WAL: its last record is torn.
fn ten_synced_puts_then_a_torn_wal_tail(fs: &MemFileSystem, dir: &Path) -> PathBuf {
    synced_puts_then_power_loss(fs, mem_options(fs), 10);
    let wal = wal_files(fs, dir).remove(0);
    let mut bytes = fs.read_file_bytes(&wal).expect("wal");
    // The last record's last 3 bytes never reached the disk: zeros, as in the preallocated
    // space after it.
    let end = bytes.iter().rposition(|&b| b != 0).expect("records") + 1;
    bytes[end - 3..end].fill(0);
    fs.write_file_bytes(&wal, &bytes);
    wal
}

/// A WAL's size is set ahead of its records (`wal_preallocate_size`, whole 32 KiB blocks):
/// synced writes survive a power loss in it, the zeros after them are its end in every
/// recovery mode, and a WAL written after recovery is preallocated again. With 0 the WAL is
/// exactly its records.
#[test]
fn a_preallocated_wal_recovers_its_synced_writes_in_every_mode() {
    let dir = Path::new("/db");
    for (size, expected) in [(256 << 10, 256 << 10), (40_000, 65_536), (0, 0)] {
        let fs = MemFileSystem::new();
        let mut o = mem_options(&fs);
        o.wal_preallocate_size = size;
        synced_puts_then_power_loss(&fs, o, 50);
        let wal = wal_files(&fs, dir).remove(0);
        let bytes = fs.read_file_bytes(&wal).expect("wal");
        let records = bytes.iter().rposition(|&b| b != 0).expect("records") + 1;
        assert_eq!(bytes.len(), expected.max(records), "size {size}");
        for mode in [
            WalRecoveryMode::AbsoluteConsistency,
            WalRecoveryMode::TolerateCorruptedTailRecords,
            WalRecoveryMode::PointInTimeRecovery,
            WalRecoveryMode::SkipAnyCorruptedRecords,
        ] {
            let trial = clone_fs(&fs);
            let mut o = mem_options(&trial);
            o.wal_preallocate_size = size;
            o.wal_recovery_mode = mode;
            let db = Db::open(dir, o).expect("open over a preallocated WAL");
            for i in 0..50 {
                assert_eq!(
                    db.get(&key(i)).expect("get").as_deref(),
                    Some(value(i).as_slice()),
                    "size {size}, {mode:?}: record {i}"
                );
            }
            db.put_opt(&sync(), b"after", b"recovery").expect("put");
            let newest = wal_files(&trial, dir).pop().expect("a new WAL");
            assert_ne!(newest, wal);
            let len = trial.read_file_bytes(&newest).expect("wal").len();
            if size > 0 {
                assert_eq!(len, expected, "size {size}, {mode:?}: the new WAL");
            } else {
                assert!(
                    len > 0 && len < 1000,
                    "size 0, {mode:?}: the new WAL has {len}"
                );
            }
        }
    }
}

/// A WAL that holds only the marker naming its predecessor (a flush's rotation) takes no
/// preallocated space: a database at rest is its tables and a few bytes of WAL. The first
/// write preallocates, and a power loss after the rotation loses nothing flushed.
#[test]
fn a_wal_holding_only_its_marker_is_not_preallocated() {
    let dir = Path::new("/db");
    let fs = MemFileSystem::new();
    let db = Db::open(dir, mem_options(&fs)).expect("open");
    for i in 0..20 {
        db.put_opt(&sync(), &key(i), &value(i)).expect("put");
    }
    db.flush().expect("flush");
    let newest = wal_files(&fs, dir).pop().expect("a WAL");
    let len = fs.read_file_bytes(&newest).expect("wal").len();
    assert!(len > 0 && len < 100, "the rotated WAL has {len} bytes");
    db.put_opt(&sync(), b"after", b"flush").expect("put");
    let len = fs.read_file_bytes(&newest).expect("wal").len();
    assert_eq!(len, 256 << 10, "the WAL preallocates at its first write");
    drop(db);
    fs.crash();
    let db = Db::open(dir, mem_options(&fs)).expect("reopen");
    for i in 0..20 {
        assert_eq!(
            db.get(&key(i)).expect("get").as_deref(),
            Some(value(i).as_slice())
        );
    }
    assert_eq!(
        db.get(b"after").expect("get").as_deref(),
        Some(&b"flush"[..])
    );
}

/// Two WALs after a power loss: the older one, which the rotation cut back to its records and
/// the first synced write in the newer one synced (recording it there in a marker), and the
/// newer one with its preallocated zeros. The older WAL's length is exactly its records;
/// zeros where its last records were (a lost synced write) are corruption before a WAL
/// holding data, or where point-in-time recovery stops, never a silent loss.
#[test]
fn an_older_wal_ends_at_its_records_and_zeros_there_are_damage() {
    let dir = Path::new("/db");
    let mem = MemFileSystem::new();
    let hook = StallFirstTable::default();
    let hooked = shaledb::fs::HookedFileSystem::new(Arc::new(mem.clone()), hook.clone());
    let o = Options {
        fs: Arc::new(hooked),
        max_background_jobs: 1,
        ..Options::default()
    };
    let db = Db::open(dir, o).expect("open");
    for i in 0..20 {
        db.put_opt(&sync(), &key(i), &value(i)).expect("put");
    }
    hook.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    std::thread::scope(|s| {
        // The flush rotates the WAL, then stalls creating its table.
        let flush = s.spawn(|| db.flush());
        StallFirstTable::wait(&hook.entered);
        for i in 20..30 {
            db.put_opt(&sync(), &key(i), &value(i)).expect("put");
        }
        mem.crash();
        StallFirstTable::set(&hook.released);
        assert!(flush.join().expect("flush thread").is_err());
    });
    drop(db);
    let wals = wal_files(&mem, dir);
    assert_eq!(wals.len(), 2, "{wals:?}");
    let older = mem.read_file_bytes(&wals[0]).expect("older WAL");
    assert_ne!(
        older.last(),
        Some(&0),
        "the older WAL ends at its last record"
    );
    let newer = mem.read_file_bytes(&wals[1]).expect("newer WAL");
    assert_eq!(
        newer.len(),
        256 << 10,
        "the newer WAL keeps its preallocated size"
    );

    let open = |fs: &MemFileSystem, mode| {
        let mut o = mem_options(fs);
        o.wal_recovery_mode = mode;
        Db::open(dir, o)
    };
    let present = |db: &Db| {
        (0..30)
            .filter(|&i| db.get(&key(i)).expect("get").is_some())
            .count()
    };
    let db = open(&clone_fs(&mem), WalRecoveryMode::AbsoluteConsistency).expect("intact");
    assert_eq!(present(&db), 30);
    drop(db);

    // The older WAL's last record lost: zeros from its start (only zeros follow the other
    // records), or from 3 bytes before the end (a torn record, then zeros).
    let last = 7 + 12 + 1 + 1 + key(19).len() + 1 + value(19).len();
    for zeroed in [last, 3] {
        let mut damaged = older.clone();
        let len = damaged.len();
        damaged[len - zeroed..].fill(0);
        let fs = clone_fs(&mem);
        fs.write_file_bytes(&wals[0], &damaged);
        for mode in [
            WalRecoveryMode::AbsoluteConsistency,
            WalRecoveryMode::TolerateCorruptedTailRecords,
        ] {
            match open(&clone_fs(&fs), mode) {
                Err(Error::Corruption { file, .. }) => assert_eq!(file, wals[0], "{mode:?}"),
                Err(e) => panic!("{zeroed} zeros, {mode:?}: expected corruption, got {e}"),
                Ok(_) => panic!("{zeroed} zeros, {mode:?}: a lost synced record went unseen"),
            }
        }
        // Point in time: the older WAL's intact records, nothing after the damage.
        let db = open(&clone_fs(&fs), WalRecoveryMode::PointInTimeRecovery).expect("open");
        assert_eq!(present(&db), 19, "{zeroed} zeros");
        assert!(db.get(&key(19)).expect("get").is_none());
        drop(db);
        let db = open(&clone_fs(&fs), WalRecoveryMode::SkipAnyCorruptedRecords).expect("open");
        assert_eq!(present(&db), 29, "{zeroed} zeros");
    }
}

/// Stalls the first two tables created (flushes) until each is released: the first then
/// goes on, the second fails.
#[derive(Clone, Default)]
struct StallTwoTables {
    created: Arc<std::sync::atomic::AtomicUsize>,
    entered: [Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>; 2],
    released: [Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>; 2],
}

impl shaledb::fs::FsHook for StallTwoTables {
    fn before(&self, call: shaledb::fs::FsCall<'_>) -> std::io::Result<()> {
        let shaledb::fs::FsCall::Create(path) = call else {
            return Ok(());
        };
        if path.extension().is_none_or(|e| e != "sst") {
            return Ok(());
        }
        let nth = self
            .created
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if nth > 1 {
            return Ok(());
        }
        StallFirstTable::set(&self.entered[nth]);
        StallFirstTable::wait(&self.released[nth]);
        match nth {
            0 => Ok(()),
            _ => Err(std::io::Error::other("the second flush fails (test)")),
        }
    }
}

/// A flush of the only column family syncs no WAL (RocksDB's `SyncClosedLogs` condition):
/// its table holds every write of the WALs it retires, and a WAL closed behind it keeps
/// its writes unsynced, lost in a power loss as the current WAL's are (the state is still
/// a prefix). With a second family the flush syncs every closed WAL first, so one family's
/// newer writes never survive another's older ones: the same power loss keeps them.
#[test]
fn a_flush_syncs_the_closed_wals_only_when_there_are_several_families() {
    let dir = Path::new("/db");
    for families in [1, 2] {
        let hook = StallTwoTables::default();
        let o = Options {
            max_write_buffer_number: 4,
            ..Options::default()
        };
        let (mem, db) = open_hooked(hook.clone(), o);
        if families == 2 {
            db.create_cf("second", shaledb::CfOptions::default())
                .expect("create family");
        }
        for i in 0..20 {
            db.put(key(i), value(i)).expect("put");
        }
        std::thread::scope(|s| {
            let [first, second] = two_flushes_with_puts_behind(s, &db, &mem, &hook.entered[0]);
            // The first flush finishes (its MANIFEST write done); the second stalls.
            StallFirstTable::set(&hook.released[0]);
            StallFirstTable::wait(&hook.entered[1]);
            mem.crash();
            StallFirstTable::set(&hook.released[1]);
            // The first caller waits for the memtables behind its own too: both see the
            // failure.
            assert!(first.join().expect("first flush thread").is_err());
            assert!(second.join().expect("second flush thread").is_err());
        });
        drop(db);
        let mut o = mem_options(&mem);
        o.create_missing_column_families = true;
        let db = Db::open(dir, o).expect("reopen after power loss");
        let kept = (0..60)
            .map(|i| db.get(key(i)).expect("get"))
            .position(|v| v.is_none())
            .unwrap_or(60);
        for i in 0..60 {
            let want = (i < kept).then(|| value(i).into());
            assert_eq!(
                db.get(key(i)).expect("get"),
                want,
                "{families} families: key {i}"
            );
        }
        let want = match families {
            1 => 20,
            _ => 40,
        };
        assert_eq!(kept, want, "{families} families: writes kept");
    }
}
