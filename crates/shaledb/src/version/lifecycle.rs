//! Who decides that a file is obsolete, and the queue that carries it to deletion.
//!
//! Table and blob files: each [`Version`](super::Version) holds a [`FileHandle`] per file it lists,
//! shared (one `Arc`) by every version that lists the file. When the last version listing a
//! file is dropped (by the version set, a reader, an iterator or a compaction, on whatever
//! thread that happens) the handle's `Drop` pushes the file onto the [`DeletionQueue`].
//! WALs are pushed when a durable MANIFEST edit moves the log number past them, an old
//! MANIFEST when CURRENT durably names its successor, and at open whatever a previous run left.
//!
//! Pushing never does IO and takes only the queue's own mutex, a leaf lock (nothing is locked
//! while it is held), so it is safe under the database mutex and on a reader's thread. The
//! database's one purge routine takes what is queued and unlinks it.

use super::filename::{self, FileKind};
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file no version, pending output, or the current MANIFEST or WAL needs any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ObsoleteFile {
    /// What kind of file (decides its name).
    pub kind: FileKind,
    /// Its number.
    pub number: u64,
}

impl ObsoleteFile {
    /// The file's path in `dir`; `None` for kinds that are never deleted this way.
    pub(crate) fn path(&self, dir: &Path) -> Option<PathBuf> {
        match self.kind {
            FileKind::Table => Some(filename::table_file(dir, self.number)),
            FileKind::Blob => Some(filename::blob_file(dir, self.number)),
            FileKind::Log => Some(filename::log_file(dir, self.number)),
            FileKind::Manifest => Some(filename::manifest_file(dir, self.number)),
            FileKind::Temp => Some(filename::temp_file(dir, self.number)),
            FileKind::Current | FileKind::Lock => None,
        }
    }
}

#[derive(Debug, Default)]
struct QueueState {
    files: Vec<ObsoleteFile>,
    /// Purges that took files and have not finished unlinking them.
    purging: usize,
    /// Set at close: the cleaner stops waiting.
    closed: bool,
    /// Holders of [`DeletionQueue::pause`]: while any, nothing is taken for deletion.
    paused: usize,
}

/// Files waiting to be deleted, and the signal that there are some or that a purge finished.
#[derive(Debug, Default)]
pub(crate) struct DeletionQueue {
    state: Mutex<QueueState>,
    /// Signalled when files are pushed, a purge finishes, or the queue is closed.
    changed: Condvar,
}

impl DeletionQueue {
    /// Queues `file` for deletion. No IO; never blocks on anything but the queue's own mutex.
    pub(crate) fn push(&self, file: ObsoleteFile) {
        self.state.lock().files.push(file);
        self.changed.notify_all();
    }

    /// Takes every queued file and counts a purge as running (call [`purged`](Self::purged)
    /// after unlinking them). Empty if nothing is queued (then no purge is counted).
    pub(crate) fn take(&self) -> Vec<ObsoleteFile> {
        let mut st = self.state.lock();
        if st.paused > 0 {
            return Vec::new();
        }
        let files = std::mem::take(&mut st.files);
        if !files.is_empty() {
            st.purging += 1;
        }
        files
    }

    /// Waits until files are queued and takes them like [`take`](Self::take), or returns
    /// `None` once the queue is closed.
    pub(crate) fn wait_take(&self) -> Option<Vec<ObsoleteFile>> {
        let mut st = self.state.lock();
        loop {
            if st.closed {
                return None;
            }
            if !st.files.is_empty() && st.paused == 0 {
                st.purging += 1;
                return Some(std::mem::take(&mut st.files));
            }
            self.changed.wait(&mut st);
        }
    }

    /// Holds deletions until [`resume`](Self::resume) (a checkpoint copying files that may
    /// become obsolete meanwhile), then waits for a purge already running to finish, so no
    /// file is unlinked from the moment this returns.
    pub(crate) fn pause(&self) {
        let mut st = self.state.lock();
        st.paused += 1;
        while st.purging > 0 {
            self.changed.wait(&mut st);
        }
    }

    /// Ends one [`pause`](Self::pause); queued files go at the next purge.
    pub(crate) fn resume(&self) {
        self.state.lock().paused -= 1;
        self.changed.notify_all();
    }

    /// Marks a purge started by a non-empty `take` as finished.
    pub(crate) fn purged(&self) {
        self.state.lock().purging -= 1;
        self.changed.notify_all();
    }

    /// Waits until nothing is queued and no purge is running (or deletions are paused).
    pub(crate) fn wait_idle(&self) {
        let mut st = self.state.lock();
        while (!st.files.is_empty() && st.paused == 0) || st.purging > 0 {
            self.changed.wait(&mut st);
        }
    }

    /// Makes [`wait_take`](Self::wait_take) return `None` from now on.
    pub(crate) fn close(&self) {
        self.state.lock().closed = true;
        self.changed.notify_all();
    }
}

/// A table or blob file's claim to exist: one per file, shared by every version listing it.
/// Its drop queues the file for deletion.
#[derive(Debug)]
pub(crate) struct FileHandle {
    kind: FileKind,
    number: u64,
    queue: Arc<DeletionQueue>,
}

impl FileHandle {
    /// A handle for file `number` of `kind` that queues it on `queue` when dropped.
    pub(crate) fn new(kind: FileKind, number: u64, queue: Arc<DeletionQueue>) -> Arc<Self> {
        Arc::new(FileHandle {
            kind,
            number,
            queue,
        })
    }

    /// The file's number.
    pub(crate) fn number(&self) -> u64 {
        self.number
    }
}

impl Drop for FileHandle {
    fn drop(&mut self) {
        self.queue.push(ObsoleteFile {
            kind: self.kind,
            number: self.number,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(number: u64) -> ObsoleteFile {
        ObsoleteFile {
            kind: FileKind::Table,
            number,
        }
    }

    #[test]
    fn the_last_handle_dropped_queues_the_table_once() {
        let q = Arc::new(DeletionQueue::default());
        let h = FileHandle::new(FileKind::Table, 7, q.clone());
        let h2 = h.clone();
        drop(h);
        assert!(q.take().is_empty());
        drop(h2);
        assert_eq!(q.take(), vec![table(7)]);
        q.purged();
        q.wait_idle();
        assert!(q.take().is_empty());
    }

    #[test]
    fn wait_idle_waits_for_a_running_purge() {
        let q = Arc::new(DeletionQueue::default());
        q.push(table(3));
        assert_eq!(q.wait_take(), Some(vec![table(3)]));
        let q2 = q.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            q2.purged();
        });
        q.wait_idle();
        assert_eq!(q.state.lock().purging, 0);
        t.join().expect("purging thread");
        q.close();
        assert_eq!(q.wait_take(), None);
    }
}
