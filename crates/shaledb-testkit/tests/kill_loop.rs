//! Process kill loop (`harness = false`): the test re-executes itself as a child process that
//! runs a mixed workload (puts, deletes, batches, sync on for some writes; iterators and
//! snapshot reads checked against its own model) on a real directory with a tiny write buffer
//! so flushes and compactions run constantly. The child prints each acknowledgement on stdout
//! (`A <i>`, flushed after the write returned). The parent SIGKILLs it at a random moment,
//! reopens the database and checks: it opens every time, every acknowledged write (sync or
//! not: a process crash keeps the OS cache) is there, no batch is half applied, and the state
//! equals the model (the one in-flight write may go either way).
//!
//! `cargo test --release -p shaledb-testkit --test kill_loop -- --cycles 1000 --seed 5`
#![allow(clippy::field_reassign_with_default)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::{CompressionType, Db, Options, ReadOptions};
use shaledb_testkit::model::{
    self, gen_op, read_all, Durability, GenConfig, Model, OpLog, Outcome,
};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ENV_DIR: &str = "SHALEDB_KILL_CHILD_DIR";
const ENV_SEED: &str = "SHALEDB_KILL_CHILD_SEED";
const ENV_FIRST: &str = "SHALEDB_KILL_CHILD_FIRST_ID";
const ENV_MODE: &str = "SHALEDB_KILL_CHILD_MODE";

/// How a cycle stores values: in the tables, in blob files written by flushes and
/// compactions, or in blob files written with each write (the WAL holds references; the blob
/// bytes must reach the OS before the write is acknowledged, as the WAL record does), with
/// a base level heavier than the flushes (the condition for merging L0 tables of references
/// within L0; the power-loss suite asserts it reaches such merges).
/// Each of those with the WAL written through `write(2)` (modes `0..MODES`) or through a
/// shared mapping (`Options::allow_mmap_writes`, modes `MODES..2 * MODES`).
const MODES: u64 = 3;

fn options(mode: u64) -> Options {
    let mut o = Options::default();
    o.allow_mmap_writes = mode >= MODES;
    o.write_buffer_size = 16 << 10;
    o.block_size = 512;
    o.level0_file_num_compaction_trigger = 2;
    o.max_bytes_for_level_base = 64 << 10;
    o.target_file_size_base = 16 << 10;
    o.max_manifest_file_size = 4 << 10;
    o.max_background_jobs = 2;
    o.merge_operator = Some(model::merge_operator());
    match mode % MODES {
        1 => shaledb_testkit::store_values_in_blob_files(&mut o, 64, CompressionType::Lz4),
        2 => {
            shaledb_testkit::store_values_in_blob_files(&mut o, 0, CompressionType::None);
            o.separate_blobs_at_write = true;
            o.blob_file_size = 64 << 10;
            shaledb_testkit::merge_level0_within_level0(&mut o, 256 << 10);
        }
        _ => {}
    }
    o
}

fn cfg() -> GenConfig {
    GenConfig {
        key_space: 500,
        sync_ratio: 0.05,
        value_len: (10, 200),
        merge_ratio: 0.15,
        range_delete_ratio: 0.05,
        ..Default::default()
    }
}

fn child(dir: &str, seed: u64, first_id: u64, mode: u64) -> ! {
    let fail = |msg: String| -> ! {
        eprintln!("kill_loop child: {msg}");
        std::process::exit(2);
    };
    let db = Db::open(dir, options(mode)).unwrap_or_else(|e| fail(format!("open: {e}")));
    let cfg = cfg();
    let probe = model::all_keys(&cfg);
    let mut model = read_all(&db, &probe).unwrap_or_else(|e| fail(e));
    let mut ops_rng = StdRng::seed_from_u64(seed);
    let mut read_rng = StdRng::seed_from_u64(!seed);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    for i in 0..1_000_000u64 {
        let op = gen_op(&mut ops_rng, &cfg, first_id + i);
        if let Err(e) = op.run(&db) {
            fail(format!("write {i} failed: {e}"));
        }
        op.apply(&mut model);
        if writeln!(out, "A {i}").and_then(|_| out.flush()).is_err() {
            std::process::exit(0); // parent went away
        }
        if read_rng.gen_ratio(1, 25) {
            // A snapshot and an iterator over part of the key space, against the model.
            let snap = db.snapshot();
            let lo = model::key(read_rng.gen_range(0..cfg.key_space));
            let ro = ReadOptions {
                snapshot: Some(snap),
                iterate_lower_bound: Some(lo.clone()),
                ..Default::default()
            };
            let mut it = db.iter(&ro);
            it.seek_to_first();
            let mut want = model.range(lo..);
            for _ in 0..50 {
                match (it.valid(), want.next()) {
                    (true, Some((k, v))) if it.key() == k && it.value() == v => it.next(),
                    (false, None) => break,
                    (valid, w) => fail(format!(
                        "iterator at op {i} disagrees with the model (valid {valid}, want {:?}, \
                         status {:?})",
                        w.map(|(k, _)| String::from_utf8_lossy(k).into_owned()),
                        it.status()
                    )),
                }
            }
            let k = model::key(read_rng.gen_range(0..cfg.key_space));
            let got = db
                .get_opt(&ro, &k)
                .unwrap_or_else(|e| fail(format!("get: {e}")));
            if got.as_deref() != model.get(&k).map(Vec::as_slice) {
                fail(format!("snapshot get at op {i} disagrees with the model"));
            }
        }
    }
    std::process::exit(0);
}

struct Args {
    cycles: u64,
    seed: u64,
}

fn parse_args() -> Args {
    let mut a = Args {
        cycles: 50,
        seed: 0x5EED,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let val = || args.get(i + 1).and_then(|s| s.parse().ok());
        match args[i].as_str() {
            "--cycles" => a.cycles = val().expect("--cycles N"),
            "--seed" => a.seed = val().expect("--seed S"),
            // Anything else (libtest flags such as --nocapture, filters) is ignored.
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

fn main() {
    if let Ok(dir) = std::env::var(ENV_DIR) {
        let num = |k: &str| {
            std::env::var(k)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0)
        };
        child(&dir, num(ENV_SEED), num(ENV_FIRST), num(ENV_MODE));
    }
    let args = parse_args();
    if std::env::args().any(|a| a == "--list") {
        println!("kill_loop: test");
        return;
    }
    let start = Instant::now();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let exe = std::env::current_exe().expect("current_exe");
    let mut rng = StdRng::seed_from_u64(args.seed);
    let cfg = cfg();
    let probe = model::all_keys(&cfg);
    let mut base = Model::new();
    let mut next_id = 0u64;
    let (mut total_acked, mut in_flight_applied) = (0u64, 0u64);
    let mut cycles_by_mode = [0u64; MODES as usize];
    let mut mapped_cycles = 0u64;
    for cycle in 0..args.cycles {
        let seed = rng.gen::<u64>();
        // Each cycle writes one way and is recovered another, as a database is reopened
        // with other options.
        let mode = rng.gen_range(0..2 * MODES);
        let reopen_mode = rng.gen_range(0..2 * MODES);
        cycles_by_mode[(mode % MODES) as usize] += 1;
        mapped_cycles += u64::from(mode >= MODES);
        let what = format!(
            "cycle {cycle} (--seed {} --cycles {})",
            args.seed,
            cycle + 1
        );
        let mut child = Command::new(&exe)
            .env(ENV_DIR, &dir)
            .env(ENV_SEED, seed.to_string())
            .env(ENV_FIRST, next_id.to_string())
            .env(ENV_MODE, mode.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("child stdout");
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if l == "ready" => {}
            other => panic!("{what}: child did not start: {other:?}"),
        }
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..300_000)));
        child.kill().expect("SIGKILL the child");
        let status = child.wait().expect("wait for the child");
        reader.join().expect("reader thread");
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "{what}: the child ended on its own ({status}) before the kill"
        );
        let mut acked = 0u64;
        for line in rx.try_iter() {
            assert_eq!(line, format!("A {acked}"), "{what}: garbled ack line");
            acked += 1;
        }

        // The parent regenerates the child's ops from the same seed.
        let mut ops_rng = StdRng::seed_from_u64(seed);
        let mut log = OpLog::default();
        for i in 0..=acked {
            let op = gen_op(&mut ops_rng, &cfg, next_id + i);
            let outcome = if i < acked {
                Outcome::Acked
            } else {
                Outcome::Failed // in flight when killed
            };
            log.push(op, outcome);
        }
        let db = Db::open(&dir, options(reopen_mode))
            .unwrap_or_else(|e| panic!("{what}: reopen after SIGKILL failed: {e}"));
        let state = read_all(&db, &probe).unwrap_or_else(|e| panic!("{what}: {e}"));
        match log.check(&base, &state, Durability::AllAcked) {
            Ok(n) => in_flight_applied += u64::from(n as u64 > acked),
            Err(e) => panic!("{what}: {acked} writes acknowledged: {e}"),
        }
        db.close().expect("close");
        base = state;
        total_acked += acked;
        next_id += acked + 1;
    }
    println!(
        "kill_loop: {} cycles (plain / blobs at flush / blobs at write: {cycles_by_mode:?}; \
         WAL mapped in {mapped_cycles}), {total_acked} acknowledged writes checked, in-flight write applied in \
         {in_flight_applied} cycles, {} keys at the end, {:?}",
        args.cycles,
        base.len(),
        start.elapsed()
    );
    assert!(total_acked > 0, "no write was ever acknowledged");
}
