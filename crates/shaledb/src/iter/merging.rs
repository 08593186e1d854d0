//! Merges several internal iterators into one ordered stream, in both directions.
//!
//! The valid children sit in a binary heap keyed on (internal key, child index): a min-heap
//! while moving forward, a max-heap while moving backward. The root is the current entry, so a
//! step advances one child and sifts it down (two comparisons when it stays on top, which is
//! the common case for a sequential scan), instead of comparing every child. A database has
//! many children (memtables, every L0 file, one per deeper level), so this matters.
//!
//! Ties: entries with equal internal keys (which the engine never produces) come out in child
//! order going forward and in reverse child order going backward: the merge behaves as if every
//! entry were tagged with its child's index.
//!
//! Changing direction re-positions every non-current child relative to the current entry (as
//! LevelDB's MergingIterator does): going forward each sits on its first entry after the
//! current one, going backward on its last entry before it.
//!
//! An error in any child stops the whole merge, because skipping a failed child would silently
//! hide its keys.

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use std::cmp::Ordering;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Direction {
    Forward,
    Reverse,
}

/// An iterator over the union of its children, in internal-key order.
pub(crate) struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// Indexes of the valid children, heap-ordered for `direction`; `heap[0]` is current.
    heap: Vec<usize>,
    direction: Direction,
    error: Option<Error>,
    /// The current key, copied when changing direction (reused so a switch does not allocate).
    switch_key: Vec<u8>,
}

impl MergingIterator {
    /// Merges `children`. Entries with equal internal keys come out in child order (forward).
    pub(crate) fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        let heap = Vec::with_capacity(children.len());
        MergingIterator {
            children,
            heap,
            direction: Direction::Forward,
            error: None,
            switch_key: Vec::new(),
        }
    }

    /// True if child `a` comes before child `b` in the current direction.
    fn before(&self, a: usize, b: usize) -> bool {
        let ord = compare_internal(self.children[a].key(), self.children[b].key()).then(a.cmp(&b));
        match self.direction {
            Direction::Forward => ord == Ordering::Less,
            Direction::Reverse => ord == Ordering::Greater,
        }
    }

    fn sift_down(&mut self, mut pos: usize) {
        let n = self.heap.len();
        loop {
            let left = 2 * pos + 1;
            if left >= n {
                return;
            }
            let right = left + 1;
            let mut best = left;
            if right < n && self.before(self.heap[right], self.heap[left]) {
                best = right;
            }
            if !self.before(self.heap[best], self.heap[pos]) {
                return;
            }
            self.heap.swap(pos, best);
            pos = best;
        }
    }

    /// Rebuilds the heap from every child's position, after they all moved. Stops on the first
    /// child error.
    fn rebuild_heap(&mut self) {
        self.heap.clear();
        if self.error.is_some() {
            return;
        }
        for (i, c) in self.children.iter().enumerate() {
            if c.valid() {
                self.heap.push(i);
            } else if let Err(e) = c.status() {
                self.error = Some(e);
                self.heap.clear();
                return;
            }
        }
        for pos in (0..self.heap.len() / 2).rev() {
            self.sift_down(pos);
        }
    }

    /// Restores the heap after the current child (the root) moved.
    fn fix_root(&mut self) {
        let Some(&cur) = self.heap.first() else {
            return;
        };
        let child = &self.children[cur];
        if child.valid() {
            self.sift_down(0);
            return;
        }
        if let Err(e) = child.status() {
            self.error = Some(e);
            self.heap.clear();
            return;
        }
        let last = self.heap.len() - 1;
        self.heap.swap(0, last);
        self.heap.pop();
        self.sift_down(0);
    }

    /// Puts every child but `cur` on its first entry after the current one (key `key`).
    fn position_others_forward(&mut self, cur: usize, key: &[u8]) {
        for (i, c) in self.children.iter_mut().enumerate() {
            if i == cur {
                continue;
            }
            c.seek(key);
            // An equal key in a lower-numbered child was already yielded before `cur`'s.
            if i < cur && c.valid() && compare_internal(c.key(), key) == Ordering::Equal {
                c.next();
            }
        }
    }

    /// Puts every child but `cur` on its last entry before the current one (key `key`).
    fn position_others_backward(&mut self, cur: usize, key: &[u8]) {
        for (i, c) in self.children.iter_mut().enumerate() {
            if i == cur {
                continue;
            }
            c.seek(key);
            if c.valid() {
                // An equal key in a lower-numbered child comes before `cur`'s: keep it.
                let keep = i < cur && compare_internal(c.key(), key) == Ordering::Equal;
                if !keep {
                    c.prev();
                }
            } else if c.status().is_ok() {
                c.seek_to_last();
            }
        }
    }

    /// Re-positions the other children for moving in `dir`; the current child stays.
    fn switch_direction(&mut self, cur: usize, dir: Direction) {
        let mut key = std::mem::take(&mut self.switch_key);
        key.clear();
        key.extend_from_slice(self.children[cur].key());
        match dir {
            Direction::Forward => self.position_others_forward(cur, &key),
            Direction::Reverse => self.position_others_backward(cur, &key),
        }
        self.switch_key = key;
        self.direction = dir;
        // Every other child now sits on the far side of `cur`, so `cur` is the root again.
        self.rebuild_heap();
        debug_assert!(self.error.is_some() || self.heap.first() == Some(&cur));
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.error.is_none() && !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) {
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.rebuild_heap();
    }

    fn seek_to_last(&mut self) {
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.rebuild_heap();
    }

    fn seek(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.seek(target);
        }
        self.direction = Direction::Forward;
        self.rebuild_heap();
    }

    fn next(&mut self) {
        let Some(&cur) = self.heap.first() else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        if self.direction != Direction::Forward {
            self.switch_direction(cur, Direction::Forward);
            if self.error.is_some() {
                return;
            }
        }
        self.children[cur].next();
        self.fix_root();
    }

    fn prev(&mut self) {
        let Some(&cur) = self.heap.first() else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        if self.direction != Direction::Reverse {
            self.switch_direction(cur, Direction::Reverse);
            if self.error.is_some() {
                return;
            }
        }
        self.children[cur].prev();
        self.fix_root();
    }

    fn key(&self) -> &[u8] {
        match self.heap.first() {
            Some(&i) if self.error.is_none() => self.children[i].key(),
            _ => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.heap.first() {
            Some(&i) if self.error.is_none() => self.children[i].value(),
            _ => &[],
        }
    }

    fn pinned_value(&self) -> Option<crate::Value> {
        match self.heap.first() {
            Some(&i) if self.error.is_none() => self.children[i].pinned_value(),
            _ => None,
        }
    }

    fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.duplicate());
        }
        for c in &self.children {
            c.status()?;
        }
        Ok(())
    }
}

/// An iterator over a sorted in-memory list of entries, for tests.
#[cfg(test)]
pub(crate) struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: Option<usize>,
}

#[cfg(test)]
impl VecIterator {
    /// `entries` must be sorted by internal key.
    pub(crate) fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        VecIterator { entries, pos: None }
    }
}

#[cfg(test)]
impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }
    fn seek_to_first(&mut self) {
        self.pos = if self.entries.is_empty() {
            None
        } else {
            Some(0)
        };
    }
    fn seek_to_last(&mut self) {
        self.pos = self.entries.len().checked_sub(1);
    }
    fn seek(&mut self, target: &[u8]) {
        let i = self
            .entries
            .partition_point(|(k, _)| compare_internal(k, target) == Ordering::Less);
        self.pos = if i < self.entries.len() {
            Some(i)
        } else {
            None
        };
    }
    fn next(&mut self) {
        self.pos = self.pos.map(|p| p + 1).filter(|&p| p < self.entries.len());
    }
    fn prev(&mut self) {
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
    }
    fn key(&self) -> &[u8] {
        self.pos
            .and_then(|p| self.entries.get(p))
            .map_or(&[][..], |(k, _)| k)
    }
    fn value(&self) -> &[u8] {
        self.pos
            .and_then(|p| self.entries.get(p))
            .map_or(&[][..], |(_, v)| v)
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::EmptyIterator;
    use crate::key::{make_internal_key, ValueKind};

    fn ik(k: &str, seq: u64) -> Vec<u8> {
        make_internal_key(k.as_bytes(), seq, ValueKind::Put)
    }

    fn source(keys: &[(&str, u64)]) -> Box<dyn InternalIterator> {
        let mut v: Vec<_> = keys.iter().map(|(k, s)| (ik(k, *s), vec![])).collect();
        v.sort_by(|a, b| compare_internal(&a.0, &b.0));
        Box::new(VecIterator::new(v))
    }

    fn all_keys(it: &mut MergingIterator) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        it.seek_to_first();
        while it.valid() {
            out.push(it.key().to_vec());
            it.next();
        }
        out
    }

    #[test]
    fn merges_and_switches_direction() {
        let mut m = MergingIterator::new(vec![
            source(&[("a", 1), ("c", 3), ("e", 5)]),
            source(&[("b", 2), ("c", 9), ("f", 6)]),
            Box::new(EmptyIterator::new()),
        ]);
        let expected = vec![
            ik("a", 1),
            ik("b", 2),
            ik("c", 9),
            ik("c", 3),
            ik("e", 5),
            ik("f", 6),
        ];
        assert_eq!(all_keys(&mut m), expected);
        // Backward from the end.
        m.seek_to_last();
        let mut back = Vec::new();
        while m.valid() {
            back.push(m.key().to_vec());
            m.prev();
        }
        let mut rev = expected.clone();
        rev.reverse();
        assert_eq!(back, rev);
        // Zig-zag: seek to c@3, prev gives c@9, next gives c@3 again, next e.
        m.seek(&ik("c", 3));
        assert_eq!(m.key(), &ik("c", 3)[..]);
        m.prev();
        assert_eq!(m.key(), &ik("c", 9)[..]);
        m.prev();
        assert_eq!(m.key(), &ik("b", 2)[..]);
        m.next();
        assert_eq!(m.key(), &ik("c", 9)[..]);
        m.next();
        assert_eq!(m.key(), &ik("c", 3)[..]);
        m.next();
        assert_eq!(m.key(), &ik("e", 5)[..]);
    }

    /// A child that fails (turns invalid with a corruption status) on its `fail_after`-th move.
    struct FailingChild {
        inner: VecIterator,
        moves_left: usize,
        failed: bool,
    }

    impl FailingChild {
        fn tick(&mut self) {
            if self.moves_left == 0 {
                self.failed = true;
            } else {
                self.moves_left -= 1;
            }
        }
    }

    impl InternalIterator for FailingChild {
        fn valid(&self) -> bool {
            !self.failed && self.inner.valid()
        }
        fn seek_to_first(&mut self) {
            self.tick();
            self.inner.seek_to_first();
        }
        fn seek_to_last(&mut self) {
            self.tick();
            self.inner.seek_to_last();
        }
        fn seek(&mut self, target: &[u8]) {
            self.tick();
            self.inner.seek(target);
        }
        fn next(&mut self) {
            self.tick();
            self.inner.next();
        }
        fn prev(&mut self) {
            self.tick();
            self.inner.prev();
        }
        fn key(&self) -> &[u8] {
            self.inner.key()
        }
        fn value(&self) -> &[u8] {
            self.inner.value()
        }
        fn status(&self) -> Result<()> {
            if self.failed {
                Err(Error::corruption("failing.sst", 42, "injected"))
            } else {
                Ok(())
            }
        }
    }

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// The model: every entry tagged with its child index, sorted by (internal key, child).
    struct Model {
        entries: Vec<(Vec<u8>, usize)>,
        pos: Option<usize>,
    }

    impl Model {
        fn seek(&mut self, target: &[u8]) {
            let i = self
                .entries
                .partition_point(|(k, _)| compare_internal(k, target) == Ordering::Less);
            self.pos = (i < self.entries.len()).then_some(i);
        }
        fn current(&self) -> Option<(Vec<u8>, Vec<u8>)> {
            self.pos.map(|p| {
                let (k, c) = &self.entries[p];
                (k.clone(), format!("child{c}").into_bytes())
            })
        }
    }

    fn random_children(rng: &mut rand::rngs::StdRng, n_children: usize) -> (Vec<Entries>, Model) {
        use rand::Rng;
        let mut lists = Vec::new();
        let mut all = Vec::new();
        for c in 0..n_children {
            // A small key space so that equal internal keys across children are common.
            let mut keys: Vec<Vec<u8>> = (0..rng.gen_range(0..12))
                .map(|_| {
                    ik(
                        &format!("k{:02}", rng.gen_range(0..30)),
                        rng.gen_range(1..4),
                    )
                })
                .collect();
            keys.sort_by(|a, b| compare_internal(a, b));
            keys.dedup();
            for k in &keys {
                all.push((k.clone(), c));
            }
            lists.push(
                keys.into_iter()
                    .map(|k| (k, format!("child{c}").into_bytes()))
                    .collect(),
            );
        }
        all.sort_by(|a, b| compare_internal(&a.0, &b.0).then(a.1.cmp(&b.1)));
        (
            lists,
            Model {
                entries: all,
                pos: None,
            },
        )
    }

    fn current(m: &MergingIterator) -> Option<(Vec<u8>, Vec<u8>)> {
        m.valid().then(|| (m.key().to_vec(), m.value().to_vec()))
    }

    #[test]
    fn randomized_against_a_sorted_model() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_4e47);
        for round in 0..300 {
            let n_children = rng.gen_range(0..40);
            let (lists, mut model) = random_children(&mut rng, n_children);
            let mut m = MergingIterator::new(
                lists
                    .into_iter()
                    .map(|l| Box::new(VecIterator::new(l)) as Box<dyn InternalIterator>)
                    .collect(),
            );
            for step in 0..200 {
                let op = rng.gen_range(0..10);
                match op {
                    0 => {
                        m.seek_to_first();
                        model.pos = (!model.entries.is_empty()).then_some(0);
                    }
                    1 => {
                        m.seek_to_last();
                        model.pos = model.entries.len().checked_sub(1);
                    }
                    2 => {
                        let t = ik(
                            &format!("k{:02}", rng.gen_range(0..31)),
                            rng.gen_range(0..5),
                        );
                        m.seek(&t);
                        model.seek(&t);
                    }
                    3..=6 => {
                        if model.pos.is_none() {
                            continue;
                        }
                        m.next();
                        model.pos = model
                            .pos
                            .map(|p| p + 1)
                            .filter(|&p| p < model.entries.len());
                    }
                    _ => {
                        if model.pos.is_none() {
                            continue;
                        }
                        m.prev();
                        model.pos = model.pos.and_then(|p| p.checked_sub(1));
                    }
                }
                assert_eq!(
                    current(&m),
                    model.current(),
                    "round {round} step {step} op {op}"
                );
                assert!(m.status().is_ok());
            }
        }
    }

    #[test]
    fn direction_switch_at_every_step_visits_each_entry() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let (lists, model) = random_children(&mut rng, 25);
        let mut m = MergingIterator::new(
            lists
                .into_iter()
                .map(|l| Box::new(VecIterator::new(l)) as Box<dyn InternalIterator>)
                .collect(),
        );
        // next, prev, next: net one step forward, two direction changes per entry.
        m.seek_to_first();
        let mut seen = Vec::new();
        while m.valid() {
            seen.push(current(&m).unwrap_or_default());
            m.next();
            if !m.valid() {
                break;
            }
            m.prev();
            assert_eq!(current(&m).as_ref(), seen.last());
            m.next();
        }
        let expected: Vec<_> = model
            .entries
            .iter()
            .map(|(k, c)| (k.clone(), format!("child{c}").into_bytes()))
            .collect();
        assert_eq!(seen, expected);
        // And backward, with prev, next, prev.
        m.seek_to_last();
        let mut back = Vec::new();
        while m.valid() {
            back.push(current(&m).unwrap_or_default());
            m.prev();
            if !m.valid() {
                break;
            }
            m.next();
            assert_eq!(current(&m).as_ref(), back.last());
            m.prev();
        }
        back.reverse();
        assert_eq!(back, expected);
    }

    #[test]
    fn equal_keys_come_out_in_child_order() {
        let mut m = MergingIterator::new(vec![
            Box::new(VecIterator::new(vec![(ik("a", 1), b"0".to_vec())])),
            Box::new(VecIterator::new(vec![(ik("a", 1), b"1".to_vec())])),
            Box::new(VecIterator::new(vec![(ik("a", 1), b"2".to_vec())])),
        ]);
        m.seek_to_first();
        let mut vals = Vec::new();
        while m.valid() {
            vals.push(m.value().to_vec());
            m.next();
        }
        assert_eq!(vals, vec![b"0".to_vec(), b"1".to_vec(), b"2".to_vec()]);
        m.seek_to_last();
        assert_eq!(m.value(), b"2");
        m.prev();
        assert_eq!(m.value(), b"1");
        m.next();
        assert_eq!(m.value(), b"2");
        m.prev();
        m.prev();
        assert_eq!(m.value(), b"0");
        m.next();
        assert_eq!(m.value(), b"1");
    }

    #[test]
    fn an_error_in_any_child_at_any_step_stops_the_merge() {
        let keys = |c: usize| -> Vec<(Vec<u8>, Vec<u8>)> {
            (0..20)
                .map(|i| (ik(&format!("k{:02}", i * 3 + c), 1), vec![c as u8]))
                .collect()
        };
        for failing in 0..3 {
            for fail_after in 0..25 {
                for backward in [false, true] {
                    let children: Vec<Box<dyn InternalIterator>> = (0..3)
                        .map(|c| -> Box<dyn InternalIterator> {
                            if c == failing {
                                Box::new(FailingChild {
                                    inner: VecIterator::new(keys(c)),
                                    moves_left: fail_after,
                                    failed: false,
                                })
                            } else {
                                Box::new(VecIterator::new(keys(c)))
                            }
                        })
                        .collect();
                    let mut m = MergingIterator::new(children);
                    if backward {
                        m.seek_to_last();
                    } else {
                        m.seek_to_first();
                    }
                    let mut steps = 0;
                    while m.valid() {
                        steps += 1;
                        // Zig-zag now and then so direction changes meet the error too.
                        match (backward, steps % 7 == 0) {
                            (false, false) | (true, true) => m.next(),
                            _ => m.prev(),
                        }
                        assert!(steps < 1000);
                    }
                    let err = m.status().expect_err("the injected error must show");
                    assert!(err.to_string().contains("failing.sst"), "{err}");
                    assert!(m.key().is_empty());
                    // The error is sticky: re-seeking does not hide it.
                    m.seek_to_first();
                    assert!(!m.valid());
                    assert!(m.status().is_err());
                }
            }
        }
    }

    #[test]
    fn child_error_stops_the_merge() {
        let mut m = MergingIterator::new(vec![
            source(&[("a", 1)]),
            Box::new(EmptyIterator::with_error(Error::corruption(
                "x.sst", 7, "bad",
            ))),
        ]);
        m.seek_to_first();
        assert!(!m.valid());
        assert!(m.status().is_err());
    }
}
