//! A filesystem that forwards every call to another one after a hook has seen it (RocksDB's
//! `FileSystemWrapper`): the hook can count calls, hold them, fail them or wrap the files they
//! open, without writing out the whole [`FileSystem`] trait for each purpose.

use super::{FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// A filesystem call, as a [`FsHook`] sees it before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsCall<'a> {
    /// [`FileSystem::create`].
    Create(&'a Path),
    /// [`FileSystem::create_direct`].
    CreateDirect(&'a Path),
    /// [`FileSystem::open_random_access`].
    OpenRandomAccess(&'a Path),
    /// [`FileSystem::open_random_access_direct`].
    OpenRandomAccessDirect(&'a Path),
    /// [`FileSystem::open_sequential`].
    OpenSequential(&'a Path),
    /// [`FileSystem::file_size`].
    FileSize(&'a Path),
    /// [`FileSystem::list_dir`].
    ListDir(&'a Path),
    /// [`FileSystem::create_dir_all`].
    CreateDirAll(&'a Path),
    /// [`FileSystem::remove_file`].
    RemoveFile(&'a Path),
    /// [`FileSystem::remove_dir`].
    RemoveDir(&'a Path),
    /// [`FileSystem::rename`] (from, to).
    Rename(&'a Path, &'a Path),
    /// [`FileSystem::sync_dir`].
    SyncDir(&'a Path),
    /// [`FileSystem::lock`].
    Lock(&'a Path),
}

impl FsCall<'_> {
    /// The path the call is about (for a rename, the file renamed).
    pub fn path(&self) -> &Path {
        match *self {
            FsCall::Create(p)
            | FsCall::CreateDirect(p)
            | FsCall::OpenRandomAccess(p)
            | FsCall::OpenRandomAccessDirect(p)
            | FsCall::OpenSequential(p)
            | FsCall::FileSize(p)
            | FsCall::ListDir(p)
            | FsCall::CreateDirAll(p)
            | FsCall::RemoveFile(p)
            | FsCall::RemoveDir(p)
            | FsCall::Rename(p, _)
            | FsCall::SyncDir(p)
            | FsCall::Lock(p) => p,
        }
    }

    /// Whether the call is about a table file (`*.sst`).
    pub fn is_table(&self) -> bool {
        self.path().extension().is_some_and(|e| e == "sst")
    }
}

/// What a [`HookedFileSystem`] does besides forwarding. Every method has a default that
/// changes nothing, so a hook implements only what it is for.
pub trait FsHook: Send + Sync + 'static {
    /// Runs before `call` reaches the wrapped filesystem; an error fails the call with it
    /// (the wrapped filesystem is then not called).
    fn before(&self, call: FsCall<'_>) -> io::Result<()> {
        let _ = call;
        Ok(())
    }

    /// Every file opened for writing (`create`, `create_direct`) passes through here, to be
    /// wrapped.
    fn writable(&self, path: &Path, file: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        let _ = path;
        file
    }

    /// Every file opened for positional reads passes through here, to be wrapped.
    fn random_access(
        &self,
        path: &Path,
        file: Arc<dyn RandomAccessFile>,
    ) -> Arc<dyn RandomAccessFile> {
        let _ = path;
        file
    }
}

/// Forwards every call to `inner`, through `hook`.
///
/// ```
/// use shaledb::fs::{FileSystem, FsCall, FsHook, HookedFileSystem, MemFileSystem};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// #[derive(Default)]
/// struct CountCreates(AtomicUsize);
/// impl FsHook for CountCreates {
///     fn before(&self, call: FsCall<'_>) -> std::io::Result<()> {
///         if let FsCall::Create(_) = call {
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///         Ok(())
///     }
/// }
///
/// let fs = HookedFileSystem::new(Arc::new(MemFileSystem::new()), CountCreates::default());
/// fs.create(std::path::Path::new("/a")).unwrap();
/// assert_eq!(fs.hook().0.load(Ordering::Relaxed), 1);
/// ```
pub struct HookedFileSystem<H> {
    inner: Arc<dyn FileSystem>,
    hook: H,
}

impl<H: FsHook> HookedFileSystem<H> {
    /// `inner` seen through `hook`.
    pub fn new(inner: Arc<dyn FileSystem>, hook: H) -> Self {
        HookedFileSystem { inner, hook }
    }

    /// The hook (to read what it counted, open a gate it holds, ...).
    pub fn hook(&self) -> &H {
        &self.hook
    }

    /// The wrapped filesystem.
    pub fn inner(&self) -> &Arc<dyn FileSystem> {
        &self.inner
    }
}

impl<H: FsHook> FileSystem for HookedFileSystem<H> {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.hook.before(FsCall::Create(path))?;
        let f = self.inner.create(path)?;
        Ok(self.hook.writable(path, f))
    }
    fn create_mapped(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.hook.before(FsCall::Create(path))?;
        let f = self.inner.create_mapped(path)?;
        Ok(self.hook.writable(path, f))
    }
    fn create_direct(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.hook.before(FsCall::CreateDirect(path))?;
        let f = self.inner.create_direct(path)?;
        Ok(self.hook.writable(path, f))
    }
    fn open_random_access(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.hook.before(FsCall::OpenRandomAccess(path))?;
        let f = self.inner.open_random_access(path)?;
        Ok(self.hook.random_access(path, f))
    }
    fn open_random_access_direct(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.hook.before(FsCall::OpenRandomAccessDirect(path))?;
        let f = self.inner.open_random_access_direct(path)?;
        Ok(self.hook.random_access(path, f))
    }
    fn open_sequential(&self, path: &Path) -> io::Result<Box<dyn SequentialFile>> {
        self.hook.before(FsCall::OpenSequential(path))?;
        self.inner.open_sequential(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> io::Result<u64> {
        self.hook.before(FsCall::FileSize(path))?;
        self.inner.file_size(path)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.hook.before(FsCall::ListDir(dir))?;
        self.inner.list_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.hook.before(FsCall::CreateDirAll(dir))?;
        self.inner.create_dir_all(dir)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.hook.before(FsCall::RemoveFile(path))?;
        self.inner.remove_file(path)
    }
    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        self.hook.before(FsCall::RemoveDir(dir))?;
        self.inner.remove_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.hook.before(FsCall::Rename(from, to))?;
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.hook.before(FsCall::SyncDir(dir))?;
        self.inner.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        self.hook.before(FsCall::Lock(path))?;
        self.inner.lock(path)
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFileSystem;
    use parking_lot::Mutex;

    /// Records every call and refuses removals.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl FsHook for Recorder {
        fn before(&self, call: FsCall<'_>) -> io::Result<()> {
            self.0.lock().push(format!("{call:?}"));
            match call {
                FsCall::RemoveFile(_) => Err(io::Error::other("refused by the hook")),
                _ => Ok(()),
            }
        }
    }

    #[test]
    fn calls_reach_the_hook_then_the_inner_filesystem_unless_refused() {
        let mem = Arc::new(MemFileSystem::new());
        let fs = HookedFileSystem::new(mem.clone(), Recorder::default());
        fs.create_dir_all(Path::new("/d")).expect("mkdir");
        let mut f = fs.create(Path::new("/d/1.sst")).expect("create");
        f.append(b"abc").expect("append");
        f.sync().expect("sync");
        assert_eq!(fs.file_size(Path::new("/d/1.sst")).expect("size"), 3);
        let r = fs.open_random_access(Path::new("/d/1.sst")).expect("open");
        let mut buf = [0u8; 2];
        r.read_exact_at(1, &mut buf).expect("read");
        assert_eq!(&buf, b"bc");
        let err = fs
            .remove_file(Path::new("/d/1.sst"))
            .expect_err("the hook refuses removals");
        assert_eq!(err.to_string(), "refused by the hook");
        assert!(
            mem.exists(Path::new("/d/1.sst")),
            "the refused call never ran"
        );
        assert_eq!(
            *fs.hook().0.lock(),
            [
                r#"CreateDirAll("/d")"#,
                r#"Create("/d/1.sst")"#,
                r#"FileSize("/d/1.sst")"#,
                r#"OpenRandomAccess("/d/1.sst")"#,
                r#"RemoveFile("/d/1.sst")"#,
            ]
        );
        assert!(FsCall::Create(Path::new("/d/1.sst")).is_table());
        assert!(!FsCall::Lock(Path::new("/d/LOCK")).is_table());
    }
}
