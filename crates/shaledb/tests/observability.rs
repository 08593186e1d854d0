//! Observability: the `LOG` file (contents, rotation, periodic stats dump, write errors
//! dropped), statistics (exact counts), event listeners (exact events, panics caught,
//! callbacks that read the database) and the rate limiter of flush and compaction writes.

mod common;

use shaledb::fs::{FileSystem, FsCall, FsHook, HookedFileSystem, MemFileSystem, WritableFile};
use shaledb::{
    BackgroundErrorInfo, BackgroundErrorReason, CompactionJobInfo, Db, EventListener, FlushJobInfo,
    HistogramKind, InfoLogLevel, Options, Statistics, TableFileDeletionInfo, Ticker, WriteOptions,
    WriteStallCondition, WriteStallInfo,
};
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

fn dir() -> PathBuf {
    PathBuf::from("/db")
}

fn mem_options(fs: &MemFileSystem) -> Options {
    Options::default()
        .with_fs(fs.clone())
        .with_max_background_jobs(1)
}

fn read_log(fs: &dyn FileSystem, name: &str) -> String {
    String::from_utf8(fs.read_to_vec(&dir().join(name)).expect("read LOG")).expect("utf-8")
}

fn table_numbers(fs: &dyn FileSystem) -> BTreeSet<u64> {
    fs.list_dir(&dir())
        .expect("list")
        .iter()
        .filter_map(|n| n.strip_suffix(".sst")?.parse().ok())
        .collect()
}

fn old_logs(fs: &dyn FileSystem) -> Vec<String> {
    let mut v: Vec<String> = fs
        .list_dir(&dir())
        .expect("list")
        .into_iter()
        .filter(|n| n.starts_with("LOG.old."))
        .collect();
    v.sort();
    v
}

/// Records every event as it arrives.
#[derive(Default)]
struct Recorder {
    flushes: Mutex<Vec<FlushJobInfo>>,
    compactions: Mutex<Vec<CompactionJobInfo>>,
    stalls: Mutex<Vec<WriteStallInfo>>,
    errors: Mutex<Vec<(BackgroundErrorReason, String)>>,
    deleted: Mutex<Vec<u64>>,
}

impl EventListener for Recorder {
    fn on_flush_completed(&self, info: &FlushJobInfo) {
        self.flushes.lock().expect("lock").push(info.clone());
    }
    fn on_compaction_completed(&self, info: &CompactionJobInfo) {
        self.compactions.lock().expect("lock").push(info.clone());
    }
    fn on_stall_conditions_changed(&self, info: &WriteStallInfo) {
        self.stalls.lock().expect("lock").push(*info);
    }
    fn on_background_error(&self, info: &BackgroundErrorInfo) {
        self.errors
            .lock()
            .expect("test")
            .push((info.reason, info.error.to_string()));
    }
    fn on_table_file_deleted(&self, info: &TableFileDeletionInfo) {
        assert!(info.error.is_none(), "{:?}", info.error);
        self.deleted.lock().expect("lock").push(info.file_number);
    }
}

#[test]
fn log_records_open_flushes_and_compactions_and_moves_aside_at_reopen() {
    let fs = MemFileSystem::new();
    let db = Db::open(dir(), mem_options(&fs)).expect("open");
    for round in 0..2u32 {
        db.put(format!("k{round}"), b"v").expect("put");
        db.flush().expect("flush");
    }
    let flushed = table_numbers(&fs);
    assert_eq!(flushed.len(), 2);
    db.compact_range(None, None).expect("compact");
    db.wait_for_compactions().expect("wait");
    let after = table_numbers(&fs);
    assert_eq!(after.len(), 1);
    drop(db);

    let log = read_log(&fs, "LOG");
    assert!(log.contains("INFO ShaleDB "), "{log}");
    assert!(log.contains("opened /db"), "{log}");
    assert!(log.contains("write_buffer_size: 67108864,"), "{log}");
    for n in &flushed {
        assert!(
            log.contains(&format!("[default] flush: tables [{n}], blob files [], ")),
            "{log}"
        );
        assert!(log.contains(&format!("deleted table #{n}")), "{log}");
    }
    let inputs: Vec<u64> = flushed.iter().copied().collect();
    let output = after.iter().next().copied().unwrap_or_default();
    assert!(
        log.contains(&format!(
            "[default] compaction (Manual) L0 -> L1: inputs {inputs:?} ("
        )),
        "{log}"
    );
    assert!(log.contains(&format!("outputs [{output}] (")), "{log}");
    assert!(log.trim_end().ends_with("INFO closed"), "{log}");
    // Every line carries a timestamp and a level.
    for line in log.lines() {
        assert_eq!(line.as_bytes()[4], b'/', "{line}");
        assert!(line.contains(" INFO ") || line.contains(" WARN "), "{line}");
    }

    // Reopen: the old LOG is kept as LOG.old.<micros>, the new one starts afresh.
    let db = Db::open(dir(), mem_options(&fs)).expect("reopen");
    drop(db);
    let old = old_logs(&fs);
    assert_eq!(old.len(), 1, "{old:?}");
    assert_eq!(read_log(&fs, &old[0]), log);
    assert!(!read_log(&fs, "LOG").contains("[default] flush:"));
    // destroy removes the LOG files with everything else.
    Db::destroy(dir(), &mem_options(&fs)).expect("destroy");
    assert!(!fs.exists(&dir()));
}

#[test]
fn log_rotates_by_size_keeping_the_newest_old_files() {
    let fs = MemFileSystem::new();
    let opts = mem_options(&fs)
        .with_max_log_file_size(1024)
        .with_keep_log_file_num(2);
    let db = Db::open(dir(), opts).expect("open");
    for i in 0..30u32 {
        db.put(format!("k{i}"), b"v").expect("put");
        db.flush().expect("flush");
    }
    drop(db);
    assert_eq!(old_logs(&fs).len(), 2, "{:?}", fs.list_dir(&dir()));
    let live = read_log(&fs, "LOG");
    assert!(live.len() <= 1024, "{}", live.len());
    assert!(live.trim_end().ends_with("INFO closed"), "{live}");
    let newest_old = read_log(&fs, &old_logs(&fs)[1]);
    // Flushes, compactions and deletions interleave (30 L0 files trigger compactions).
    assert!(
        newest_old.len() <= 1024 && newest_old.contains(" INFO "),
        "{newest_old}"
    );

    // Off: no LOG at all.
    let fs = MemFileSystem::new();
    let db = Db::open(
        dir(),
        mem_options(&fs).with_info_log_level(InfoLogLevel::Off),
    )
    .expect("open");
    db.put(b"k", b"v").expect("put");
    db.flush().expect("flush");
    drop(db);
    assert!(!fs.exists(&dir().join("LOG")));
    assert!(
        Db::open(dir(), mem_options(&fs).with_max_log_file_size(100)).is_err(),
        "a tiny max_log_file_size is refused"
    );
}

#[test]
fn stats_are_dumped_to_the_log_every_period() {
    let fs = MemFileSystem::new();
    let opts = mem_options(&fs)
        .with_stats_dump_period(1)
        .with_statistics(Arc::new(Statistics::new()));
    let db = Db::open(dir(), opts).expect("open");
    db.put(b"k", b"v").expect("put");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !read_log(&fs, "LOG").contains("STATISTICS:") {
        assert!(Instant::now() < deadline, "no stats dump within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let started = Instant::now();
    drop(db);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "close waits for no period"
    );
    let log = read_log(&fs, "LOG");
    assert!(log.contains("------- DUMPING STATS -------"), "{log}");
    assert!(
        log.contains("shaledb.number.keys.written COUNT : 1"),
        "{log}"
    );
    // The `shaledb.stats` property's text is in it.
    assert!(log.contains("Level"), "{log}");
}

#[test]
fn statistics_count_exactly() {
    let fs = MemFileSystem::new();
    let stats = Arc::new(Statistics::new());
    let opts = mem_options(&fs)
        .with_statistics(stats.clone())
        .with_paranoid_checks(false);
    let db = Db::open(dir(), opts).expect("open");
    let mut bytes = 0;
    for i in 0..100u32 {
        let (k, v) = (format!("key{i:03}"), format!("value{i}"));
        bytes += k.len() + v.len();
        db.put(k, v).expect("put");
    }
    db.put_opt(&WriteOptions::default().with_sync(true), b"synced", b"1")
        .expect("sync put");
    let s = db.statistics().expect("statistics on");
    assert_eq!(s.ticker(Ticker::KeysWritten), 101);
    assert_eq!(s.ticker(Ticker::WalSyncs), 1);
    // Each put's bytes plus its batch header (12 bytes) and per-entry framing.
    assert!(s.ticker(Ticker::BytesWritten) > bytes as u64);
    assert_eq!(s.histogram(HistogramKind::WriteMicros).count, 101);

    assert_eq!(
        db.get(b"key007").expect("get").as_deref(),
        Some(&b"value7"[..])
    );
    let s = db.statistics().expect("on");
    assert_eq!(s.ticker(Ticker::MemtableHit), 1);
    assert_eq!(s.ticker(Ticker::MemtableMiss), 0);
    assert_eq!(s.ticker(Ticker::KeysRead), 1);
    assert_eq!(s.ticker(Ticker::BytesRead), 6);

    db.flush().expect("flush");
    let s = db.statistics().expect("on");
    assert!(s.ticker(Ticker::FlushBytesWritten) > bytes as u64);
    assert_eq!(s.histogram(HistogramKind::FlushMicros).count, 1);
    let before = stats.snapshot();
    assert_eq!(
        db.get(b"key042").expect("get").as_deref(),
        Some(&b"value42"[..])
    );
    let delta = |s: &shaledb::StatisticsSnapshot, t| s.ticker(t) - before.ticker(t);
    let s = stats.snapshot();
    assert_eq!(delta(&s, Ticker::MemtableMiss), 1);
    assert_eq!(
        delta(&s, Ticker::BlockCacheDataMiss),
        1,
        "first read of the block"
    );
    assert_eq!(delta(&s, Ticker::BlockCacheDataHit), 0);
    assert_eq!(delta(&s, Ticker::BloomChecked), 1);
    assert_eq!(delta(&s, Ticker::BloomUseful), 0);
    db.get(b"key043").expect("get");
    let s = stats.snapshot();
    assert_eq!(delta(&s, Ticker::BlockCacheDataMiss), 1);
    assert_eq!(
        delta(&s, Ticker::BlockCacheDataHit),
        1,
        "the block is cached now"
    );
    // An absent key inside the table's range: the filter rules it out (no block read).
    assert_eq!(db.get(b"key042x").expect("get"), None);
    let s = stats.snapshot();
    assert_eq!(delta(&s, Ticker::BloomChecked), 3);
    assert_eq!(delta(&s, Ticker::BloomUseful), 1);
    assert_eq!(delta(&s, Ticker::BlockCacheDataHit), 1);
    assert_eq!(s.ticker(Ticker::KeysRead), 4);
    assert_eq!(s.histogram(HistogramKind::GetMicros).count, 4);
    let bytes_read = s.ticker(Ticker::BytesRead);
    let misses = s.ticker(Ticker::MemtableMiss);
    db.put(b"key002", b"in-mem").expect("put");
    let got = db.multi_get([&b"key001"[..], b"nope", b"key010", b"key002"]);
    assert_eq!(got.len(), 4);
    let s = stats.snapshot();
    assert_eq!(s.ticker(Ticker::KeysRead), 8);
    assert_eq!(s.ticker(Ticker::BytesRead), bytes_read + 6 + 7 + 6);
    // key002 is in the memtable; the three others go to the tables.
    assert_eq!(s.ticker(Ticker::MemtableMiss), misses + 3);
    assert_eq!(s.histogram(HistogramKind::MultiGetMicros).count, 1);

    let mut it = db.iter(&Default::default());
    it.seek(b"key050");
    assert!(it.valid());
    it.seek_to_first();
    assert_eq!(
        stats.snapshot().histogram(HistogramKind::SeekMicros).count,
        2
    );
    drop(it);
    let text = db.statistics().expect("on").to_string();
    assert!(
        text.contains("shaledb.number.keys.written COUNT : 102\n"),
        "{text}"
    );
    assert!(text.contains("shaledb.db.get.micros P50 : "), "{text}");
    drop(db);

    // Off: nothing to read.
    let fs = MemFileSystem::new();
    let db = Db::open(dir(), mem_options(&fs)).expect("open");
    db.put(b"k", b"v").expect("put");
    assert!(db.statistics().is_none());
}

#[test]
fn listeners_receive_exactly_the_flushes_compactions_and_deletions() {
    let fs = MemFileSystem::new();
    let rec = Arc::new(Recorder::default());
    let db = Db::open(dir(), mem_options(&fs).with_listener(rec.clone())).expect("open");
    let mut flushed = Vec::new();
    for round in 0..2u32 {
        for i in 0..10u32 {
            db.put(format!("k{i:02}"), format!("v{round}"))
                .expect("put");
        }
        let before = table_numbers(&fs);
        db.flush().expect("flush");
        let new: Vec<u64> = table_numbers(&fs).difference(&before).copied().collect();
        assert_eq!(new.len(), 1);
        flushed.push(new[0]);
        // Delivered before flush returned.
        let f = rec.flushes.lock().expect("lock");
        assert_eq!(f.len(), round as usize + 1);
        let last = &f[round as usize];
        assert_eq!(last.cf_name, "default");
        assert_eq!(last.file_number, new[0]);
        assert_eq!(last.num_entries, 10);
        assert_eq!(
            last.file_size,
            fs.file_size(&dir().join(format!("{:06}.sst", new[0])))
                .expect("size")
        );
        assert!(last.file_path.ends_with(format!("{:06}.sst", new[0])));
    }
    db.compact_range(None, None).expect("compact");
    db.wait_for_compactions().expect("wait");
    let out = table_numbers(&fs);
    let c = rec.compactions.lock().expect("lock").clone();
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!((c[0].base_input_level, c[0].output_level), (0, 1));
    let mut inputs = c[0].input_files.clone();
    inputs.sort();
    assert_eq!(inputs, flushed);
    assert_eq!(c[0].output_files, out.iter().copied().collect::<Vec<_>>());
    assert!(!c[0].trivial_move);
    assert_eq!(c[0].reason, shaledb::CompactionReason::Manual);
    assert!(c[0].bytes_read > 0 && c[0].bytes_written > 0);
    let mut deleted = rec.deleted.lock().expect("lock").clone();
    deleted.sort();
    assert_eq!(
        deleted, flushed,
        "exactly the compaction's inputs were deleted"
    );
    assert!(rec.stalls.lock().expect("lock").is_empty());
    assert!(rec.errors.lock().expect("lock").is_empty());
}

#[test]
fn stall_condition_changes_are_reported_once_each() {
    let fs = MemFileSystem::new();
    let rec = Arc::new(Recorder::default());
    let opts = mem_options(&fs)
        .with_listener(rec.clone())
        .with_statistics(Arc::new(Statistics::new()))
        .with_level0_file_num_compaction_trigger(10)
        .with_level0_slowdown_writes_trigger(2)
        .with_level0_stop_writes_trigger(10);
    let db = Db::open(dir(), opts).expect("open");
    for i in 0..2u32 {
        db.put(format!("k{i}"), b"v").expect("put");
        db.flush().expect("flush");
    }
    assert!(
        rec.stalls.lock().expect("lock").is_empty(),
        "flushes do not write"
    );
    // Two L0 files: writes are slowed.
    db.put(b"a", b"1").expect("put");
    db.put(b"b", b"1").expect("put");
    db.compact_range(None, None).expect("compact");
    // Said when the compaction ends, not at the next write.
    assert_eq!(
        rec.stalls.lock().expect("lock").len(),
        2,
        "the compaction ended the slowdown"
    );
    db.put(b"c", b"1").expect("put");
    db.put(b"d", b"1").expect("put");
    let stalls = rec.stalls.lock().expect("lock").clone();
    let pairs: Vec<_> = stalls.iter().map(|s| (s.previous, s.current)).collect();
    use WriteStallCondition::{Delayed, Normal};
    assert_eq!(pairs, [(Normal, Delayed), (Delayed, Normal)]);
    let log = read_log(&fs, "LOG");
    assert!(
        log.contains("WARN write stall condition Normal -> Delayed"),
        "{log}"
    );
    assert!(
        log.contains("WARN write stall condition Delayed -> Normal"),
        "{log}"
    );
}

/// Fails the creation of table files while armed.
struct FailTables(AtomicBool);

impl FsHook for FailTables {
    fn before(&self, call: FsCall<'_>) -> io::Result<()> {
        if self.0.load(Ordering::Relaxed) && matches!(call, FsCall::Create(_)) && call.is_table() {
            return Err(io::Error::other("injected: no table files"));
        }
        Ok(())
    }
}

#[test]
fn a_failed_flush_is_one_background_error_event() {
    let fs = Arc::new(HookedFileSystem::new(
        Arc::new(MemFileSystem::new()),
        FailTables(AtomicBool::new(false)),
    ));
    let rec = Arc::new(Recorder::default());
    let opts = Options {
        fs: fs.clone(),
        listeners: vec![rec.clone()],
        max_background_jobs: 1,
        ..Default::default()
    };
    let db = Db::open(dir(), opts).expect("open");
    db.put(b"k", b"v").expect("put");
    fs.hook().0.store(true, Ordering::Relaxed);
    assert!(db.flush().is_err());
    assert!(db.put(b"k2", b"v").is_err(), "writes are refused");
    let errors = rec.errors.lock().expect("lock").clone();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, BackgroundErrorReason::Flush);
    assert!(
        errors[0].1.contains("injected: no table files"),
        "{errors:?}"
    );
    assert!(rec.flushes.lock().expect("lock").is_empty());
    let log = read_log(&*fs, "LOG");
    assert!(log.contains("ERROR background error (Flush)"), "{log}");
}

/// Fails every append to the `LOG` file.
struct FailLogWrites;

struct FailingFile;

impl WritableFile for FailingFile {
    fn append(&mut self, _: &[u8]) -> io::Result<()> {
        Err(io::Error::other("injected: LOG append"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        0
    }
}

impl FsHook for FailLogWrites {
    fn writable(&self, path: &Path, file: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        match path.file_name().is_some_and(|n| n == "LOG") {
            true => Box::new(FailingFile),
            false => file,
        }
    }
}

#[test]
fn log_write_errors_never_fail_an_operation_and_are_counted() {
    let fs = Arc::new(HookedFileSystem::new(
        Arc::new(MemFileSystem::new()),
        FailLogWrites,
    ));
    let stats = Arc::new(Statistics::new());
    let opts = Options {
        fs,
        statistics: Some(stats.clone()),
        ..Default::default()
    };
    let db = Db::open(dir(), opts).expect("open despite the LOG");
    db.put(b"k", b"v").expect("put");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    let errors: u64 = db
        .property("shaledb.info-log-write-errors")
        .expect("property")
        .parse()
        .expect("number");
    assert!(
        errors >= 3,
        "open, flush and compaction lines were dropped: {errors}"
    );
    assert_eq!(stats.ticker(Ticker::InfoLogWriteErrors), errors);
}

/// Panics on every flush.
struct Panicky;

impl EventListener for Panicky {
    fn on_flush_completed(&self, _: &FlushJobInfo) {
        panic!("listener bug");
    }
}

/// Reads the database from inside a callback.
#[derive(Default)]
struct ReadsBack {
    db: OnceLock<Weak<Db>>,
    seen: Mutex<Vec<Option<Vec<u8>>>>,
}

impl EventListener for ReadsBack {
    fn on_flush_completed(&self, _: &FlushJobInfo) {
        let db = self.db.get().and_then(Weak::upgrade).expect("db");
        let v = db.get(b"k").expect("get").map(|v| v.to_vec());
        assert!(db.property("shaledb.stats").is_some());
        self.seen.lock().expect("lock").push(v);
    }
}

#[test]
fn a_panicking_listener_is_caught_and_a_callback_may_read_the_database() {
    let fs = MemFileSystem::new();
    let stats = Arc::new(Statistics::new());
    let reader = Arc::new(ReadsBack::default());
    let opts = mem_options(&fs)
        .with_statistics(stats.clone())
        .with_listener(Arc::new(Panicky))
        .with_listener(reader.clone());
    let db = Arc::new(Db::open(dir(), opts).expect("open"));
    reader.db.set(Arc::downgrade(&db)).expect("once");
    db.put(b"k", b"v").expect("put");
    db.flush().expect("flush goes on after the panic");
    db.put(b"k", b"w").expect("put");
    db.flush().expect("flush");
    assert_eq!(stats.ticker(Ticker::ListenerPanics), 2);
    assert_eq!(
        *reader.seen.lock().expect("lock"),
        [Some(b"v".to_vec()), Some(b"w".to_vec())]
    );
    assert!(read_log(&fs, "LOG").contains("ERROR an event listener panicked"));
}

#[test]
fn the_rate_limiter_paces_flush_writes() {
    // 1.5 MiB of values no codec shrinks, flushed at 1 MiB/s: the table alone takes at least
    // 1.5 s less the tenth of a second of credit the bucket may hold. Only a lower bound:
    // a slow machine takes longer.
    let fs = MemFileSystem::new();
    let stats = Arc::new(Statistics::new());
    let opts = mem_options(&fs)
        .with_rate_limit_bytes_per_sec(1 << 20)
        .with_statistics(stats.clone());
    let db = Db::open(dir(), opts).expect("open");
    for i in 0..48u64 {
        db.put(format!("k{i:03}"), common::incompressible(i, 32 << 10))
            .expect("put");
    }
    let start = Instant::now();
    db.flush().expect("flush");
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_millis(1300), "{elapsed:?}");
    assert!(stats.ticker(Ticker::RateLimiterWaitMicros) >= 1_300_000);
    assert!(stats.ticker(Ticker::FlushBytesWritten) >= 3 << 19);
}
