use shaledb::{Db, Options};
use std::time::Instant;
fn main() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options { block_cache_size: 256 << 20, ..Default::default() }).unwrap();
    for i in 0..1_000_000u64 {
        db.put(format!("key{i:012}"), [b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    for dir_name in ["forward", "reverse", "forward", "reverse"] {
        let t = Instant::now();
        let mut n = 0usize;
        let mut bytes = 0usize;
        if dir_name == "forward" {
            for item in db.range(..) { let (k, v) = item.unwrap(); n += 1; bytes += k.len() + v.len(); }
        } else {
            for item in db.range(..).rev() { let (k, v) = item.unwrap(); n += 1; bytes += k.len() + v.len(); }
        }
        let e = t.elapsed().as_secs_f64();
        println!("{dir_name}: {n} items, {bytes} bytes, {:.0} items/s", n as f64 / e);
    }
}
