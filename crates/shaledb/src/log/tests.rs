//! Tests for the log writer and reader.

use super::*;
use crate::checksum;
use crate::fs::{SequentialFile, WritableFile};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::sync::Arc;

/// A writable file appending to a shared vector.
struct VecFile(Arc<Mutex<Vec<u8>>>);

impl WritableFile for VecFile {
    fn append(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.0.lock().extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        self.0.lock().len() as u64
    }
}

/// A sequential file over bytes that returns at most `chunk` bytes per read, to exercise the
/// reader's handling of short reads.
struct SliceFile {
    data: Vec<u8>,
    pos: usize,
    chunk: usize,
}

impl SequentialFile for SliceFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.chunk).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

fn write_log(records: &[Vec<u8>]) -> Vec<u8> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let mut w = LogWriter::new(Box::new(VecFile(buf.clone())));
    for r in records {
        w.add_record(r).expect("append");
    }
    w.flush().expect("flush");
    w.sync().expect("sync");
    assert_eq!(w.file_len(), buf.lock().len() as u64);
    let out = buf.lock().clone();
    out
}

fn reader(data: Vec<u8>, chunk: usize) -> LogReader {
    LogReader::new(
        Box::new(SliceFile {
            data,
            pos: 0,
            chunk,
        }),
        PathBuf::from("000001.log"),
    )
}

/// A reader of `data` resumed at `at` (`LogReader::new_at`), reading `chunk` bytes at a time.
fn reader_at(data: Vec<u8>, at: u64, chunk: usize) -> LogReader {
    let block = (at - at % BLOCK_SIZE as u64) as usize;
    let file = SliceFile {
        data,
        pos: block,
        chunk,
    };
    LogReader::new_at(Box::new(file), PathBuf::from("000001.log"), at)
}

/// Reads everything; panics after an absurd number of results (a reader loop bug).
fn read_all(data: Vec<u8>) -> Vec<LogRead> {
    let mut r = reader(data, BLOCK_SIZE);
    let mut out = Vec::new();
    loop {
        let item = r.read().expect("no IO errors in memory");
        let done = item == LogRead::Eof;
        out.push(item);
        if done {
            // Eof is sticky.
            assert_eq!(r.read().expect("read"), LogRead::Eof);
            return out;
        }
        assert!(out.len() < 1_000_000, "reader does not terminate");
    }
}

fn records_of(results: &[LogRead]) -> Vec<(Vec<u8>, u64)> {
    results
        .iter()
        .filter_map(|r| match r {
            LogRead::Record { data, offset } => Some((data.clone(), *offset)),
            _ => None,
        })
        .collect()
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn fragment(typ: u8, payload: &[u8]) -> Vec<u8> {
    let crc = checksum::crc32c_extend(checksum::crc32c(&[typ]), payload);
    let mut v = checksum::mask(crc).to_le_bytes().to_vec();
    v.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    v.push(typ);
    v.extend_from_slice(payload);
    v
}

#[test]
fn round_trip_various_sizes() {
    let records = vec![
        Vec::new(),
        b"a".to_vec(),
        pattern(100, 1),
        pattern(BLOCK_SIZE - HEADER_SIZE, 2),
        pattern(BLOCK_SIZE, 3),
        Vec::new(),
        pattern(3 * BLOCK_SIZE + 17, 4),
        pattern(1000, 5),
    ];
    let data = write_log(&records);
    for chunk in [BLOCK_SIZE, 1000, 7, 1] {
        let mut r = reader(data.clone(), chunk);
        let mut prev_offset = None;
        for rec in &records {
            match r.read().expect("read") {
                LogRead::Record { data, offset } => {
                    assert_eq!(&data, rec);
                    assert!(prev_offset.map_or(offset == 0, |p| offset > p));
                    prev_offset = Some(offset);
                }
                other => panic!("expected record, got {other:?}"),
            }
        }
        assert_eq!(r.read().expect("read"), LogRead::Eof);
        assert_eq!(r.read().expect("read"), LogRead::Eof);
        assert_eq!(r.path(), std::path::Path::new("000001.log"));
    }
}

#[test]
fn exactly_block_sized_record_fills_one_block() {
    let data = write_log(&[pattern(BLOCK_SIZE - HEADER_SIZE, 9), b"next".to_vec()]);
    assert_eq!(data.len(), BLOCK_SIZE + HEADER_SIZE + 4);
    assert_eq!(data[6], record_type::FULL);
    assert_eq!(data[BLOCK_SIZE + 6], record_type::FULL);
    let recs = records_of(&read_all(data));
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[1].1, BLOCK_SIZE as u64);
}

#[test]
fn fragmented_record_types() {
    let data = write_log(&[pattern(2 * BLOCK_SIZE + 5, 7)]);
    assert_eq!(data[6], record_type::FIRST);
    assert_eq!(data[BLOCK_SIZE + 6], record_type::MIDDLE);
    assert_eq!(data[2 * BLOCK_SIZE + 6], record_type::LAST);
    let recs = records_of(&read_all(data));
    assert_eq!(recs, vec![(pattern(2 * BLOCK_SIZE + 5, 7), 0)]);
}

#[test]
fn trailer_padding_at_block_end() {
    // Leave 3 bytes in the first block: too small for a header, so they are zero-filled.
    let first = pattern(BLOCK_SIZE - 2 * HEADER_SIZE + 4, 1);
    let data = write_log(&[first.clone(), b"x".to_vec()]);
    assert_eq!(data.len(), BLOCK_SIZE + HEADER_SIZE + 1);
    assert_eq!(&data[BLOCK_SIZE - 3..BLOCK_SIZE], &[0, 0, 0]);
    assert_eq!(data[BLOCK_SIZE + 6], record_type::FULL);
    let recs = records_of(&read_all(data));
    assert_eq!(recs, vec![(first, 0), (b"x".to_vec(), BLOCK_SIZE as u64)]);

    // Exactly 7 bytes left: an empty record still fits there, with no padding.
    let first = pattern(BLOCK_SIZE - 2 * HEADER_SIZE, 2);
    let data = write_log(&[first.clone(), Vec::new(), b"y".to_vec()]);
    assert_eq!(data.len(), BLOCK_SIZE + HEADER_SIZE + 1);
    let recs = records_of(&read_all(data));
    assert_eq!(
        recs,
        vec![
            (first, 0),
            (Vec::new(), (BLOCK_SIZE - HEADER_SIZE) as u64),
            (b"y".to_vec(), BLOCK_SIZE as u64)
        ]
    );
}

#[test]
fn writer_continues_existing_file() {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let mut w = LogWriter::new(Box::new(VecFile(buf.clone())));
    w.add_record(&pattern(BLOCK_SIZE - 17, 1)).expect("append");
    drop(w);
    // Reopen: the writer must know it is 10 bytes from the block end (pads 3 after one more).
    let mut w = LogWriter::new(Box::new(VecFile(buf.clone())));
    w.add_record(b"").expect("append");
    w.add_record(b"zz").expect("append");
    let data = buf.lock().clone();
    let recs = records_of(&read_all(data));
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[2], (b"zz".to_vec(), BLOCK_SIZE as u64));
}

/// Cuts the file at every offset inside the last record: the earlier records always come back
/// intact, then at most one damage report, then Eof; never a wrong record.
fn check_truncations(records: &[Vec<u8>]) {
    let full = write_log(records);
    let before = write_log(&records[..records.len() - 1]);
    let expected_prefix = records_of(&read_all(before.clone()));
    assert_eq!(expected_prefix.len(), records.len() - 1);
    for cut in before.len()..full.len() {
        let results = read_all(full[..cut].to_vec());
        let n = expected_prefix.len();
        assert!(results.len() > n, "cut {cut}: {results:?}");
        assert_eq!(records_of(&results[..n]), expected_prefix, "cut {cut}");
        match &results[n..] {
            [LogRead::Eof] => {}
            [LogRead::Damaged { offset, .. }, LogRead::Eof] => {
                assert!(*offset >= before.len() as u64, "cut {cut}: offset {offset}");
            }
            other => panic!("cut {cut}: unexpected tail {other:?}"),
        }
    }
}

#[test]
fn truncation_of_last_record_at_every_offset() {
    // The last record spans a block boundary.
    check_truncations(&[pattern(30_000, 1), b"small".to_vec(), pattern(5_000, 3)]);
    // The last record starts with trailer padding.
    check_truncations(&[
        pattern(BLOCK_SIZE - 2 * HEADER_SIZE + 4, 1),
        pattern(100, 2),
    ]);
    // A single empty record.
    check_truncations(&[Vec::new()]);
}

#[test]
fn flipped_byte_mid_file_is_damage_then_later_records_read() {
    let records: Vec<Vec<u8>> = (0..40).map(|i| pattern(3000 + i * 7, i as u8)).collect();
    let clean = read_all(write_log(&records));
    let offsets: Vec<u64> = records_of(&clean).iter().map(|r| r.1).collect();
    let mut data = write_log(&records);
    // Corrupt a payload byte of record 12.
    let at = offsets[12] as usize + HEADER_SIZE + 100;
    data[at] ^= 0x40;
    let results = read_all(data);
    let recs = records_of(&results);
    // Records 0..12 intact and first.
    for (i, r) in recs.iter().take(12).enumerate() {
        assert_eq!(r, &(records[i].clone(), offsets[i]));
    }
    assert!(matches!(
        results[12],
        LogRead::Damaged { offset, .. } if offset == offsets[12]
    ));
    // Then valid records again (mid-log corruption is distinguishable from a torn tail).
    assert!(matches!(results[13], LogRead::Record { .. }));
    // Every record after the damage is a true record at its true offset, and the last survives.
    for (data, off) in &recs[12..] {
        let i = offsets.iter().position(|o| o == off).expect("known offset");
        assert!(i > 12);
        assert_eq!(data, &records[i]);
    }
    assert_eq!(recs.last().map(|r| r.1), offsets.last().copied());
    assert_eq!(
        results
            .iter()
            .filter(|r| matches!(r, LogRead::Damaged { .. }))
            .count(),
        1
    );
}

#[test]
fn flipped_byte_in_fragmented_record() {
    let records = vec![b"a".to_vec(), pattern(3 * BLOCK_SIZE, 1), b"b".to_vec()];
    let mut data = write_log(&records);
    // Corrupt the middle fragment: the record is lost, reported at its first fragment.
    data[BLOCK_SIZE + 50] ^= 1;
    let results = read_all(data);
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(matches!(&results[0], LogRead::Record { data, .. } if data == b"a"));
    assert!(matches!(results[1], LogRead::Damaged { offset, .. } if offset == 8));
    assert!(matches!(&results[2], LogRead::Record { data, .. } if data == b"b"));
}

/// Zeros from the end of the last record to the end of the file are the end of the log (a
/// preallocated log's unwritten space), however long, and a reader goes on from their start.
#[test]
fn a_zero_tail_is_the_end_of_the_log() {
    let records = vec![b"one".to_vec(), pattern(40_000, 2)];
    let written = write_log(&records);
    let end = written.len() as u64;
    for zeros in [
        1,
        6,
        7,
        100,
        3 * BLOCK_SIZE + 123,
        4 * BLOCK_SIZE - end as usize,
    ] {
        let mut data = written.clone();
        data.resize(data.len() + zeros, 0);
        let results = read_all(data.clone());
        assert_eq!(records_of(&results).len(), 2);
        assert_eq!(results.len(), 3, "{zeros} zeros: {:?}", results.last());
        let mut r = reader(data, 1000);
        while let LogRead::Record { .. } = r.read().expect("read") {}
        assert_eq!(r.position(), end, "{zeros} zeros");
    }
    // A file of only zeros holds no record.
    for len in [100, BLOCK_SIZE, 2 * BLOCK_SIZE + 7] {
        let mut r = reader(vec![0u8; len], BLOCK_SIZE);
        assert_eq!(r.read().expect("read"), LogRead::Eof);
        assert_eq!(r.position(), 0);
    }
    assert_eq!(read_all(Vec::new()), vec![LogRead::Eof]);
}

/// Zeros followed by anything else are damage, wherever the data after them starts: in the
/// same block, at the start of a later block, or inside one.
#[test]
fn zeros_followed_by_data_are_damage() {
    let written = write_log(&[b"one".to_vec(), b"two".to_vec()]);
    let end = written.len() as u64;
    for late_at in [end as usize + 50, 3 * BLOCK_SIZE, 3 * BLOCK_SIZE + 5] {
        let mut data = written.clone();
        data.resize(late_at, 0);
        data.extend(fragment(record_type::FULL, b"late"));
        let results = read_all(data.clone());
        assert!(
            matches!(
                &results[..],
                [
                    LogRead::Record { .. },
                    LogRead::Record { .. },
                    LogRead::Damaged { offset, .. },
                    LogRead::Record { data, offset: at },
                    LogRead::Eof,
                ] if *offset == end && data == b"late" && *at == late_at as u64
            ),
            "late record at {late_at}: {:?}",
            results.get(2..)
        );
        assert_eq!(
            replay(data.clone(), TailPolicy::TornTailOnly).1,
            Err(end),
            "late record at {late_at}"
        );
        // Garbage rather than a record after the zeros: a torn tail, not the end.
        let mut data = written.clone();
        data.resize(late_at, 0);
        data.push(0x5a);
        data.resize(late_at + 20, 0);
        let (_, replayed) = replay(data, TailPolicy::TornTailOnly);
        assert!(
            matches!(replayed, Ok(ReplayEnd::Eof { torn_tail: Some((at, _)) }) if at == end),
            "byte at {late_at}: {replayed:?}"
        );
    }
}

#[test]
fn fragment_sequence_errors() {
    // First then Full: the partial record is reported, then the full record is returned.
    let mut data = fragment(record_type::FIRST, b"partial");
    data.extend(fragment(record_type::FULL, b"whole"));
    let results = read_all(data);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(matches!(results[0], LogRead::Damaged { offset: 0, .. }));
    assert_eq!(
        results[1],
        LogRead::Record {
            data: b"whole".to_vec(),
            offset: 14
        }
    );

    // Orphan Last, then a good record.
    let mut data = fragment(record_type::LAST, b"tail");
    data.extend(fragment(record_type::FULL, b"ok"));
    let results = read_all(data);
    assert!(matches!(results[0], LogRead::Damaged { offset: 0, .. }));
    assert_eq!(
        results[1],
        LogRead::Record {
            data: b"ok".to_vec(),
            offset: 11
        }
    );

    // First, then a First: the first partial is reported, the second completes.
    let mut data = fragment(record_type::FIRST, b"x");
    data.extend(fragment(record_type::FIRST, b"a"));
    data.extend(fragment(record_type::MIDDLE, b"b"));
    data.extend(fragment(record_type::LAST, b"c"));
    let results = read_all(data);
    assert!(matches!(results[0], LogRead::Damaged { offset: 0, .. }));
    assert_eq!(
        results[1],
        LogRead::Record {
            data: b"abc".to_vec(),
            offset: 8
        }
    );

    // A valid checksum over an unknown type is damage.
    let mut data = fragment(9, b"strange");
    data.extend(fragment(record_type::ZERO, b""));
    let results = read_all(data);
    assert!(matches!(
        results[..],
        [LogRead::Damaged { offset: 0, .. }, LogRead::Eof]
    ));

    // A length running past the end of a full block.
    let mut data = write_log(&[pattern(BLOCK_SIZE - 100, 1)]);
    let mut bad = fragment(record_type::FULL, &[1u8; 10]);
    bad[4..6].copy_from_slice(&200u16.to_le_bytes());
    data.extend(bad);
    data.resize(BLOCK_SIZE, 0);
    data.extend(fragment(record_type::FULL, b"after"));
    let results = read_all(data);
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(matches!(&results[1], LogRead::Damaged { detail, .. } if detail.contains("past")));
    assert!(matches!(&results[2], LogRead::Record { data, .. } if data == b"after"));
}

#[test]
fn random_garbage_never_panics() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5a1e);
    for round in 0..200 {
        let len = rng.gen_range(0..3 * BLOCK_SIZE);
        let mut data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        // Sprinkle plausible headers so some paths past the length check are reached.
        if round % 2 == 0 {
            for _ in 0..20 {
                let at = rng.gen_range(0..len.max(1));
                let frag = fragment(rng.gen_range(0..6), &pattern(rng.gen_range(0..50), 1));
                for (i, b) in frag.into_iter().enumerate() {
                    if let Some(slot) = data.get_mut(at + i) {
                        *slot = b;
                    }
                }
            }
        }
        let chunk = rng.gen_range(1..2 * BLOCK_SIZE);
        let mut r = reader(data, chunk);
        let mut n = 0;
        while r.read().expect("read") != LogRead::Eof {
            n += 1;
            assert!(n < 100_000);
        }
    }
}

#[test]
fn random_corruption_never_yields_a_wrong_record() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let records: Vec<Vec<u8>> = (0..30)
        .map(|i| pattern(rng.gen_range(0..20_000), i as u8))
        .collect();
    let clean = write_log(&records);
    for _ in 0..100 {
        let mut data = clean.clone();
        for _ in 0..rng.gen_range(1..5) {
            let at = rng.gen_range(0..data.len());
            data[at] = rng.gen();
        }
        for (rec, _) in records_of(&read_all(data)) {
            assert!(records.contains(&rec));
        }
    }
}

/// Replays `data` under `policy`, rejecting records that start with `b'!'`. Returns the
/// applied records and the end, or the corruption offset.
fn replay(data: Vec<u8>, policy: TailPolicy) -> (Vec<Vec<u8>>, Result<ReplayEnd, u64>) {
    let mut applied = Vec::new();
    let mut r = reader(data, BLOCK_SIZE);
    let end = replay_records(&mut r, policy, "reading test log", |rec, _| {
        if rec.first() == Some(&b'!') {
            return Ok(RecordCheck::Invalid("rejected".to_string()));
        }
        applied.push(rec);
        Ok(RecordCheck::Applied)
    });
    let end = end.map_err(|e| match e {
        crate::Error::Corruption { offset, .. } => offset,
        other => panic!("expected corruption, got {other}"),
    });
    (applied, end)
}

/// Three records, the middle one's payload flipped (offsets 0, 12 and 24 with 5-byte payloads).
fn log_with_damaged_middle() -> Vec<u8> {
    let mut data = write_log(&[b"aaaaa".to_vec(), b"bbbbb".to_vec(), b"ccccc".to_vec()]);
    data[HEADER_SIZE + 12] ^= 0xff;
    data
}

#[test]
fn replay_policies_decide_mid_log_damage() {
    let a = b"aaaaa".to_vec();
    let c = b"ccccc".to_vec();
    let data = log_with_damaged_middle();
    assert_eq!(
        replay(data.clone(), TailPolicy::Strict),
        (vec![a.clone()], Err(12))
    );
    assert_eq!(
        replay(data.clone(), TailPolicy::TornTailOnly),
        (vec![a.clone()], Err(12))
    );
    assert_eq!(
        replay(data.clone(), TailPolicy::StopAtDamage),
        (vec![a.clone()], Ok(ReplayEnd::Stopped))
    );
    assert_eq!(
        replay(data, TailPolicy::SkipDamaged),
        (vec![a, c], Ok(ReplayEnd::Eof { torn_tail: None }))
    );
}

#[test]
fn replay_policies_decide_a_torn_tail() {
    let a = b"aaaaa".to_vec();
    let mut data = write_log(&[a.clone(), b"bbbbb".to_vec()]);
    data.truncate(12 + HEADER_SIZE + 2);
    assert_eq!(
        replay(data.clone(), TailPolicy::Strict),
        (vec![a.clone()], Err(12))
    );
    let (applied, end) = replay(data.clone(), TailPolicy::TornTailOnly);
    assert_eq!(applied, vec![a.clone()]);
    assert!(matches!(
        end,
        Ok(ReplayEnd::Eof {
            torn_tail: Some((12, _))
        })
    ));
    assert_eq!(
        replay(data.clone(), TailPolicy::StopAtDamage),
        (vec![a.clone()], Ok(ReplayEnd::Stopped))
    );
    assert_eq!(
        replay(data, TailPolicy::SkipDamaged),
        (vec![a], Ok(ReplayEnd::Eof { torn_tail: None }))
    );
}

#[test]
fn replay_policies_decide_rejected_records() {
    let a = b"aaaaa".to_vec();
    let c = b"ccccc".to_vec();
    let data = write_log(&[a.clone(), b"!bbbb".to_vec(), c.clone()]);
    assert_eq!(
        replay(data.clone(), TailPolicy::Strict),
        (vec![a.clone()], Err(12))
    );
    assert_eq!(
        replay(data.clone(), TailPolicy::TornTailOnly),
        (vec![a.clone()], Err(12))
    );
    assert_eq!(
        replay(data.clone(), TailPolicy::StopAtDamage),
        (vec![a.clone()], Ok(ReplayEnd::Stopped))
    );
    assert_eq!(
        replay(data, TailPolicy::SkipDamaged),
        (vec![a, c], Ok(ReplayEnd::Eof { torn_tail: None }))
    );
}

/// A reader started with `new_at` at any record boundary an earlier reader reached reads
/// exactly the records after it, with file offsets, across blocks, fragments and padding.
#[test]
fn reading_resumes_at_every_record_boundary() {
    let records: Vec<Vec<u8>> = (0..60u8)
        .map(|i| pattern([10, 3000, 40_000, 7, 32_760][i as usize % 5], i))
        .collect();
    let data = write_log(&records);
    let all = records_of(&read_all(data.clone()));
    let mut r = reader(data.clone(), BLOCK_SIZE);
    let mut boundaries = vec![0u64];
    while let LogRead::Record { .. } = r.read().expect("read") {
        boundaries.push(r.position());
    }
    assert_eq!(boundaries.len(), records.len() + 1);
    for (i, &at) in boundaries.iter().enumerate() {
        let mut resumed = reader_at(data.clone(), at, 777);
        let mut got = Vec::new();
        loop {
            match resumed.read().expect("read") {
                LogRead::Record { data, offset } => got.push((data, offset)),
                LogRead::Eof => break,
                other => panic!("resuming at {at}: {other:?}"),
            }
        }
        assert_eq!(got, all[i..], "resuming at boundary {i} (offset {at})");
    }
}

/// A log read while being written: a record cut short is a torn tail; a reader resumed at
/// the tail's offset once the writer finished reads that record and the ones after it.
#[test]
fn a_torn_tail_is_read_again_once_written() {
    let records: Vec<Vec<u8>> = (0..8u8).map(|i| pattern(9000, i)).collect();
    let data = write_log(&records);
    let all = records_of(&read_all(data.clone()));
    // The writer has written the first 4 records and part of the fifth.
    let cut = all[4].1 as usize + 5000;
    let mut r = reader(data[..cut].to_vec(), BLOCK_SIZE);
    let mut seen = Vec::new();
    let tail = loop {
        match r.read().expect("read") {
            LogRead::Record { data, offset } => seen.push((data, offset)),
            LogRead::Damaged { offset, .. } => break offset,
            LogRead::Eof => panic!("no torn tail reported"),
        }
    };
    assert_eq!(seen, all[..4]);
    assert_eq!(tail, all[4].1);
    let mut resumed = reader_at(data, tail, BLOCK_SIZE);
    let mut rest = Vec::new();
    while let LogRead::Record { data, offset } = resumed.read().expect("read") {
        rest.push((data, offset));
    }
    assert_eq!(rest, all[4..]);
}

/// Every policy reads a log ending in zeros as a log that ends there.
#[test]
fn replay_policies_read_a_zero_tail_as_the_end() {
    let a = b"aaaaa".to_vec();
    let mut data = write_log(&[a.clone(), b"bbbbb".to_vec()]);
    data.resize(5 * BLOCK_SIZE, 0);
    for policy in [
        TailPolicy::Strict,
        TailPolicy::TornTailOnly,
        TailPolicy::StopAtDamage,
        TailPolicy::SkipDamaged,
    ] {
        assert_eq!(
            replay(data.clone(), policy),
            (
                vec![a.clone(), b"bbbbb".to_vec()],
                Ok(ReplayEnd::Eof { torn_tail: None })
            ),
            "{policy:?}"
        );
    }
}

/// A preallocating writer sets the file's size ahead in whole steps (rounded up to blocks),
/// never writes past that size, and the reader ends at the last record; a record written
/// later is read by a reader resumed where the last one ended.
#[test]
fn a_preallocating_writer_stays_inside_its_space() {
    use crate::fs::{FileSystem, MemFileSystem};
    let fs = MemFileSystem::new();
    let path = std::path::Path::new("/log");
    let file = fs.create(path).expect("create");
    let mut w = LogWriter::preallocating(file, 40_000);
    let step = 2 * BLOCK_SIZE as u64;
    let records: Vec<Vec<u8>> = (0..40u8)
        .map(|i| pattern([10, 3000, 40_000, 7, 32_760, 200_000][i as usize % 6], i))
        .collect();
    for r in &records[..39] {
        w.add_record(r).expect("append");
        let size = fs.file_size(path).expect("size");
        assert_eq!(size % step, 0, "size {size}");
        assert!(size >= w.file_len() && size - w.file_len() <= step + BLOCK_SIZE as u64);
    }
    let data = fs.read_file_bytes("/log").expect("read");
    let mut r = reader(data, BLOCK_SIZE);
    let mut got = Vec::new();
    while let LogRead::Record { data, .. } = r.read().expect("read") {
        got.push(data);
    }
    assert_eq!(got, records[..39]);
    let at = r.position();
    assert_eq!(at, w.file_len());
    w.add_record(&records[39]).expect("append");
    let data = fs.read_file_bytes("/log").expect("read");
    let mut resumed = reader_at(data, at, BLOCK_SIZE);
    assert!(
        matches!(resumed.read().expect("read"), LogRead::Record { data, .. } if data == records[39])
    );
    assert_eq!(resumed.read().expect("read"), LogRead::Eof);
}

/// A WAL written through a mapping (`Options::allow_mmap_writes`) reads back as one written
/// with `write(2)`: every record in order, then the preallocated zeros read as the end, with
/// no flush or sync (what a process crash leaves).
#[test]
fn a_log_written_through_a_mapping_reads_back_without_a_flush() {
    use crate::fs::{FileSystem, PosixFileSystem};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("000001.log");
    let fs = PosixFileSystem::new();
    let mut w = LogWriter::preallocating(fs.create_mapped(&path).expect("create"), 40_000);
    let records: Vec<Vec<u8>> = (0..60u8)
        .map(|i| pattern([10, 3000, 40_000, 7, 32_760, 100][i as usize % 6], i))
        .collect();
    w.add_marker(b"marker").expect("marker");
    for r in &records {
        w.add_record(r).expect("append");
    }
    let data = std::fs::read(&path).expect("read");
    assert!(data.len() as u64 > w.file_len(), "no zeros preallocated");
    let mut r = reader(data, BLOCK_SIZE);
    let mut got = Vec::new();
    while let LogRead::Record { data, .. } = r.read().expect("read") {
        got.push(data);
    }
    assert_eq!(got[0], b"marker");
    assert_eq!(got[1..], records[..]);
    assert_eq!(r.zero_tail(), Some(w.file_len()));
    assert_eq!(w.finish().expect("finish"), w.file_len());
    assert_eq!(std::fs::metadata(&path).expect("size").len(), w.file_len());
}
