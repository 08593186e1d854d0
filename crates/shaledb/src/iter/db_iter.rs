//! The user-facing iterator: turns the merged stream of internal entries (every version of
//! every key, tombstones included) into the user's view at one sequence number: one entry per
//! live key, within optional bounds, in either direction.
//!
//! Moving forward, the inner iterator sits on the entry that yields the current key. Moving
//! backward, the inner iterator sits just before all entries of the current key, whose value is
//! held in `saved_value` (the same scheme as LevelDB's DBIter), sharing its table block where
//! it can rather than copied.

use crate::clock::{self, Clock, Expiry};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, SequenceNumber, ValueKind, KIND_FOR_SEEK, MAX_SEQUENCE};
use crate::merge::{self, MergeOperator};
use crate::prefix::PrefixExtractor;
use crate::range_del::FragmentedRangeTombstones;
use std::any::Any;
use std::sync::Arc;

/// Rebuilds an iterator's inputs over the database's latest state: the merged internal
/// iterator, the sequence number to read at, and what must stay alive while it is read.
pub(crate) type Refresher = Arc<
    dyn Fn() -> (
            Box<dyn InternalIterator>,
            SequenceNumber,
            Arc<dyn Any + Send + Sync>,
            Option<Arc<FragmentedRangeTombstones>>,
            Option<BlobResolver>,
        ) + Send
        + Sync,
>;

/// Reads the value a blob reference (second argument) stored under a user key (first)
/// points at, from the blob files of the iterator's read view, through the iterator's
/// readahead (third).
pub(crate) type BlobResolver =
    Arc<dyn Fn(&[u8], &[u8], &mut crate::blob::BlobReadahead) -> Result<Vec<u8>> + Send + Sync>;

/// Builds the merged internal iterator of the iterator's read view for a seek within one
/// prefix (`Some`: tables whose prefix bloom rules it out left out) or for any seek (`None`).
pub(crate) type PrefixRebuild =
    Arc<dyn Fn(Option<&[u8]>) -> Box<dyn InternalIterator> + Send + Sync>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// An ordered cursor over the database as of one sequence number (a snapshot or the moment it
/// was created). Obtained from [`crate::Db::iter`].
///
/// ```
/// # use shaledb::{Db, Options, ReadOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = Db::open(dir.path(), Options::default()).unwrap();
/// db.put(b"a", b"1").unwrap();
/// db.put(b"b", b"2").unwrap();
/// let mut it = db.iter(&ReadOptions::default());
/// it.seek_to_first();
/// while it.valid() {
///     println!("{:?} = {:?}", it.key(), it.value());
///     it.next();
/// }
/// it.status().unwrap(); // an IO or corruption error would show here, never as a quiet end
/// ```
pub struct DbIterator {
    inner: Box<dyn InternalIterator>,
    sequence: SequenceNumber,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    saved_key: Vec<u8>,
    saved_value: SavedValue,
    /// An entry the inner iterator produced that is not an internal key; ends iteration.
    error: Option<Error>,
    /// The internal key a seek positions the inner iterator at; reused across seeks.
    lookup: Vec<u8>,
    /// Combines merge operands into values (`None`: operands are an error).
    merge_operator: Option<Arc<dyn MergeOperator>>,
    /// Moving forward, the current key's newest version was a merge operand: its key and
    /// merged value are in `saved_key`/`saved_value`, and the inner iterator has moved on.
    merged: bool,
    /// A key's merge operands while its value is computed (buffers reused).
    operands: Vec<Vec<u8>>,
    /// Moves the iterator to the latest state (`refresh`); `None` for snapshot iterators.
    refresher: Option<Refresher>,
    /// Refresh before every seek (`ReadOptions::tailing`).
    tailing: bool,
    /// `ReadOptions::prefix_same_as_start` with the family's extractor.
    prefix_extractor: Option<Arc<dyn PrefixExtractor>>,
    /// The prefix of the last seek target, which every yielded key must share.
    active_prefix: Option<Vec<u8>>,
    /// The active prefix is the extractor's prefix of the seek target (not the target itself).
    prefix_in_domain: bool,
    /// Rebuilds `inner` for a prefix seek (tables skipped by prefix bloom) and back.
    prefix_rebuild: Option<PrefixRebuild>,
    /// The prefix `inner` was built for by `prefix_rebuild` (`None`: every table).
    inner_prefix: Option<Vec<u8>>,
    /// Every range tombstone of the read view (`None`: there are none); an entry below a
    /// visible tombstone over its key reads as a delete.
    range_dels: Option<Arc<FragmentedRangeTombstones>>,
    /// The fragment of `range_dels` last looked at (keys come in order).
    range_del_hint: std::cell::Cell<usize>,
    /// The family's TTL in seconds and the clock, when it has one: its values end with their
    /// write time, and expired ones read as deleted as of `expiry.now`.
    ttl: Option<(u64, Arc<dyn Clock>)>,
    expiry: Option<Expiry>,
    /// Resolves blob references (`None`: the view has no blob files).
    blobs: Option<BlobResolver>,
    /// The current entry is a blob reference: forward, the inner iterator's value; backward,
    /// `saved_value`. `value()` reads the blob once, on first use, into `blob_value`.
    current_blob: bool,
    blob_value: std::cell::OnceCell<Result<Vec<u8>>>,
    /// Reads ahead in blob files whose records this iterator reads in order (kept across
    /// refreshes: a file number always names the same bytes).
    blob_readahead: std::cell::RefCell<crate::blob::BlobReadahead>,
    /// Times seeks (`Options::statistics`).
    stats: Option<Arc<crate::statistics::Statistics>>,
    // Keeps the memtables, version and snapshot this iterator reads alive.
    _pin: Option<Arc<dyn Any + Send + Sync>>,
}

impl DbIterator {
    /// Wraps a merged internal iterator.
    pub(crate) fn new(
        inner: Box<dyn InternalIterator>,
        sequence: SequenceNumber,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        pin: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Self {
        DbIterator {
            inner,
            sequence,
            lower,
            upper,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: SavedValue::default(),
            error: None,
            lookup: Vec::new(),
            merge_operator: None,
            merged: false,
            operands: Vec::new(),
            refresher: None,
            tailing: false,
            prefix_extractor: None,
            active_prefix: None,
            prefix_in_domain: false,
            prefix_rebuild: None,
            inner_prefix: None,
            range_dels: None,
            range_del_hint: std::cell::Cell::new(0),
            ttl: None,
            expiry: None,
            blobs: None,
            current_blob: false,
            blob_value: std::cell::OnceCell::new(),
            blob_readahead: Default::default(),
            stats: None,
            _pin: pin,
        }
    }

    /// Records seek latencies in `stats`.
    pub(crate) fn with_statistics(
        mut self,
        stats: Option<Arc<crate::statistics::Statistics>>,
    ) -> Self {
        self.stats = stats;
        self
    }

    /// Runs a positioning call, timed when statistics are kept.
    #[inline]
    fn timed_seek(&mut self, seek: impl FnOnce(&mut Self)) {
        // Taken out for the call (a move, not a reference count).
        match self.stats.take() {
            None => seek(self),
            Some(s) => {
                let start = std::time::Instant::now();
                seek(self);
                s.record_since(crate::statistics::HistogramKind::SeekMicros, start);
                self.stats = Some(s);
            }
        }
    }

    /// Lets the iterator read values stored in blob files.
    pub(crate) fn with_blobs(mut self, blobs: Option<BlobResolver>) -> Self {
        self.blobs = blobs;
        self
    }

    /// Forgets the current entry's blob value (the iterator moves).
    fn clear_blob(&mut self) {
        self.current_blob = false;
        self.blob_value = std::cell::OnceCell::new();
    }

    /// Reads the blob `reference` of `user_key` through the view's resolver.
    fn read_blob(&self, user_key: &[u8], reference: &[u8]) -> Result<Vec<u8>> {
        match &self.blobs {
            Some(resolve) => resolve(user_key, reference, &mut self.blob_readahead.borrow_mut()),
            None => Err(Error::corruption(
                "<merged iterator input>",
                0,
                "a blob reference in a view without blob files",
            )),
        }
    }

    /// The current entry's blob value, read on first use.
    fn blob_value(&self) -> &Result<Vec<u8>> {
        self.blob_value.get_or_init(|| {
            let (key, reference) = match self.direction {
                Direction::Forward => (key::user_key(self.inner.key()), self.inner.value()),
                Direction::Reverse => (self.saved_key.as_slice(), self.saved_value.as_slice()),
            };
            self.read_blob(key, reference)
        })
    }

    /// Sets the read view's range tombstones.
    pub(crate) fn with_range_tombstones(
        mut self,
        t: Option<Arc<FragmentedRangeTombstones>>,
    ) -> Self {
        self.range_dels = t;
        self
    }

    /// Sets the family's TTL (seconds) and clock: values carry write times.
    pub(crate) fn with_ttl(mut self, ttl: Option<(u64, Arc<dyn Clock>)>) -> Self {
        self.ttl = ttl;
        self.reset_expiry();
        self
    }

    /// "Now" for expiry: when the iterator was created or last refreshed.
    fn reset_expiry(&mut self) {
        self.expiry = self.ttl.as_ref().map(|(ttl_secs, clock)| Expiry {
            ttl_secs: *ttl_secs,
            now: clock.now_secs(),
        });
    }

    /// The kind the current entry (`p`) reads as: a delete if a visible range tombstone covers
    /// it or it is an expired put. A range-deletion kind among point entries, or a value of a
    /// TTL family without its write time, is corruption.
    #[inline]
    fn read_kind(&self, p: &key::ParsedInternalKey<'_>) -> Result<ValueKind> {
        if p.kind == ValueKind::RangeDeletion {
            return Err(Error::corruption(
                "<merged iterator input>",
                0,
                "a range deletion among point entries",
            ));
        }
        if let Some(t) = &self.range_dels {
            let covering =
                t.max_covering_seq_hinted(p.user_key, self.sequence, &self.range_del_hint);
            if covering > p.sequence {
                return Ok(ValueKind::Delete);
            }
        }
        if let (Some(e), ValueKind::Put | ValueKind::BlobIndex) = (&self.expiry, p.kind) {
            let value = self.inner.value();
            let write_time = match p.kind {
                ValueKind::Put => clock::split_stamp(value).map(|(_, t)| t),
                // A blob reference in a TTL family is followed by the value's write time.
                _ => crate::blob::BlobRef::decode_entry(value).and_then(|(_, t)| t),
            };
            let write_time = write_time.ok_or_else(|| {
                Error::corruption(
                    "<merged iterator input>",
                    0,
                    "a value of a family with a ttl lacks its write time",
                )
            })?;
            if e.expired(write_time) {
                return Ok(ValueKind::Delete);
            }
        }
        Ok(p.kind)
    }

    /// The user's part of a stored value: without its write time in a TTL family.
    #[inline]
    fn user_value<'v>(&self, stored: &'v [u8]) -> &'v [u8] {
        match self.expiry {
            Some(_) => &stored[..stored.len().saturating_sub(clock::WRITE_TIME_LEN)],
            None => stored,
        }
    }

    /// Limits iteration after a seek to the seek target's prefix
    /// (`ReadOptions::prefix_same_as_start`).
    pub(crate) fn with_prefix_same_as_start(
        mut self,
        ex: Option<Arc<dyn PrefixExtractor>>,
    ) -> Self {
        self.prefix_extractor = ex;
        self
    }

    /// Lets prefix seeks leave out the tables whose prefix bloom rules the prefix out.
    pub(crate) fn with_prefix_rebuild(mut self, rebuild: PrefixRebuild) -> Self {
        self.prefix_rebuild = Some(rebuild);
        self
    }

    /// Before a seek to `target`: with prefix blooms, reads through the tables that may hold
    /// the target's prefix (or all of them outside prefix mode).
    fn choose_inner(&mut self, target: Option<&[u8]>) {
        let Some(rebuild) = &self.prefix_rebuild else {
            return;
        };
        let prefix = match (target, &self.prefix_extractor) {
            // Only a true prefix of the target bounds the keys iteration can reach.
            (Some(t), Some(ex)) => ex.prefix(t).filter(|p| t.starts_with(p)),
            _ => None,
        };
        if self.inner_prefix.as_deref() == prefix {
            return;
        }
        self.inner = rebuild(prefix);
        self.inner_prefix = prefix.map(<[u8]>::to_vec);
    }

    /// Ends iteration at a key outside the active prefix.
    fn enforce_prefix(&mut self) {
        let Some(prefix) = &self.active_prefix else {
            return;
        };
        // RocksDB's meaning: keys with the target's prefix (as the extractor gives it), which
        // is also what the prefix blooms of `choose_inner` promise to keep.
        let same = match (&self.prefix_extractor, self.prefix_in_domain) {
            (Some(ex), true) => ex.prefix(self.key()) == Some(prefix.as_slice()),
            _ => self.key().starts_with(prefix),
        };
        if self.valid() && !same {
            self.valid = false;
            self.merged = false;
            self.saved_key.clear();
            self.saved_value.clear();
        }
    }

    /// Sets the prefix a seek to `target` limits iteration to (none without the option).
    fn start_prefix(&mut self, target: &[u8]) {
        // A target outside the extractor's domain keeps itself as the prefix: only keys
        // starting with it can follow.
        let ex = self.prefix_extractor.as_ref();
        let in_domain = ex.and_then(|ex| ex.prefix(target));
        self.prefix_in_domain = in_domain.is_some();
        self.active_prefix = ex.map(|_| in_domain.unwrap_or(target).to_vec());
    }

    /// Lets the iterator move to the latest state: on `refresh`, and before every seek when
    /// `tailing`.
    pub(crate) fn with_refresher(mut self, refresher: Refresher, tailing: bool) -> Self {
        self.refresher = Some(refresher);
        self.tailing = tailing;
        self
    }

    /// Moves the iterator to the database's current state (RocksDB's `Iterator::Refresh`):
    /// it then sees every write acknowledged so far. The iterator is left unpositioned; seek
    /// again. Fails with `InvalidArgument` for an iterator reading a snapshot.
    pub fn refresh(&mut self) -> Result<()> {
        let Some(refresher) = &self.refresher else {
            return Err(Error::InvalidArgument(
                "an iterator reading a snapshot cannot be refreshed".to_string(),
            ));
        };
        let (inner, sequence, pin, range_dels, blobs) = refresher();
        self.blobs = blobs;
        self.clear_blob();
        // The rebuild reads the old view; a refreshed iterator reads every table.
        self.prefix_rebuild = None;
        self.inner_prefix = None;
        self.inner = inner;
        self.sequence = sequence;
        self.range_dels = range_dels;
        self.reset_expiry();
        self._pin = Some(pin);
        self.direction = Direction::Forward;
        self.valid = false;
        self.merged = false;
        self.error = None;
        self.saved_key.clear();
        self.saved_value.clear();
        Ok(())
    }

    /// Before a seek: a tailing iterator moves to the latest state.
    fn refresh_if_tailing(&mut self) {
        if self.tailing {
            // Only iterators with a refresher are tailing, so this cannot fail.
            let _ = self.refresh();
        }
    }

    /// Sets the operator that computes the values of keys holding merge operands.
    pub(crate) fn with_merge_operator(mut self, op: Option<Arc<dyn MergeOperator>>) -> Self {
        self.merge_operator = op;
        self
    }

    /// True if positioned on an entry (false from the moment reading the entry's value from
    /// a blob file failed).
    pub fn valid(&self) -> bool {
        self.valid && self.error.is_none() && !matches!(self.blob_value.get(), Some(Err(_)))
    }

    /// The current key. REQUIRES: `valid()`.
    pub fn key(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match self.direction {
            Direction::Forward if !self.merged => key::user_key(self.inner.key()),
            _ => &self.saved_key,
        }
    }

    /// The current value. REQUIRES: `valid()`.
    ///
    /// A value stored in a blob file (`Options::enable_blob_files`) is read here, on first
    /// use, so a scan that never asks for values reads no blob. If that read fails, this
    /// returns an empty slice, `valid()` turns false and `status()` holds the error: use
    /// [`try_value`](Self::try_value), or check `status()` before trusting a value of a
    /// database with blob files, or iterate with [`Db::range`](crate::Db::range), whose items
    /// carry the error.
    pub fn value(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        if self.current_blob {
            return self.blob_value().as_deref().unwrap_or_default();
        }
        match self.direction {
            Direction::Forward if !self.merged => self.user_value(self.inner.value()),
            _ => self.saved_value.as_slice(),
        }
    }

    /// The current value, or the error reading it from a blob file. REQUIRES: `valid()`.
    ///
    /// ```
    /// use shaledb::{Db, Options, ReadOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let opts = Options { enable_blob_files: true, ..Default::default() };
    /// let db = Db::open(dir.path(), opts).unwrap();
    /// db.put(b"k", vec![7u8; 1000]).unwrap();
    /// db.flush().unwrap(); // the value is now in a blob file
    /// let mut it = db.iter(&ReadOptions::default());
    /// it.seek_to_first();
    /// assert_eq!(it.try_value().unwrap(), &[7u8; 1000][..]);
    /// ```
    pub fn try_value(&self) -> Result<&[u8]> {
        if self.valid && self.current_blob {
            return self.blob_value().as_deref().map_err(Error::duplicate);
        }
        Ok(self.value())
    }

    /// The current value as a [`Value`](crate::Value): moving forward over a table block it
    /// shares the block (no copy); otherwise (memtable entries, after `prev`) a copy.
    /// REQUIRES: `valid()`.
    pub(crate) fn value_pinned(&self) -> Result<crate::Value> {
        if self.valid && self.current_blob {
            return match self.blob_value() {
                Ok(v) => Ok(crate::Value::from(v.as_slice())),
                Err(e) => Err(e.duplicate()),
            };
        }
        Ok(self.value_pinned_inline())
    }

    /// [`value_pinned`](Self::value_pinned) for a value stored in the tables or memtables.
    fn value_pinned_inline(&self) -> crate::Value {
        if self.valid && self.direction == Direction::Forward && !self.merged {
            if let Some(v) = self.inner.pinned_value() {
                let len = self.user_value(v.as_slice()).len();
                return v.truncated(len);
            }
        }
        if self.valid && self.direction == Direction::Reverse {
            return self.saved_value.to_value();
        }
        crate::Value::from(self.value())
    }

    /// The first IO or corruption error met. An error ends iteration (`valid()` turns false)
    /// and shows here; check it after a loop.
    pub fn status(&self) -> Result<()> {
        if let Some(Err(e)) = self.blob_value.get() {
            return Err(e.duplicate());
        }
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => self.inner.status(),
        }
    }

    /// Ends iteration because the inner iterator produced an entry whose key is not an
    /// internal key. Table blocks reject such keys themselves with the file and block offset
    /// (`sst/block.rs`), and memtables only hold keys the engine built, so this is the last
    /// line of defence: it names no file because the merged stream does not know the source.
    fn fail_unparseable(&mut self) {
        self.error = Some(Error::corruption(
            "<merged iterator input>",
            0,
            format!(
                "an entry's key of {} bytes is not a point entry's internal key",
                self.inner.key().len()
            ),
        ));
        self.valid = false;
        self.saved_key.clear();
        self.saved_value.clear();
    }

    /// Positions at the first key.
    pub fn seek_to_first(&mut self) {
        self.timed_seek(Self::seek_to_first_untimed)
    }

    fn seek_to_first_untimed(&mut self) {
        self.refresh_if_tailing();
        self.active_prefix = None;
        self.choose_inner(None);
        if self.lower.is_some() {
            // `seek` raises any target to the lower bound.
            self.seek_slice(&[]);
        } else {
            self.direction = Direction::Forward;
            self.inner.seek_to_first();
            self.find_next_user_entry(false);
        }
    }

    /// Positions at the last key.
    pub fn seek_to_last(&mut self) {
        self.timed_seek(Self::seek_to_last_untimed)
    }

    fn seek_to_last_untimed(&mut self) {
        self.refresh_if_tailing();
        self.active_prefix = None;
        self.choose_inner(None);
        match &self.upper {
            Some(u) => {
                // Last entry strictly below the upper bound.
                self.lookup.clear();
                key::append_internal_key(&mut self.lookup, u, MAX_SEQUENCE, KIND_FOR_SEEK);
                self.inner.seek(&self.lookup);
                if self.inner.valid() {
                    self.inner.prev();
                } else if self.inner.status().is_ok() {
                    self.inner.seek_to_last();
                }
            }
            None => self.inner.seek_to_last(),
        }
        self.direction = Direction::Reverse;
        self.find_prev_user_entry();
    }

    /// Positions at the first key >= `target`.
    pub fn seek(&mut self, target: impl AsRef<[u8]>) {
        let target = target.as_ref();
        self.timed_seek(|it| it.seek_slice(target))
    }

    fn seek_slice(&mut self, target: &[u8]) {
        self.refresh_if_tailing();
        self.start_prefix(target);
        self.choose_inner(Some(target));
        let target = match &self.lower {
            Some(l) if target < l.as_slice() => l.as_slice(),
            _ => target,
        };
        self.lookup.clear();
        key::append_internal_key(&mut self.lookup, target, self.sequence, KIND_FOR_SEEK);
        self.direction = Direction::Forward;
        self.saved_key.clear();
        self.saved_value.clear();
        self.inner.seek(&self.lookup);
        self.find_next_user_entry(false);
        self.enforce_prefix();
    }

    /// Positions at the last key <= `target`.
    pub fn seek_for_prev(&mut self, target: impl AsRef<[u8]>) {
        let target = target.as_ref();
        self.timed_seek(|it| it.seek_for_prev_slice(target))
    }

    fn seek_for_prev_slice(&mut self, target: &[u8]) {
        self.refresh_if_tailing();
        self.start_prefix(target);
        self.choose_inner(Some(target));
        if let Some(u) = &self.upper {
            if target >= u.as_slice() {
                self.seek_to_last_untimed();
                return;
            }
        }
        // The smallest internal key for `target` is (target, 0, Delete): the last of its entries.
        self.lookup.clear();
        key::append_internal_key(&mut self.lookup, target, 0, ValueKind::Delete);
        self.inner.seek(&self.lookup);
        if self.inner.valid() {
            if key::user_key(self.inner.key()) > target {
                self.inner.prev();
            }
        } else if self.inner.status().is_ok() {
            self.inner.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.find_prev_user_entry();
        self.enforce_prefix();
    }

    /// Moves to the next key. REQUIRES: `valid()`.
    pub fn next(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Reverse {
            // The inner iterator sits before the entries of saved_key: step into them, then skip
            // them below.
            self.direction = Direction::Forward;
            if self.inner.valid() {
                self.inner.next();
            } else if self.inner.status().is_ok() {
                self.inner.seek_to_first();
            }
        } else if !self.merged {
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(key::user_key(self.inner.key()));
            self.inner.next();
        }
        // (After a merge, `saved_key` is the current key and the inner iterator already sits
        // past its newest entry.)
        self.merged = false;
        if !self.inner.valid() {
            self.valid = false;
            self.saved_key.clear();
            return;
        }
        self.find_next_user_entry(true);
        self.enforce_prefix();
    }

    /// Moves to the previous key. REQUIRES: `valid()`.
    pub fn prev(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Forward {
            // Step back past every entry of the current key.
            if self.merged {
                // The inner iterator is past the key's newest entry, maybe at the end.
                if !self.inner.valid() && self.inner.status().is_ok() {
                    self.inner.seek_to_last();
                }
            } else {
                self.saved_key.clear();
                self.saved_key
                    .extend_from_slice(key::user_key(self.inner.key()));
            }
            self.merged = false;
            while self.inner.valid() && key::user_key(self.inner.key()) >= self.saved_key.as_slice()
            {
                self.inner.prev();
            }
            if !self.inner.valid() {
                self.valid = false;
                self.saved_key.clear();
                self.saved_value.clear();
                return;
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry();
        self.enforce_prefix();
    }

    /// Forward: from the inner position, finds the first visible live entry, skipping entries of
    /// `saved_key` when `skipping`.
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        self.merged = false;
        self.clear_blob();
        while self.inner.valid() {
            let Some(p) = key::parse_internal_key(self.inner.key()) else {
                self.fail_unparseable();
                return;
            };
            if let Some(u) = &self.upper {
                if p.user_key >= u.as_slice() {
                    break;
                }
            }
            if p.sequence <= self.sequence {
                let kind = match self.read_kind(&p) {
                    Ok(k) => k,
                    Err(e) => return self.fail(e),
                };
                match kind {
                    ValueKind::Delete | ValueKind::SingleDelete | ValueKind::RangeDeletion => {
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(p.user_key);
                        skipping = true;
                    }
                    ValueKind::Put | ValueKind::BlobIndex => {
                        if !(skipping && p.user_key <= self.saved_key.as_slice()) {
                            self.valid = true;
                            self.current_blob = kind == ValueKind::BlobIndex;
                            self.saved_key.clear();
                            return;
                        }
                    }
                    ValueKind::Merge => {
                        if !(skipping && p.user_key <= self.saved_key.as_slice()) {
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(p.user_key);
                            self.merge_forward();
                            return;
                        }
                    }
                }
            }
            self.inner.next();
        }
        self.saved_key.clear();
        self.valid = false;
    }

    /// Forward, at the newest visible entry of `saved_key`, a merge operand: collects the
    /// key's operands down to its base (a put, a delete or the end) and merges them into
    /// `saved_value`. Leaves the inner iterator past the operands.
    fn merge_forward(&mut self) {
        self.operands.clear();
        let mut base: Option<Vec<u8>> = None;
        while self.inner.valid() {
            let Some(p) = key::parse_internal_key(self.inner.key()) else {
                self.fail_unparseable();
                return;
            };
            if p.user_key != self.saved_key.as_slice() {
                break;
            }
            let kind = match self.read_kind(&p) {
                Ok(k) => k,
                Err(e) => return self.fail(e),
            };
            match kind {
                ValueKind::Merge => self.operands.push(self.inner.value().to_vec()),
                ValueKind::Put => {
                    base = Some(self.inner.value().to_vec());
                    break;
                }
                ValueKind::BlobIndex => {
                    match self.read_blob(&self.saved_key, self.inner.value()) {
                        Ok(v) => base = Some(v),
                        Err(e) => return self.fail(e),
                    }
                    break;
                }
                ValueKind::Delete | ValueKind::SingleDelete | ValueKind::RangeDeletion => break,
            }
            self.inner.next();
        }
        if self.inner.status().is_err() {
            self.valid = false;
            return;
        }
        let op = self.merge_operator.as_deref();
        match merge::merge_newest_first(op, &self.saved_key, base.as_deref(), &self.operands) {
            Ok(v) => {
                self.saved_value.set_owned(v);
                self.valid = true;
                self.merged = true;
            }
            Err(e) => self.fail(e),
        }
    }

    /// Ends iteration with `e`.
    fn fail(&mut self, e: Error) {
        self.error = Some(e);
        self.valid = false;
        self.merged = false;
        self.clear_blob();
        self.saved_key.clear();
        self.saved_value.clear();
    }

    /// Backward: collects the newest visible version of the key before the inner position.
    /// Versions of one key come oldest first here: a put sets the base, a delete clears it,
    /// merge operands on top are merged once the key is complete.
    fn find_prev_user_entry(&mut self) {
        self.merged = false;
        self.clear_blob();
        self.operands.clear();
        let mut has_base = false;
        let mut kind = ValueKind::Delete;
        while self.inner.valid() {
            let Some(p) = key::parse_internal_key(self.inner.key()) else {
                self.fail_unparseable();
                self.direction = Direction::Forward;
                return;
            };
            if let Some(l) = &self.lower {
                if p.user_key < l.as_slice() {
                    break;
                }
            }
            if p.sequence <= self.sequence {
                if kind != ValueKind::Delete && p.user_key < self.saved_key.as_slice() {
                    // Everything of saved_key has been seen; its newest version is a value.
                    break;
                }
                let read = match self.read_kind(&p) {
                    Ok(k) => k,
                    Err(e) => {
                        self.fail(e);
                        self.direction = Direction::Forward;
                        return;
                    }
                };
                kind = match read {
                    ValueKind::SingleDelete | ValueKind::RangeDeletion => ValueKind::Delete,
                    k => k,
                };
                match kind {
                    ValueKind::Delete | ValueKind::SingleDelete | ValueKind::RangeDeletion => {
                        self.saved_key.clear();
                        self.saved_value.clear();
                        self.operands.clear();
                        has_base = false;
                        self.current_blob = false;
                    }
                    ValueKind::BlobIndex => {
                        // The reference; `value()` (or a merge) reads the blob.
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(p.user_key);
                        self.saved_value.set_copy(self.inner.value());
                        self.operands.clear();
                        has_base = true;
                        self.current_blob = true;
                    }
                    ValueKind::Put => {
                        self.current_blob = false;
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(p.user_key);
                        let v = self.user_value(self.inner.value());
                        let pinned = (v.len() >= PIN_SAVED_VALUE_MIN)
                            .then(|| self.inner.pinned_value())
                            .flatten();
                        match pinned {
                            Some(p) => self.saved_value.set_pinned(p.truncated(v.len())),
                            None => self.saved_value.set_copy(v),
                        }
                        self.operands.clear();
                        has_base = true;
                    }
                    ValueKind::Merge => {
                        if self.operands.is_empty() && !has_base {
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(p.user_key);
                        }
                        self.operands.push(self.inner.value().to_vec());
                    }
                }
            }
            self.inner.prev();
        }
        if kind == ValueKind::Delete || self.inner.status().is_err() {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
            self.direction = Direction::Forward;
        } else if kind == ValueKind::Merge {
            self.merge_backward(has_base);
        } else {
            self.valid = true;
        }
    }

    /// Backward: merges the operands collected for `saved_key` (oldest first) onto its base
    /// (`saved_value` when `has_base`).
    fn merge_backward(&mut self, has_base: bool) {
        if has_base && self.current_blob {
            match self.read_blob(&self.saved_key, self.saved_value.as_slice()) {
                Ok(v) => self.saved_value.set_owned(v),
                Err(e) => {
                    self.fail(e);
                    self.direction = Direction::Forward;
                    return;
                }
            }
            self.current_blob = false;
        }
        let op = self.merge_operator.as_deref();
        let operands: Vec<&[u8]> = self.operands.iter().map(Vec::as_slice).collect();
        let base = has_base.then_some(self.saved_value.as_slice());
        match merge::merge_oldest_first(op, &self.saved_key, base, &operands) {
            Ok(v) => {
                self.saved_value.set_owned(v);
                self.valid = true;
            }
            Err(e) => {
                self.fail(e);
                self.direction = Direction::Forward;
            }
        }
    }
}

/// Values at least this long are kept backward by sharing their block (one reference-count
/// update) rather than copied; shorter ones copy faster than the count is updated and dropped.
const PIN_SAVED_VALUE_MIN: usize = 128;

/// The current value when the inner iterator is no longer on it: a merge result, or, moving
/// backward, the newest version of the key before the inner iterator moved past it.
#[derive(Default)]
struct SavedValue {
    bytes: Vec<u8>,
    /// Set instead of `bytes` when the value lies in a shared table block.
    pinned: Option<crate::Value>,
}

impl SavedValue {
    fn clear(&mut self) {
        self.bytes.clear();
        self.pinned = None;
    }

    fn set_copy(&mut self, v: &[u8]) {
        self.clear();
        self.bytes.extend_from_slice(v);
    }

    fn set_owned(&mut self, v: Vec<u8>) {
        self.bytes = v;
        self.pinned = None;
    }

    fn set_pinned(&mut self, v: crate::Value) {
        self.bytes.clear();
        self.pinned = Some(v);
    }

    fn as_slice(&self) -> &[u8] {
        match &self.pinned {
            Some(v) => v.as_slice(),
            None => &self.bytes,
        }
    }

    fn to_value(&self) -> crate::Value {
        match &self.pinned {
            Some(v) => v.clone(),
            None => crate::Value::from(self.bytes.as_slice()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::merging::VecIterator;
    use crate::key::{compare_internal, make_internal_key};

    fn build(entries: &[(&str, u64, ValueKind, &str)]) -> Box<dyn InternalIterator> {
        let mut v: Vec<_> = entries
            .iter()
            .map(|(k, s, kind, val)| {
                (
                    make_internal_key(k.as_bytes(), *s, *kind),
                    val.as_bytes().to_vec(),
                )
            })
            .collect();
        v.sort_by(|a, b| compare_internal(&a.0, &b.0));
        Box::new(VecIterator::new(v))
    }

    fn forward(it: &mut DbIterator) -> Vec<(String, String)> {
        let mut out = Vec::new();
        it.seek_to_first();
        while it.valid() {
            out.push((
                String::from_utf8_lossy(it.key()).into_owned(),
                String::from_utf8_lossy(it.value()).into_owned(),
            ));
            it.next();
        }
        out
    }

    fn backward(it: &mut DbIterator) -> Vec<(String, String)> {
        let mut out = Vec::new();
        it.seek_to_last();
        while it.valid() {
            out.push((
                String::from_utf8_lossy(it.key()).into_owned(),
                String::from_utf8_lossy(it.value()).into_owned(),
            ));
            it.prev();
        }
        out
    }

    use ValueKind::{Delete as D, Put as P};
    const DATA: &[(&str, u64, ValueKind, &str)] = &[
        ("a", 1, P, "a1"),
        ("a", 5, P, "a5"),
        ("b", 2, P, "b2"),
        ("b", 6, D, ""),
        ("c", 3, D, ""),
        ("c", 7, P, "c7"),
        ("d", 4, P, "d4"),
        ("e", 8, D, ""),
    ];

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn latest_view_both_directions() {
        let mut it = DbIterator::new(build(DATA), 100, None, None, None);
        let exp = pairs(&[("a", "a5"), ("c", "c7"), ("d", "d4")]);
        assert_eq!(forward(&mut it), exp);
        let mut rev = exp.clone();
        rev.reverse();
        assert_eq!(backward(&mut it), rev);
    }

    #[test]
    fn older_sequence_sees_older_view() {
        let mut it = DbIterator::new(build(DATA), 4, None, None, None);
        let exp = pairs(&[("a", "a1"), ("b", "b2"), ("d", "d4")]);
        assert_eq!(forward(&mut it), exp);
        let mut rev = exp.clone();
        rev.reverse();
        assert_eq!(backward(&mut it), rev);
    }

    #[test]
    fn bounds_and_seeks() {
        let mut it = DbIterator::new(
            build(DATA),
            100,
            Some(b"b".to_vec()),
            Some(b"d".to_vec()),
            None,
        );
        assert_eq!(forward(&mut it), pairs(&[("c", "c7")]));
        assert_eq!(backward(&mut it), pairs(&[("c", "c7")]));
        let mut it = DbIterator::new(build(DATA), 100, None, None, None);
        it.seek(b"b");
        assert_eq!(it.key(), b"c");
        it.seek_for_prev(b"b");
        assert_eq!(it.key(), b"a");
        it.seek_for_prev(b"c");
        assert_eq!(it.key(), b"c");
        it.seek_for_prev(b"zz");
        assert_eq!(it.key(), b"d");
        // Direction changes in the middle.
        it.seek(b"c");
        it.prev();
        assert_eq!(it.key(), b"a");
        it.next();
        assert_eq!(it.key(), b"c");
        it.next();
        assert_eq!(it.key(), b"d");
        it.prev();
        assert_eq!(it.key(), b"c");
        it.prev();
        it.prev();
        assert!(!it.valid());
    }

    #[test]
    fn unparseable_key_ends_iteration_with_corruption_in_both_directions() {
        let mut v = vec![
            (make_internal_key(b"a", 1, P), b"a1".to_vec()),
            (b"bad".to_vec(), b"x".to_vec()),
            (make_internal_key(b"c", 1, P), b"c1".to_vec()),
        ];
        v.sort_by(|a, b| compare_internal(&a.0, &b.0));
        let mut it = DbIterator::new(Box::new(VecIterator::new(v.clone())), 100, None, None, None);
        // "bad" sorts between "a" and "c" (short keys compare as their whole bytes).
        assert_eq!(forward(&mut it), pairs(&[("a", "a1")]));
        let err = it.status().expect_err("forward must fail");
        assert!(err.is_corruption(), "{err}");
        assert_eq!(
            err.to_string(),
            "corruption in <merged iterator input> at offset 0: an entry's key of 3 bytes is not a point entry's internal key"
        );
        let mut it = DbIterator::new(Box::new(VecIterator::new(v)), 100, None, None, None);
        // Backward, "c" is yielded only after stepping past all its versions, onto "bad".
        assert_eq!(backward(&mut it), pairs(&[]));
        assert!(it.status().expect_err("reverse must fail").is_corruption());
        // Sticky: a later seek does not hide the error.
        it.seek(b"c");
        assert!(!it.valid());
        assert!(it.status().is_err());
    }
}
