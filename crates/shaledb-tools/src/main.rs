//! `shale`: inspect and administer a ShaleDB database from the command line.
//!
//! A thin layer over the library: each command is one or two library calls (or, for the
//! file dumps, a reader from `shaledb::internals`) plus formatting. Errors are one sentence
//! on stderr and exit code 1; see docs/operations.md, "The `shale` tool".

mod bytes;
mod db_commands;
mod error;
mod file_dumps;
mod ops_commands;
mod progress;

use bytes::Codec;
use clap::{Parser, Subcommand};
use error::CliError;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Inspect and administer a ShaleDB database.
///
/// Keys and values are escaped text by default: printable ASCII as is, a backslash as \\,
/// any other byte as \xNN (the same form is accepted as input). --hex reads and writes hex.
#[derive(Parser, Debug)]
#[command(name = "shale", version)]
struct Cli {
    /// The database directory (not needed by sst-dump, wal-dump and blob-dump).
    #[arg(long, global = true, value_name = "PATH")]
    db: Option<PathBuf>,
    /// The column family to read or write.
    #[arg(long, global = true, value_name = "NAME", default_value = "default")]
    cf: String,
    /// Keys and values as hex digits, on input and output.
    #[arg(long, global = true)]
    hex: bool,
    /// The merge operator the database was written with (every family): `uint64add`,
    /// `stringappend` (delimiter ",") or `stringappend:DELIM`.
    #[arg(long, global = true, value_name = "NAME")]
    merge_operator: Option<String>,
    /// The TTL, in seconds, of a database whose families were created with one.
    #[arg(long, global = true, value_name = "SECONDS")]
    ttl: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

/// The commands. Backup, restore, repair and ingest slot in here as their library calls land
/// (`BackupEngine`, `repair`, `SstFileWriter` with `db.ingest`).
#[derive(Subcommand, Debug)]
enum Command {
    /// Prints the value of KEY (exit code 1 if it is not found).
    Get { key: String },
    /// Stores VALUE under KEY (synced).
    Put {
        key: String,
        value: String,
        /// Create the database if it does not exist.
        #[arg(long)]
        create_if_missing: bool,
    },
    /// Deletes KEY (synced).
    Delete { key: String },
    /// Prints key<TAB>value lines in key order.
    Scan(ScanArgs),
    /// Prints every stored entry, all versions: key<TAB>sequence<TAB>kind<TAB>value.
    Dump,
    /// Prints a table file: properties, block counts and entries.
    SstDump {
        file: PathBuf,
        /// Re-read every block and check its checksum and key order first.
        #[arg(long)]
        verify: bool,
    },
    /// Prints the version edits of the database's MANIFEST (or of FILE).
    ManifestDump { file: Option<PathBuf> },
    /// Prints the records of a write-ahead log: batches with sequence numbers and operations.
    WalDump { file: PathBuf },
    /// Prints the records of a blob file.
    BlobDump { file: PathBuf },
    /// Lists the column families.
    ListCf,
    /// Creates a column family.
    CreateCf {
        name: String,
        /// Create the database if it does not exist.
        #[arg(long)]
        create_if_missing: bool,
    },
    /// Drops a column family and its data.
    DropCf { name: String },
    /// Prints statistics (shaledb.stats and other properties, including blob files).
    Stats {
        /// Print only this property (e.g. shaledb.estimate-num-keys).
        #[arg(long, value_name = "NAME")]
        property: Option<String>,
    },
    /// Re-reads every table and blob file and checks every checksum: each block's and
    /// record's, then each whole file's against the one the MANIFEST recorded.
    Verify,
    /// Compacts the keys from --from to --to (both included; default: everything).
    Compact {
        #[arg(long, value_name = "KEY")]
        from: Option<String>,
        #[arg(long, value_name = "KEY")]
        to: Option<String>,
    },
    /// Makes an openable copy of the database in DIR (which must not exist).
    Checkpoint {
        dir: PathBuf,
        /// Flush every column family first, so the copy holds tables and no write-ahead log.
        #[arg(long)]
        flush: bool,
    },
    /// Prints about how many bytes of table files hold the keys from --from to --to
    /// (--to excluded; default: unbounded).
    ApproximateSize {
        #[arg(long, value_name = "KEY")]
        from: Option<String>,
        #[arg(long, value_name = "KEY")]
        to: Option<String>,
    },
    /// Backups in --backup-dir: create (needs --db), list, verify, restore, delete, purge.
    Backup {
        /// The backup directory (created if missing).
        #[arg(long, value_name = "DIR")]
        backup_dir: PathBuf,
        #[command(subcommand)]
        action: BackupAction,
    },
    /// Rebuilds the MANIFEST from the tables and WALs present (after CURRENT or the MANIFEST
    /// was lost or damaged); damaged files are moved to lost/, never deleted. Prints what was
    /// kept and lost; exit code 1 if data was lost.
    Repair,
    /// Adds SST files written by SstFileWriter to the family (atomically, all or none).
    Ingest {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Hard-link the files instead of copying them (copied where links fail).
        #[arg(long = "move")]
        move_files: bool,
    },
}

/// What `shale backup` does.
#[derive(Subcommand, Debug)]
enum BackupAction {
    /// Backs up the database (--db): only files not in an earlier backup are copied.
    Create {
        /// Read at most BYTES per second from the database (default: no limit).
        #[arg(long, value_name = "BYTES")]
        rate_limit: Option<u64>,
    },
    /// Lists the backups: id, time, files, bytes.
    List,
    /// Re-reads every file of backup ID and checks its checksum.
    Verify { id: u64 },
    /// Restores backup ID into DIR (which must not exist or be empty).
    Restore {
        id: u64,
        dir: PathBuf,
        /// Copy at most BYTES per second (default: no limit).
        #[arg(long, value_name = "BYTES")]
        rate_limit: Option<u64>,
    },
    /// Deletes backup ID (and the files no other backup uses).
    Delete { id: u64 },
    /// Deletes all but the newest KEEP backups.
    Purge {
        #[arg(long)]
        keep: usize,
    },
}

/// `scan`'s options.
#[derive(clap::Args, Debug)]
struct ScanArgs {
    /// First key (included).
    #[arg(long, value_name = "KEY")]
    from: Option<String>,
    /// Last key (excluded).
    #[arg(long, value_name = "KEY")]
    to: Option<String>,
    /// Only keys starting with P.
    #[arg(long, value_name = "P")]
    prefix: Option<String>,
    /// Print at most N entries.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// From the last key to the first.
    #[arg(long)]
    reverse: bool,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result = run(&cli, &mut out).and_then(|()| out.flush().map_err(CliError::from));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stopped early (`shale ... | head`) is not a failure.
        Err(CliError::BrokenPipe) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shale: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Help and version go to stdout with exit code 0; a usage error is one line and code 1.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = e.print();
        return ExitCode::FAILURE;
    }
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    eprintln!("shale: {first} (see shale --help)");
    ExitCode::FAILURE
}

/// Runs one command, writing its output to `out`.
fn run(cli: &Cli, out: &mut dyn Write) -> Result<(), CliError> {
    let codec = if cli.hex { Codec::Hex } else { Codec::Text };
    let ctx = db_commands::Context {
        db: cli.db.as_deref(),
        cf: &cli.cf,
        codec,
        merge_operator: cli
            .merge_operator
            .as_deref()
            .map(db_commands::merge_operator)
            .transpose()?,
        ttl: cli.ttl.map(std::time::Duration::from_secs),
    };
    match &cli.command {
        Command::SstDump { file, verify } => file_dumps::sst_dump(file, *verify, codec, out),
        Command::WalDump { file } => file_dumps::wal_dump(file, codec, out),
        Command::BlobDump { file } => file_dumps::blob_dump(file, codec, out),
        Command::ManifestDump { file } => {
            let file = match file {
                Some(f) => f.clone(),
                None => file_dumps::current_manifest(ctx.require_db()?)?,
            };
            file_dumps::manifest_dump(&file, codec, out)
        }
        Command::Backup { backup_dir, action } => {
            ops_commands::backup(&ctx, backup_dir, action, out)
        }
        command => db_commands::run(&ctx, command, out),
    }
}
