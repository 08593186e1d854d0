//! Merges several internal iterators into one ordered stream, in both directions.
//!
//! Children are scanned linearly for the smallest (or largest) key: there are few of them (the
//! memtables, the L0 files and one per deeper level), and a linear scan over a handful of
//! children beats a heap's bookkeeping. An error in any child stops the whole merge, because
//! skipping a failed child would silently hide its keys.

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use std::cmp::Ordering;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// An iterator over the union of its children, in internal-key order.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    direction: Direction,
    error: Option<Error>,
}

impl MergingIterator {
    /// Merges `children`. Entries with equal internal keys (which the engine never produces)
    /// come out in child order.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            current: None,
            direction: Direction::Forward,
            error: None,
        }
    }

    /// Records the first child error; returns true if there is one.
    fn check_errors(&mut self) -> bool {
        if self.error.is_some() {
            return true;
        }
        for c in &self.children {
            if !c.valid() {
                if let Err(e) = c.status() {
                    self.error = Some(e);
                    return true;
                }
            }
        }
        false
    }

    fn find_smallest(&mut self) {
        self.current = None;
        if self.check_errors() {
            return;
        }
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            best = match best {
                Some(b) if compare_internal(c.key(), self.children[b].key()) != Ordering::Less => {
                    Some(b)
                }
                _ => Some(i),
            };
        }
        self.current = best;
    }

    fn find_largest(&mut self) {
        self.current = None;
        if self.check_errors() {
            return;
        }
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate().rev() {
            if !c.valid() {
                continue;
            }
            best = match best {
                Some(b)
                    if compare_internal(c.key(), self.children[b].key()) != Ordering::Greater =>
                {
                    Some(b)
                }
                _ => Some(i),
            };
        }
        self.current = best;
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.error.is_none() && self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.find_smallest();
    }

    fn seek_to_last(&mut self) {
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.find_largest();
    }

    fn seek(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.seek(target);
        }
        self.direction = Direction::Forward;
        self.find_smallest();
    }

    fn next(&mut self) {
        let Some(cur) = self.current else {
            return;
        };
        if self.direction != Direction::Forward {
            // Every other child sits before key(); move each to the first entry after key().
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                c.seek(&key);
                if c.valid() && compare_internal(&key, c.key()) == Ordering::Equal {
                    c.next();
                }
            }
            self.direction = Direction::Forward;
        }
        self.children[cur].next();
        self.find_smallest();
    }

    fn prev(&mut self) {
        let Some(cur) = self.current else {
            return;
        };
        if self.direction != Direction::Reverse {
            // Every other child sits after key(); move each to the last entry before key().
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                c.seek(&key);
                if c.valid() {
                    c.prev();
                } else if c.status().is_ok() {
                    c.seek_to_last();
                }
            }
            self.direction = Direction::Reverse;
        }
        self.children[cur].prev();
        self.find_largest();
    }

    fn key(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].value(),
            None => &[],
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
pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: Option<usize>,
}

#[cfg(test)]
impl VecIterator {
    /// `entries` must be sorted by internal key.
    pub fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
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
