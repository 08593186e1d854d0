//! The whole-table bloom filter over user keys. See docs/format/filter.md.
//!
//! Filter bytes: `bits: [u8; m]` then one byte `k` (number of probes). Probe `i` of a key tests
//! bit `(h + i * delta) mod (8 * m)` (wrapping u64 arithmetic), where `h = xxh3_64(user_key)`
//! and `delta = h.rotate_right(17) | 1` (double hashing: one hash, k probes).

use xxhash_rust::xxh3::xxh3_64;

/// Fewest bits a filter has, so tiny tables do not get a uselessly small filter.
const MIN_BITS: usize = 64;

/// Hash of a user key as the filter uses it.
#[inline]
pub(crate) fn key_hash(user_key: &[u8]) -> u64 {
    xxh3_64(user_key)
}

/// The number of probes for `bits_per_key`: round(bits * ln 2), clamped to 1..=30.
pub(crate) fn num_probes(bits_per_key: usize) -> u8 {
    let k = (bits_per_key as f64 * 0.69).round();
    k.clamp(1.0, 30.0) as u8
}

/// Builds the filter for the given key hashes.
pub(crate) fn build(hashes: &[u64], bits_per_key: usize) -> Vec<u8> {
    let k = num_probes(bits_per_key);
    let bits = hashes
        .len()
        .saturating_mul(bits_per_key)
        .max(MIN_BITS)
        .div_ceil(8)
        * 8;
    let mut out = vec![0u8; bits / 8 + 1];
    let nbits = bits as u64;
    for &h in hashes {
        let delta = h.rotate_right(17) | 1;
        let mut p = h;
        for _ in 0..k {
            let bit = (p % nbits) as usize;
            if let Some(b) = out.get_mut(bit / 8) {
                *b |= 1 << (bit % 8);
            }
            p = p.wrapping_add(delta);
        }
    }
    if let Some(last) = out.last_mut() {
        *last = k;
    }
    out
}

/// A filter read from a table; validated at construction.
#[derive(Debug, Clone)]
pub(crate) struct BloomFilter {
    bits: Vec<u8>,
    k: u8,
}

impl BloomFilter {
    /// Checks the filter's shape. The error is a message; the caller adds file and offset.
    pub(crate) fn new(mut data: Vec<u8>) -> Result<BloomFilter, String> {
        let k = data.pop().ok_or("empty filter")?;
        if !(1..=30).contains(&k) {
            return Err(format!("filter has {k} probes, expected 1 to 30"));
        }
        if data.is_empty() {
            return Err("filter has no bits".to_string());
        }
        Ok(BloomFilter { bits: data, k })
    }

    /// False only if the key is definitely absent.
    pub(crate) fn may_contain_hash(&self, h: u64) -> bool {
        let nbits = self.bits.len() as u64 * 8;
        let delta = h.rotate_right(17) | 1;
        let mut p = h;
        for _ in 0..self.k {
            let bit = (p % nbits) as usize;
            match self.bits.get(bit / 8) {
                Some(b) if b & (1 << (bit % 8)) != 0 => {}
                _ => return false,
            }
            p = p.wrapping_add(delta);
        }
        true
    }

    /// Size of the filter bytes.
    pub(crate) fn size(&self) -> usize {
        self.bits.len() + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> Vec<u8> {
        format!("user-key-{i:08}").into_bytes()
    }

    #[test]
    fn probes_follow_bits_per_key() {
        assert_eq!(num_probes(1), 1);
        assert_eq!(num_probes(10), 7);
        assert_eq!(num_probes(20), 14);
        assert_eq!(num_probes(100), 30);
    }

    #[test]
    fn no_false_negatives_and_low_false_positive_rate() {
        let n = 10_000u32;
        let hashes: Vec<u64> = (0..n).map(|i| key_hash(&key(i))).collect();
        let f = BloomFilter::new(build(&hashes, 10)).expect("filter");
        assert_eq!(f.size(), 10_000 * 10 / 8 + 1);
        for i in 0..n {
            assert!(f.may_contain_hash(key_hash(&key(i))), "false negative {i}");
        }
        let probes = 100_000u32;
        let fp = (n..n + probes)
            .filter(|&i| f.may_contain_hash(key_hash(&key(i))))
            .count();
        let rate = fp as f64 / probes as f64;
        assert!(rate < 0.02, "false positive rate {rate}");
    }

    #[test]
    fn small_and_empty_filters() {
        let f = BloomFilter::new(build(&[], 10)).expect("filter");
        assert!(!f.may_contain_hash(key_hash(b"x")));
        let f = BloomFilter::new(build(&[key_hash(b"a")], 10)).expect("filter");
        assert!(f.may_contain_hash(key_hash(b"a")));
        assert!(BloomFilter::new(vec![]).is_err());
        assert!(BloomFilter::new(vec![7]).is_err());
        assert!(BloomFilter::new(vec![0, 0, 31]).is_err());
        assert!(BloomFilter::new(vec![0, 0, 0]).is_err());
    }
}
