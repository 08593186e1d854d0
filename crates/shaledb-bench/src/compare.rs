//! `shale-bench compare`: every workload of a BENCHMARKS.md suite on every engine, alternating
//! engines within the run, each cell on a fresh database directory in its own process (so a
//! crash or a missing peer is one failed cell), plus RocksDB's own `db_bench` as the
//! `rocksdb-db_bench` column when installed. Writes `bench/results/<date>-<suite>/`.

use crate::dbbench::report::{parse_db_bench_output, BenchResult};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

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
    let (n, k1_bytes, t1_rows, y1_records, y1_ops) = match name {
        "seed-small" => (100_000u64, 20u64 << 20, 200_000u64, 200_000u64, 100_000u64),
        "seed-full" => (5_000_000, 1 << 30, 5_000_000, 50_000_000, 10_000_000),
        // seed-full scaled down to fit a shared 2-core machine's hour (docs/benchmarks.md).
        "seed-medium" => (1_000_000, 50 << 20, 500_000, 1_000_000, 500_000),
        "tiny" => (2_000, 1 << 20, 2_000, 2_000, 2_000),
        other => {
            return Err(format!(
                "unknown suite {other:?}: seed-small, seed-medium, seed-full (or tiny)"
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
        "readseq, readreverse, seekrandom + 10 next",
        Kind::DbBench,
        &format!(
            "{base} --benchmarks=fillseq,readseq,readreverse,seekrandom --seek_nexts=10 --reads={}",
            n / 10
        ),
    ));
    for (label, vs) in [
        ("100B", 100u64),
        ("1KB", 1000),
        ("100KB", 100_000),
        ("256KB", 262_144),
        ("512KB", 524_288),
        ("1MB", 1_048_576),
    ] {
        let num = (k1_bytes / vs).max(10);
        v.push(w(&format!("K1-{label}"), &format!("value-size sweep {label}: fills, reads before and after a full compaction"), Kind::DbBench,
            &format!("--num={num} --key_size=16 --value_size={vs} --write_buffer_size=4194304 --cache_size=8388608 --bloom_bits=0 --compression_ratio=0.5 --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,compact,readrandom,readseq")));
    }
    v.push(w(
        "T1",
        "TPC-H lineitem rows, 1 writer + 2 readers, small cache, direct reads",
        Kind::Tpch,
        &format!("--rows={t1_rows} --readers=2 --cache_size=8388608 --use_direct_reads=1"),
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
        engine: "shaledb",
        flag: "--use_direct_reads",
        when: &["1", "true"],
        default: "0",
        with: "0",
        label: "buffered reads",
        why: "ShaleDB has no O_DIRECT reads yet; its reads go through the page cache",
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
];

/// The arguments `engine` runs `args` with, and the substitutions applied (none for RocksDB,
/// WiredTiger and RocksDB's db_bench).
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
        _ => "Suite tiny: a test-sized run.",
    }
}

/// One cell: a workload on an engine.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Cell {
    /// Workload id.
    pub workload: String,
    /// Engine (or `rocksdb-db_bench`).
    pub engine: String,
    /// The exact command.
    pub command: String,
    /// Results, or empty on failure.
    pub results: Vec<BenchResult>,
    /// Failure text.
    pub error: Option<String>,
    /// Wall seconds of the process.
    pub secs: f64,
    /// Labels of the substitutions this cell ran with (see [`SUBSTITUTIONS`]).
    pub substitutions: Vec<String>,
}

impl Cell {
    /// The engine column: the engine, with its substitutions in parentheses.
    pub fn label(&self) -> String {
        if self.substitutions.is_empty() {
            self.engine.clone()
        } else {
            format!("{} ({})", self.engine, self.substitutions.join(", "))
        }
    }
}

fn find_db_bench() -> Option<PathBuf> {
    [
        "/usr/bin/db_bench",
        "/usr/local/bin/db_bench",
        "/usr/bin/rocksdb_db_bench",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

fn shell_quote(a: &str) -> String {
    if a.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_=./,:".contains(c))
    {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// Runs one process of a cell; returns its command, and its results or an error.
fn run_step(
    prog: &Path,
    args: &[String],
    json: &Path,
    stdout_path: &Path,
    db_bench: bool,
) -> (String, Result<Vec<BenchResult>, String>) {
    let command = std::iter::once(prog.display().to_string())
        .chain(args.iter().map(|a| shell_quote(a)))
        .collect::<Vec<_>>()
        .join(" ");
    let res = match Command::new(prog).args(args).output() {
        Err(e) => Err(format!("could not start: {e}")),
        Ok(o) => {
            let stdout = String::from_utf8_lossy(&o.stdout).to_string();
            let _ = std::fs::write(stdout_path, &stdout);
            if !o.status.success() {
                let err = String::from_utf8_lossy(&o.stderr);
                let last = err
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("failed");
                Err(format!(
                    "exit {}: {}",
                    o.status.code().unwrap_or(-1),
                    last.trim()
                ))
            } else if db_bench {
                let r = parse_db_bench_output(&stdout);
                let _ = std::fs::write(json, serde_json::to_string_pretty(&r).unwrap_or_default());
                Ok(r)
            } else {
                std::fs::read_to_string(json)
                    .map_err(|e| e.to_string())
                    .and_then(|t| {
                        serde_json::from_str::<serde_json::Value>(&t).map_err(|e| e.to_string())
                    })
                    .and_then(|v| {
                        serde_json::from_value::<Vec<BenchResult>>(v["results"].clone())
                            .map_err(|e| e.to_string())
                    })
                    .map_err(|e| format!("no JSON results: {e}"))
            }
        }
    };
    (command, res)
}

fn run_cell(exe: &Path, wl: &Workload, engine: &str, dir: &Path, raw: &Path) -> Cell {
    let db = dir.join(format!("{}-{engine}", wl.id));
    let db_bench = engine == "rocksdb-db_bench";
    let prog = if db_bench {
        find_db_bench().unwrap_or_default()
    } else {
        exe.to_path_buf()
    };
    // The load step, then (if the workload has one) the measured step on the same database.
    let mut steps = vec![wl.args.clone()];
    if !wl.then.is_empty() {
        let mut t = wl.then.clone();
        t.push("--use_existing_db=1".into());
        steps.push(t);
    }
    let mut used: Vec<String> = Vec::new();
    let mut commands = Vec::new();
    let mut results = Vec::new();
    let mut error = None;
    let t0 = Instant::now();
    for (i, step) in steps.iter().enumerate() {
        let suffix = if i == 0 {
            String::new()
        } else {
            format!(".step{}", i + 1)
        };
        let json = raw.join(format!("{}-{engine}{suffix}.json", wl.id));
        let stdout_path = raw.join(format!("{}-{engine}{suffix}.stdout.txt", wl.id));
        let mut args: Vec<String> = Vec::new();
        if db_bench {
            args.extend(step.iter().filter(|a| !a.starts_with("--engine")).cloned());
            args.push("--histogram=1".into());
            args.push(format!("--db={}", db.display()));
        } else {
            match wl.kind {
                Kind::Ycsb => args.push("ycsb".into()),
                Kind::Tpch => args.push("tpch".into()),
                Kind::DbBench => {}
            }
            let (wargs, subs) = substitute(engine, step);
            for s in subs {
                if !used.iter().any(|u| u == s.label) {
                    used.push(s.label.to_string());
                }
            }
            args.extend(wargs);
            args.push(format!("--engine={engine}"));
            args.push(format!("--db={}", db.display()));
            args.push(format!("--json={}", json.display()));
        }
        let (command, res) = run_step(&prog, &args, &json, &stdout_path, db_bench);
        commands.push(command);
        match res {
            Ok(r) => results.extend(r),
            Err(e) => {
                error = Some(if steps.len() > 1 {
                    format!("step {}: {e}", i + 1)
                } else {
                    e
                });
                break;
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&db);
    Cell {
        workload: wl.id.clone(),
        engine: engine.into(),
        command: commands.join(" && "),
        results: if error.is_some() { Vec::new() } else { results },
        error,
        secs,
        substitutions: used,
    }
}

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn sh(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|e| format!("({cmd}: {e})"))
}

/// CPU, cores, memory, disk, filesystem and kernel.
pub fn machine_facts(dir: &Path) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| s.lines().next().map(|l| l.to_string()))
        .unwrap_or_default();
    let d = dir.display().to_string();
    format!(
        "CPU: {cpu}\nCores: {cores}\n{mem}\nKernel: {}\nFilesystem of the database directories:\n{}\nBlock devices:\n{}\n",
        sh("uname", &["-srvmo"]),
        sh("df", &["-PT", &d]),
        sh("lsblk", &["-d", "-o", "NAME,MODEL,SIZE,ROTA,TYPE"]),
    )
}

fn fmt_num(x: f64) -> String {
    if x >= 100.0 {
        crate::ycsb::group_thousands(x.round() as u64)
    } else {
        format!("{x:.2}")
    }
}

/// report.md.
pub fn report_md(
    suite: &str,
    cells: &[Cell],
    wls: &[Workload],
    engines: &[String],
    facts: &str,
    command: &str,
) -> String {
    let mut s = format!("# shale-bench compare --suite={suite} ({})\n\n```\n{command}\n```\n\n{}\n\nEngines: {}. Each cell ran in its own process on a fresh database directory; engines alternate within each workload. Figures are one run on a shared machine: compare ratios, not absolutes.\n", today(), suite_note(suite), engines.join(", "));
    let mut used: Vec<&Substitution> = Vec::new();
    for c in cells {
        for sub in SUBSTITUTIONS {
            let hit = sub.engine == c.engine && c.substitutions.iter().any(|l| l == sub.label);
            if hit && !used.iter().any(|u| std::ptr::eq(*u, sub)) {
                used.push(sub);
            }
        }
    }
    if !used.is_empty() {
        s.push_str("\n## Substitutions\n\nA cell labelled `engine (label)` ran with a stand-in for an option that engine does not have (table `SUBSTITUTIONS` in crates/shaledb-bench/src/compare.rs; docs/benchmarks.md, \"Substitutions\"):\n\n| engine | workload option | ran with | label | why |\n| --- | --- | --- | --- | --- |\n");
        for u in used {
            let _ = writeln!(
                s,
                "| {} | {}={} | {}={} | {} | {} |",
                u.engine, u.flag, u.when[0], u.flag, u.with, u.label, u.why
            );
        }
    }
    s.push_str(&summary_md(cells, wls, engines));
    let _ = write!(s, "\n## Machine\n\n```\n{facts}```\n");
    for wl in wls {
        let _ = write!(s, "\n## {} — {}\n\n| benchmark | engine | ops/sec | MB/s | P50 us | P99 us | P99.9 us | ShaleDB / engine |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n", wl.id, wl.title);
        let mine: Vec<&Cell> = cells.iter().filter(|c| c.workload == wl.id).collect();
        let shale = mine.iter().find(|c| c.engine == "shaledb");
        let mut notes: Vec<String> = Vec::new();
        for c in &mine {
            if let Some(e) = &c.error {
                let _ = writeln!(
                    s,
                    "| (all) | {} | FAILED: {} | | | | | |",
                    c.label(),
                    e.replace('|', "/")
                );
            }
        }
        for (bn, nth) in bench_order(&mine) {
            // The n-th occurrence of a repeated benchmark name pairs with the n-th.
            let pick = |c: &Cell| nth_result(c, &bn, nth).cloned();
            let b = if nth > 0 {
                format!("{bn} ({})", nth + 1)
            } else {
                bn.clone()
            };
            let base = shale.and_then(|c| pick(c));
            for c in &mine {
                if c.error.is_some() {
                    continue;
                }
                let Some(r) = pick(c) else { continue };
                let ratio = match &base {
                    Some(b0) if r.ops_per_sec > 0.0 => {
                        let (x, dagger) = ratio_text(b0, &r);
                        format!("{x}{dagger}")
                    }
                    _ => "-".into(),
                };
                let l = &r.latency;
                let _ = writeln!(
                    s,
                    "| {b} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {ratio} |",
                    c.label(),
                    fmt_num(r.ops_per_sec),
                    r.mb_per_sec,
                    l.p50_us,
                    l.p99_us,
                    l.p999_us
                );
                for (op, ol) in &r.per_op {
                    let _ = writeln!(
                        s,
                        "| {b} {op} | {} | | | {:.1} | {:.1} | {:.1} | |",
                        c.label(),
                        ol.p50_us,
                        ol.p99_us,
                        ol.p999_us
                    );
                }
                if let Some(n) = &r.note {
                    notes.push(format!("- † {b} on {}: {n}", c.label()));
                }
                if let (Some(sz), Some(wa)) = (r.size_on_disk, r.write_amp) {
                    let _ = writeln!(
                        s,
                        "| {b} size / write-amp | {} | {:.1} MB | {wa:.2}x | | | | |",
                        c.label(),
                        sz as f64 / 1048576.0
                    );
                }
            }
        }
        if !notes.is_empty() {
            let _ = write!(s, "\n{}\n", notes.join("\n"));
        }
    }
    s.push_str("\n## Commands\n\nSee commands.txt; raw per-cell JSON and stdout in raw/.\n");
    s
}

/// ShaleDB's ops/sec over a peer's as `1.23x`, and `†` when either figure carries a note.
fn ratio_text(shale: &BenchResult, peer: &BenchResult) -> (String, &'static str) {
    let noted = shale.note.is_some() || peer.note.is_some();
    (
        format!("{:.2}x", shale.ops_per_sec / peer.ops_per_sec),
        if noted { "†" } else { "" },
    )
}

/// The benchmarks of a workload in run order, each with its occurrence number (a workload may
/// run `readrandom` twice: before and after a compaction).
fn bench_order(mine: &[&Cell]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for c in mine {
        let mut seen: Vec<&str> = Vec::new();
        for r in c.results.iter().filter(|r| r.error.is_none()) {
            let nth = seen.iter().filter(|b| **b == r.benchmark).count();
            seen.push(&r.benchmark);
            if !out.iter().any(|(b, n)| *b == r.benchmark && *n == nth) {
                out.push((r.benchmark.clone(), nth));
            }
        }
    }
    out
}

fn nth_result<'a>(c: &'a Cell, bench: &str, nth: usize) -> Option<&'a BenchResult> {
    c.results
        .iter()
        .filter(|r| r.benchmark == bench && r.error.is_none())
        .nth(nth)
}

/// The headline table: ShaleDB's ops/sec over each peer's, per workload and benchmark.
fn summary_md(cells: &[Cell], wls: &[Workload], engines: &[String]) -> String {
    let peers: Vec<&String> = engines.iter().filter(|e| *e != "shaledb").collect();
    if peers.is_empty() || !engines.iter().any(|e| e == "shaledb") {
        return String::new();
    }
    let mut s = String::from("\n## Summary: ShaleDB ops/sec ÷ peer ops/sec\n\nAbove 1 ShaleDB is faster. `*`: one of the two cells ran with a substitution (see above); `†`: one of the two figures has a note under its workload's table (a phase stopped at its time limit); `F`: a cell failed; `-`: not run.\n\n| workload | benchmark |");
    for p in &peers {
        let _ = write!(s, " {p} |");
    }
    s.push_str("\n| --- | --- |");
    for _ in &peers {
        s.push_str(" ---: |");
    }
    s.push('\n');
    for wl in wls {
        let mine: Vec<&Cell> = cells.iter().filter(|c| c.workload == wl.id).collect();
        let Some(shale) = mine.iter().find(|c| c.engine == "shaledb") else {
            continue;
        };
        for (b, nth) in bench_order(&mine) {
            let name = if nth > 0 {
                format!("{b} ({})", nth + 1)
            } else {
                b.clone()
            };
            let _ = write!(s, "| {} | {name} |", wl.id);
            let base = nth_result(shale, &b, nth);
            for p in &peers {
                let cell = mine.iter().find(|c| &&c.engine == p);
                let text = match (cell, base) {
                    (None, _) => "-".to_string(),
                    (Some(c), _) if c.error.is_some() => "F".to_string(),
                    (_, None) if shale.error.is_some() => "F".to_string(),
                    (Some(c), Some(b0)) => match nth_result(c, &b, nth) {
                        Some(r) if r.ops_per_sec > 0.0 => {
                            let star =
                                if c.substitutions.is_empty() && shale.substitutions.is_empty() {
                                    ""
                                } else {
                                    "*"
                                };
                            let (x, dagger) = ratio_text(b0, r);
                            format!("{x}{star}{dagger}")
                        }
                        _ => "-".to_string(),
                    },
                    _ => "-".to_string(),
                };
                let _ = write!(s, " {text} |");
            }
            s.push('\n');
        }
    }
    s
}

fn svg_bars(title: &str, bars: &[(String, f64)], unit: &str) -> String {
    let max = bars.iter().map(|b| b.1).fold(0.0f64, f64::max).max(1e-9);
    let h = 22 * bars.len() + 30;
    let mut s = format!("<svg xmlns='http://www.w3.org/2000/svg' width='720' height='{h}' font-family='sans-serif' font-size='12'><text x='4' y='14' font-weight='bold'>{}</text>", esc(title));
    for (i, (label, v)) in bars.iter().enumerate() {
        let y = 24 + i * 22;
        let wdt = (v / max * 440.0).max(1.0);
        let _ = write!(s, "<text x='4' y='{}'>{}</text><rect x='200' y='{y}' width='{wdt:.1}' height='16' fill='{}'/><text x='{:.1}' y='{}'>{} {unit}</text>", y + 12, esc(label), if label.contains("shaledb") { "#2a7" } else { "#58a" }, 204.0 + wdt, y + 12, fmt_num(*v));
    }
    s.push_str("</svg>");
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&#39;")
}

/// report.html: self-contained, inline SVG.
pub fn report_html(
    suite: &str,
    cells: &[Cell],
    wls: &[Workload],
    facts: &str,
    command: &str,
) -> String {
    let mut s = format!("<!doctype html><html><head><meta charset='utf-8'><title>shale-bench {suite}</title><style>body{{font-family:sans-serif;max-width:800px;margin:auto}}pre{{background:#eee;padding:8px}}</style></head><body><h1>shale-bench compare --suite={suite} ({})</h1><pre>{}</pre><p>{}</p><p>A label in parentheses after an engine names a substitution for an option that engine lacks (see report.md and docs/benchmarks.md, Substitutions).</p><pre>{}</pre>", today(), esc(command), esc(suite_note(suite)), esc(facts));
    for wl in wls {
        let _ = write!(s, "<h2>{} — {}</h2>", esc(&wl.id), esc(&wl.title));
        let mine: Vec<&Cell> = cells.iter().filter(|c| c.workload == wl.id).collect();
        for c in &mine {
            if let Some(e) = &c.error {
                let _ = write!(s, "<p><b>{}</b> failed: {}</p>", esc(&c.label()), esc(e));
            }
        }
        let shale = mine.iter().find(|c| c.engine == "shaledb");
        for (bn, nth) in bench_order(&mine) {
            let get = |c: &Cell| nth_result(c, &bn, nth).cloned();
            let b = if nth > 0 {
                format!("{bn} ({})", nth + 1)
            } else {
                bn.clone()
            };
            let base = shale.and_then(|c| get(c)).map(|r| r.ops_per_sec);
            let ops: Vec<(String, f64)> = mine
                .iter()
                .filter_map(|c| get(c).map(|r| (c.label(), r.ops_per_sec)))
                .collect();
            s.push_str(&svg_bars(&format!("{b}: ops/sec"), &ops, "ops/s"));
            for c in &mine {
                if let Some(n) = get(c).and_then(|r| r.note) {
                    let _ = write!(
                        s,
                        "<p>† {} on {}: {}</p>",
                        esc(&b),
                        esc(&c.label()),
                        esc(&n)
                    );
                }
            }
            if let Some(b0) = base {
                let ratios: Vec<(String, f64)> = ops
                    .iter()
                    .filter(|(e, v)| e != "shaledb" && *v > 0.0)
                    .map(|(e, v)| (format!("shaledb / {e}"), b0 / v))
                    .collect();
                if !ratios.is_empty() {
                    s.push_str(&svg_bars(
                        &format!("{b}: ShaleDB / peer (ops/sec ratio)"),
                        &ratios,
                        "x",
                    ));
                }
            }
            let mut lat = Vec::new();
            for c in &mine {
                if let Some(r) = get(c) {
                    for (p, v) in [
                        ("P50", r.latency.p50_us),
                        ("P99", r.latency.p99_us),
                        ("P99.9", r.latency.p999_us),
                    ] {
                        if v > 0.0 {
                            lat.push((format!("{} {p}", c.label()), v));
                        }
                    }
                }
            }
            if !lat.is_empty() {
                s.push_str(&svg_bars(&format!("{b}: latency percentiles"), &lat, "us"));
            }
        }
    }
    s.push_str("</body></html>\n");
    s
}

/// `shale-bench compare --suite=... --engines=... [--out=DIR] [--only=R1,K1-100B]`.
pub fn main_with_args<S: AsRef<str>>(args: &[S]) -> Result<(), String> {
    let mut suite_name = "seed-small".to_string();
    let mut engines = vec!["shaledb".to_string()];
    let mut out_root = PathBuf::from("bench/results");
    let mut only: Option<Vec<String>> = None;
    let mut with_db_bench = true;
    let mut out_dir: Option<PathBuf> = None;
    let mut append = false;
    for a in args {
        let a = a.as_ref();
        let (n, v) = a
            .split_once('=')
            .ok_or_else(|| format!("compare: expected --name=value, got {a:?}"))?;
        match n {
            "--suite" => suite_name = v.into(),
            "--engines" => {
                engines = v
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            }
            "--out" => out_root = v.into(),
            "--only" => only = Some(v.split(',').map(String::from).collect()),
            "--db_bench" => with_db_bench = matches!(v, "1" | "true"),
            "--dir" => out_dir = Some(v.into()),
            "--append" => append = matches!(v, "1" | "true"),
            _ => {
                return Err(format!(
                    "compare: unknown flag {n} (known: --suite --engines --out --dir --only --db_bench --append)"
                ))
            }
        }
    }
    // A long run must not discover a missing engine cell by cell (each would be a FAILED row).
    for e in &engines {
        crate::engines::check_engine(e).map_err(|m| format!("compare: {m}"))?;
    }
    let all_wls = suite(&suite_name)?;
    let mut wls = all_wls.clone();
    if let Some(o) = &only {
        wls.retain(|w| {
            o.iter()
                .any(|x| w.id == *x || w.id.starts_with(&format!("{x}-")))
        });
    }
    let this_command = std::iter::once("shale-bench compare".to_string())
        .chain(args.iter().map(|a| shell_quote(a.as_ref())))
        .collect::<Vec<_>>()
        .join(" ");
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let dir = out_dir.unwrap_or_else(|| out_root.join(format!("{}-{suite_name}", today())));
    let raw = dir.join("raw");
    std::fs::create_dir_all(&raw).map_err(|e| format!("creating {}: {e}", raw.display()))?;
    let report_wls = |cells: &[Cell]| -> Vec<Workload> {
        all_wls
            .iter()
            .filter(|w| {
                wls.iter().any(|x| x.id == w.id) || cells.iter().any(|c| c.workload == w.id)
            })
            .cloned()
            .collect()
    };
    let work = tempfile::Builder::new()
        .prefix("shale-compare-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let mut columns = engines.clone();
    let db_bench = find_db_bench();
    if with_db_bench {
        match &db_bench {
            Some(_) => columns.push("rocksdb-db_bench".into()),
            None => eprintln!("compare: RocksDB's db_bench not installed (apt-get install -y rocksdb-tools); column rocksdb-db_bench skipped"),
        }
    }
    // With --append, a suite too long for one sitting is run in parts into one directory: the
    // cells this run does not repeat (another workload, or another engine of the same workload)
    // are kept, and each part's command and time are listed in runs.txt.
    let (kept, mut command) = if append {
        earlier_parts(&dir, &wls, &columns)?
    } else {
        (Vec::new(), String::new())
    };
    let _ = write!(command, "{this_command}    # {} UTC", now_utc());
    let report_columns = all_columns(&kept, &columns);
    let facts = machine_facts(work.path());
    let mut cells: Vec<Cell> = kept;
    let first_new = cells.len();
    let total = wls.len() * columns.len();
    let t0 = Instant::now();
    for wl in &wls {
        for engine in &columns {
            if engine == "rocksdb-db_bench" && wl.kind != Kind::DbBench {
                continue;
            }
            eprintln!(
                "[{}/{total}] {} on {engine} ({:.0} s so far)",
                cells.len() - first_new + 1,
                wl.id,
                t0.elapsed().as_secs_f64()
            );
            let c = run_cell(&exe, wl, engine, work.path(), &raw);
            match &c.error {
                Some(e) => eprintln!("    FAILED: {e}"),
                None => {
                    for r in &c.results {
                        eprintln!("    {}", r.line());
                    }
                }
            }
            cells.push(c);
            let shown = report_wls(&cells);
            write_outputs(
                &dir,
                &suite_name,
                &cells,
                &shown,
                &report_columns,
                &facts,
                &command,
            )?;
        }
    }
    println!(
        "compare: {} cells in {:.0} s; report in {}",
        cells.len() - first_new,
        t0.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(())
}

/// The report's columns: this run's and the earlier parts', in the usual engine order.
fn all_columns(kept: &[Cell], columns: &[String]) -> Vec<String> {
    const ORDER: [&str; 6] = [
        "shaledb",
        "rocksdb",
        "leveldb",
        "wiredtiger",
        "fjall",
        "rocksdb-db_bench",
    ];
    let mut all: Vec<String> = columns.to_vec();
    for c in kept {
        if !all.contains(&c.engine) {
            all.push(c.engine.clone());
        }
    }
    let rank = |e: &String| ORDER.iter().position(|o| o == e).unwrap_or(ORDER.len());
    all.sort_by_key(rank);
    all
}

/// Cells and part commands already in `dir` (from `runs.txt` and `results.json`), less the
/// cells of `rerun` workloads on `engines` (which this run measures again).
fn earlier_parts(
    dir: &Path,
    rerun: &[Workload],
    engines: &[String],
) -> Result<(Vec<Cell>, String), String> {
    let results = dir.join("results.json");
    if !results.exists() {
        return Ok((Vec::new(), String::new()));
    }
    let text = std::fs::read_to_string(&results)
        .map_err(|e| format!("reading {}: {e}", results.display()))?;
    let mut cells: Vec<Cell> = serde_json::from_str(&text).map_err(|e| {
        format!(
            "--append: {} is not a compare result: {e}",
            results.display()
        )
    })?;
    cells.retain(|c| !(rerun.iter().any(|w| w.id == c.workload) && engines.contains(&c.engine)));
    let mut command = std::fs::read_to_string(dir.join("runs.txt")).unwrap_or_default();
    if !command.is_empty() && !command.ends_with('\n') {
        command.push('\n');
    }
    Ok((cells, command))
}

/// The current UTC time as YYYY-MM-DD HH:MM.
fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!(
        "{} {:02}:{:02}",
        today(),
        secs % 86_400 / 3_600,
        secs % 3_600 / 60
    )
}

fn write_outputs(
    dir: &Path,
    suite: &str,
    cells: &[Cell],
    wls: &[Workload],
    cols: &[String],
    facts: &str,
    command: &str,
) -> Result<(), String> {
    let wr = |name: &str, text: String| {
        std::fs::write(dir.join(name), text).map_err(|e| format!("writing {name}: {e}"))
    };
    wr(
        "report.md",
        report_md(suite, cells, wls, cols, facts, command),
    )?;
    wr(
        "report.html",
        report_html(suite, cells, wls, facts, command),
    )?;
    wr(
        "results.json",
        serde_json::to_string_pretty(cells).map_err(|e| e.to_string())?,
    )?;
    wr(
        "commands.txt",
        cells
            .iter()
            .map(|c| format!("# {} on {}\n{}\n", c.workload, c.engine, c.command))
            .collect(),
    )?;
    wr("runs.txt", format!("{command}\n"))?;
    wr("machine.txt", facts.to_string())
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
        let (out, used) = substitute("shaledb", &args("--use_direct_reads=1"));
        assert_eq!(out, args("--use_direct_reads=0"));
        assert_eq!(used[0].label, "buffered reads");
        let (_, used) = substitute("leveldb", &args("--disable_wal=0 --use_direct_reads=0"));
        assert!(used.is_empty());
    }

    #[test]
    fn every_suite_parses() {
        for s in ["tiny", "seed-small", "seed-medium", "seed-full"] {
            assert!(suite(s).map_or(0, |v| v.len()) > 10, "{s}");
        }
        assert!(suite("nope").is_err());
    }

    #[test]
    fn append_keeps_the_cells_of_workloads_not_rerun() {
        let dir = tempfile::tempdir().unwrap();
        let wls = suite("tiny").unwrap();
        let cell = |w: &str, e: &str| Cell {
            workload: w.into(),
            engine: e.into(),
            command: format!("run {w} {e}"),
            results: Vec::new(),
            error: None,
            secs: 1.0,
            substitutions: Vec::new(),
        };
        let both = vec!["shaledb".to_string(), "rocksdb".to_string()];
        assert!(earlier_parts(dir.path(), &wls, &both).unwrap().0.is_empty());
        let cells = vec![
            cell("R1", "shaledb"),
            cell("R1", "rocksdb"),
            cell("R2", "shaledb"),
        ];
        let cols = vec!["shaledb".to_string(), "rocksdb".to_string()];
        write_outputs(
            dir.path(),
            "tiny",
            &cells,
            &wls,
            &cols,
            "facts\n",
            "part one",
        )
        .unwrap();
        let r1: Vec<Workload> = wls.iter().filter(|w| w.id == "R1").cloned().collect();
        let (kept, command) = earlier_parts(dir.path(), &r1, &both).unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(
            (kept[0].workload.as_str(), kept[0].command.as_str()),
            ("R2", "run R2 shaledb")
        );
        assert_eq!(command, "part one\n");
        // A part that reruns R1 on RocksDB alone keeps ShaleDB's R1 cell.
        let rocks = vec!["rocksdb".to_string()];
        let (kept, _) = earlier_parts(dir.path(), &r1, &rocks).unwrap();
        assert_eq!(kept.len(), 2);
        assert!(kept
            .iter()
            .any(|c| (c.workload.as_str(), c.engine.as_str()) == ("R1", "shaledb")));
        assert_eq!(
            all_columns(&kept, &["fjall".to_string(), "rocksdb".to_string()]),
            ["shaledb", "rocksdb", "fjall"]
        );
        std::fs::write(dir.path().join("results.json"), "not json").unwrap();
        assert!(earlier_parts(dir.path(), &r1, &both).is_err());
    }

    #[test]
    fn a_noted_figure_is_marked_in_the_summary_and_explained_under_its_table() {
        let wls: Vec<Workload> = suite("tiny")
            .unwrap()
            .into_iter()
            .filter(|w| w.id == "Y1-8t")
            .collect();
        let result = |ops: f64, note: Option<&str>| BenchResult {
            benchmark: "ycsb-a-load".into(),
            ops_per_sec: ops,
            note: note.map(String::from),
            ..Default::default()
        };
        let cell = |e: &str, r: BenchResult| Cell {
            workload: "Y1-8t".into(),
            engine: e.into(),
            command: String::new(),
            results: vec![r],
            error: None,
            secs: 1.0,
            substitutions: Vec::new(),
        };
        let cells = vec![
            cell("shaledb", result(300.0, None)),
            cell(
                "wiredtiger",
                result(
                    100.0,
                    Some("stopped at --maxexecutiontime=9: 5 of 50 records loaded"),
                ),
            ),
            cell("fjall", result(150.0, None)),
        ];
        let cols: Vec<String> = ["shaledb", "wiredtiger", "fjall"]
            .map(String::from)
            .to_vec();
        let md = report_md("tiny", &cells, &wls, &cols, "", "cmd");
        assert!(
            md.contains("| Y1-8t | ycsb-a-load | 3.00x† | 2.00x |"),
            "{md}"
        );
        assert!(
            md.contains("| ycsb-a-load | wiredtiger | 100 | 0.0 | 0.0 | 0.0 | 0.0 | 3.00x† |"),
            "{md}"
        );
        assert!(md.contains("\n- † ycsb-a-load on wiredtiger: stopped at --maxexecutiontime=9: 5 of 50 records loaded\n"), "{md}");
        let html = report_html("tiny", &cells, &wls, "", "cmd");
        assert!(
            html.contains("<p>† ycsb-a-load on wiredtiger: stopped at"),
            "{html}"
        );
    }
}
