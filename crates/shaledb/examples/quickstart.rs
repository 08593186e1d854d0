//! Writes a database in a temporary directory, reopens it and reads it back, printing what it
//! did. Run with `cargo run --release --example quickstart`.

use shaledb::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
use std::time::Instant;

fn main() -> shaledb::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("quickstart-db");
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);

    let db = Db::open(&path, Options::default())?;
    println!("opened {}", path.display());
    let start = Instant::now();
    for i in 0..n {
        let key = format!("key{:016}", (i * 7919) % n);
        db.put(key.as_bytes(), format!("value-{i:0100}").as_bytes())?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "wrote {n} keys in {secs:.2} s ({:.0} puts/s)",
        n as f64 / secs
    );
    let mut batch = WriteBatch::new();
    batch.put(b"hello", b"world");
    batch.delete(b"key0000000000000000");
    db.write(
        &WriteOptions {
            sync: true,
            ..Default::default()
        },
        &batch,
    )?;
    println!("applied a synced batch of {} operations", batch.len());
    db.close()?;
    drop(db);

    let db = Db::open(&path, Options::default())?;
    println!(
        "reopened; hello = {:?}",
        db.get(b"hello")?.map(|v| String::from_utf8(v.into_vec()))
    );
    let start = Instant::now();
    let mut found = 0u64;
    for i in 0..n {
        if db.get(format!("key{i:016}").as_bytes())?.is_some() {
            found += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "read {n} keys ({found} found) in {secs:.2} s ({:.0} gets/s)",
        n as f64 / secs
    );
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    let mut scanned = 0u64;
    let start = Instant::now();
    while it.valid() {
        scanned += 1;
        it.next();
    }
    it.status()?;
    println!(
        "scanned {scanned} keys in order in {:.2} s",
        start.elapsed().as_secs_f64()
    );
    db.flush()?;
    println!("{}", db.property("shaledb.stats").unwrap_or_default());
    db.close()?;
    Ok(())
}
