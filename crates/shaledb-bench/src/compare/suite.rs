//! The suites `compare` runs (workloads from BENCHMARKS.md, scaled per suite) and the documented
//! substitutions for options an engine does not have.

/// What runs a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// db_bench mode (RocksDB's db_bench runs the same flags).
    DbBench,
    /// `shale-bench ycsb`.
    Ycsb,
    /// `shale-bench tpch`.
    Tpch,
}

/// One workload of a suite.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Id from BENCHMARKS.md (R1, K1-100B, Y1-8t, ...).
    pub id: String,
    /// What it is.
    pub title: String,
    /// Runner.
    pub kind: Kind,
    /// Arguments (without --engine/--db/--json).
    pub args: Vec<String>,
    /// A second, measured step on the database the first step loaded (run with
    /// `--use_existing_db=1`), or empty. Multi-threaded reads load with one thread first: a
    /// db_bench fill with `--threads=T` writes every key T times.
    pub then: Vec<String>,
}

fn w(id: &str, title: &str, kind: Kind, args: &str) -> Workload {
    Workload {
        id: id.into(),
        title: title.into(),
        kind,
        args: args.split_whitespace().map(String::from).collect(),
        then: Vec::new(),
    }
}

/// A workload that loads with `load` (one thread), then runs `run` on the loaded database.
fn w2(id: &str, title: &str, load: &str, run: &str) -> Workload {
    let mut wl = w(id, title, Kind::DbBench, load);
    wl.then = run.split_whitespace().map(String::from).collect();
    wl
}

/// The workloads of `seed-small` or `seed-full`.
pub fn suite(name: &str) -> Result<Vec<Workload>, String> {
    if name == "data-model" {
        return Ok(data_model_suite());
    }
    if name == "small-cache" {
        return Ok(small_cache_suite());
    }
    let (n, k1_bytes, t1_rows, y1_records, y1_ops) = match name {
        "seed-small" => (100_000u64, 20u64 << 20, 200_000u64, 200_000u64, 100_000u64),
        "seed-full" => (5_000_000, 1 << 30, 5_000_000, 50_000_000, 10_000_000),
        // seed-full scaled down to fit a shared 2-core machine's hour (docs/benchmarks.md).
        "seed-medium" => (1_000_000, 50 << 20, 500_000, 1_000_000, 500_000),
        "tiny" => (2_000, 1 << 20, 2_000, 2_000, 2_000),
        other => {
            return Err(format!(
                "unknown suite {other:?}: seed-small, seed-medium, seed-full, data-model, small-cache (or tiny)"
            ))
        }
    };
    let base = format!(
        "--num={n} --key_size=10 --value_size=800 --compression_ratio=0.5 --compression_type=snappy --bloom_bits=10 --cache_size=1073741824"
    );
    let mut v = vec![
        w("R1", "bulk load random: fillrandom, WAL off", Kind::DbBench, &format!("{base} --benchmarks=fillrandom --disable_wal=1")),
        w("R1-bulk", "bulk load recipe: vector memtable, auto compactions off, fillrandom then compact", Kind::DbBench, &format!("{base} --benchmarks=fillrandom,compact --disable_wal=1 --memtablerep=vector --allow_concurrent_memtable_write=false --disable_auto_compactions=1")),
        w("R2", "bulk load sequential: fillseq, WAL off", Kind::DbBench, &format!("{base} --benchmarks=fillseq --disable_wal=1")),
        w("R3", "random overwrite, WAL on, no sync", Kind::DbBench, &format!("{base} --benchmarks=fillseq,overwrite")),
    ];
    let r4 = format!("{base} --compression_type=none --block_size=4096");
    for t in [1u64, 2, 32] {
        v.push(w2(
            &format!("R4-{t}t"),
            &format!("readrandom, 4 KB blocks, no compression, {t} threads, 1 GB cache (loaded by fillseq, 1 thread)"),
            &format!("{r4} --benchmarks=fillseq --threads=1"),
            &format!("{r4} --benchmarks=readrandom --threads={t} --reads={}", (n / t).max(1)),
        ));
    }
    v.push(w2(
        "R4-mmap",
        "readrandom, 2 threads, 1 GB cache, table files mapped (--mmap_read=1: LevelDB's way, which it always takes; off by default in ShaleDB and RocksDB; fjall cannot map) (loaded by fillseq, 1 thread)",
        &format!("{r4} --benchmarks=fillseq --threads=1"),
        &format!("{r4} --benchmarks=readrandom --threads=2 --reads={} --mmap_read=1", n / 2),
    ));
    v.push(w2(
        "R4-io",
        "readrandom, 2 threads, 64 MB cache, direct reads (loaded by fillseq, 1 thread)",
        &format!("{r4} --benchmarks=fillseq --threads=1"),
        &format!("{r4} --benchmarks=readrandom --threads=2 --reads={} --cache_size=67108864 --use_direct_reads=1", n / 2),
    ));
    v.push(w2(
        "R5",
        "readwhilewriting, 2 readers + 1 writer (loaded by fillseq, 1 thread)",
        &format!("{base} --benchmarks=fillseq --threads=1"),
        &format!(
            "{base} --benchmarks=readwhilewriting --threads=2 --reads={}",
            n / 2
        ),
    ));
    // R5 again with the compaction threads at low CPU priority, where the engine can set it
    // (bench/results/2026-11-27-background-priority): the readers then get the CPU the
    // compactions took until the debt is urgent; flushes keep normal priority.
    v.push(w2(
        "R5-low",
        "R5 with compaction threads at low CPU priority (ShaleDB's background_cpu_priority, RocksDB's LowerThreadPoolCPUPriority; LevelDB, WiredTiger, fjall and RocksDB's db_bench cannot set it and run at normal priority)",
        &format!("{base} --benchmarks=fillseq --threads=1"),
        &format!(
            "{base} --benchmarks=readwhilewriting --threads=2 --reads={} --background_cpu_priority=low",
            n / 2
        ),
    ));
    for t in [1, 2] {
        v.push(w(
            &format!("R6-{t}t"),
            &format!("fillsync, {t} thread(s)"),
            Kind::DbBench,
            // db_bench's fillsync divides --num by 1000 but loops over --writes (default: the
            // undivided --num), so RocksDB's db_bench would sync N writes per thread, not N/1000.
            &format!(
                "{base} --benchmarks=fillsync --threads={t} --writes={}",
                (n / 1000).max(1)
            ),
        ));
    }
    v.push(w(
        "R7",
        "readseq, readreverse, seekrandom + 10 next, right after the fill (flushed blocks go into the block cache: RocksDB's prepopulate_block_cache, where the engine has it)",
        Kind::DbBench,
        &format!(
            "{base} --benchmarks=fillseq,readseq,readreverse,seekrandom --seek_nexts=10 --prepopulate_block_cache=1 --reads={}",
            n / 10
        ),
    ));
    // K1 runs with blob files (key-value separation), the engines' answer to large values:
    // ShaleDB, RocksDB and its db_bench as written, fjall with its KV separation, LevelDB and
    // WiredTiger without (labelled; SUBSTITUTIONS). `--min_blob_size=512`: the 100 B values
    // stay in the tables (as a blob, each would cost a read of its own and a reference nearly
    // its size: readseq ran 7x slower that way), every value from 1 KB up is a blob. From
    // 100 KB ShaleDB writes each blob when the value is written (`--separate_blobs_at_write`,
    // its own option: the WAL holds the reference, the value is written once; fills 3-4x
    // faster, bench/results/2026-11-26-blobs-at-write); at 1 KB it separates at flush as
    // RocksDB does (written at write, 1 KB blobs lose their key order in the files: readseq
    // 0.7x).
    for (label, vs) in [
        ("100B", 100u64),
        ("1KB", 1000),
        ("100KB", 100_000),
        ("256KB", 262_144),
        ("512KB", 524_288),
        ("1MB", 1_048_576),
    ] {
        let num = (k1_bytes / vs).max(10);
        let (at_write_title, at_write_flag) = match vs >= 100_000 {
            true => (
                "; ShaleDB writes blobs with the values (--separate_blobs_at_write)",
                " --separate_blobs_at_write=1",
            ),
            false => ("", ""),
        };
        v.push(w(&format!("K1-{label}"), &format!("value-size sweep {label}: fills, reads before and after a full compaction; blob files on (ShaleDB, RocksDB and its db_bench; fjall: its KV separation; LevelDB and WiredTiger have none){at_write_title}"), Kind::DbBench,
            &format!("--num={num} --key_size=16 --value_size={vs} --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --enable_blob_files=1 --min_blob_size=512{at_write_flag} --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,compact,readrandom,readseq")));
    }
    v.push(w(
        "T1",
        "TPC-H lineitem rows, 1 writer + 2 readers, small cache, direct reads",
        Kind::Tpch,
        &format!("--rows={t1_rows} --readers=2 --cache_size=8388608 --use_direct_reads=1"),
    ));
    v.push(w(
        "T1-dict",
        "T1 with zstd and a 16 KiB dictionary per table trained on 1.6 MB (RocksDB's max_dict_bytes, zstd_max_train_bytes; engines without dictionaries refuse it)",
        Kind::Tpch,
        &format!("--rows={t1_rows} --readers=2 --cache_size=8388608 --use_direct_reads=1 --compression_type=zstd --compression_max_dict_bytes=16384 --compression_zstd_max_train_bytes=1638400"),
    ));
    // At seed-full, WiredTiger with 8 threads on 2 cores loads at a few thousand records a
    // second (50M would take hours): each phase stops after 30 minutes with what it did, and
    // the report marks such a figure (the seed itself ran WiredTiger on fewer records).
    let y1_limit = if name == "seed-full" {
        " --maxexecutiontime=1800"
    } else {
        ""
    };
    for t in [8, 2] {
        v.push(w(&format!("Y1-{t}t"), &format!("YCSB load + A-F, 8-byte keys, one 24-byte field, {t} threads"), Kind::Ycsb,
            &format!("--workload=a,b,c,f,d,e --phase=load,run --recordcount={y1_records} --operationcount={y1_ops} --threads={t} --fixedkey8b --fieldcount=1 --fieldlength=24 --cache_size=268435456{y1_limit}")));
    }
    Ok(v)
}

/// A documented stand-in for an option an engine does not have. The adapters refuse such an
/// option outright (never a silent substitute); `compare` alone applies these, labels the cell
/// with `label`, and lists every substitution used in the report. docs/benchmarks.md
/// ("Substitutions") explains each row.
/// Reads of a database many times the block cache, with direct reads (issue 14): R4-io's
/// data (786 MB), read by MultiGet batches, and read with the index and filters in a cache too
/// small for them, whole or partitioned.
fn small_cache_suite() -> Vec<Workload> {
    let load = "--num=1000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --compression_type=none --block_size=4096 --bloom_bits=10 --benchmarks=fillseq --threads=1";
    let read = "--num=1000000 --key_size=10 --value_size=800 --compression_ratio=0.5 --compression_type=none --block_size=4096 --bloom_bits=10 --use_direct_reads=1 --threads=2";
    vec![
        w2(
            "S1",
            "multireadrandom, batches of 16, 2 threads, 64 MB cache, direct reads (R4-io's data)",
            load,
            &format!("{read} --benchmarks=multireadrandom --batch_size=16 --reads=250000 --cache_size=67108864"),
        ),
        w2(
            "S2",
            "readrandom, 2 threads, 8 MB cache holding index and filters too (cache_index_and_filter_blocks), direct reads",
            load,
            &format!("{read} --benchmarks=readrandom --reads=150000 --cache_size=8388608 --cache_index_and_filter_blocks=1"),
        ),
        w2(
            "S3",
            "S2 with partitioned index and filters (4 KB partitions, top level pinned), also when loading",
            &format!("{load} --partition_index_and_filters=1"),
            &format!("{read} --benchmarks=readrandom --reads=150000 --cache_size=8388608 --cache_index_and_filter_blocks=1 --partition_index_and_filters=1"),
        ),
    ]
}

/// RocksDB's data model beyond put/get (issue 13): merge operands, MultiGet and range
/// deletes, run on the engines that have them (ShaleDB and RocksDB).
fn data_model_suite() -> Vec<Workload> {
    let base = "--num=1000000 --key_size=16 --value_size=100 --bloom_bits=10 --compression_type=snappy --compression_ratio=0.5 --cache_size=268435456";
    vec![
        w(
            "M1",
            "merge: mergerandom, then readrandommergerandom (70% reads), uint64add",
            Kind::DbBench,
            &format!("{base} --benchmarks=mergerandom,readrandommergerandom --merge_operator=uint64add"),
        ),
        w2(
            "M2",
            "multireadrandom, batches of 8 (loaded by fillrandom)",
            &format!("{base} --benchmarks=fillrandom"),
            &format!("{base} --benchmarks=multireadrandom --batch_size=8 --reads=1000000"),
        ),
        w2(
            "D1",
            "fillrandom with a 100-key range delete every 100 writes, then readrandom and seekrandom + 10 next",
            &format!("{base} --benchmarks=fillrandom --writes_per_range_tombstone=100 --range_tombstone_width=100"),
            &format!("{base} --benchmarks=readrandom,seekrandom --seek_nexts=10 --reads=300000"),
        ),
        w2(
            "P1",
            "prefix seek: 7-byte fixed prefixes (256 keys each), prefix blooms, seekrandom + 10 next within the prefix, then readrandom",
            &format!("{base} --benchmarks=fillrandom --prefix_size=7"),
            &format!("{base} --benchmarks=seekrandom,readrandom --seek_nexts=10 --reads=300000 --prefix_size=7 --prefix_same_as_start=1"),
        ),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Substitution {
    /// Engine it applies to.
    pub engine: &'static str,
    /// The db_bench flag, with its leading `--`.
    pub flag: &'static str,
    /// Values of the flag that the engine cannot honour.
    pub when: &'static [&'static str],
    /// The flag's value when the workload does not set it (db_bench's default).
    pub default: &'static str,
    /// The value the engine runs with instead.
    pub with: &'static str,
    /// Label on the cell (engine column and report notes).
    pub label: &'static str,
    /// Why.
    pub why: &'static str,
}

/// Every substitution `compare` makes, in one place.
pub const SUBSTITUTIONS: &[Substitution] = &[
    Substitution {
        engine: "leveldb",
        flag: "--disable_wal",
        when: &["1", "true"],
        default: "0",
        with: "0",
        label: "WAL on",
        why: "LevelDB 1.23 always writes its log; run with the log on and sync off",
    },
    Substitution {
        engine: "fjall",
        flag: "--disable_wal",
        when: &["1", "true"],
        default: "0",
        with: "0",
        label: "WAL on",
        why: "fjall 3 always writes its journal; run with the journal on and sync off",
    },
    Substitution {
        engine: "fjall",
        flag: "--compression_type",
        when: &["snappy"],
        default: "snappy",
        with: "lz4",
        label: "lz4",
        why: "fjall 3 has lz4 and none, no snappy; lz4 is the nearest codec in speed and ratio",
    },
    Substitution {
        engine: "leveldb",
        flag: "--use_direct_reads",
        when: &["1", "true"],
        default: "0",
        with: "0",
        label: "buffered reads",
        why: "LevelDB has no O_DIRECT reads; its reads go through the page cache",
    },
    Substitution {
        engine: "fjall",
        flag: "--use_direct_reads",
        when: &["1", "true"],
        default: "0",
        with: "0",
        label: "buffered reads",
        why: "fjall 3 has no O_DIRECT reads; its reads go through the page cache",
    },
    Substitution {
        engine: "fjall",
        flag: "--mmap_read",
        when: &["1", "true"],
        default: "0",
        with: "0",
        label: "pread reads",
        why: "fjall 3 does not map its files; it reads them with pread",
    },
    Substitution {
        engine: "leveldb",
        flag: "--prepopulate_block_cache",
        when: &["1"],
        default: "0",
        with: "0",
        label: "cache filled by reads",
        why: "LevelDB cannot put the blocks it flushes into its cache; reads fill it",
    },
    Substitution {
        engine: "fjall",
        flag: "--prepopulate_block_cache",
        when: &["1"],
        default: "0",
        with: "0",
        label: "cache filled by reads",
        why: "fjall 3 cannot put the blocks it flushes into its cache; reads fill it",
    },
    Substitution {
        engine: "wiredtiger",
        flag: "--prepopulate_block_cache",
        when: &["1"],
        default: "0",
        with: "0",
        label: "its own cache policy",
        why: "WiredTiger has no such option: its cache keeps the pages it writes anyway",
    },
    Substitution {
        engine: "leveldb",
        flag: "--enable_blob_files",
        when: &["1", "true"],
        default: "0",
        with: "0",
        label: "no blob files",
        why: "LevelDB 1.23 has no blob files (key-value separation): values stay in its tables",
    },
    Substitution {
        engine: "wiredtiger",
        flag: "--enable_blob_files",
        when: &["1", "true"],
        default: "0",
        with: "0",
        label: "no blob files",
        why: "WiredTiger has no blob files: values stay in its btree pages",
    },
    Substitution {
        engine: "fjall",
        flag: "--enable_blob_files",
        when: &["1", "true"],
        default: "0",
        with: "1",
        label: "KV separation",
        why: "fjall 3's key-value separation stands in for RocksDB's blob files: --min_blob_size is its separation threshold, --blob_file_size its blob file target size; its blob garbage collection is off unless --enable_blob_garbage_collection=1",
    },
    Substitution {
        engine: "leveldb",
        flag: "--background_cpu_priority",
        when: &["low", "idle"],
        default: "normal",
        with: "normal",
        label: "normal priority",
        why: "LevelDB 1.23 has no setting for its background threads' CPU priority: they run at normal priority",
    },
    Substitution {
        engine: "wiredtiger",
        flag: "--background_cpu_priority",
        when: &["low", "idle"],
        default: "normal",
        with: "normal",
        label: "normal priority",
        why: "WiredTiger has no setting for its background threads' CPU priority: they run at normal priority",
    },
    Substitution {
        engine: "fjall",
        flag: "--background_cpu_priority",
        when: &["low", "idle"],
        default: "normal",
        with: "normal",
        label: "normal priority",
        why: "fjall 3 has no setting for its background threads' CPU priority: they run at normal priority",
    },
];

/// The arguments `engine` runs `args` with, and the substitutions applied (none for RocksDB
/// and its db_bench).
pub fn substitute(engine: &str, args: &[String]) -> (Vec<String>, Vec<&'static Substitution>) {
    let mut out = args.to_vec();
    let mut used = Vec::new();
    for sub in SUBSTITUTIONS.iter().filter(|s| s.engine == engine) {
        let prefix = format!("{}=", sub.flag);
        let last = out.iter().rposition(|a| a.starts_with(&prefix));
        let value = last.map_or(sub.default, |i| &out[i][prefix.len()..]);
        if !sub.when.contains(&value) {
            continue;
        }
        out.retain(|a| !a.starts_with(&prefix));
        out.push(format!("{prefix}{}", sub.with));
        used.push(sub);
    }
    (out, used)
}

/// What the suite is, for the report header: its sizes and, for a scaled suite, why.
pub fn suite_note(name: &str) -> &'static str {
    match name {
        "seed-small" => "Suite seed-small (CI smoke test): N = 100,000 keys; K1 20 MB per value size; T1 200,000 rows; Y1 200,000 records, 100,000 operations. Its figures are never asserted.",
        "seed-medium" => "Suite seed-medium: seed-full scaled down so that five engines plus db_bench finish in about 40 minutes on this 2-core machine (seed-full would take several hours): N = 1,000,000 keys (not 5,000,000); K1 50 MB per value size (not 1 GB); T1 500,000 rows (not 5,000,000); Y1 1,000,000 records and 500,000 operations per workload (not 50,000,000 / 10,000,000). Every workload, engine and option is kept; only sizes differ. Not the seed-full reference.",
        "seed-full" => "Suite seed-full: the BENCHMARKS.md reference sizes (N = 5,000,000 keys; K1 1 GB per value size; T1 5,000,000 rows; Y1 50,000,000 records and 10,000,000 operations per workload, each YCSB phase stopped after 30 minutes, a figure so stopped marked †). A suite this long runs in parts (runs.txt).",
        "small-cache" => "Suite small-cache: R4-io's 786 MB of data (1,000,000 keys, 800-byte values, no compression) read with direct reads through caches of 64 MB (MultiGet batches) and 8 MB (index and filters in the cache, whole or partitioned); ShaleDB and RocksDB.",
        "data-model" => "Suite data-model: merge operands, MultiGet, range deletes and prefix seek (RocksDB's data model beyond put and get), N = 1,000,000 16-byte keys with 100-byte values; only ShaleDB and RocksDB have these operations.",
        _ => "Suite tiny: a test-sized run.",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn substitutions_apply_to_set_and_default_values_and_are_labelled() {
        let a = args("--num=10 --disable_wal=1 --compression_type=snappy");
        let (out, used) = substitute("fjall", &a);
        assert!(out.contains(&"--disable_wal=0".to_string()));
        assert!(out.contains(&"--compression_type=lz4".to_string()));
        assert!(!out
            .iter()
            .any(|x| x == "--disable_wal=1" || x.ends_with("=snappy")));
        let labels: Vec<&str> = used.iter().map(|u| u.label).collect();
        assert_eq!(labels, ["WAL on", "lz4"]);
        // fjall's codec default is snappy, as db_bench's: K1 and Y1 set no codec.
        let (out, used) = substitute("fjall", &args("--num=10"));
        assert_eq!(out, args("--num=10 --compression_type=lz4"));
        assert_eq!(used.len(), 1);
        // Engines with the option run the workload as written.
        for e in ["rocksdb", "wiredtiger", "rocksdb-db_bench"] {
            let a = args("--disable_wal=1 --use_direct_reads=1");
            assert_eq!(substitute(e, &a), (a.clone(), Vec::new()));
        }
        let (out, used) = substitute("leveldb", &args("--use_direct_reads=1"));
        assert_eq!(out, args("--use_direct_reads=0"));
        assert_eq!(used[0].label, "buffered reads");
        // ShaleDB runs direct reads as written.
        let a = args("--use_direct_reads=1");
        assert_eq!(substitute("shaledb", &a), (a.clone(), Vec::new()));
        let (_, used) = substitute("leveldb", &args("--disable_wal=0 --use_direct_reads=0"));
        assert!(used.is_empty());
    }

    #[test]
    fn k1_runs_with_blob_files_where_an_engine_has_them_and_is_labelled() {
        let k1: Vec<Workload> = suite("seed-small")
            .unwrap()
            .into_iter()
            .filter(|w| w.id.starts_with("K1-"))
            .collect();
        assert_eq!(k1.len(), 6);
        for wl in &k1 {
            let flags = crate::dbbench::Flags::parse(&wl.args).unwrap();
            let blob = &flags.opts.blob;
            assert!(blob.enabled && !blob.gc, "{}", wl.id);
            // Values from 1 KB up are blobs; the 100 B ones stay in the tables.
            assert_eq!(blob.min_size, 512, "{}", wl.id);
            assert_eq!(
                blob.min_size <= flags.value_size as u64,
                wl.id != "K1-100B",
                "{}",
                wl.id
            );
            assert!(wl.title.contains("blob files on"), "{}", wl.id);
            // ShaleDB writes blobs with the values from 100 KB up, and says so.
            let at_write = flags.value_size >= 100_000;
            assert_eq!(blob.separate_at_write, at_write, "{}", wl.id);
            assert_eq!(
                wl.title.contains("--separate_blobs_at_write"),
                at_write,
                "{}",
                wl.id
            );
            for (engine, labels, enabled) in [
                ("shaledb", &[][..], true),
                ("rocksdb", &[], true),
                ("rocksdb-db_bench", &[], true),
                ("fjall", &["lz4", "KV separation"], true),
                ("leveldb", &["no blob files"], false),
                ("wiredtiger", &["no blob files"], false),
            ] {
                let (out, used) = substitute(engine, &wl.args);
                let got: Vec<&str> = used.iter().map(|u| u.label).collect();
                assert_eq!(got, labels, "{} on {engine}", wl.id);
                let f = crate::dbbench::Flags::parse(&out).unwrap();
                assert_eq!(f.opts.blob.enabled, enabled, "{} on {engine}", wl.id);
            }
        }
        // The other workloads run without blob files, unlabelled for it.
        for wl in suite("seed-small").unwrap() {
            if wl.id.starts_with("K1-") || wl.kind != Kind::DbBench {
                continue;
            }
            assert!(
                !crate::dbbench::Flags::parse(&wl.args)
                    .unwrap()
                    .opts
                    .blob
                    .enabled
            );
            for engine in ["leveldb", "wiredtiger", "fjall"] {
                let (_, used) = substitute(engine, &wl.args);
                assert!(
                    used.iter().all(|u| u.flag != "--enable_blob_files"),
                    "{} on {engine}",
                    wl.id
                );
            }
        }
    }

    #[test]
    fn every_suite_parses() {
        for s in ["tiny", "seed-small", "seed-medium", "seed-full"] {
            assert!(suite(s).map_or(0, |v| v.len()) > 10, "{s}");
        }
        assert!(suite("nope").is_err());
    }
}
