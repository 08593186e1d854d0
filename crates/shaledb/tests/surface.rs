//! The public API's shape: key and value types, options' `Debug` and validation, errors.

use shaledb::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

#[test]
fn keys_and_values_take_any_byte_slice_type() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let wo = WriteOptions::default();
    db.put(b"array", b"1").expect("byte-string literals");
    db.put("str", "2").expect("&str");
    db.put(String::from("string"), String::from("3"))
        .expect("String by value");
    let (k, v) = (b"vec".to_vec(), b"4".to_vec());
    db.put(&k, &v).expect("&Vec<u8>");
    db.put_opt(&wo, k.clone(), v.clone())
        .expect("Vec<u8> by value");
    db.put(&b"slice"[..], &b"5"[..]).expect("&[u8]");
    let mut batch = WriteBatch::new();
    batch.put("batch", vec![b'6']);
    batch.delete(String::from("array"));
    db.write(&wo, &batch).expect("batch");

    assert_eq!(db.get("str").expect("get"), Some(b"2".to_vec()));
    assert_eq!(
        db.get(String::from("string")).expect("get"),
        Some(b"3".to_vec())
    );
    assert_eq!(db.get(&k).expect("get"), Some(b"4".to_vec()));
    assert_eq!(
        db.get_opt(&ReadOptions::default(), b"batch").expect("get"),
        Some(b"6".to_vec())
    );
    assert_eq!(db.get(b"array").expect("get"), None);
    db.delete("str").expect("delete &str");
    db.delete_opt(&wo, k).expect("delete Vec");
    assert_eq!(db.get("str").expect("get"), None);
    assert_eq!(db.get("vec").expect("get"), None);

    let mut it = db.iter(&ReadOptions::default());
    it.seek("sl");
    assert_eq!(it.key(), b"slice");
    it.seek_for_prev(String::from("sm"));
    assert_eq!(it.key(), b"slice");
}
