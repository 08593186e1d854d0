//! Helpers shared by integration tests (each test file that uses them declares `mod common;`).

/// `len` pseudo-random bytes (xorshift), the same for the same `seed`: values no codec
/// shrinks, so sizes measured in tests are data whatever codec a level uses.
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
