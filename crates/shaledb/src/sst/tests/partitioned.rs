//! Two-level indexes and partitioned filters (format version 3).

use super::*;
use crate::{FixedPrefix, PrefixExtractor};

/// Table options with a two-level index of small partitions (and partitioned filters).
fn partitioned(compression: CompressionType, filters: bool) -> TableBuilderOptions {
    TableBuilderOptions {
        block_size: 128,
        partition_index: true,
        partition_filters: filters,
        metadata_block_size: 128,
        ..opts(compression)
    }
}

/// Every entry found by get and by a seek; absent keys between them not found.
fn check_lookups(t: &Arc<Table>, e: &[(Vec<u8>, Vec<u8>)], what: &str) {
    for (k, v) in e {
        assert_eq!(&found(get(t, k, true, true).expect("get")), v, "{what}");
    }
    for i in (1..2 * e.len()).step_by(2) {
        assert_eq!(
            get(t, &ikey(i, 1 << 40), true, true).expect("get"),
            LookupResult::NotPresent,
            "{what}: absent key {i}"
        );
    }
    let mut it = t.iter(ro(true, true));
    for (i, (k, _)) in e.iter().enumerate() {
        it.seek(k);
        assert_eq!(it.key(), &k[..], "{what}: seek {i}");
    }
    it.seek(&ikey(2 * e.len(), 1));
    assert!(!it.valid(), "{what}: seek past the end");
    let mut back = Vec::new();
    it.seek_to_last();
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().expect("status");
    back.reverse();
    assert_eq!(back, e, "{what}: backwards");
    assert_eq!(collect(&mut t.iter(ro(true, true))), e, "{what}: forwards");
}

#[test]
fn two_level_index_and_filter_partitions_read_back() {
    let e = entries(2000);
    for (c, legacy) in all_compressions()
        .into_iter()
        .zip([true, false].into_iter().cycle())
    {
        for filters in [false, true] {
            let what = format!("{c:?} filters {filters} legacy {legacy}");
            let (bytes, props) = build(with_format(partitioned(c, filters), legacy), &e);
            assert_eq!(footer_version(&bytes), version_for(legacy, 3), "{what}");
            assert_eq!(props.index_two_level, !legacy, "{what}");
            assert!(props.index_partitions > 5, "{what}: {props:?}");
            let want_filters = if filters { props.index_partitions } else { 0 };
            assert_eq!(props.filter_partitions, want_filters, "{what}");
            for cache in [None, Some(Arc::new(BlockCache::new(1 << 20, 2)))] {
                let t = open_bytes(bytes.clone(), cache).expect("open");
                assert_eq!(t.properties(), &props, "{what}");
                check_lookups(&t, &e, &what);
                t.verify_checksums().expect("verify");
                assert_eq!(t.approximate_offset_of(&e[0].0), 0);
                for (k, _) in &e {
                    assert!(t.may_contain(crate::key::user_key(k)), "{what}");
                }
            }
        }
    }
}

#[test]
fn partitioned_filters_reject_absent_keys() {
    let e = entries(3000);
    let (bytes, props) = build(partitioned(CompressionType::None, true), &e);
    assert!(props.filter_partitions > 10);
    let t = open_bytes(bytes, None).expect("open");
    let absent = (0..3000).map(|i| ukey(2 * i + 1));
    let false_positives = absent.filter(|k| t.may_contain(k)).count();
    assert!(
        false_positives < 90,
        "{false_positives} of 3000 absent keys pass"
    );
}

#[test]
fn partitions_in_a_cache_too_small_for_them_are_read_again() {
    let e = entries(1000);
    let (bytes, _) = build(partitioned(CompressionType::Lz4, true), &e);
    for meta_in_cache in [false, true] {
        let tiny = Arc::new(BlockCache::new(1, 0));
        let t = match meta_in_cache {
            true => open_meta_in_cache(bytes.clone(), tiny.clone()),
            false => open_bytes(bytes.clone(), Some(tiny.clone())),
        }
        .expect("open");
        check_lookups(&t, &e, "tiny cache");
        t.verify_checksums().expect("verify");
    }
}

#[test]
fn versions_of_one_key_across_partitions_are_all_found() {
    // 300 versions of "k" spread over many blocks and partitions: each partition's filter
    // must hold "k", and the index must lead every sequence to its version.
    let e = versions_of_one_key(300);
    let mut o = partitioned(CompressionType::None, true);
    o.block_size = 64;
    o.metadata_block_size = 64;
    let (bytes, props) = build(o, &e);
    assert!(props.filter_partitions > 10, "{props:?}");
    let t = open_bytes(bytes, None).expect("open");
    check_versions_of_one_key(&t, &e, 300);
}

#[test]
fn prefixes_whose_keys_cross_a_partition_boundary_pass_the_filter() {
    // Prefixes of 4 bytes ("p000" ..), 1 to 9 keys each, tiny partitions: many prefixes start
    // in one partition and end in the next.
    let mut e = Vec::new();
    let mut present = Vec::new();
    for p in 0..400usize {
        let prefix = format!("p{:03}", p * 2);
        present.push(prefix.clone());
        for j in 0..(p % 9 + 1) {
            let k = format!("{prefix}-{j:02}");
            e.push((
                make_internal_key(k.as_bytes(), 5, ValueKind::Put),
                b"v".to_vec(),
            ));
        }
    }
    let mut o = partitioned(CompressionType::None, true);
    o.block_size = 64;
    o.metadata_block_size = 64;
    o.prefix_extractor = Some(Arc::new(FixedPrefix(4)));
    let id = FixedPrefix(4).id();
    let (bytes, props) = build(o, &e);
    assert!(props.filter_partitions > 20, "{props:?}");
    let t = open_bytes(bytes, None).expect("open");
    for prefix in &present {
        assert!(t.may_contain_prefix(prefix.as_bytes(), &id), "{prefix}");
    }
    let absent =
        (0..400).filter(|p| t.may_contain_prefix(format!("p{:03}", p * 2 + 1).as_bytes(), &id));
    assert!(absent.count() < 40, "absent prefixes mostly rejected");
    assert!(!t.may_contain_prefix(b"q000", &id), "past the last key");
}

#[test]
fn every_byte_flip_of_a_partitioned_table_is_detected() {
    let e = entries(40);
    let mut o = partitioned(CompressionType::Snappy, true);
    o.block_size = 64;
    o.metadata_block_size = 64;
    let (bytes, props) = build(o, &e);
    assert!(props.index_partitions >= 3, "{props:?}");
    for pos in 0..bytes.len() {
        let mut b = bytes.clone();
        b[pos] ^= 0x01;
        assert_corruption(read_all(b, &e), &format!("flip at {pos}"));
    }
}

#[test]
fn partitioned_tables_with_a_dictionary_read_back() {
    let e = rows(2000);
    for legacy in [true, false] {
        let o = with_format(partitioned(CompressionType::Zstd, true), legacy);
        let (bytes, props) = build_with_dictionary(o, &e, 2048, 0);
        assert_eq!(footer_version(&bytes), version_for(legacy, 3));
        assert!(props.index_partitions > 5);
        let t = open_bytes(bytes, None).expect("open");
        for (k, v) in &e {
            assert_eq!(&found(get(&t, k, true, true).expect("get")), v);
        }
        assert_eq!(collect(&mut t.iter(ro(true, true))), e);
        t.verify_checksums().expect("verify");
    }
}

#[test]
fn empty_partitioned_table() {
    let (bytes, props) = build(partitioned(CompressionType::Lz4, true), &[]);
    assert_eq!((props.index_partitions, props.filter_partitions), (0, 0));
    let t = open_bytes(bytes, None).expect("open");
    assert!(collect(&mut t.iter(ro(true, true))).is_empty());
    assert_eq!(
        get(&t, &ikey(1, 1), true, true).expect("get"),
        LookupResult::NotPresent
    );
    t.verify_checksums().expect("verify");
}
