//! The real filesystem (work in progress).

/// The operating system's filesystem.
pub struct PosixFileSystem {}
impl PosixFileSystem {
    /// A handle to the real filesystem.
    pub fn new() -> Self {
        PosixFileSystem {}
    }
}

impl Default for PosixFileSystem {
    fn default() -> Self {
        Self::new()
    }
}

#[allow(unused_variables)]
impl super::FileSystem for PosixFileSystem {
    fn create(&self, path: &std::path::Path) -> std::io::Result<Box<dyn super::WritableFile>> {
        unimplemented!()
    }
    fn open_random_access(
        &self,
        path: &std::path::Path,
    ) -> std::io::Result<std::sync::Arc<dyn super::RandomAccessFile>> {
        unimplemented!()
    }
    fn open_sequential(
        &self,
        path: &std::path::Path,
    ) -> std::io::Result<Box<dyn super::SequentialFile>> {
        unimplemented!()
    }
    fn exists(&self, path: &std::path::Path) -> bool {
        unimplemented!()
    }
    fn file_size(&self, path: &std::path::Path) -> std::io::Result<u64> {
        unimplemented!()
    }
    fn list_dir(&self, dir: &std::path::Path) -> std::io::Result<Vec<String>> {
        unimplemented!()
    }
    fn create_dir_all(&self, dir: &std::path::Path) -> std::io::Result<()> {
        unimplemented!()
    }
    fn remove_file(&self, path: &std::path::Path) -> std::io::Result<()> {
        unimplemented!()
    }
    fn remove_dir(&self, dir: &std::path::Path) -> std::io::Result<()> {
        unimplemented!()
    }
    fn rename(&self, from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
        unimplemented!()
    }
    fn sync_dir(&self, dir: &std::path::Path) -> std::io::Result<()> {
        unimplemented!()
    }
    fn lock(&self, path: &std::path::Path) -> std::io::Result<Box<dyn super::FileLock>> {
        unimplemented!()
    }
}
