//! The whole-table bloom filter over user keys. See docs/format/filter.md.
//!
//! Cache-local ("blocked") bloom: the filter is an array of 64-byte lines and all `k` probes of
//! a key fall in one line, so a lookup touches one cache line instead of `k` scattered ones.
//! Filter bytes: `lines: [[u8; 64]; L]` then one byte `k` (number of probes). A key's line is
//! `((h >> 32) * L) >> 32` with `h = xxh3_64(user_key)`; probe `i` tests bit `g_i >> 23` of that
//! line (a 9-bit index into its 512 bits), where `g_0 = h as u32` and
//! `g_{i+1} = g_i * 0x9e3779b9` (wrapping).

use xxhash_rust::xxh3::xxh3_64;

/// Bytes per line: one cache line.
const LINE_BYTES: usize = 64;
const LINE_BITS: u64 = (LINE_BYTES * 8) as u64;
const GOLDEN: u32 = 0x9e37_79b9;

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

#[inline]
fn line_of(h: u64, lines: usize) -> usize {
    (((h >> 32) * lines as u64) >> 32) as usize
}

/// Builds the filter for the given key hashes.
pub(crate) fn build(hashes: &[u64], bits_per_key: usize) -> Vec<u8> {
    let k = num_probes(bits_per_key);
    let bits = hashes.len().saturating_mul(bits_per_key);
    let lines = bits.div_ceil(LINE_BITS as usize).max(1);
    let mut out = vec![0u8; lines * LINE_BYTES + 1];
    for &h in hashes {
        let base = line_of(h, lines) * LINE_BYTES;
        let mut g = h as u32;
        for _ in 0..k {
            let bit = (g >> 23) as usize;
            if let Some(b) = out.get_mut(base + bit / 8) {
                *b |= 1 << (bit % 8);
            }
            g = g.wrapping_mul(GOLDEN);
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
    lines: usize,
    k: u8,
}

impl BloomFilter {
    /// Checks the filter's shape. The error is a message; the caller adds file and offset.
    pub(crate) fn new(mut data: Vec<u8>) -> Result<BloomFilter, String> {
        let k = data.pop().ok_or("empty filter")?;
        if !(1..=30).contains(&k) {
            return Err(format!("filter has {k} probes, expected 1 to 30"));
        }
        if data.is_empty() || !data.len().is_multiple_of(LINE_BYTES) {
            return Err(format!(
                "filter has {} bytes of bits, not a positive multiple of {LINE_BYTES}",
                data.len()
            ));
        }
        let lines = data.len() / LINE_BYTES;
        Ok(BloomFilter {
            bits: data,
            lines,
            k,
        })
    }

    /// False only if the key is definitely absent.
    #[inline]
    pub(crate) fn may_contain_hash(&self, h: u64) -> bool {
        let base = line_of(h, self.lines) * LINE_BYTES;
        let Some(line) = self.bits.get(base..base + LINE_BYTES) else {
            return true;
        };
        let mut g = h as u32;
        for _ in 0..self.k {
            let bit = (g >> 23) as usize;
            if line[bit / 8] & (1 << (bit % 8)) == 0 {
                return false;
            }
            g = g.wrapping_mul(GOLDEN);
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
        assert_eq!(f.size(), (10_000usize * 10).div_ceil(512) * 64 + 1);
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
        assert!(BloomFilter::new(vec![0, 0, 7]).is_err(), "not whole lines");
        let mut ok = vec![0u8; 64];
        ok.push(7);
        assert!(BloomFilter::new(ok).is_ok());
        let mut zero_k = vec![0u8; 64];
        zero_k.push(0);
        assert!(BloomFilter::new(zero_k).is_err());
    }
}
