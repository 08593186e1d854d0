//! Format 4's index: user-key or internal-key separators, delta-encoded handles, in flat and
//! two-level indexes.

use super::*;
use crate::key::{compare_internal, MAX_SEQUENCE};
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Every layout of a format-4 index: flat or two-level (with filter partitions), restart
/// interval 1 or 16, with small blocks and partitions so there are many of each.
fn layouts() -> Vec<(String, TableBuilderOptions)> {
    let mut out = Vec::new();
    for two_level in [false, true] {
        for interval in [1, 16] {
            let o = TableBuilderOptions {
                block_size: 128,
                index_restart_interval: interval,
                partition_index: two_level,
                partition_filters: two_level,
                metadata_block_size: 128,
                ..opts(CompressionType::None)
            };
            out.push((format!("two-level {two_level}, interval {interval}"), o));
        }
    }
    out
}

/// The position of the first entry at or after `target`, by a linear scan.
fn first_at_or_after(e: &[(Vec<u8>, Vec<u8>)], target: &[u8]) -> Option<usize> {
    e.iter()
        .position(|(k, _)| compare_internal(k, target) != Ordering::Less)
}

/// Seek targets around every entry: the key itself, its user key at the newest and oldest
/// sequence numbers, and a user key just after it.
fn targets(e: &[(Vec<u8>, Vec<u8>)]) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    for (k, _) in e {
        let user = crate::key::user_key(k);
        let mut after = user.to_vec();
        after.push(0);
        out.push(k.clone());
        out.push(make_internal_key(user, MAX_SEQUENCE, ValueKind::Put));
        out.push(make_internal_key(user, 0, ValueKind::Delete));
        out.push(make_internal_key(&after, MAX_SEQUENCE, ValueKind::Put));
    }
    out
}

/// Every seek target lands where a linear scan says, and a step back and forth from there
/// too; a get at the target's sequence number finds what the scan finds for its user key;
/// the table reads both ways and verifies.
fn check_against_scan(t: &Arc<Table>, e: &[(Vec<u8>, Vec<u8>)], what: &str) {
    let mut it = t.iter(ro(true, true));
    let at = |i: Option<usize>| i.map(|i| e[i].0.clone());
    for target in targets(e) {
        let want = first_at_or_after(e, &target);
        it.seek(&target);
        assert_eq!(it.valid().then(|| it.key().to_vec()), at(want), "{what}");
        if let Some(i) = want {
            it.prev();
            let before = i.checked_sub(1);
            assert_eq!(it.valid().then(|| it.key().to_vec()), at(before), "{what}");
            if before.is_some() {
                it.next();
                assert_eq!(it.key(), &e[i].0[..], "{what}: back again");
            }
        }
        it.status().expect("status");
        check_get(t, e, &target, want, what);
    }
    let mut back = Vec::new();
    it.seek_to_last();
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    back.reverse();
    assert_eq!(back, e, "{what}: backwards");
    assert_eq!(collect(&mut t.iter(ro(true, true))), e, "{what}: forwards");
    t.verify_checksums().expect("verify");
}

/// A get of `target` returns entry `want` (the first at or after it) if that has the
/// target's user key.
fn check_get(
    t: &Arc<Table>,
    e: &[(Vec<u8>, Vec<u8>)],
    target: &[u8],
    want: Option<usize>,
    what: &str,
) {
    let Some(p) = crate::key::parse_internal_key(target) else {
        return;
    };
    let visible = want
        .map(|i| &e[i])
        .and_then(|(k, v)| Some((crate::key::parse_internal_key(k)?, v)))
        .filter(|(k, _)| k.user_key == p.user_key);
    let got = get(t, target, true, true).expect("get");
    match visible {
        Some((k, v)) if k.kind == ValueKind::Put => assert_eq!(&found(got), v, "{what}"),
        Some(_) => assert_eq!(got, LookupResult::Deleted, "{what}"),
        None => assert_eq!(got, LookupResult::NotPresent, "{what}"),
    }
}

#[test]
fn user_key_separators_in_every_layout() {
    let e = entries(600);
    for (what, o) in layouts() {
        let (bytes, props) = build(o.clone(), &e);
        assert_eq!(footer_version(&bytes), 4, "{what}");
        assert!(props.index_user_keys, "{what}");
        assert_eq!(props.index_two_level, o.partition_index, "{what}");
        if o.partition_index {
            assert!(props.index_partitions > 3, "{what}: {props:?}");
        }
        let t = open_bytes(bytes, Some(Arc::new(BlockCache::new(1 << 20, 2)))).expect("open");
        check_against_scan(&t, &e, &what);
        for (k, _) in &e {
            assert!(t.may_contain(crate::key::user_key(k)), "{what}");
        }
        check_multi_get_and_offsets(&t, &e, &what);
    }
}

#[test]
fn a_user_key_across_blocks_keeps_internal_keys_in_every_layout() {
    let e = versions_of_one_key(300);
    for (what, mut o) in layouts() {
        o.block_size = 64;
        o.metadata_block_size = 64;
        let (bytes, props) = build(o, &e);
        assert_eq!(footer_version(&bytes), 4, "{what}");
        assert!(!props.index_user_keys, "{what}");
        let t = open_bytes(bytes, None).expect("open");
        check_versions_of_one_key(&t, &e, 300);
        check_against_scan(&t, &e, &what);
    }
}

/// `multi_get_entries` over every key (and the absent keys between them) agrees with get;
/// approximate offsets grow with the key and start at 0.
fn check_multi_get_and_offsets(t: &Arc<Table>, e: &[(Vec<u8>, Vec<u8>)], what: &str) {
    let lookups: Vec<LookupKey> = e
        .iter()
        .flat_map(|(k, _)| {
            let p = crate::key::parse_internal_key(k).expect("key");
            let mut after = p.user_key.to_vec();
            after.push(0);
            [
                LookupKey::new(p.user_key, p.sequence),
                LookupKey::new(&after, MAX_SEQUENCE),
            ]
        })
        .collect();
    let refs: Vec<&LookupKey> = lookups.iter().collect();
    let mut batched: Vec<_> = refs.iter().map(|_| (LookupResult::NotPresent, 0)).collect();
    t.multi_get_entries(&refs, ro(true, true), &mut batched)
        .expect("multi_get");
    for (l, got) in refs.iter().zip(&batched) {
        assert_eq!(got, &t.get_entry(l, ro(true, true)).expect("get"), "{what}");
    }
    assert_eq!(t.approximate_offset_of(&e[0].0), 0, "{what}");
    let offsets: Vec<u64> = e.iter().map(|(k, _)| t.approximate_offset_of(k)).collect();
    assert!(offsets.windows(2).all(|w| w[0] <= w[1]), "{what}");
    assert!(offsets.last() < Some(&t.properties().data_size), "{what}");
}

/// Random user keys (short, from a small alphabet, so separators share prefixes and some
/// keys are prefixes of others), each with 1 to `versions` versions, some deleted.
fn random_entries(rng: &mut impl Rng, n: usize, versions: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut users: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            let len = rng.gen_range(1..10);
            (0..len).map(|_| rng.gen_range(b'a'..=b'e')).collect()
        })
        .collect();
    users.sort();
    users.dedup();
    let mut out = Vec::new();
    for u in users {
        for seq in (1..=rng.gen_range(1..=versions)).rev() {
            let kind = match rng.gen_range(0..8) {
                0 => ValueKind::Delete,
                _ => ValueKind::Put,
            };
            let v = vec![b'v'; rng.gen_range(0..40)];
            out.push((make_internal_key(&u, seq * 10, kind), v));
        }
    }
    out
}

#[test]
fn random_tables_seek_like_a_linear_scan() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x1d_e4);
    let mut forms = [0, 0];
    for round in 0..16 {
        // Every other table has one version per key: its index has user keys.
        let e = random_entries(&mut rng, 300, 1 + 2 * (round as u64 % 2));
        let (what, mut o) = layouts().swap_remove(round % 4);
        o.block_size = rng.gen_range(64..400);
        let (bytes, props) = build(o, &e);
        forms[usize::from(props.index_user_keys)] += 1;
        let t = open_bytes(bytes, None).expect("open");
        check_against_scan(&t, &e, &format!("round {round}, {what}"));
    }
    assert!(
        forms[0] > 0 && forms[1] > 0,
        "both key forms were tried: {forms:?}"
    );
}

#[test]
fn user_keys_and_deltas_shrink_the_index() {
    let e = entries(3000);
    let size = |legacy: bool, interval: usize| {
        let o = TableBuilderOptions {
            index_restart_interval: interval,
            legacy_format: legacy,
            data_block_hash_ratio: None,
            ..opts(CompressionType::None)
        };
        build(o, &e).1.index_size
    };
    let (legacy, one, sixteen) = (size(true, 1), size(false, 1), size(false, 16));
    assert!(
        legacy > one && one > sixteen,
        "{legacy} {one} {sixteen} bytes"
    );
}

/// A small format-4 table with restart interval 16, and the offset of its index block.
fn small_table() -> (Vec<u8>, Entries, BlockHandle) {
    let e = entries(60);
    let o = TableBuilderOptions {
        index_restart_interval: 16,
        ..opts(CompressionType::None)
    };
    let (bytes, props) = build(o, &e);
    assert!(props.file_size < 16_000 && props.num_data_blocks > 4);
    let t = open_bytes(bytes.clone(), None).expect("open");
    (bytes, e, t.index_handle_for_tests())
}

fn varint_len(b: &[u8]) -> usize {
    b.iter().position(|&x| x & 0x80 == 0).expect("varint") + 1
}

#[test]
fn a_bad_delta_in_the_index_is_corruption_naming_file_and_offset() {
    let (mut bytes, e, index) = small_table();
    // The second entry (off the restart point): shared, non_shared, key delta, size.
    let block = index.offset as usize;
    let first_len = {
        let b = &bytes[block..];
        let key_len = b[1] as usize;
        let value = 2 + key_len;
        let offset_len = varint_len(&b[value..]);
        value + offset_len + varint_len(&b[value + offset_len..])
    };
    let second = block + first_len;
    let size_at = second + 2 + bytes[second + 1] as usize;
    let n = varint_len(&bytes[size_at..]);
    // The largest size of n varint bytes (>= 16383): the block would end past the file.
    for b in &mut bytes[size_at..size_at + n - 1] {
        *b = 0xff;
    }
    bytes[size_at + n - 1] = 0x7f;
    reseal_block_for_tests(&mut bytes, index);
    let t = open_bytes(bytes, None).expect("the index is read lazily per entry");
    let check = |r: Result<()>, what: &str| match r {
        Err(Error::Corruption {
            file,
            offset,
            detail,
        }) => {
            assert_eq!((file, offset), (path(), index.offset), "{what}");
            assert!(detail.contains("past the data area"), "{what}: {detail}");
        }
        other => panic!("{what}: expected corruption, got {other:?}"),
    };
    check(read_all_via_get(&t, &e), "get");
    check(collect_status(&t), "scan");
    check(t.verify_checksums(), "verify");
}

/// Gets every entry; the first error.
fn read_all_via_get(t: &Arc<Table>, e: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
    for (k, _) in e {
        get(t, k, true, true)?;
    }
    Ok(())
}

/// Scans the table; its status at the end.
fn collect_status(t: &Arc<Table>) -> Result<()> {
    let mut it = t.iter(ro(true, true));
    it.seek_to_first();
    while it.valid() {
        it.next();
    }
    it.status()
}

/// Prints `shaledb.index.size` of a ~64 MB table (4 KiB blocks, 16-byte keys, 100-byte
/// values) in formats 3 and 4, flat and two-level, at restart intervals 1, 4 and 16. Run by
/// hand: `cargo test --release -p shaledb index_size_of_a_64mb_table -- --ignored
/// --nocapture`.
#[test]
#[ignore]
fn index_size_of_a_64mb_table() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(64);
    let e: Vec<(Vec<u8>, Vec<u8>)> = (0..520_000u64)
        .map(|i| {
            let k = format!("{:016}", i * 3 + rng.gen_range(0..3));
            // Half random bytes, half repeated: compressible to about half, as db_bench's.
            let mut v: Vec<u8> = (0..50).map(|_| rng.gen_range(b'a'..=b'z')).collect();
            v.extend_from_slice(&[b'x'; 50]);
            (make_internal_key(k.as_bytes(), i + 1, ValueKind::Put), v)
        })
        .collect();
    for c in [CompressionType::None, CompressionType::Lz4] {
        for two_level in [false, true] {
            for (legacy, interval) in [(true, 1), (false, 1), (false, 4), (false, 16)] {
                let o = TableBuilderOptions {
                    block_size: 4096,
                    restart_interval: 16,
                    index_restart_interval: interval,
                    legacy_format: legacy,
                    data_block_hash_ratio: None,
                    partition_index: two_level,
                    metadata_block_size: 4096,
                    ..opts(c)
                };
                let (_, p) = build(o, &e);
                eprintln!(
                    "{c:?} two-level {two_level} format {} interval {interval}: file {} \
                     data blocks {} index {} bytes ({} partitions)",
                    version_for(legacy, if two_level { 3 } else { 1 }),
                    p.file_size,
                    p.num_data_blocks,
                    p.index_size,
                    p.index_partitions
                );
            }
        }
    }
}
