//! The one error type of the engine.
//!
//! Every failure a caller can see is one of these variants. Corruption always names the file and
//! the byte offset where it was found so an operator can locate it with `shale sst-dump`.

use std::fmt;
use std::path::PathBuf;

/// The result type of every fallible ShaleDB call.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong in ShaleDB.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system reported an IO error.
    #[error("IO error{}: {source}", context_suffix(.context))]
    Io {
        /// What the engine was doing, e.g. "writing WAL 000012.log".
        context: String,
        /// The underlying OS error.
        #[source]
        source: std::io::Error,
    },
    /// Bytes read from disk failed validation. Never silently turned into "not found".
    #[error("corruption in {} at offset {offset}: {detail}", .file.display())]
    Corruption {
        /// The file holding the bad bytes.
        file: PathBuf,
        /// The byte offset in that file where the problem was found.
        offset: u64,
        /// What was wrong.
        detail: String,
    },
    /// A caller passed an argument the engine cannot accept.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Another handle, in this process or another, has the database open.
    #[error("database at {} is locked: it is already open in this or another process", .0.display())]
    Locked(PathBuf),
    /// A WAL or MANIFEST write or sync failed earlier; the database refuses further writes
    /// because their durability could not be guaranteed. Reads keep working. Reopen to recover.
    #[error("database refuses writes after an earlier failure ({0}); reads still work, reopen the database to recover")]
    Poisoned(String),
    /// The database is being closed or was closed.
    #[error("database is closed")]
    Closed,
    /// The database does not exist and `create_if_missing` is false.
    #[error("database at {} does not exist (set Options::create_if_missing to create it)", .0.display())]
    NotFound(PathBuf),
    /// The database exists and `error_if_exists` is true.
    #[error("database at {} already exists (Options::error_if_exists is set)", .0.display())]
    AlreadyExists(PathBuf),
}

fn context_suffix(context: &str) -> String {
    if context.is_empty() {
        String::new()
    } else {
        format!(" while {context}")
    }
}

impl Error {
    /// Builds a corruption error for `file` at `offset`.
    pub(crate) fn corruption(
        file: impl Into<PathBuf>,
        offset: u64,
        detail: impl fmt::Display,
    ) -> Error {
        Error::Corruption {
            file: file.into(),
            offset,
            detail: detail.to_string(),
        }
    }

    /// Wraps an IO error with what the engine was doing.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// True if this is a corruption error.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// A copy of this error, for handing the same failure to several waiters (group commit)
    /// or keeping it as the background error. IO errors keep their kind and message.
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { context, source } => Error::Io {
                context: context.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corruption {
                file,
                offset,
                detail,
            } => Error::Corruption {
                file: file.clone(),
                offset: *offset,
                detail: detail.clone(),
            },
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::Locked(p) => Error::Locked(p.clone()),
            Error::Poisoned(s) => Error::Poisoned(s.clone()),
            Error::Closed => Error::Closed,
            Error::NotFound(p) => Error::NotFound(p.clone()),
            Error::AlreadyExists(p) => Error::AlreadyExists(p.clone()),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Self {
        Error::Io {
            context: String::new(),
            source,
        }
    }
}
