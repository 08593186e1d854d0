//! Differential tests of the capabilities that copy or follow a database, against RocksDB:
//! one random sequence of batches (puts, deletes, single deletes, uint64add and string-append
//! merges, range deletions over four families), flushes and compactions runs on a ShaleDB
//! primary and a RocksDB primary, and at random points (a deterministic generator)
//!
//! - a secondary of each catches up (`try_catch_up_with_primary`): full scans of every family
//!   and gets of sampled keys equal each other and their primaries;
//! - each is opened read-only: the same comparisons;
//! - each makes a checkpoint (flushing first or not, the same choice for both), which is
//!   opened as a database: its contents equal the other engine's checkpoint and the
//!   primaries' when it was made;
//! - each takes a backup (flushing first or not); after some of them both purge all but the
//!   two newest; both list the same backup ids; the latest and an older backup restored into
//!   fresh directories hold what the primaries held when they were taken, in both engines.

use super::{
    gen_op, shale_families, shale_options, shale_scan, shale_write, Config, Op, Rocks, DEFAULTS,
    DYNAMIC_LEVELS_BLOB_FILES, FAMILIES,
};
use crate::engines::peers::capi::rocksdb_ops::{self, Follower, RocksBackups};
use shaledb::{BackupEngine, CheckpointOptions, ColumnFamily, Db};
use std::collections::BTreeMap;
use std::path::Path;

/// Every family's entries, in [`FAMILIES`] order.
type Contents = Vec<Vec<(Vec<u8>, Vec<u8>)>>;

/// A small xorshift generator: the same seed, the same run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn rocks_contents(r: &Rocks) -> Contents {
    (0..FAMILIES.len())
        .map(|f| r.scan(f, false, None))
        .collect()
}

fn shale_contents(db: &Db, cfs: &[ColumnFamily]) -> Contents {
    cfs.iter()
        .map(|cf| shale_scan(db, cf, false, None))
        .collect()
}

/// Asserts `want == got` family by family, naming `what` and the first differing entry.
fn assert_same(want: &Contents, got: &Contents, what: &str) {
    for (f, name) in FAMILIES.iter().enumerate() {
        let (w, g) = (&want[f], &got[f]);
        if w != g {
            let at = w.iter().zip(g).position(|(a, b)| a != b);
            panic!(
                "{what}, family {name}: {} entries expected, {} read; first difference at \
                 {at:?}: expected {:?}, read {:?}",
                w.len(),
                g.len(),
                at.and_then(|i| w.get(i)),
                at.and_then(|i| g.get(i)),
            );
        }
    }
}

/// Gets of 30 sampled keys of every family (present or not) read the same in both.
fn assert_same_gets(rocks: &Rocks, db: &Db, cfs: &[ColumnFamily], rng: &mut Rng, what: &str) {
    for (f, cf) in cfs.iter().enumerate() {
        for _ in 0..30 {
            let key = format!("k{:03}", rng.below(125)).into_bytes();
            let got = db.get_cf(cf, &key).expect("get").map(|v| v.to_vec());
            assert_eq!(
                got,
                rocks.get(f, &key),
                "{what}: get {:?} of {}",
                String::from_utf8_lossy(&key),
                FAMILIES[f]
            );
        }
    }
}

/// A path as the `&str` RocksDB's C API wrappers take.
fn path_str(p: &Path) -> String {
    p.to_str().expect("utf-8 temp path").to_string()
}

/// The two primaries, their secondaries, and the directories of the run.
struct Pair {
    cfg: Config,
    rocks: Rocks,
    shale: Db,
    cfs: Vec<ColumnFamily>,
    /// RocksDB's secondary; none with blob files, which RocksDB's secondaries do not
    /// support (its BlobDB documentation; 7.8's crashes reading a blob, RocksDB issue
    /// 13248): ShaleDB's secondary is then compared with the primaries only.
    rocks_secondary: Option<Rocks>,
    /// RocksDB's secondary's own directory (its info log).
    rocks_secondary_dir: String,
    shale_secondary: Db,
    shale_secondary_cfs: Vec<ColumnFamily>,
    rocks_dir: tempfile::TempDir,
    shale_dir: tempfile::TempDir,
    /// Checkpoints, restores and the secondaries' own directories.
    scratch: tempfile::TempDir,
}

impl Pair {
    fn open(cfg: &Config) -> Pair {
        let rocks_dir = tempfile::tempdir().expect("tempdir");
        let shale_dir = tempfile::tempdir().expect("tempdir");
        let scratch = tempfile::tempdir().expect("tempdir");
        let rocks = Rocks::open(rocks_dir.path(), cfg);
        let (opts, families) = shale_options(cfg);
        let shale = Db::open_cf(shale_dir.path(), opts, families).expect("open");
        let cfs = shale_families(&shale);
        let rocks_secondary_dir = path_str(&scratch.path().join("rocks-secondary"));
        let rocks_secondary = cfg.min_blob_size.is_none().then(|| {
            let how = Follower::Secondary(&rocks_secondary_dir);
            Rocks::open_as(rocks_dir.path(), cfg, Some(how))
        });
        let (opts, families) = shale_options(cfg);
        let shale_secondary = Db::open_secondary_cf(
            shale_dir.path(),
            scratch.path().join("shale-secondary"),
            opts,
            families,
        )
        .expect("open secondary");
        let shale_secondary_cfs = shale_families(&shale_secondary);
        Pair {
            cfg: *cfg,
            rocks,
            shale,
            cfs,
            rocks_secondary,
            rocks_secondary_dir,
            shale_secondary,
            shale_secondary_cfs,
            rocks_dir,
            shale_dir,
            scratch,
        }
    }

    /// Both primaries' contents, which must be equal.
    fn primaries(&self, what: &str) -> Contents {
        let rocks = rocks_contents(&self.rocks);
        assert_same(&rocks, &shale_contents(&self.shale, &self.cfs), what);
        rocks
    }

    fn write(&self, ops: &[Op]) {
        self.rocks.write(ops);
        shale_write(&self.shale, &self.cfs, ops);
    }

    fn flush(&self, family: usize) {
        self.rocks.flush(family);
        self.shale.flush_cf(&self.cfs[family]).expect("flush");
    }

    fn flush_all(&self) {
        for f in 0..FAMILIES.len() {
            self.flush(f);
        }
    }

    fn compact(&self, family: usize) {
        self.rocks.compact(family, self.cfg.bottommost);
        super::shale_compact(&self.shale, &self.cfs[family], self.cfg.bottommost);
    }

    /// Both secondaries catch up; they must equal each other and their primaries.
    ///
    /// RocksDB 7.8's secondary can read differently from its primary after a catch-up that
    /// follows a flush: entries it replayed from a WAL the primary has since flushed stay in
    /// its memtable (RocksDB issues 15051 and 14444, fixed long after 7.8), so a merge operand
    /// counts twice and a value deleted since can come back. The primary is the arbiter
    /// then: ShaleDB's secondary must still equal it, and RocksDB's is reopened (a fresh
    /// secondary replays only what the tables lack) and must equal it. Returns whether
    /// RocksDB's secondary differed from its primary.
    fn catch_up_and_compare(&mut self, rng: &mut Rng, what: &str) -> bool {
        let primary = self.primaries(what);
        self.shale_secondary
            .try_catch_up_with_primary()
            .expect("catch up");
        let shale = shale_contents(&self.shale_secondary, &self.shale_secondary_cfs);
        assert_same(
            &primary,
            &shale,
            &format!("{what}: ShaleDB's secondary against the primaries"),
        );
        let Some(rocks_secondary) = &self.rocks_secondary else {
            return false;
        };
        // SAFETY: the secondary's database is open (it lives in `self`).
        unsafe { rocksdb_ops::try_catch_up_with_primary(rocks_secondary.db.cast()) }
            .unwrap_or_else(|e| panic!("{what}: RocksDB catch-up: {e}"));
        let mut rocks = rocks_contents(rocks_secondary);
        let stale = rocks != primary;
        if stale {
            let family = (0..FAMILIES.len()).find(|&f| rocks[f] != primary[f]);
            eprintln!(
                "{what}: RocksDB's secondary differs from its primary after a catch-up (family \
                 {family:?}); ShaleDB's equals it; RocksDB's secondary is reopened"
            );
            // The old one closes first: one secondary at a time in its directory.
            self.rocks_secondary = None;
            let how = Follower::Secondary(&self.rocks_secondary_dir);
            let fresh = Rocks::open_as(self.rocks_dir.path(), &self.cfg, Some(how));
            rocks = rocks_contents(&fresh);
            self.rocks_secondary = Some(fresh);
        }
        assert_same(
            &rocks,
            &shale,
            &format!("{what}: ShaleDB's secondary against RocksDB's"),
        );
        if let Some(r) = &self.rocks_secondary {
            let (s, cfs) = (&self.shale_secondary, &self.shale_secondary_cfs);
            assert_same_gets(r, s, cfs, rng, &format!("{what}: secondaries"));
        }
        stale
    }

    /// Both primaries opened read-only (beside the running primaries): equal contents.
    fn read_only_and_compare(&self, rng: &mut Rng, what: &str) {
        let primary = self.primaries(what);
        let rocks = Rocks::open_as(self.rocks_dir.path(), &self.cfg, Some(Follower::ReadOnly));
        let (opts, families) = shale_options(&self.cfg);
        let shale =
            Db::open_read_only_cf(self.shale_dir.path(), opts, families).expect("open read-only");
        let cfs = shale_families(&shale);
        assert_same(
            &rocks_contents(&rocks),
            &shale_contents(&shale, &cfs),
            &format!("{what}: read-only opens"),
        );
        let what_ro = format!("{what}: ShaleDB's read-only open against the primaries");
        assert_same(&primary, &shale_contents(&shale, &cfs), &what_ro);
        assert_same_gets(
            &rocks,
            &shale,
            &cfs,
            rng,
            &format!("{what}: read-only opens"),
        );
    }

    /// Checkpoints of both (flushing first when `flush`) opened as databases: equal to each
    /// other and to the primaries when made.
    fn checkpoint_and_compare(&self, n: usize, flush: bool, rng: &mut Rng, what: &str) {
        let primary = self.primaries(what);
        let rocks_dir = self.scratch.path().join(format!("rocks-checkpoint-{n}"));
        let shale_dir = self.scratch.path().join(format!("shale-checkpoint-{n}"));
        let log_size_for_flush = if flush { 0 } else { u64::MAX };
        // SAFETY: the primary is open and writable (it lives in `self`).
        unsafe {
            rocksdb_ops::checkpoint(
                self.rocks.db.cast(),
                &path_str(&rocks_dir),
                log_size_for_flush,
            )
        }
        .unwrap_or_else(|e| panic!("{what}: RocksDB checkpoint: {e}"));
        let o = CheckpointOptions { log_size_for_flush };
        self.shale
            .checkpoint_opt(&shale_dir, &o)
            .expect("checkpoint");
        self.compare_copies(&rocks_dir, &shale_dir, &primary, rng, what);
    }

    /// Opens `rocks_dir` and `shale_dir` as databases: both must hold `want`.
    fn compare_copies(
        &self,
        rocks_dir: &Path,
        shale_dir: &Path,
        want: &Contents,
        rng: &mut Rng,
        what: &str,
    ) {
        let rocks = Rocks::open(rocks_dir, &self.cfg);
        let (opts, families) = shale_options(&self.cfg);
        let shale = Db::open_cf(shale_dir, opts, families).expect("open copy");
        let cfs = shale_families(&shale);
        let rocks_has = rocks_contents(&rocks);
        let shale_has = shale_contents(&shale, &cfs);
        assert_same(
            &rocks_has,
            &shale_has,
            &format!("{what}: ShaleDB's copy against RocksDB's"),
        );
        assert_same(want, &rocks_has, &format!("{what}: RocksDB's copy"));
        assert_same_gets(&rocks, &shale, &cfs, rng, what);
    }
}

/// The backup engines of both and what the primaries held at each backup id.
struct Backups {
    rocks: RocksBackups,
    shale: BackupEngine,
    taken: BTreeMap<u64, Contents>,
}

impl Backups {
    fn open(pair: &Pair) -> Backups {
        let rocks_dir = path_str(&pair.scratch.path().join("rocks-backups"));
        Backups {
            rocks: RocksBackups::open(&rocks_dir).expect("RocksDB backup engine"),
            shale: BackupEngine::open(pair.scratch.path().join("shale-backups")).expect("open"),
            taken: BTreeMap::new(),
        }
    }

    /// A backup of both (flushed first when `flush`); both get the same id.
    fn create(&mut self, pair: &Pair, flush: bool, what: &str) {
        if flush {
            // ShaleDB's backup does not flush: both flush first, so both copy tables only.
            pair.flush_all();
        }
        let contents = pair.primaries(what);
        // SAFETY: the primary is open and writable (it lives in `pair`).
        unsafe { self.rocks.create(pair.rocks.db.cast(), false) }
            .unwrap_or_else(|e| panic!("{what}: RocksDB backup: {e}"));
        let id = self
            .shale
            .create_backup(&pair.shale)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        self.taken.insert(id, contents);
        self.assert_same_list(what);
    }

    /// Both keep the two newest backups.
    fn purge(&mut self, what: &str) {
        self.rocks.purge_old(2).expect("RocksDB purge");
        self.shale.purge_old(2).expect("purge");
        self.assert_same_list(what);
    }

    /// ShaleDB's backup ids, oldest first.
    fn shale_ids(&self) -> Vec<u64> {
        let list = self.shale.list().expect("list");
        list.iter().map(|b| b.id).collect()
    }

    /// Both list the same ids, oldest first; each is verified.
    fn assert_same_list(&self, what: &str) {
        let rocks: Vec<u64> = self.rocks.list().iter().map(|b| u64::from(b.id)).collect();
        let shale = self.shale_ids();
        assert_eq!(rocks, shale, "{what}: backup ids");
        for &id in &shale {
            self.shale.verify(id).expect("verify");
            let rid = u32::try_from(id).expect("small id");
            self.rocks
                .verify(rid)
                .unwrap_or_else(|e| panic!("{what}: RocksDB verify {id}: {e}"));
        }
    }

    /// Restores the latest backup of each, and the oldest remaining one, into fresh
    /// directories: they hold what the primaries held when the backup was taken.
    fn restore_and_compare(&self, pair: &Pair, n: usize, rng: &mut Rng, what: &str) {
        let ids = self.shale_ids();
        let (Some(&oldest), Some(&latest)) = (ids.first(), ids.last()) else {
            return;
        };
        let scratch = pair.scratch.path();
        for (id, latest_call) in [(latest, true), (oldest, false)] {
            let rocks_dir = scratch.join(format!("rocks-restore-{n}-{id}"));
            let shale_dir = scratch.join(format!("shale-restore-{n}-{id}"));
            let rid = (!latest_call).then(|| u32::try_from(id).expect("small id"));
            self.rocks
                .restore(rid, &path_str(&rocks_dir))
                .unwrap_or_else(|e| panic!("{what}: RocksDB restore {id}: {e}"));
            self.shale.restore(id, &shale_dir).expect("restore");
            let want = &self.taken[&id];
            let what = format!("{what}: restore of backup {id}");
            pair.compare_copies(&rocks_dir, &shale_dir, want, rng, &what);
        }
    }
}

/// Runs `rounds` rounds of random batches with `seed` under `cfg`, with the random
/// secondary, read-only, checkpoint and backup comparisons the module describes.
fn run_ops(cfg: &Config, seed: u64, rounds: usize) {
    let mut pair = Pair::open(cfg);
    let mut backups = Backups::open(&pair);
    let mut rng = Rng(seed);
    let mut op_rng = seed.rotate_left(17) ^ 0x9E37_79B9_7F4A_7C15;
    let mut history = BTreeMap::new();
    let mut counts = [0usize; 5];
    let mut rocks_stale = 0;
    for round in 0..rounds {
        let what = format!("seed {seed:#x}, round {round}");
        for step in 0..60 {
            let n = 1 + step % 4;
            let ops: Vec<Op> = (0..n)
                .map(|_| gen_op(&mut op_rng, &mut history, cfg.value_pad))
                .collect();
            pair.write(&ops);
        }
        let family = rng.below(FAMILIES.len() as u64) as usize;
        match rng.below(4) {
            0 => pair.flush(family),
            1 => pair.compact(family),
            _ => {}
        }
        if rng.chance(50) || round + 1 == rounds {
            rocks_stale += usize::from(pair.catch_up_and_compare(&mut rng, &what));
            counts[0] += 1;
        }
        if rng.chance(20) {
            pair.read_only_and_compare(&mut rng, &what);
            counts[1] += 1;
        }
        if rng.chance(20) {
            let flush = rng.chance(50);
            pair.checkpoint_and_compare(round, flush, &mut rng, &what);
            counts[2] += 1;
        }
        if rng.chance(35) {
            let flush = rng.chance(40);
            backups.create(&pair, flush, &what);
            counts[3] += 1;
            if backups.taken.len() > 2 && rng.chance(50) {
                backups.purge(&what);
                backups.restore_and_compare(&pair, round, &mut rng, &what);
                counts[4] += 1;
            }
        }
    }
    // The end: a last backup, a purge and restores, whatever the draws were.
    let what = format!("seed {seed:#x}, end");
    backups.create(&pair, false, &what);
    backups.purge(&what);
    backups.restore_and_compare(&pair, rounds, &mut rng, &what);
    eprintln!(
        "seed {seed:#x}: {} catch-ups (RocksDB's secondary differed from its primary after \
         {rocks_stale}), {} read-only opens, {} checkpoints, {} backups, {} purges with \
         restores (and one at the end)",
        counts[0], counts[1], counts[2], counts[3], counts[4]
    );
    assert!(
        counts.iter().all(|&c| c > 0),
        "every comparison ran at least once: {counts:?}"
    );
}

/// Both engines' defaults: tables only.
#[test]
fn secondaries_read_only_opens_checkpoints_and_backups_agree_with_rocksdb() {
    for seed in [0x5EC0_0D01u64, 0xC0FF_EE02] {
        run_ops(&DEFAULTS, seed, 30);
    }
}

/// Small levels with blob files and blob garbage collection: copies and followers meet blob
/// files too.
#[test]
fn secondaries_read_only_opens_checkpoints_and_backups_agree_with_rocksdb_on_blob_files() {
    run_ops(&DYNAMIC_LEVELS_BLOB_FILES, 0xB10B_0003, 30);
}
