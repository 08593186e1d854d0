//! A secondary instance reads the primary's WAL on from where its last catch-up stopped when
//! the MANIFEST did not change: the read operations of such a catch-up do not grow with the
//! WAL, and the values are right, also when a catch-up lands in the middle of a record.

use shaledb::fs::MemFileSystem;
use shaledb::{Db, Options};
use shaledb_testkit::{FaultFs, OpKind};
use std::sync::Arc;

fn options(fs: &FaultFs) -> Options {
    Options {
        fs: fs.as_dyn(),
        // Nothing is flushed during the test: the MANIFEST does not change.
        write_buffer_size: 256 << 20,
        info_log_level: shaledb::InfoLogLevel::Off,
        ..Default::default()
    }
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("value{i}-").into_bytes();
    v.resize(100 + (i as usize % 3) * 500, b'v');
    v
}

#[test]
fn catch_up_reads_only_what_the_primary_wrote_since() {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let db = Db::open("/db", options(&fs)).expect("open");
    for i in 0..20_000 {
        db.put(format!("k{i:06}"), value(i)).expect("put");
    }
    let sec = Db::open_secondary("/db", "/sec", options(&fs)).expect("open secondary");
    let reads = fs.count(OpKind::Read);
    sec.try_catch_up_with_primary().expect("nothing new");
    let idle = fs.count(OpKind::Read) - reads;
    let mut next = 20_000;
    for round in 0..20 {
        for _ in 0..5 {
            db.put(format!("k{next:06}"), value(next)).expect("put");
            next += 1;
        }
        let before = fs.count(OpKind::Read);
        sec.try_catch_up_with_primary().expect("catch up");
        let used = fs.count(OpKind::Read) - before;
        // A full reading of a 6 MB WAL takes hundreds of block reads; going on from the last
        // position takes the fingerprint's and one or two blocks'.
        assert!(
            used <= idle + 8,
            "round {round}: {used} reads for five new records (an idle catch-up: {idle})"
        );
        for i in next - 5..next {
            let got = sec.get(format!("k{i:06}")).expect("get");
            assert_eq!(got.as_deref(), Some(&value(i)[..]), "key {i}");
        }
    }
    // The whole state, and a full reading after a flush changes the MANIFEST.
    db.flush().expect("flush");
    db.put(b"after-flush", b"x").expect("put");
    sec.try_catch_up_with_primary()
        .expect("catch up after a flush");
    for i in (0..next).step_by(97) {
        let got = sec.get(format!("k{i:06}")).expect("get");
        assert_eq!(got.as_deref(), Some(&value(i)[..]), "key {i}");
    }
    assert_eq!(
        sec.get(b"after-flush").expect("get").as_deref(),
        Some(&b"x"[..])
    );
}
