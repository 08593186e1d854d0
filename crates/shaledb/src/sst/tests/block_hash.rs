//! Data-block hash indexes (format 5, docs/format/block.md): a get through the index finds
//! exactly what a binary search of the block finds, tables with them answer every lookup as
//! tables without, and damaged indexes are refused when the block is read.

use super::*;
use crate::key::MAX_SEQUENCE;
use crate::sst::block::{Block, BlockBuilder, BlockIter, HashLookup};
use crate::sst::filter;
use rand::{Rng, SeedableRng};

/// A key and value found.
type Entry = (Vec<u8>, Vec<u8>);

/// Random user keys (1 to 12 bytes over a small alphabet, so neighbours share prefixes),
/// each with 1 to 4 versions of random kinds, in block order.
fn versioned_entries(rng: &mut rand::rngs::StdRng, users: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut keys: Vec<Vec<u8>> = (0..users)
        .map(|_| {
            let len = rng.gen_range(1..=12);
            (0..len).map(|_| b"abcde"[rng.gen_range(0..5)]).collect()
        })
        .collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for user in keys {
        let versions = rng.gen_range(1..=4);
        let mut seq = rng.gen_range(10..1_000u64);
        for _ in 0..versions {
            let kind = [ValueKind::Put, ValueKind::Delete, ValueKind::Merge][rng.gen_range(0..3)];
            let value = format!("{}@{seq}", String::from_utf8_lossy(&user)).into_bytes();
            out.push((make_internal_key(&user, seq, kind), value));
            seq -= rng.gen_range(1..5);
        }
    }
    out
}

fn block_of(entries: &[(Vec<u8>, Vec<u8>)], interval: usize, ratio: Option<f64>) -> Arc<Block> {
    let mut b = BlockBuilder::new(interval);
    if let Some(r) = ratio {
        b = b.with_hash_index(r);
    }
    for (k, v) in entries {
        b.add(k, v);
    }
    let estimate = b.size_estimate();
    let data = b.finish();
    assert_eq!(data.len(), estimate, "the size estimate is exact");
    Arc::new(Block::new(data).expect("valid block"))
}

/// What a get in `block` finds for `target` (the entry at or after it if it has the target's
/// user key), through the hash index when `hashed`, else by binary search; and how the index
/// answered.
fn get_in_block(block: &Arc<Block>, target: &[u8], hashed: bool) -> (Option<Entry>, HashLookup) {
    let user = &target[..target.len() - 8];
    let mut it = BlockIter::new(block.clone());
    let how = match hashed {
        true => {
            it.seek_for_get(target);
            block.hash_lookup(user)
        }
        false => {
            it.seek(target);
            HashLookup::NoIndex
        }
    };
    assert!(it.status().is_ok());
    let found = (it.valid() && &it.key()[..it.key().len() - 8] == user)
        .then(|| (it.key().to_vec(), it.value().to_vec()));
    (found, how)
}

/// Lookup targets: every user key at the newest sequence number, at each version's, one
/// below it and at 0, and user keys that are not in the entries.
fn targets(entries: &[(Vec<u8>, Vec<u8>)], rng: &mut rand::rngs::StdRng) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (k, _) in entries {
        let user = &k[..k.len() - 8];
        let seq = crate::key::parse_internal_key(k).expect("key").sequence;
        for s in [MAX_SEQUENCE, seq, seq.saturating_sub(1), 0] {
            out.push(LookupKey::new(user, s).internal_key().to_vec());
        }
    }
    for _ in 0..200 {
        let len = rng.gen_range(0..=13);
        let user: Vec<u8> = (0..len).map(|_| b"abcdef"[rng.gen_range(0..6)]).collect();
        out.push(
            LookupKey::new(&user, rng.gen_range(0..2_000))
                .internal_key()
                .to_vec(),
        );
    }
    out
}

#[test]
fn gets_through_the_hash_index_find_what_binary_search_finds() {
    let mut seen = [0usize; 3]; // intervals, absent, collisions
    for seed in 0..24u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let users = rng.gen_range(1..120);
        let e = versioned_entries(&mut rng, users);
        let probes = targets(&e, &mut rng);
        for interval in [1, 2, 5, 16] {
            for ratio in [0.25, 0.75, 1.0] {
                let hashed = block_of(&e, interval, Some(ratio));
                let plain = block_of(&e, interval, None);
                let mut a = BlockIter::new(hashed.clone());
                let mut b = BlockIter::new(plain.clone());
                a.seek_to_first();
                b.seek_to_first();
                while b.valid() {
                    assert!(a.valid() && a.key() == b.key() && a.value() == b.value());
                    a.next();
                    b.next();
                }
                assert!(!a.valid(), "the index adds no entry");
                let restarts = e.len().div_ceil(interval);
                for t in &probes {
                    let (got, how) = get_in_block(&hashed, t, true);
                    let (want, _) = get_in_block(&plain, t, false);
                    assert_eq!(got, want, "seed {seed}, interval {interval}, ratio {ratio}");
                    match how {
                        HashLookup::Interval(_) => seen[0] += 1,
                        HashLookup::Absent => seen[1] += 1,
                        HashLookup::Collision => seen[2] += 1,
                        HashLookup::NoIndex => assert!(restarts > 254, "{restarts} restarts"),
                    }
                }
            }
        }
    }
    assert!(
        seen.iter().all(|&n| n > 100),
        "every answer of the index was met: {seen:?}"
    );
}

#[test]
fn blocks_with_too_many_restart_points_have_no_hash_index() {
    let e: Vec<(Vec<u8>, Vec<u8>)> = (0..300).map(|i| (ikey(i, 5), value(i))).collect();
    let block = block_of(&e, 1, Some(0.75));
    assert_eq!(block.hash_lookup(&ukey(7)), HashLookup::NoIndex);
    let block = block_of(&e[..254], 1, Some(0.75));
    assert_ne!(block.hash_lookup(&ukey(7)), HashLookup::NoIndex);
}

/// Two entries, restart interval 1, ratio 1: three buckets, each key's bucket names its
/// restart interval, then the bucket count and the flagged restart count.
#[test]
fn the_hash_index_layout_is_byte_for_byte_as_documented() {
    let e = [(ikey(1, 9), b"v".to_vec()), (ikey(2, 9), b"w".to_vec())];
    let block = block_of(&e, 1, Some(1.0));
    let data = block.data();
    let n = data.len();
    assert_eq!(
        &data[n - 4..],
        &(2u32 | 1 << 31).to_le_bytes(),
        "count with the flag"
    );
    assert_eq!(
        &data[n - 6..n - 4],
        &3u16.to_le_bytes(),
        "ceil(2 / 1.0) | 1 buckets"
    );
    let mut buckets = [255u8; 3];
    for (i, k) in [ukey(1), ukey(2)].iter().enumerate() {
        let b = &mut buckets[(filter::key_hash(k) % 3) as usize];
        *b = if *b == 255 { i as u8 } else { 254 };
    }
    assert_eq!(&data[n - 9..n - 6], &buckets);
    let entry_bytes = 2 * (3 + 9 + 8 + 1);
    assert_eq!(
        &data[n - 17..n - 9],
        &[0, 0, 0, 0, 21, 0, 0, 0],
        "restart array"
    );
    assert_eq!(n - 17, entry_bytes);
}

#[test]
fn damaged_hash_indexes_are_refused_when_the_block_is_read() {
    let e: Vec<(Vec<u8>, Vec<u8>)> = (0..40).map(|i| (ikey(i, 5), value(i))).collect();
    let good = block_of(&e, 4, Some(0.75)).data().to_vec();
    let n = good.len();
    let buckets = usize::from(u16::from_le_bytes([good[n - 6], good[n - 5]]));
    let start = n - 6 - buckets;
    let refuse = |bytes: Vec<u8>, what: &str| {
        let err = Block::new(bytes).expect_err(what);
        assert!(err.contains(what), "{err}");
    };
    // A bucket naming restart interval 10 of a block with 10.
    let mut b = good.clone();
    b[start] = 10;
    refuse(b, "hash bucket 0 names restart interval 10");
    // No buckets, or more than the block holds.
    let mut b = good.clone();
    b[n - 6..n - 4].copy_from_slice(&0u16.to_le_bytes());
    refuse(b, "no buckets");
    let mut b = good.clone();
    b[n - 6..n - 4].copy_from_slice(&u16::MAX.to_le_bytes());
    refuse(b, "cannot hold 65535 hash buckets");
    // More restart points than bucket values can name.
    let mut b = good.clone();
    b[n - 4..].copy_from_slice(&(255u32 | 1 << 31).to_le_bytes());
    refuse(b, "255 restart points");
    // Without the flag the bucket bytes are read as the restart array's end: refused too.
    let mut b = good.clone();
    b[n - 1] &= 0x7f;
    assert!(Block::new(b).is_err());
    // Every value a bucket may hold is accepted: the 10 intervals, empty and collision.
    for v in (0..10).chain([254, 255]) {
        let mut b = good.clone();
        b[start] = v;
        Block::new(b).expect("a valid bucket value");
    }
}

/// Tables written with and without data-block hash indexes answer every lookup the same,
/// cached or not; with them the footer says format 5.
#[test]
fn tables_with_hash_indexes_answer_every_lookup_as_tables_without() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let e = versioned_entries(&mut rng, 2_000);
    let probes = targets(&e, &mut rng);
    let version = |bytes: &[u8]| {
        let n = bytes.len();
        u32::from_le_bytes(bytes[n - 16..n - 12].try_into().expect("4 bytes"))
    };
    for interval in [1, 16] {
        let o = |ratio| TableBuilderOptions {
            restart_interval: interval,
            bloom_bits_per_key: 0,
            data_block_hash_ratio: ratio,
            ..opts(CompressionType::None)
        };
        let (hashed_bytes, _) = build(o(Some(0.75)), &e);
        let (plain_bytes, _) = build(o(None), &e);
        assert_eq!((version(&hashed_bytes), version(&plain_bytes)), (5, 4));
        let cache = Arc::new(BlockCache::new(1 << 20, 0));
        let hashed = open_bytes(hashed_bytes, Some(cache)).expect("open");
        let plain = open_bytes(plain_bytes, None).expect("open");
        for t in &probes {
            let user = &t[..t.len() - 8];
            let seq = crate::key::parse_internal_key(t).expect("key").sequence;
            let l = LookupKey::new(user, seq);
            let want = plain.get_entry(&l, ro(true, true)).expect("get");
            for fill in [true, false] {
                assert_eq!(hashed.get_entry(&l, ro(true, fill)).expect("get"), want);
            }
        }
    }
}
