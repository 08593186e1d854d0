//! `Options::background_cpu_priority`: the engine's compaction and cleaner threads run at the
//! priority asked, its flush and relief threads at normal priority (read back from /proc, so
//! Linux only), and the application's threads keep theirs.
#![cfg(target_os = "linux")]

use shaledb::{CpuPriority, Db, Options};
use std::time::{Duration, Instant};

/// Name, nice value and scheduling policy of each thread of this process whose name starts
/// with `prefix` (fields 19 and 41 of /proc/self/task/TID/stat).
fn threads_named(prefix: &str) -> Vec<(String, i64, i64)> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task")
        .expect("tasks")
        .flatten()
    {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue; // the thread ended meanwhile
        };
        // "tid (name) state ...": the name may hold spaces, so split after its last ')'.
        let (head, rest) = stat.rsplit_once(')').expect("a stat line");
        let name = head.split_once('(').expect("a stat line").1.to_string();
        if !name.starts_with(prefix) {
            continue;
        }
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // `rest` starts at field 3 (the state).
        let field = |n: usize| fields[n - 3].parse::<i64>().expect("a number");
        found.push((name, field(19), field(41)));
    }
    found.sort();
    found
}

#[test]
fn background_threads_run_at_the_priority_asked() {
    const SCHED_OTHER: i64 = 0;
    const SCHED_IDLE: i64 = 5;
    let normal = (0, SCHED_OTHER);
    for (priority, lowered) in [
        (CpuPriority::Low, (19, SCHED_OTHER)),
        (CpuPriority::Idle, (0, SCHED_IDLE)),
        (CpuPriority::Normal, normal),
    ] {
        // (name as /proc shows it, at most 15 bytes; its nice value and policy): below
        // normal, flushes and urgent compactions keep normal priority on threads of their own.
        let expected: Vec<(&str, (i64, i64))> = match priority {
            CpuPriority::Normal => vec![
                ("shaledb-bg-0", normal),
                ("shaledb-bg-1", normal),
                ("shaledb-cleaner", normal),
                ("shaledb-stats", normal),
            ],
            _ => vec![
                ("shaledb-cleaner", lowered),
                ("shaledb-compact", lowered),
                ("shaledb-flush", normal),
                ("shaledb-relief", normal),
                ("shaledb-stats", lowered),
            ],
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let o = Options {
            background_cpu_priority: priority,
            max_background_jobs: 2,
            ..Options::default()
        };
        let db = Db::open(dir.path(), o).expect("open");
        db.put(b"k", b"v").expect("put");
        db.flush().expect("flush");
        // Each thread sets its priority as it starts, perhaps after open returned.
        let deadline = Instant::now() + Duration::from_secs(10);
        let threads = loop {
            let threads: Vec<(String, (i64, i64))> = threads_named("shaledb-")
                .into_iter()
                .map(|(name, nice, policy)| (name, (nice, policy)))
                .collect();
            let got: Vec<(&str, (i64, i64))> =
                threads.iter().map(|(n, p)| (n.as_str(), *p)).collect();
            if got == expected || Instant::now() > deadline {
                break threads;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let got: Vec<(&str, (i64, i64))> = threads.iter().map(|(n, p)| (n.as_str(), *p)).collect();
        assert_eq!(got, expected, "{priority:?}");
        // The application's thread is left alone.
        let mine = std::fs::read_to_string("/proc/thread-self/stat").expect("stat");
        let fields: Vec<&str> = mine
            .rsplit_once(')')
            .expect("stat")
            .1
            .split_whitespace()
            .collect();
        assert_eq!(
            (fields[16], fields[38]),
            ("0", "0"),
            "{priority:?}: the caller"
        );
        drop(db);
        // Closing joins the background threads, so the next round sees only its own.
        assert_eq!(
            threads_named("shaledb-"),
            vec![],
            "{priority:?}: after close"
        );
    }
}
