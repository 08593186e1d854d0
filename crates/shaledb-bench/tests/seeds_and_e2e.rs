//! Every seed command line parses; every db_bench benchmark and YCSB workload runs end to end on
//! ShaleDB with a tiny --num.
#![allow(clippy::unwrap_used)]

use shaledb_bench::dbbench::{Flags, Runner};
use shaledb_bench::ycsb::YcsbConfig;

/// The db_bench command lines of ../shared/seeds/, with the shell variables substituted by the
/// seeds' own values (only --num and --db scaled).
const SEED_LINES: &[&str] = &[
    // rocksdb-flash-benchmarks-2014 / rocksdb-vs-leveldb-2013: bulk load into L0, then compact.
    "--benchmarks=fillrandom --disable_seek_compaction=1 --mmap_read=0 --statistics=1 --histogram=1 --num=1000 --threads=1 --value_size=800 --block_size=65536 --cache_size=1048576 --bloom_bits=10 --cache_numshardbits=4 --open_files=500000 --verify_checksum=1 --sync=0 --disable_wal=1 --compression_type=zlib --stats_interval=1000000 --compression_ratio=0.5 --write_buffer_size=268435456 --target_file_size_base=1073741824 --max_write_buffer_number=30 --max_background_compactions=20 --level0_file_num_compaction_trigger=10000000 --level0_slowdown_writes_trigger=10000000 --level0_stop_writes_trigger=10000000 --num_levels=2 --delete_obsolete_files_period_micros=300000000 --min_level_to_compress=2 --stats_per_interval=1 --max_bytes_for_level_base=10485760 --memtablerep=vector --use_existing_db=0 --disable_auto_compactions=1 --allow_concurrent_memtable_write=false",
    "--benchmarks=compact --disable_seek_compaction=1 --mmap_read=0 --statistics=1 --histogram=1 --num=1000 --threads=1 --value_size=800 --block_size=65536 --cache_size=1048576 --bloom_bits=10 --cache_numshardbits=4 --open_files=500000 --verify_checksum=1 --sync=0 --disable_wal=1 --compression_type=zlib --stats_interval=1000000 --compression_ratio=0.5 --write_buffer_size=268435456 --target_file_size_base=1073741824 --max_write_buffer_number=30 --max_background_compactions=20 --level0_file_num_compaction_trigger=10000000 --level0_slowdown_writes_trigger=10000000 --level0_stop_writes_trigger=10000000 --num_levels=2 --delete_obsolete_files_period_micros=300000000 --min_level_to_compress=2 --stats_per_interval=1 --max_bytes_for_level_base=10485760 --memtablerep=vector --use_existing_db=1 --disable_auto_compactions=1 --allow_concurrent_memtable_write=false",
    "--benchmarks=fillrandom --num=1000 --threads=1 --value_size=800 --cache_size=1048576 --bloom_bits=10 --open_files=500000 --db=DB --compression_ratio=0.5 --write_buffer_size=268435456 --use_existing_db=0",
    "--benchmarks=fillseq --disable_seek_compaction=1 --mmap_read=0 --statistics=1 --histogram=1 --num=1000 --threads=1 --value_size=800 --block_size=65536 --cache_size=1048576 --bloom_bits=10 --cache_numshardbits=4 --open_files=500000 --verify_checksum=1 --sync=0 --disable_wal=1 --compression_type=zlib --stats_interval=1000000 --compression_ratio=0.5 --write_buffer_size=134217728 --target_file_size_base=67108864 --max_write_buffer_number=3 --max_background_compactions=20 --level0_file_num_compaction_trigger=4 --level0_slowdown_writes_trigger=8 --level0_stop_writes_trigger=12 --num_levels=6 --delete_obsolete_files_period_micros=300000000 --min_level_to_compress=2 --stats_per_interval=1 --max_bytes_for_level_base=10485760 --use_existing_db=0",
    "--benchmarks=overwrite --disable_seek_compaction=1 --mmap_read=0 --statistics=1 --histogram=1 --num=1000 --threads=1 --value_size=800 --block_size=65536 --cache_size=1048576 --bloom_bits=10 --cache_numshardbits=4 --open_files=500000 --verify_checksum=1 --sync=0 --disable_wal=1 --compression_type=zlib --stats_interval=1000000 --compression_ratio=0.5 --write_buffer_size=134217728 --target_file_size_base=67108864 --max_write_buffer_number=3 --max_background_compactions=20 --level0_file_num_compaction_trigger=4 --level0_slowdown_writes_trigger=8 --level0_stop_writes_trigger=12 --num_levels=6 --delete_obsolete_files_period_micros=300000000 --min_level_to_compress=2 --stats_per_interval=1 --max_bytes_for_level_base=10485760 --use_existing_db=1",
    "--benchmarks=readrandom --disable_seek_compaction=1 --mmap_read=0 --statistics=1 --histogram=1 --num=1000 --threads=32 --value_size=800 --block_size=4096 --cache_size=1048576 --bloom_bits=10 --cache_numshardbits=6 --open_files=500000 --verify_checksum=1 --sync=0 --disable_wal=1 --compression_type=none --stats_interval=1000000 --compression_ratio=0.5 --write_buffer_size=134217728 --target_file_size_base=67108864 --max_write_buffer_number=3 --max_background_compactions=20 --level0_file_num_compaction_trigger=4 --level0_slowdown_writes_trigger=8 --level0_stop_writes_trigger=12 --num_levels=6 --delete_obsolete_files_period_micros=300000000 --min_level_to_compress=2 --stats_per_interval=1 --max_bytes_for_level_base=10485760 --use_existing_db=1",
    "--benchmarks=readwhilewriting --disable_seek_compaction=1 --mmap_read=0 --statistics=1 --histogram=1 --num=1000 --threads=4 --value_size=800 --block_size=4096 --cache_size=17179869184 --bloom_bits=10 --cache_numshardbits=6 --open_files=500000 --verify_checksum=1 --sync=0 --disable_wal=0 --compression_type=none --stats_interval=10000000 --compression_ratio=1 --write_buffer_size=134217728 --target_file_size_base=67108864 --max_write_buffer_number=3 --max_background_compactions=20 --level0_file_num_compaction_trigger=4 --level0_slowdown_writes_trigger=8 --level0_stop_writes_trigger=12 --num_levels=6 --delete_obsolete_files_period_micros=300000000 --min_level_to_compress=2 --stats_per_interval=1 --max_bytes_for_level_base=536870912 --use_existing_db=1",
    // rocksdb-vs-leveldb-2013 (compression_ratio=50 as printed, max_grandparent_overlap_factor, disable_data_sync, source_compaction_factor).
    "--benchmarks=fillrandom --disable_seek_compaction=1 --mmap_read=0 --statistics=1 --histogram=1 --num=1000 --threads=1 --value_size=800 --block_size=65536 --cache_size=1048576 --bloom_bits=10 --cache_numshardbits=4 --open_files=500000 --verify_checksum=1 --db=DB --sync=0 --disable_wal=1 --compression_type=zlib --stats_interval=1000000 --compression_ratio=50 --disable_data_sync=1 --write_buffer_size=268435456 --target_file_size_base=1073741824 --max_write_buffer_number=30 --max_background_compactions=20 --level0_file_num_compaction_trigger=10000000 --level0_slowdown_writes_trigger=10000000 --level0_stop_writes_trigger=10000000 --num_levels=2 --delete_obsolete_files_period_micros=300000000 --min_level_to_compress=2 --max_grandparent_overlap_factor=10 --stats_per_interval=1 --max_bytes_for_level_base=10485760 --memtablerep=vector --use_existing_db=0 --disable_auto_compactions=1 --source_compaction_factor=10000000",
    "--benchmarks=fillseq --histogram=1 --num=1000 --threads=1 --value_size=800 --cache_size=17179869184 --bloom_bits=10 --open_files=500000 --db=DB --compression_ratio=1 --use_existing_db=0 --write_buffer_size=268435456",
    "--benchmarks=readwhilewriting --histogram=1 --num=1000 --threads=2 --value_size=800 --cache_size=17179869184 --bloom_bits=10 --open_files=500000 --db=DB --compression_ratio=1 --use_existing_db=1 --write_buffer_size=268435456",
];

fn args(line: &str, db: &str) -> Vec<String> {
    line.split_whitespace()
        .map(|a| a.replace("=DB", &format!("={db}")))
        .collect()
}

#[test]
fn every_seed_line_parses_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    for line in SEED_LINES {
        let mut a = args(line, db);
        // Every line gets the scaled --db (db_bench's seeds give /data/...).
        a.retain(|x| !x.starts_with("--db="));
        a.push(format!("--db={db}"));
        let f = Flags::parse(&a).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert!(!f.benchmarks.is_empty());
        let mut r = Runner::new(f).unwrap();
        r.verbose = false;
        r.run_all().unwrap_or_else(|e| panic!("{line}: {e}"));
    }
}

#[test]
fn flag_syntax() {
    let f = Flags::parse(&[
        "--num",
        "5",
        "--histogram",
        "--sync=false",
        "--disable_wal=1",
        "-threads=3",
    ])
    .unwrap();
    assert_eq!(f.num, 5);
    assert!(f.histogram);
    assert!(!f.opts.sync);
    assert!(f.opts.disable_wal);
    assert_eq!(f.threads, 3);
    let f = Flags::parse(&["--memtablerep=vector", "--statistics"]).unwrap();
    assert_eq!(f.ignored.len(), 2);
    let e = Flags::parse(&["--frobnicate=1"]).unwrap_err();
    assert!(e.contains("--frobnicate"), "{e}");
    assert!(Flags::parse(&["--num=x"]).is_err());
    assert!(Flags::parse(&["--sync=maybe"]).is_err());
    assert!(Flags::parse(&["--compression_type=brotli"]).is_err());
    assert!(Flags::parse(&["--num"]).is_err());
    assert_eq!(Flags::parse::<&str>(&[]).unwrap().benchmarks.len(), 5);
}

#[test]
fn every_benchmark_runs_end_to_end() {
    let all = shaledb_bench::dbbench::runner::BENCHMARKS.join(",");
    let a = vec![
        format!("--benchmarks=fillseq,{all}"),
        "--num=300".into(),
        "--threads=2".into(),
        "--seek_nexts=5".into(),
        "--histogram=1".into(),
        "--value_size=50".into(),
        "--merge_operator=uint64add".into(),
    ];
    let f = Flags::parse(&a).unwrap();
    let mut r = Runner::new(f).unwrap();
    r.verbose = false;
    let res = r.run_all().unwrap();
    let get = |n: &str| res.iter().find(|r| r.benchmark == n).unwrap();
    assert_eq!(get("fillseq").ops, 600);
    assert!(get("fillrandom").write_amp.is_some());
    assert_eq!(get("fill100K").ops, 2);
    let rr = get("readrandom");
    assert_eq!(rr.ops, 600);
    assert!(rr.message.contains("found"));
    assert!(get("readseq").ops > 0);
    assert_eq!(get("readmissing").message, "(0 of 600 found)");
    assert!(get("readwhilewriting").threads == 2);
    assert!(get("readwhilewriting").message.contains("the writer wrote"));
    assert_eq!(get("mergerandom").ops, 600);
    assert!(get("multireadrandom").message.contains("found"));
}

/// `--fill_by_ingestion`: the fills load sorted external files; the reads after them find
/// exactly what a fill by writes would have left (same keys, same generator).
#[test]
fn fill_by_ingestion_loads_the_same_keys() {
    let found = |ingest: bool| {
        let mut a = vec![
            "--benchmarks=fillrandom,readrandom".to_string(),
            "--num=500".into(),
            "--value_size=40".into(),
            "--target_file_size_base=4096".into(),
        ];
        if ingest {
            a.push("--fill_by_ingestion=1".into());
        }
        let mut r = Runner::new(Flags::parse(&a).unwrap()).unwrap();
        r.verbose = false;
        let res = r.run_all().unwrap();
        assert_eq!(res[0].ops, 500);
        res[1].message.clone()
    };
    let by_writes = found(false);
    assert!(by_writes.contains("found"), "{by_writes}");
    assert_eq!(found(true), by_writes);
    // Only the plain fills, on one thread.
    for bad in [
        &["--benchmarks=fillsync", "--fill_by_ingestion=1"][..],
        &[
            "--benchmarks=fillrandom",
            "--fill_by_ingestion=1",
            "--threads=2",
        ][..],
    ] {
        let mut r = Runner::new(Flags::parse(bad).unwrap()).unwrap();
        r.verbose = false;
        let e = r.run_all().unwrap_err();
        assert!(e.contains("fill_by_ingestion"), "{e}");
    }
}

#[test]
fn duration_and_rate_limit() {
    let f = Flags::parse(&[
        "--benchmarks=fillrandom",
        "--num=100000",
        "--duration=1",
        "--benchmark_write_rate_limit=100000",
        "--value_size=84",
    ])
    .unwrap();
    let mut r = Runner::new(f).unwrap();
    r.verbose = false;
    let res = r.run_all().unwrap();
    // 100 KB/s of 100-byte writes for about a second: about 1000 ops, far under --num.
    assert!(res[0].ops > 300 && res[0].ops < 2000, "{}", res[0].ops);
}

#[test]
fn every_ycsb_workload_runs() {
    for extra in [
        &[][..],
        &["--fixedkey8b", "--fieldcount=1", "--fieldlength=24"][..],
    ] {
        let mut a = vec![
            "--workload=a,b,c,d,e,f",
            "--phase=load,run",
            "--recordcount=300",
            "--operationcount=300",
            "--threads=2",
        ];
        a.extend_from_slice(extra);
        let cfg = YcsbConfig::parse(&a).unwrap();
        let res = shaledb_bench::ycsb::run(&cfg, false).unwrap();
        assert_eq!(res.len(), 7);
        assert_eq!(res[0].benchmark, "ycsb-a-load");
        assert_eq!(res[0].ops, 300);
        for r in &res[1..] {
            assert_eq!(r.ops, 300, "{}", r.benchmark);
        }
        let e = &res[5];
        assert_eq!(e.benchmark, "ycsb-e-run");
        assert!(e.per_op.iter().any(|(n, _)| n == "SCAN"));
        let f = &res[6];
        assert!(f.per_op.iter().any(|(n, _)| n == "READ-MODIFY-WRITE"));
        let t = shaledb_bench::ycsb::format_phase(&res[1], "run");
        assert!(t.contains("| DB | Run runtime(sec) | Run throughput(ops/sec) |"));
        assert!(t.contains("| DB | Max | Min | Avg(us) | 90 | 99 | 99.9 | 99.99 |"));
        assert!(t.contains("| shaledb-READ |"));
    }
    assert!(YcsbConfig::parse(&["--phase=run"]).is_ok());
    let cfg = YcsbConfig::parse(&["--phase=run"]).unwrap();
    assert!(shaledb_bench::ycsb::run(&cfg, false).is_err());
}

#[test]
fn ycsb_reads_of_the_newest_records_all_find_them() {
    // Workload D reads mostly the records inserted moments ago, by eight threads on this
    // machine's two cores; readers choose only records whose insert (and every earlier one)
    // finished, so each read must find its record.
    let cfg = YcsbConfig::parse(&[
        "--workload=d",
        "--phase=load,run",
        "--recordcount=20000",
        "--operationcount=200000",
        "--threads=8",
        "--fixedkey8b",
        "--fieldcount=1",
        "--fieldlength=24",
    ])
    .unwrap();
    let res = shaledb_bench::ycsb::run(&cfg, false).unwrap();
    assert_eq!(res.len(), 2);
    assert_eq!(res[1].benchmark, "ycsb-d-run");
    assert_eq!(res[1].ops, 200_000);
    assert_eq!(
        res[1].message, "",
        "a record the engine acknowledged was not found"
    );
}

#[test]
fn ycsb_maxexecutiontime_stops_a_load_and_runs_on_what_it_loaded() {
    // A load far too big for one second stops there; the read-only run that follows must then
    // choose among the records that exist (no read misses) and say so.
    let cfg = YcsbConfig::parse(&[
        "--workload=c",
        "--phase=load,run",
        "--recordcount=1000000000",
        "--operationcount=2000",
        "--threads=2",
        "--maxexecutiontime=1",
        "--fixedkey8b",
        "--fieldcount=1",
        "--fieldlength=24",
    ])
    .unwrap();
    let res = shaledb_bench::ycsb::run(&cfg, false).unwrap();
    assert_eq!(res.len(), 2);
    let (load, run) = (&res[0], &res[1]);
    assert!(load.ops > 0 && load.ops < 1_000_000_000, "{}", load.ops);
    assert!(load.elapsed_secs < 10.0, "{}", load.elapsed_secs);
    let note = load.note.as_deref().unwrap_or_default();
    assert!(
        note.starts_with("stopped at --maxexecutiontime=1: "),
        "{note}"
    );
    assert!(note.ends_with(" of 1,000,000,000 records loaded"), "{note}");
    assert_eq!(run.ops, 2000);
    assert_eq!(run.message, "", "every read finds a loaded record");
    let expected = format!(
        "on the {} records the stopped load left",
        shaledb_bench::ycsb::group_thousands(load.ops)
    );
    assert_eq!(run.note.as_deref(), Some(expected.as_str()));
}

#[test]
fn tpch_runs() {
    let f = Flags::parse(&["--cache_size=1048576"]).unwrap();
    let r = shaledb_bench::tpch::run(&f, 500, 1, false).unwrap();
    assert_eq!(r[0].ops, 500);
    assert!(r[0].size_on_disk.unwrap_or(0) > 0);
}

#[test]
fn suites_are_defined() {
    for s in ["seed-small", "seed-full"] {
        let w = shaledb_bench::compare::suite(s).unwrap();
        for id in [
            "R1", "R2", "R3", "R4-1t", "R4-io", "R5", "R6-1t", "R7", "K1-1MB", "T1", "T1-dict",
            "Y1-8t",
        ] {
            assert!(w.iter().any(|x| x.id == id), "{s} lacks {id}");
        }
        for x in w
            .iter()
            .filter(|x| x.kind == shaledb_bench::compare::Kind::DbBench)
        {
            Flags::parse(&x.args).unwrap_or_else(|e| panic!("{}: {e}", x.id));
        }
    }
    assert!(shaledb_bench::compare::suite("nope").is_err());
}
