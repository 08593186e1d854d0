use super::*;
use crate::key::{make_internal_key, ValueKind};
use crate::sst::block::BlockBuilder;
use rand::{Rng, SeedableRng};

const FORMS: [IndexForm; 3] = [IndexForm::LEGACY, IndexForm::v4(false), IndexForm::v4(true)];

/// Sorted keys of `form` (random user keys sharing prefixes) with handles of blocks written
/// back to back, but for a gap every 37 blocks (which the builder must not delta-encode).
fn entries(form: IndexForm, n: usize, seed: u64) -> Vec<(Vec<u8>, BlockHandle)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut users: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            let len = rng.gen_range(0..12);
            (0..len).map(|_| rng.gen_range(b'a'..=b'd')).collect()
        })
        .collect();
    users.sort();
    users.dedup();
    let mut offset = 0;
    users
        .into_iter()
        .enumerate()
        .map(|(i, u)| {
            let key = match form.user_keys {
                true => u,
                false => make_internal_key(&u, i as u64, ValueKind::Put),
            };
            if i % 37 == 36 {
                offset += 1000;
            }
            let h = BlockHandle {
                offset,
                size: rng.gen_range(0..100_000),
            };
            offset += h.size + 5;
            (key, h)
        })
        .collect()
}

fn build(form: IndexForm, interval: usize, e: &[(Vec<u8>, BlockHandle)]) -> Arc<Block> {
    let mut b = IndexBlockBuilder::new(form, interval);
    for (k, h) in e {
        b.add(k, *h);
    }
    let est = b.size_estimate();
    let data = b.finish();
    assert_eq!(data.len(), est);
    Arc::new(Block::new(data).expect("valid block"))
}

fn current(it: &IndexBlockIter) -> Option<(Vec<u8>, BlockHandle)> {
    it.valid().then(|| (it.key().to_vec(), it.handle()))
}

/// A seek target: an internal key of the user key of `key`, an index key of `form`.
fn target(form: IndexForm, key: &[u8], seq: u64) -> Vec<u8> {
    let user = match form.user_keys {
        true => key,
        false => crate::key::user_key(key),
    };
    make_internal_key(user, seq, ValueKind::Put)
}

#[test]
fn every_form_and_interval_reads_back_both_ways_and_seeks_like_a_scan() {
    for form in FORMS {
        for interval in [1, 2, 16] {
            let e = entries(form, 300, interval as u64);
            let what = format!("{form:?} interval {interval}");
            let mut it = IndexBlockIter::new(build(form, interval, &e), form);
            let mut forward = Vec::new();
            it.seek_to_first();
            while let Some(x) = current(&it) {
                forward.push(x);
                it.next();
            }
            assert_eq!(forward, e, "{what}");
            let mut backward = Vec::new();
            it.seek_to_last();
            while let Some(x) = current(&it) {
                backward.push(x);
                it.prev();
            }
            backward.reverse();
            assert_eq!(backward, e, "{what}: backwards");
            for (i, (k, _)) in e.iter().enumerate() {
                // At the key (newest sequence: the first entry >= it is this one) and just
                // after it (the next one).
                let seq = match form.user_keys {
                    true => 0,
                    false => crate::key::MAX_SEQUENCE,
                };
                it.seek(&target(form, k, seq));
                assert_eq!(current(&it), Some(e[i].clone()), "{what}: seek {i}");
                let mut after = target(form, k, 0);
                after.truncate(after.len() - 8);
                after.push(0);
                it.seek(&make_internal_key(
                    &after,
                    crate::key::MAX_SEQUENCE,
                    ValueKind::Put,
                ));
                assert_eq!(current(&it), e.get(i + 1).cloned(), "{what}: after {i}");
                if i > 0 {
                    it.seek(&target(form, k, seq));
                    it.prev();
                    assert_eq!(current(&it), Some(e[i - 1].clone()), "{what}: prev {i}");
                }
            }
            assert!(it.status().is_ok());
        }
    }
}

#[test]
fn the_legacy_form_is_the_block_formats_1_to_3_wrote() {
    let e = entries(IndexForm::LEGACY, 100, 7);
    let mut old = BlockBuilder::new(1);
    for (k, h) in &e {
        let mut v = Vec::new();
        h.encode_to(&mut v);
        old.add(k, &v);
    }
    // Asked for interval 16, the legacy form still writes 1.
    assert_eq!(build(IndexForm::LEGACY, 16, &e).data(), &old.finish()[..]);
}

#[test]
fn deltas_and_shared_prefixes_shrink_the_block() {
    let e = entries(IndexForm::v4(true), 500, 3);
    let sizes: Vec<usize> = [1, 4, 16]
        .iter()
        .map(|&i| build(IndexForm::v4(true), i, &e).size())
        .collect();
    assert!(sizes[0] > sizes[1] && sizes[1] > sizes[2], "{sizes:?}");
}

fn error_detail(it: &IndexBlockIter) -> String {
    match it.status() {
        Err(Error::Corruption { detail, .. }) => detail,
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn a_delta_that_does_not_decode_or_leaves_the_file_is_corruption() {
    let form = IndexForm::v4(true);
    let e: Vec<(Vec<u8>, BlockHandle)> = (0..5u64)
        .map(|i| {
            let h = BlockHandle {
                offset: i * 105,
                size: 100,
            };
            (vec![b'a' + i as u8], h)
        })
        .collect();
    let good = build(form, 16, &e).data().to_vec();
    // The last entry's size (one byte, 100, the last byte of the entries) made to continue
    // into the restart array: its varint runs off the entries.
    let entries_end = good.len() - 8;
    let mut bad = good.clone();
    bad[entries_end - 1] |= 0x80;
    let mut it = IndexBlockIter::new(Arc::new(Block::new(bad).expect("block")), form);
    it.seek_to_last();
    assert!(!it.valid());
    assert!(
        error_detail(&it).ends_with("bad delta-encoded block size"),
        "{}",
        error_detail(&it)
    );
    // Intact, but the implied blocks end past a limit of 400 bytes: the fourth entry's block
    // (315..420) is the first that does not fit.
    let block = Arc::new(Block::new(good).expect("block"));
    let mut it = IndexBlockIter::new(block, form)
        .with_origin(Arc::from(Path::new("/x/000009.sst")), 777)
        .with_limit(400);
    it.seek_to_first();
    for _ in 0..3 {
        assert!(it.valid());
        it.next();
    }
    assert!(!it.valid());
    match it.status() {
        Err(Error::Corruption {
            file,
            offset,
            detail,
        }) => {
            assert_eq!((file.as_path(), offset), (Path::new("/x/000009.sst"), 777));
            assert!(detail.ends_with("points past the data area"), "{detail}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn damaged_blocks_give_errors_never_panics() {
    for form in FORMS {
        let e = entries(form, 60, 11);
        let good = build(form, 4, &e).data().to_vec();
        for i in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut d = good.clone();
                d[i] ^= flip;
                let Ok(block) = Block::new(d) else { continue };
                let block = Arc::new(block);
                let mut it = IndexBlockIter::new(block.clone(), form).with_limit(1 << 40);
                let mut n = 0;
                it.seek_to_first();
                while it.valid() && n <= e.len() {
                    n += 1;
                    it.next();
                }
                assert!(n <= e.len() + 4, "{form:?} flip at {i}: {n} entries");
                it.seek_to_last();
                while it.valid() && n <= 3 * e.len() {
                    n += 1;
                    it.prev();
                }
                let mut it = IndexBlockIter::new(block, form);
                it.seek(&target(form, &e[30].0, 0));
                let _ = it.status();
            }
        }
    }
}

/// Index entries whose user keys are `users` in order, each repeated `repeats(i)` times with
/// descending sequence numbers in the internal-key forms (a user key's versions spanning
/// data blocks); handles back to back.
fn entries_of(
    form: IndexForm,
    users: &[Vec<u8>],
    repeats: impl Fn(usize) -> usize,
) -> Vec<(Vec<u8>, BlockHandle)> {
    let mut out = Vec::new();
    let mut offset = 0;
    for (i, u) in users.iter().enumerate() {
        let copies = if form.user_keys { 1 } else { repeats(i) };
        for c in 0..copies {
            let key = match form.user_keys {
                true => u.clone(),
                false => make_internal_key(u, 1000 - c as u64, ValueKind::Put),
            };
            let h = BlockHandle { offset, size: 4000 };
            offset += h.size + 5;
            out.push((key, h));
        }
    }
    out
}

/// Seeks with heads land where seeks without them do, for every entry's key, the gaps
/// between keys, and keys before and after all of them.
fn check_heads_agree(form: IndexForm, interval: usize, e: &[(Vec<u8>, BlockHandle)], what: &str) {
    let block = build(form, interval, e);
    let heads = IndexHeads::build(&block, form).expect("a large sorted block has heads");
    let mut probes: Vec<Vec<u8>> = vec![
        target(form, b"", crate::key::MAX_SEQUENCE),
        target(form, b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 0),
    ];
    for (k, _) in e {
        for seq in [crate::key::MAX_SEQUENCE, 999, 0] {
            probes.push(target(form, k, seq));
        }
        let mut user = target(form, k, 0);
        user.truncate(user.len() - 8);
        for tweak in [&b"\0"[..], b"\xff", b"0"] {
            let mut u = user.clone();
            u.extend_from_slice(tweak);
            probes.push(make_internal_key(
                &u,
                crate::key::MAX_SEQUENCE,
                ValueKind::Put,
            ));
        }
        if let Some(last) = user.last_mut() {
            *last = last.wrapping_sub(1);
            probes.push(make_internal_key(&user, 5, ValueKind::Put));
        }
    }
    let mut plain = IndexBlockIter::new(block.clone(), form);
    let mut hinted = IndexBlockIter::new(block.clone(), form);
    for p in &probes {
        plain.seek(p);
        hinted.seek_with_heads(p, Some(&heads));
        assert_eq!(current(&hinted), current(&plain), "{what}: seek {p:?}");
        assert!(hinted.status().is_ok(), "{what}");
    }
}

#[test]
fn seeks_narrowed_by_heads_land_where_plain_seeks_do() {
    // Random short keys over a small alphabet (many shared prefixes and tied heads), and
    // fixed-width decimal keys (db_bench's: every key starts with the same zeros).
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut random: Vec<Vec<u8>> = (0..3000)
        .map(|_| {
            let len = rng.gen_range(0..14);
            (0..len).map(|_| rng.gen_range(b'a'..=b'd')).collect()
        })
        .collect();
    random.sort();
    random.dedup();
    let decimal: Vec<Vec<u8>> = (0..2000u64)
        .map(|i| format!("{:016}", i * 7919).into_bytes())
        .collect();
    for form in FORMS {
        for interval in [1, 3, 16] {
            for (name, users) in [("random", &random), ("decimal", &decimal)] {
                let e = entries_of(form, users, |i| 1 + i % 3);
                let what = format!("{form:?} interval {interval} {name} keys");
                check_heads_agree(form, interval, &e, &what);
            }
        }
    }
}

#[test]
fn small_blocks_have_no_heads_and_heads_of_another_shape_are_ignored() {
    let form = IndexForm::v4(true);
    let users: Vec<Vec<u8>> = (0..40u32).map(|i| i.to_be_bytes().to_vec()).collect();
    let small = build(form, 1, &entries_of(form, &users, |_| 1));
    assert!(IndexHeads::build(&small, form).is_none(), "40 restarts");

    let many: Vec<Vec<u8>> = (0..500u32).map(|i| i.to_be_bytes().to_vec()).collect();
    let large = build(form, 1, &entries_of(form, &many, |_| 1));
    let heads = IndexHeads::build(&large, form).expect("500 restarts");
    assert!(heads.heap_size() >= 500 / 8 * 8, "{}", heads.heap_size());
    // Heads of the large block handed to a seek in the small one: not used.
    let probe = make_internal_key(&30u32.to_be_bytes(), 0, ValueKind::Put);
    let mut it = IndexBlockIter::new(small.clone(), form);
    it.seek_with_heads(&probe, Some(&heads));
    assert_eq!(it.key(), &30u32.to_be_bytes()[..]);
}

#[test]
fn out_of_order_restart_keys_give_no_heads() {
    // Two sorted runs back to back: restart keys go down once; the builder does not check.
    let form = IndexForm::v4(true);
    let users: Vec<Vec<u8>> = (0..200u32)
        .map(|i| (i % 100).to_be_bytes().to_vec())
        .collect();
    let block = build(form, 1, &entries_of(form, &users, |_| 1));
    assert!(IndexHeads::build(&block, form).is_none());
}
