//! Writeback hints reach the files they are for: `bytes_per_sync` every table and blob file a
//! flush or compaction writes, `wal_bytes_per_sync` every WAL (through a filesystem hook that
//! records the interval each created file was given).

use shaledb::fs::{FsHook, HookedFileSystem, MemFileSystem, WritableFile};
use shaledb::{Db, Options};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The writeback interval last set on each created file, by file name.
#[derive(Default, Clone)]
struct Intervals(Arc<Mutex<BTreeMap<String, u64>>>);

impl Intervals {
    /// The intervals of the files named `*.{ext}`.
    fn of(&self, ext: &str) -> Vec<u64> {
        let map = self.0.lock().expect("lock");
        map.iter()
            .filter(|(name, _)| name.ends_with(&format!(".{ext}")))
            .map(|(_, &bytes)| bytes)
            .collect()
    }
}

struct Recorded {
    inner: Box<dyn WritableFile>,
    name: String,
    intervals: Intervals,
}

impl WritableFile for Recorded {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.inner.append(data)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn set_writeback_interval(&mut self, bytes: u64) {
        let mut map = self.intervals.0.lock().expect("lock");
        map.insert(self.name.clone(), bytes);
        self.inner.set_writeback_interval(bytes);
    }
}

impl FsHook for Intervals {
    fn writable(&self, path: &Path, file: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.0.lock().expect("lock").insert(name.clone(), 0);
        Box::new(Recorded {
            inner: file,
            name,
            intervals: self.clone(),
        })
    }
}

fn run(bytes_per_sync: u64, wal_bytes_per_sync: u64) -> Intervals {
    let intervals = Intervals::default();
    let fs = HookedFileSystem::new(Arc::new(MemFileSystem::new()), intervals.clone());
    let mut o = Options {
        fs: Arc::new(fs),
        write_buffer_size: 64 << 10,
        enable_blob_files: true,
        min_blob_size: 100,
        bytes_per_sync,
        wal_bytes_per_sync,
        ..Options::default()
    };
    o.level0_file_num_compaction_trigger = 2;
    let db = Db::open(Path::new("/db"), o).expect("open");
    for round in 0..4u32 {
        for i in 0..300u32 {
            let value = vec![b'a' + (i % 26) as u8; if i % 2 == 0 { 40 } else { 400 }];
            db.put(format!("k{i:04}-{round}"), value).expect("put");
        }
        db.flush().expect("flush");
    }
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    drop(db);
    intervals
}

#[test]
fn tables_and_blob_files_get_bytes_per_sync_and_wals_get_wal_bytes_per_sync() {
    let seen = run(12_345, 777);
    for ext in ["sst", "blob"] {
        let got = seen.of(ext);
        assert!(got.len() >= 4, "{ext}: {got:?}");
        assert!(got.iter().all(|&b| b == 12_345), "{ext}: {got:?}");
    }
    let wals = seen.of("log");
    assert!(
        !wals.is_empty() && wals.iter().all(|&b| b == 777),
        "{wals:?}"
    );
}

#[test]
fn zero_turns_the_hint_off() {
    let seen = run(0, 0);
    for ext in ["sst", "blob", "log"] {
        let got = seen.of(ext);
        assert!(
            !got.is_empty() && got.iter().all(|&b| b == 0),
            "{ext}: {got:?}"
        );
    }
}
