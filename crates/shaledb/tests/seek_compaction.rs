//! Read-triggered compaction (`Options::seek_compaction`, LevelDB's seek compaction): gets that
//! keep searching a table without a filter in vain before finding their keys deeper get that
//! table compacted into the next level.

use shaledb::{CompactionJobInfo, CompactionReason, Db, EventListener, Options};
use std::sync::{Arc, Mutex};

/// Records why each compaction ran.
#[derive(Default)]
struct Reasons(Mutex<Vec<CompactionReason>>);

impl EventListener for Reasons {
    fn on_compaction_completed(&self, info: &CompactionJobInfo) {
        self.0.lock().expect("lock").push(info.reason);
    }
}

fn level_files(db: &Db, level: usize) -> usize {
    db.property(&format!("shaledb.num-files-at-level{level}"))
        .and_then(|s| s.parse().ok())
        .expect("level file count")
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Even keys compacted to the last level, odd keys in one L0 table over the same range (under
/// the L0 compaction trigger); then `gets` reads of even keys, each of which searches the L0
/// table in vain first. Returns the L0 table count once compactions are done, and why the
/// compactions after the reads began ran.
fn l0_tables_after_reads(mut opts: Options, gets: u32) -> (usize, Vec<CompactionReason>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let reasons = Arc::new(Reasons::default());
    opts.listeners.push(reasons.clone());
    let db = Db::open(dir.path(), opts).expect("open");
    for i in (0..4000).step_by(2) {
        db.put(key(i), format!("even{i}")).expect("put");
    }
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    for i in (1..4000).step_by(2) {
        db.put(key(i), format!("odd{i}")).expect("put");
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait");
    assert_eq!(level_files(&db, 0), 1, "one L0 table before the reads");
    let before = reasons.0.lock().expect("lock").len();
    for n in 0..gets {
        // From key 2: key 0 sorts before the L0 table's first key, so it skips the table.
        let i = 2 + (n * 2) % 3998;
        let got = db.get(key(i)).expect("get");
        assert_eq!(got.as_deref(), Some(format!("even{i}").as_bytes()));
    }
    db.wait_for_compactions().expect("wait");
    let l0 = level_files(&db, 0);
    let after = reasons.0.lock().expect("lock")[before..].to_vec();
    // Every key still reads back after whatever compaction ran.
    for i in 0..4000 {
        let want = match i % 2 {
            0 => format!("even{i}"),
            _ => format!("odd{i}"),
        };
        assert_eq!(
            db.get(key(i)).expect("get").as_deref(),
            Some(want.as_bytes())
        );
    }
    (l0, after)
}

fn filterless() -> Options {
    Options {
        bloom_bits_per_key: 0,
        ..Options::default()
    }
}

#[test]
fn a_table_searched_in_vain_100_times_is_compacted_down() {
    // A small table is allowed 100 searches in vain: 99 leave it, the 100th compacts it.
    assert_eq!(l0_tables_after_reads(filterless(), 99), (1, vec![]));
    assert_eq!(
        l0_tables_after_reads(filterless(), 100),
        (0, vec![CompactionReason::ReadTriggered])
    );
}

#[test]
fn tables_with_filters_and_databases_without_it_are_left_alone() {
    let with_filter = Options {
        bloom_bits_per_key: 10,
        ..Options::default()
    };
    assert_eq!(l0_tables_after_reads(with_filter, 1000), (1, vec![]));
    let off = Options {
        seek_compaction: false,
        ..filterless()
    };
    assert_eq!(l0_tables_after_reads(off, 1000), (1, vec![]));
}
