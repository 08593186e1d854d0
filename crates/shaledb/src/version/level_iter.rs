//! Iterates one sorted, non-overlapping level as a single stream, opening each table only when
//! the cursor reaches it.

use crate::cache::TableCache;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::sst::{BlockReadOptions, TableIterator};
use crate::version::{find_file, FileMetaData, Version};
use std::sync::Arc;

/// The files a level iterator walks.
enum LevelFiles {
    /// One level of a version, shared: creating an iterator copies no file list.
    Shared(Arc<Version>, usize),
    /// A list of its own (compaction inputs).
    Owned(Vec<Arc<FileMetaData>>),
}

impl LevelFiles {
    fn as_slice(&self) -> &[Arc<FileMetaData>] {
        match self {
            LevelFiles::Shared(v, level) => v.level_files(*level),
            LevelFiles::Owned(files) => files,
        }
    }
}

/// A concatenation of the tables of one level (L1 and deeper).
pub(crate) struct LevelIterator {
    files: LevelFiles,
    tables: Arc<TableCache>,
    opts: BlockReadOptions,
    /// Read each table this many bytes at a time (compaction inputs).
    compaction_readahead: Option<usize>,
    index: usize,
    current: Option<TableIterator>,
    error: Option<Error>,
}

impl LevelIterator {
    /// Iterates `files`, which must be sorted and non-overlapping.
    pub(crate) fn new(
        files: Vec<Arc<FileMetaData>>,
        tables: Arc<TableCache>,
        opts: BlockReadOptions,
    ) -> Self {
        Self::with_files(LevelFiles::Owned(files), tables, opts)
    }

    /// Iterates the files of `level` (1 or deeper) of `version`, which it keeps alive.
    pub(crate) fn over_level(
        version: Arc<Version>,
        level: usize,
        tables: Arc<TableCache>,
        opts: BlockReadOptions,
    ) -> Self {
        Self::with_files(LevelFiles::Shared(version, level), tables, opts)
    }

    fn with_files(files: LevelFiles, tables: Arc<TableCache>, opts: BlockReadOptions) -> Self {
        LevelIterator {
            files,
            tables,
            opts,
            compaction_readahead: None,
            index: 0,
            current: None,
            error: None,
        }
    }

    /// Reads every table `bytes` at a time (see `sst/readahead.rs`).
    pub(crate) fn with_compaction_readahead(mut self, bytes: usize) -> Self {
        self.compaction_readahead = Some(bytes);
        self
    }

    /// Makes the table at `index` current. A seek that lands in the table already open keeps
    /// its iterator (and so its loaded blocks and readahead state) instead of reopening it.
    fn open(&mut self, index: usize) -> bool {
        // An iterator that met an error is dropped as soon as it is seen, so a current one is
        // healthy.
        if index == self.index && self.current.is_some() {
            return true;
        }
        self.current = None;
        self.index = index;
        let Some(f) = self.files.as_slice().get(index) else {
            return false;
        };
        match self.tables.get(f) {
            Ok(t) => {
                let it = t.iter(self.opts);
                self.current = Some(match self.compaction_readahead {
                    Some(bytes) => it.with_compaction_readahead(bytes),
                    None => it,
                });
                true
            }
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    /// Stops on a child error; returns true if the caller should keep moving to another file.
    fn current_exhausted_cleanly(&mut self) -> bool {
        match &self.current {
            Some(c) if c.valid() => false,
            Some(c) => match c.status() {
                Ok(()) => true,
                Err(e) => {
                    self.error = Some(e);
                    self.current = None;
                    false
                }
            },
            None => false,
        }
    }

    fn skip_forward(&mut self) {
        while self.error.is_none() && self.current_exhausted_cleanly() {
            let next = self.index + 1;
            if !self.open(next) {
                return;
            }
            if let Some(c) = &mut self.current {
                c.seek_to_first();
            }
        }
    }

    fn skip_backward(&mut self) {
        while self.error.is_none() && self.current_exhausted_cleanly() {
            let Some(prev) = self.index.checked_sub(1) else {
                self.current = None;
                return;
            };
            if !self.open(prev) {
                return;
            }
            if let Some(c) = &mut self.current {
                c.seek_to_last();
            }
        }
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.error.is_none() && self.current.as_ref().is_some_and(|c| c.valid())
    }
    fn seek_to_first(&mut self) {
        self.error = None;
        if self.open(0) {
            if let Some(c) = &mut self.current {
                c.seek_to_first();
            }
        }
        self.skip_forward();
    }
    fn seek_to_last(&mut self) {
        self.error = None;
        let Some(last) = self.files.as_slice().len().checked_sub(1) else {
            self.current = None;
            return;
        };
        if self.open(last) {
            if let Some(c) = &mut self.current {
                c.seek_to_last();
            }
        }
        self.skip_backward();
    }
    fn seek(&mut self, target: &[u8]) {
        self.error = None;
        let i = find_file(self.files.as_slice(), target);
        if self.open(i) {
            if let Some(c) = &mut self.current {
                c.seek(target);
            }
        }
        self.skip_forward();
    }
    fn next(&mut self) {
        if let Some(c) = &mut self.current {
            c.next();
        }
        self.skip_forward();
    }
    fn prev(&mut self) {
        if let Some(c) = &mut self.current {
            c.prev();
        }
        self.skip_backward();
    }
    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.key())
    }
    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.value())
    }
    fn pinned_value(&self) -> Option<crate::Value> {
        self.current.as_ref()?.pinned_value()
    }
    fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.duplicate());
        }
        match &self.current {
            Some(c) => c.status(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::BlockCache;
    use crate::compaction::job::{write_tables, OutputSpec};
    use crate::fs::{FileSystem, MemFileSystem};
    use crate::iter::merging::VecIterator;
    use crate::key::{make_internal_key, ValueKind};
    use crate::options::Options;
    use std::path::Path;
    use std::sync::atomic::AtomicBool;

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// Writes `n` entries into L1 tables of about 2 KiB each; returns the version and entries.
    fn level_one(n: usize) -> (Arc<Version>, Arc<TableCache>, Entries) {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let dir = Path::new("/db");
        fs.create_dir_all(dir).expect("mkdir");
        let tables = Arc::new(TableCache::new(
            fs.clone(),
            dir.to_path_buf(),
            100,
            Arc::new(BlockCache::new(1 << 20, 2)),
        ));
        let entries: Entries = (0..n)
            .map(|i| {
                (
                    make_internal_key(format!("key{i:05}").as_bytes(), 1, ValueKind::Put),
                    format!("value{i}").into_bytes(),
                )
            })
            .collect();
        let opts = Options::default();
        let spec = OutputSpec {
            fs: &fs,
            dir,
            opts: &opts,
            tables: &tables,
            level: 1,
            base_level: 1,
            bottommost: false,
            max_file_size: 2048,
            flush: false,
            cf_id: 0,
            cf_name: "default",
            blob_gc: None,
            write_time_blobs: None,
        };
        let mut number = 10;
        let files = write_tables(
            &spec,
            &mut VecIterator::new(entries.clone()),
            None,
            None,
            &mut || {
                number += 1;
                number
            },
            &AtomicBool::new(false),
        )
        .expect("write tables")
        .tables;
        assert!(files.len() > 5, "{} files", files.len());
        let mut version = Version::empty(3);
        version.files[1] = files.into_iter().map(Arc::new).collect();
        (Arc::new(version), tables, entries)
    }

    #[test]
    fn new_iterators_share_the_level_file_list() {
        let (version, tables, entries) = level_one(2000);
        let counts = |v: &Version| -> Vec<usize> {
            v.level_files(1).iter().map(Arc::strong_count).collect()
        };
        let before = counts(&version);
        assert!(before.iter().all(|&c| c == 1));
        let mut children = Vec::new();
        version.add_iterators(
            &tables,
            crate::sst::BlockReadOptions {
                verify_checksums: true,
                fill_cache: true,
            },
            &mut children,
        );
        assert_eq!(children.len(), 1);
        // No file's reference count moved: the iterator holds the version, not a copy.
        assert_eq!(counts(&version), before);
        assert_eq!(Arc::strong_count(&version), 2);

        let it = &mut children[0];
        it.seek_to_first();
        let mut forward = Vec::new();
        while it.valid() {
            forward.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        assert_eq!(forward, entries);
        it.seek_to_last();
        let mut backward = Vec::new();
        while it.valid() {
            backward.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        backward.reverse();
        assert_eq!(backward, entries);
        // Seeks within the open table and across tables, each followed by steps both ways.
        for &i in &[1234, 1240, 1235, 0, 1999, 700, 701, 1500, 3] {
            it.seek(&entries[i].0);
            assert_eq!(it.key(), &entries[i].0[..]);
            it.next();
            match entries.get(i + 1) {
                Some(e) => assert_eq!(it.key(), &e.0[..]),
                None => assert!(!it.valid()),
            }
            it.seek(&entries[i].0);
            it.prev();
            if i > 0 {
                assert_eq!(it.key(), &entries[i - 1].0[..]);
            } else {
                assert!(!it.valid());
            }
        }
        it.status().expect("status");
        drop(children);
        assert_eq!(Arc::strong_count(&version), 1);
    }

    #[test]
    fn compaction_outputs_record_their_first_and_last_keys() {
        let (version, tables, entries) = level_one(2000);
        let mut next = 0;
        for f in version.level_files(1) {
            let table = tables.get(f).expect("open");
            let mut it = table.iter(crate::sst::BlockReadOptions {
                verify_checksums: true,
                fill_cache: false,
            });
            it.seek_to_first();
            assert_eq!(f.smallest.encoded(), &entries[next].0[..]);
            let mut n = 0;
            while it.valid() {
                assert_eq!(it.key(), &entries[next].0[..]);
                next += 1;
                n += 1;
                it.next();
            }
            assert_eq!(f.largest.encoded(), &entries[next - 1].0[..]);
            assert_eq!(f.num_entries, n);
        }
        assert_eq!(next, entries.len());
    }
}
