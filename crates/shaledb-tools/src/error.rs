//! The tool's one error type: a sentence for stderr.

use std::fmt;

/// Why a command failed.
#[derive(Debug)]
pub(crate) enum CliError {
    /// A message for the user (the library's errors are turned into their `Display`).
    Message(String),
    /// Standard output was closed by its reader: stop quietly.
    BrokenPipe,
}

impl CliError {
    pub(crate) fn msg(s: impl Into<String>) -> CliError {
        CliError::Message(s.into())
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Message(m) => f.write_str(m),
            CliError::BrokenPipe => f.write_str("standard output was closed"),
        }
    }
}

impl From<shaledb::Error> for CliError {
    fn from(e: shaledb::Error) -> CliError {
        match e {
            shaledb::Error::NotFound(p) => CliError::Message(format!(
                "database at {} does not exist (put and create-cf create one with \
                 --create-if-missing)",
                p.display()
            )),
            e => CliError::Message(e.to_string()),
        }
    }
}

/// An error writing the output.
impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> CliError {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            CliError::BrokenPipe
        } else {
            CliError::Message(format!("writing the output failed: {e}"))
        }
    }
}

impl From<String> for CliError {
    fn from(s: String) -> CliError {
        CliError::Message(s)
    }
}
