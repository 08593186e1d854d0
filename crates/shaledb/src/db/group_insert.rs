//! A write group's memtable inserts shared among its members (RocksDB's
//! `allow_concurrent_memtable_write`).
//!
//! Once the leader has appended the group to the WAL, the group is split into its members'
//! parts (each member's batch, as `build_group` appended it) and posted to the members still
//! yielding for their turn. The leader and every member that sees the post claim parts one at a
//! time from a shared counter and insert them with [`MemTable::add_concurrent`]; a member asleep
//! never claims one, so the leader is never left waiting for a thread that is not running its
//! part. The leader waits until every part is inserted before it publishes the group's last
//! sequence number: no reader sees a sequence whose entries are not all in place.

use crate::memtable::MemTable;
use crate::write_batch::{BatchEntry, WriteBatch, BATCH_HEADER_SIZE};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Where one member's entries start in the group's merged batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Part {
    /// Byte offset of its first entry.
    pub(super) offset: usize,
    /// Entries of the group before it (its first sequence number is the group's plus this).
    pub(super) entries_before: u64,
}

/// One group's inserts, claimed part by part by whichever thread gets there first.
pub(super) struct GroupInserts {
    batch: WriteBatch,
    first_seq: u64,
    /// Each family's memtable at the time the group was built.
    mems: Vec<(u32, Arc<MemTable>)>,
    /// Every member's part, the leader's first; part `i` ends where part `i + 1` starts.
    parts: Vec<Part>,
    /// The next part to claim (may run past the end).
    next: AtomicUsize,
    /// Parts fully inserted.
    done: AtomicUsize,
}

impl GroupInserts {
    /// The inserts of `batch` (its entries from sequence `first_seq` on), made of the leader's
    /// part and the members' `member_parts`.
    pub(super) fn new(
        batch: WriteBatch,
        first_seq: u64,
        mems: Vec<(u32, Arc<MemTable>)>,
        member_parts: &[Part],
    ) -> Self {
        let leader = Part {
            offset: BATCH_HEADER_SIZE,
            entries_before: 0,
        };
        GroupInserts {
            batch,
            first_seq,
            mems,
            parts: std::iter::once(leader)
                .chain(member_parts.iter().copied())
                .collect(),
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
        }
    }

    /// Inserts parts nobody has claimed yet until none is left. Returns at once if all are
    /// claimed (a late or repeated call does nothing).
    pub(super) fn help(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.parts.len() {
                return;
            }
            self.insert_part(i);
            // Release: the leader's Acquire load that sees the count sees the entries.
            self.done.fetch_add(1, Ordering::Release);
        }
    }

    /// Waits until every part is inserted (by the caller's [`help`](Self::help) or others').
    pub(super) fn wait(&self) {
        let mut spins = 0u32;
        while self.done.load(Ordering::Acquire) < self.parts.len() {
            // A part is a few microseconds of inserts: spin briefly, then let the thread
            // inserting it have the core (writers may outnumber cores).
            if spins < 64 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    fn insert_part(&self, i: usize) {
        let part = self.parts[i];
        let end = self
            .parts
            .get(i + 1)
            .map_or(self.batch.approximate_size(), |p| p.offset);
        let entries = self.batch.iter_cf_between(part.offset, end);
        let first = self.first_seq + part.entries_before;
        insert_entries(entries, first, &self.mems, true);
    }
}

/// Inserts `entries` (sequences from `first` on) into their families' memtables in `mems`,
/// with `MemTable::add_concurrent` if `concurrent`, else `MemTable::add` (the leader alone).
pub(super) fn insert_entries<'a>(
    entries: impl Iterator<Item = (u32, BatchEntry<'a>)>,
    first: u64,
    mems: &[(u32, Arc<MemTable>)],
    concurrent: bool,
) {
    for (i, (cf, e)) in entries.enumerate() {
        // A family dropped since the batch was checked has no memtable here: its entries go
        // nowhere (the family's data is being discarded anyway).
        let Some((_, mem)) = mems.iter().find(|(id, _)| *id == cf) else {
            continue;
        };
        let (kind, k, v) = e.parts();
        match concurrent {
            true => mem.add_concurrent(first + i as u64, kind, k, v),
            false => mem.add(first + i as u64, kind, k, v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::InternalIterator;
    use crate::key::{parse_internal_key, ValueKind};
    use crate::value::LookupResult;

    /// A group of `members` batches of `per` puts each (key `m-i`, value `m.i`), merged as
    /// `build_group` merges them, with the members' parts.
    fn group(members: usize, per: usize) -> (WriteBatch, Vec<Part>) {
        let mut merged = WriteBatch::new();
        let mut parts = Vec::new();
        for m in 0..members {
            let mut b = WriteBatch::new();
            for i in 0..per {
                b.put(format!("{m}-{i}"), format!("{m}.{i}"));
            }
            if m == 0 {
                merged = b;
            } else {
                parts.push(Part {
                    offset: merged.approximate_size(),
                    entries_before: merged.len() as u64,
                });
                merged.append(&b);
            }
        }
        (merged, parts)
    }

    #[test]
    fn every_entry_is_inserted_once_with_its_own_sequence_whoever_helps() {
        let (batch, parts) = group(5, 7);
        let mem = Arc::new(MemTable::new(1));
        let g = Arc::new(GroupInserts::new(
            batch,
            100,
            vec![(0, mem.clone())],
            &parts,
        ));
        std::thread::scope(|s| {
            for _ in 0..3 {
                let g = g.clone();
                s.spawn(move || g.help());
            }
            g.help();
            g.wait();
        });
        g.help(); // Late: nothing left to claim.
        assert_eq!(mem.len(), 35);
        for m in 0..5u64 {
            for i in 0..7u64 {
                let key = format!("{m}-{i}");
                let seq = 100 + m * 7 + i;
                // Visible at its own sequence, not before.
                let LookupResult::Found(v) = mem.get(key.as_bytes(), seq) else {
                    panic!("{key} missing at {seq}");
                };
                assert_eq!(&*v, format!("{m}.{i}").as_bytes());
                assert!(matches!(
                    mem.get(key.as_bytes(), seq - 1),
                    LookupResult::NotPresent
                ));
            }
        }
        // In order at level 0, each key once.
        let mut it = mem.iter();
        let mut seen = Vec::new();
        it.seek_to_first();
        while it.valid() {
            let parsed = parse_internal_key(it.key()).expect("well-formed key");
            assert_eq!(parsed.kind, ValueKind::Put);
            seen.push(parsed.user_key.to_vec());
            it.next();
        }
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!((seen.len(), seen), (35, sorted));
    }

    #[test]
    fn entries_of_a_family_without_a_memtable_go_nowhere() {
        let mut b = WriteBatch::new();
        b.put_in(0, b"a", b"1");
        b.put_in(3, b"b", b"2");
        b.put_in(0, b"c", b"3");
        let mem = Arc::new(MemTable::new(1));
        let g = GroupInserts::new(b, 10, vec![(0, mem.clone())], &[]);
        g.help();
        g.wait();
        assert_eq!(mem.len(), 2);
        assert!(matches!(mem.get(b"c", 12), LookupResult::Found(v) if &*v == b"3"));
    }
}
