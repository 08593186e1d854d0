//! T1 (terarkdb-vs-rocksdb seed): TPC-H `lineitem` rows, one writer and several readers.
//!
//! Rows are generated here, not by `dbgen`/`tpchgen`: each row has lineitem's sixteen columns
//! with TPC-H's value domains (quantities 1-50, discounts 0.00-0.10, taxes 0.00-0.08, dates
//! 1992-1998, the spec's ship instructions and modes) and the comment widened to 512 bytes of
//! text, about 615 bytes a row as in the seed. The key is the first three fields
//! (`l_orderkey|l_partkey|l_suppkey`) as decimal strings. Row `i` is a pure function of `i` and
//! `--seed`, so readers can rebuild any key already written.

use crate::dbbench::flags::{parse_args, Flags};
use crate::dbbench::keys::Mt64;
use crate::dbbench::report::{BenchResult, Hist};
use crate::engine::size_on_disk;
use crate::engines::open_engine;
use crate::ycsb::fnvhash64;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const INSTRUCT: [&str; 4] = [
    "DELIVER IN PERSON",
    "COLLECT COD",
    "NONE",
    "TAKE BACK RETURN",
];
const MODES: [&str; 7] = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"];
const WORDS: [&str; 16] = [
    "furiously",
    "carefully",
    "slyly",
    "blithely",
    "quickly",
    "fluffily",
    "ironic",
    "final",
    "regular",
    "express",
    "pending",
    "special",
    "deposits",
    "requests",
    "packages",
    "accounts",
];

/// The key of row `i`.
pub fn lineitem_key(i: u64, seed: u64) -> Vec<u8> {
    let (o, p, s) = key_fields(i, seed);
    format!("{o}|{p}|{s}").into_bytes()
}

fn key_fields(i: u64, seed: u64) -> (u64, u64, u64) {
    let h = fnvhash64(i ^ seed.rotate_left(32));
    // dbgen's orderkeys are sparse: 8 used out of every 32.
    let order = i / 4;
    let orderkey = (order / 8) * 32 + order % 8 + 1;
    let partkey = 1 + h % 200_000;
    let suppkey = 1 + (partkey + (i % 4) * (10_000 / 4 + (partkey - 1) / 10_000)) % 10_000;
    (orderkey, partkey, suppkey)
}

fn date(d: u64) -> String {
    // Days after 1992-01-01, in a 360-day-year approximation that keeps valid dates.
    let y = 1992 + d / 360;
    let m = 1 + (d % 360) / 30;
    let day = 1 + d % 28;
    format!("{y:04}-{m:02}-{day:02}")
}

/// Row `i`: the sixteen lineitem columns separated by `|`.
pub fn lineitem_row(i: u64, seed: u64) -> Vec<u8> {
    let (o, p, s) = key_fields(i, seed);
    let mut r = Mt64::new(fnvhash64(i.wrapping_add(seed)));
    let qty = 1 + r.uniform(50);
    let price = qty * (90_000 + (p / 10) % 20_001 + 100 * (p % 1_000)) / 100;
    let disc = r.uniform(11);
    let tax = r.uniform(9);
    let ship = r.uniform(2_400);
    let commit = ship + 30 + r.uniform(60);
    let receipt = ship + 1 + r.uniform(30);
    let (flag, status) = if receipt < 1_200 {
        (if r.uniform(2) == 0 { "R" } else { "A" }, "F")
    } else {
        ("N", "O")
    };
    let mut comment = String::with_capacity(512);
    while comment.len() < 512 {
        comment.push_str(WORDS[r.uniform(16) as usize]);
        comment.push(' ');
    }
    comment.truncate(512);
    format!(
        "{o}|{p}|{s}|{}|{qty}|{}.{:02}|0.{disc:02}|0.{tax:02}|{flag}|{status}|{}|{}|{}|{}|{}|{comment}",
        i % 4 + 1,
        price / 100,
        price % 100,
        date(ship),
        date(commit),
        date(receipt),
        INSTRUCT[r.uniform(4) as usize],
        MODES[r.uniform(7) as usize],
    )
    .into_bytes()
}

/// `shale-bench tpch --rows=N --readers=R [db_bench engine flags]`.
pub fn main_with_args<S: AsRef<str>>(args: &[S]) -> Result<Vec<BenchResult>, String> {
    let mut rows = 200_000u64;
    let mut readers = 2usize;
    let mut rest = Vec::new();
    for a in args {
        let a = a.as_ref();
        if let Some(v) = a.strip_prefix("--rows=") {
            rows = v
                .parse()
                .map_err(|_| format!("--rows: cannot parse {v:?}"))?;
        } else if let Some(v) = a.strip_prefix("--readers=") {
            readers = v
                .parse()
                .map_err(|_| format!("--readers: cannot parse {v:?}"))?;
        } else {
            rest.push(a.to_string());
        }
    }
    let (m, pos) = parse_args(&rest)?;
    if let Some(p) = pos.first() {
        return Err(format!("unexpected argument {p:?}"));
    }
    let flags = Flags::from_map(&m)?;
    run(&flags, rows, readers, true)
}

/// One writer loads `rows` rows while `readers` threads read random rows already written.
pub fn run(
    flags: &Flags,
    rows: u64,
    readers: usize,
    verbose: bool,
) -> Result<Vec<BenchResult>, String> {
    let (path, _tmp) = match &flags.db {
        Some(p) => (PathBuf::from(p), None),
        None => {
            let t = tempfile::Builder::new()
                .prefix("shale-tpch-")
                .tempdir()
                .map_err(|e| format!("temp dir: {e}"))?;
            (t.path().join("db"), Some(t))
        }
    };
    if path.exists() && !flags.opts.use_existing_db {
        std::fs::remove_dir_all(&path).map_err(|e| format!("deleting {}: {e}", path.display()))?;
    }
    // A fresh database is created, not opened as existing (peers refuse an empty directory).
    let e = open_engine(&flags.engine, &path, &flags.opts)?;
    let e = e.as_ref();
    let seed = flags.seed;
    let written = AtomicU64::new(0);
    let reads = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let start = Instant::now();
    let mut timeline: Vec<(f64, f64)> = Vec::new();
    let (wres, rres) = std::thread::scope(|s| {
        let writer = s.spawn(|| -> Result<(Hist, u64, Instant), String> {
            let mut h = Hist::new();
            let mut bytes = 0;
            let res = (|| {
                for i in 0..rows {
                    let k = lineitem_key(i, seed);
                    let v = lineitem_row(i, seed);
                    let t0 = Instant::now();
                    e.put(&k, &v)?;
                    h.record_nanos(t0.elapsed().as_nanos() as u64);
                    bytes += (k.len() + v.len()) as u64;
                    written.store(i + 1, Ordering::Release);
                }
                Ok(())
            })();
            // The run ends when the writer is done (the main thread polls in 50 ms steps).
            let end = Instant::now();
            done.store(true, Ordering::Release);
            res.map(|_| (h, bytes, end))
        });
        let rs: Vec<_> = (0..readers)
            .map(|t| {
                let (written, reads, done) = (&written, &reads, &done);
                s.spawn(move || -> Result<(Hist, u64, u64), String> {
                    let mut rng = Mt64::new(seed + 77 + t as u64);
                    let mut h = Hist::new();
                    let (mut found, mut bytes) = (0, 0);
                    while !done.load(Ordering::Acquire) {
                        let n = written.load(Ordering::Acquire);
                        if n == 0 {
                            std::thread::yield_now();
                            continue;
                        }
                        let k = lineitem_key(rng.uniform(n), seed);
                        let t0 = Instant::now();
                        if let Some(v) = e.get(&k)? {
                            found += 1;
                            bytes += (k.len() + v.len()) as u64;
                        }
                        h.record_nanos(t0.elapsed().as_nanos() as u64);
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok((h, found, bytes))
                })
            })
            .collect();
        let mut last = (Instant::now(), 0u64);
        while !done.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(50));
            if last.0.elapsed() >= Duration::from_secs(1) {
                let n = reads.load(Ordering::Relaxed);
                let rate = (n - last.1) as f64 / last.0.elapsed().as_secs_f64();
                let t = start.elapsed().as_secs_f64();
                timeline.push((t, rate));
                if verbose {
                    eprintln!(
                        "tpch: t={t:.0}s rows written {} read ops/sec {rate:.0}",
                        written.load(Ordering::Relaxed)
                    );
                }
                last = (Instant::now(), n);
            }
        }
        let w = writer
            .join()
            .unwrap_or_else(|_| Err("writer panicked".into()));
        let r: Vec<_> = rs
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("reader panicked".into())))
            .collect();
        (w, r)
    });
    let (wh, wbytes, end) = wres?;
    let elapsed = end.duration_since(start).as_secs_f64().max(1e-9);
    let mut rh = Hist::new();
    let (mut found, mut rbytes) = (0, 0);
    for r in rres {
        let (h, f, b) = r?;
        rh.merge(&h);
        found += f;
        rbytes += b;
    }
    e.flush()?;
    e.wait_for_compactions()?;
    let size = size_on_disk(&path);
    let mk = |name: &str, h: &Hist, bytes: u64, threads: usize| BenchResult {
        benchmark: name.into(),
        engine: flags.engine.clone(),
        threads,
        ops: h.count(),
        elapsed_secs: elapsed,
        micros_per_op: elapsed * 1e6 * threads as f64 / h.count().max(1) as f64,
        ops_per_sec: h.count() as f64 / elapsed,
        bytes,
        mb_per_sec: bytes as f64 / 1048576.0 / elapsed,
        latency: h.summary(),
        size_on_disk: Some(size),
        ..Default::default()
    };
    let w = mk("tpch-write", &wh, wbytes, 1);
    let mut r = mk("tpch-read", &rh, rbytes, readers);
    r.message = format!(
        "({found} of {} found; read ops/sec per second: {})",
        rh.count(),
        timeline
            .iter()
            .map(|(_, r)| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    if verbose {
        println!("{}", w.line());
        println!("{}", r.line());
        println!(
            "tpch         : {rows} rows, size on disk {:.1} MB",
            size as f64 / 1048576.0
        );
    }
    let out = vec![w, r];
    if let Some(p) = &flags.json {
        let doc =
            serde_json::json!({"tool": "shale-bench tpch", "engine": flags.engine, "results": out});
        std::fs::write(
            p,
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?,
        )
        .map_err(|e| format!("writing {p}: {e}"))?;
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_lineitem_shaped() {
        let r = lineitem_row(12, 1000);
        let s = String::from_utf8(r.clone()).unwrap();
        let cols: Vec<&str> = s.split('|').collect();
        assert_eq!(cols.len(), 16);
        assert_eq!(cols[15].len(), 512);
        assert!(r.len() > 590 && r.len() < 640, "{}", r.len());
        let k = String::from_utf8(lineitem_key(12, 1000)).unwrap();
        assert_eq!(k, cols[..3].join("|"));
        assert_eq!(lineitem_row(12, 1000), r);
        assert_ne!(lineitem_key(13, 1000), lineitem_key(12, 1000));
    }
}
