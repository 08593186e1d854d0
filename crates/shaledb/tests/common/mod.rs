//! Helpers shared by integration tests (each test file that uses them declares `mod common;`).

/// `len` pseudo-random bytes (xorshift), the same for the same `seed`: values no codec
/// shrinks, so sizes measured in tests are data whatever codec a level uses.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn incompressible(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Checks `db` against `model`: a get of every key `key{i:05}` for i below `keys` (present
/// or not), then a full scan.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn check_keys_and_scan(
    db: &shaledb::Db,
    model: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
    keys: u32,
) {
    for i in 0..keys {
        let key = format!("key{i:05}").into_bytes();
        let got = db.get(&key).expect("get").map(|v| v.to_vec());
        assert_eq!(got.as_ref(), model.get(&key), "key {i}");
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = db
        .range(..)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .expect("iterate");
    let expected: Vec<(Vec<u8>, Vec<u8>)> =
        model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all, expected);
}
