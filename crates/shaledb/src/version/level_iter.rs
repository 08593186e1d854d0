//! Iterates one sorted, non-overlapping level as a single stream, opening each table only when
//! the cursor reaches it.

use crate::cache::TableCache;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::sst::{BlockReadOptions, TableIterator};
use crate::version::{find_file, FileMetaData};
use std::sync::Arc;

/// A concatenation of the tables of one level (L1 and deeper).
pub struct LevelIterator {
    files: Vec<Arc<FileMetaData>>,
    tables: Arc<TableCache>,
    opts: BlockReadOptions,
    index: usize,
    current: Option<TableIterator>,
    error: Option<Error>,
}

impl LevelIterator {
    /// Iterates `files`, which must be sorted and non-overlapping.
    pub fn new(
        files: Vec<Arc<FileMetaData>>,
        tables: Arc<TableCache>,
        opts: BlockReadOptions,
    ) -> Self {
        LevelIterator {
            files,
            tables,
            opts,
            index: 0,
            current: None,
            error: None,
        }
    }

    fn open(&mut self, index: usize) -> bool {
        self.current = None;
        self.index = index;
        let Some(f) = self.files.get(index) else {
            return false;
        };
        match self.tables.get(f.number, f.file_size) {
            Ok(t) => {
                self.current = Some(t.iter(self.opts));
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
        let Some(last) = self.files.len().checked_sub(1) else {
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
        let i = find_file(&self.files, target);
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
