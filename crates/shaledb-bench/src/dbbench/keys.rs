//! Key and value bytes exactly as RocksDB's db_bench makes them.
//!
//! * [`LevelRandom`] is LevelDB/RocksDB `util/random.h` `Random` (Park-Miller, 16807).
//! * [`Mt64`] is `std::mt19937_64`, RocksDB's `Random64`, which db_bench threads use to pick keys.
//! * [`RandomGenerator`] is db_bench's value source: 1 MiB (or `value_size`, if larger) built from
//!   100-byte pieces of `test::CompressibleString(rnd(301), compression_ratio, 100)`: a random
//!   printable prefix of `100 * ratio` bytes repeated to 100 bytes, so a codec shrinks it to about
//!   `ratio` of its size.
//! * [`make_key`] is db_bench's `GenerateKeyFromInt` (RocksDB 7.x, no prefixes): the integer as
//!   `min(key_size, 8)` big-endian bytes, then `'0'` padding up to `key_size`. RocksDB's db_bench
//!   is the ground truth of the compare runs, so we store byte-identical keys. (LevelDB's db_bench
//!   instead prints `%016d`; [`make_decimal_key`] provides that form for reference.)

/// LevelDB's `Random`: a Lehmer generator modulo 2^31-1.
#[derive(Debug, Clone)]
pub struct LevelRandom {
    seed: u32,
}

impl LevelRandom {
    /// Seeds as LevelDB does (0 and 2^31-1 become 1).
    pub fn new(s: u32) -> Self {
        let mut seed = s & 0x7fff_ffff;
        if seed == 0 || seed == 2_147_483_647 {
            seed = 1;
        }
        LevelRandom { seed }
    }
    /// The next value in [1, 2^31-2].
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u32 {
        const M: u64 = 2_147_483_647;
        const A: u64 = 16807;
        let product = self.seed as u64 * A;
        let mut s = ((product >> 31) + (product & M)) as u32;
        if s as u64 > M {
            s -= M as u32;
        }
        self.seed = s;
        s
    }
    /// Uniform in [0, n).
    pub fn uniform(&mut self, n: u32) -> u32 {
        self.next() % n.max(1)
    }
}

/// `std::mt19937_64`.
#[derive(Clone)]
pub struct Mt64 {
    mt: Box<[u64; 312]>,
    idx: usize,
}

impl std::fmt::Debug for Mt64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mt64 {{ idx: {} }}", self.idx)
    }
}

impl Mt64 {
    const NN: usize = 312;
    const MM: usize = 156;
    /// Seeds like `std::mt19937_64(seed)`.
    pub fn new(seed: u64) -> Self {
        let mut mt = Box::new([0u64; 312]);
        mt[0] = seed;
        for i in 1..Self::NN {
            mt[i] = 6364136223846793005u64
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 62))
                .wrapping_add(i as u64);
        }
        Mt64 { mt, idx: Self::NN }
    }
    /// The next 64-bit output.
    pub fn next_u64(&mut self) -> u64 {
        const UM: u64 = 0xFFFF_FFFF_8000_0000;
        const LM: u64 = 0x7FFF_FFFF;
        const MATRIX_A: u64 = 0xB502_6F5A_A966_19E9;
        if self.idx >= Self::NN {
            for i in 0..Self::NN {
                let x = (self.mt[i] & UM) | (self.mt[(i + 1) % Self::NN] & LM);
                let mut xa = x >> 1;
                if x & 1 != 0 {
                    xa ^= MATRIX_A;
                }
                self.mt[i] = self.mt[(i + Self::MM) % Self::NN] ^ xa;
            }
            self.idx = 0;
        }
        let mut x = self.mt[self.idx];
        self.idx += 1;
        x ^= (x >> 29) & 0x5555_5555_5555_5555;
        x ^= (x << 17) & 0x71D6_7FFF_EDA6_0000;
        x ^= (x << 37) & 0xFFF7_EEE0_0000_0000;
        x ^= x >> 43;
        x
    }
    /// Uniform in [0, n) as `Random64::Uniform` (modulo).
    pub fn uniform(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// A double in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// db_bench's `GenerateKeyFromInt`: big-endian integer bytes, then `'0'` padding.
pub fn make_key(v: u64, key_size: usize, out: &mut Vec<u8>) {
    out.clear();
    let fill = key_size.min(8);
    for i in 0..fill {
        out.push((v >> ((fill - i - 1) * 8)) as u8);
    }
    out.resize(key_size, b'0');
}

/// LevelDB db_bench's key form: zero-padded decimal of `key_size` digits.
pub fn make_decimal_key(v: u64, key_size: usize) -> Vec<u8> {
    format!("{v:0key_size$}").into_bytes()
}

/// `test::RandomString`: `len` printable bytes ' '..'~'.
pub fn random_string(rnd: &mut LevelRandom, len: usize) -> Vec<u8> {
    (0..len).map(|_| b' ' + rnd.uniform(95) as u8).collect()
}

/// `test::CompressibleString`.
pub fn compressible_string(rnd: &mut LevelRandom, fraction: f64, len: usize) -> Vec<u8> {
    let raw = ((len as f64 * fraction) as usize).max(1);
    let raw_data = random_string(rnd, raw);
    let mut dst = Vec::with_capacity(len + raw);
    while dst.len() < len {
        dst.extend_from_slice(&raw_data);
    }
    dst.truncate(len);
    dst
}

/// db_bench's value source.
#[derive(Debug, Clone)]
pub struct RandomGenerator {
    data: Vec<u8>,
    pos: usize,
}

impl RandomGenerator {
    /// Builds the 1 MiB (at least `value_size`) buffer from seed 301, as db_bench does.
    pub fn new(compression_ratio: f64, value_size: usize) -> Self {
        let mut rnd = LevelRandom::new(301);
        let target = value_size.max(1_048_576);
        let mut data = Vec::with_capacity(target + 100);
        while data.len() < target {
            data.extend_from_slice(&compressible_string(&mut rnd, compression_ratio, 100));
        }
        RandomGenerator { data, pos: 0 }
    }
    /// The next `len` bytes (wrapping to the start when the buffer runs out).
    pub fn generate(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.data.len());
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        self.pos += len;
        &self.data[self.pos - len..self.pos]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn level_random_matches_leveldb() {
        // 16807 * 301 = 5058907; the next is 5058907 * 16807 mod (2^31 - 1).
        let mut r = LevelRandom::new(301);
        assert_eq!(r.next(), 5_058_907);
        assert_eq!(r.next(), ((5_058_907u64 * 16807) % 2_147_483_647) as u32);
    }

    #[test]
    fn mt64_matches_std() {
        // The C++ standard requires the 10000th output of a default-seeded mt19937_64 (seed
        // 5489) to be 9981545732273789042.
        let mut m = Mt64::new(5489);
        let mut last = 0;
        for _ in 0..10_000 {
            last = m.next_u64();
        }
        assert_eq!(last, 9_981_545_732_273_789_042);
    }

    #[test]
    fn keys_are_db_bench_bytes() {
        let mut k = Vec::new();
        make_key(1, 16, &mut k);
        assert_eq!(k, b"\0\0\0\0\0\0\0\x0100000000");
        make_key(0x0102_0304_0506_0708, 10, &mut k);
        assert_eq!(k, b"\x01\x02\x03\x04\x05\x06\x07\x0800");
        make_key(0x0102, 4, &mut k);
        assert_eq!(k, b"\0\0\x01\x02");
        assert_eq!(make_decimal_key(42, 16), b"0000000000000042");
        // Big-endian keys sort in integer order.
        let mut a = Vec::new();
        make_key(255, 16, &mut a);
        make_key(256, 16, &mut k);
        assert!(a < k);
    }

    #[test]
    fn values_are_db_bench_bytes() {
        let mut g = RandomGenerator::new(0.5, 100);
        let v = g.generate(100).to_vec();
        // First piece: 50 random printable bytes from Random(301), repeated twice.
        let mut r = LevelRandom::new(301);
        let head = random_string(&mut r, 50);
        assert_eq!(&v[..50], &head[..]);
        assert_eq!(&v[50..], &head[..]);
        assert_eq!(v[0], b' ' + (5_058_907u32 % 95) as u8);
        assert!(v.iter().all(|b| (b' '..=b'~').contains(b)));
        // Deterministic across instances.
        let mut g2 = RandomGenerator::new(0.5, 100);
        assert_eq!(g2.generate(100), &v[..]);
    }

    #[test]
    fn values_compress_to_ratio() {
        use std::io::Write;
        for ratio in [0.25, 0.5, 1.0] {
            let mut g = RandomGenerator::new(ratio, 800);
            let mut raw = Vec::new();
            for _ in 0..200 {
                raw.extend_from_slice(g.generate(800));
            }
            let mut enc =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(&raw).unwrap();
            let z = enc.finish().unwrap();
            let got = z.len() as f64 / raw.len() as f64;
            // Printable random bytes carry ~6.6 bits/byte, so deflate reaches ~0.83 of the
            // random part; allow for that and framing.
            assert!(
                got < ratio * 1.0 + 0.05 && got > ratio * 0.6,
                "ratio {ratio}: {got}"
            );
        }
    }
}
