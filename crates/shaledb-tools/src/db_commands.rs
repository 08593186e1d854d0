//! The commands that open the database: reads, writes, families, statistics, verification,
//! compaction, checkpoints.

use crate::bytes::Codec;
use crate::error::CliError;
use crate::file_dumps::{kind_name, show_value};
use crate::progress::Spinner;
use crate::{Command, ScanArgs};
use shaledb::internals::{internal_entries, parse_internal_key};
use shaledb::{
    merge_operators, CfOptions, ColumnFamily, Db, MergeOperator, Options, ReadOptions, WriteOptions,
};
use std::io::Write;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The global options every command sees.
pub(crate) struct Context<'a> {
    pub(crate) db: Option<&'a Path>,
    pub(crate) cf: &'a str,
    pub(crate) codec: Codec,
    /// `--merge-operator`: given to every family.
    pub(crate) merge_operator: Option<Arc<dyn MergeOperator>>,
    /// `--ttl`: given to every family.
    pub(crate) ttl: Option<Duration>,
}

/// The built-in merge operator `--merge-operator` names.
pub(crate) fn merge_operator(name: &str) -> Result<Arc<dyn MergeOperator>, CliError> {
    match name.split_once(':') {
        None if name == "uint64add" => Ok(Arc::new(merge_operators::UInt64Add)),
        None if name == "stringappend" => Ok(Arc::new(merge_operators::StringAppend::new(","))),
        Some(("stringappend", delimiter)) => {
            Ok(Arc::new(merge_operators::StringAppend::new(delimiter)))
        }
        _ => Err(CliError::msg(format!(
            "unknown merge operator {name:?}: use uint64add, stringappend or stringappend:DELIM"
        ))),
    }
}

/// How a command opens the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The command changes nothing.
    Read,
    /// The command writes; the database must exist.
    Write,
    /// The command writes and may create the database (`--create-if-missing`).
    Create,
}

/// Properties `stats` prints after `shaledb.stats` and `shaledb.blob-stats`, as `name: value`.
const STATS_PROPERTIES: [&str; 14] = [
    "shaledb.estimate-num-keys",
    "shaledb.last-sequence",
    "shaledb.total-sst-files-size",
    "shaledb.estimate-live-data-size",
    "shaledb.cur-size-all-mem-tables",
    "shaledb.num-immutable-mem-table",
    "shaledb.base-level",
    "shaledb.estimate-pending-compaction-bytes",
    "shaledb.compaction-bytes-written",
    "shaledb.user-bytes-written",
    "shaledb.num-blob-files",
    "shaledb.live-blob-file-size",
    "shaledb.live-blob-file-garbage-size",
    "shaledb.background-errors",
];

impl Context<'_> {
    /// The database directory, which this command needs.
    pub(crate) fn require_db(&self) -> Result<&Path, CliError> {
        self.db
            .ok_or_else(|| CliError::msg("this command needs the database: give --db PATH"))
    }

    fn parse(&self, arg: &str, what: &str) -> Result<Vec<u8>, CliError> {
        Ok(self.codec.parse(arg, what)?)
    }

    fn parse_opt(&self, arg: &Option<String>, what: &str) -> Result<Option<Vec<u8>>, CliError> {
        arg.as_deref().map(|a| self.parse(a, what)).transpose()
    }

    /// Opens the database; never creates one unless `access` is `Create`.
    pub(crate) fn open(&self, access: Access) -> Result<Db, CliError> {
        let path = self.require_db()?;
        let opts = Options {
            create_if_missing: access == Access::Create,
            merge_operator: self.merge_operator.clone(),
            ttl: self.ttl,
            ..Options::default()
        };
        // Every family gets the operator and TTL too (a new database has only the default).
        let families: Vec<(String, CfOptions)> = match Db::list_cf(path, &opts) {
            Ok(names) => names
                .into_iter()
                .filter(|n| n != "default")
                .map(|n| (n, opts.cf_options()))
                .collect(),
            Err(_) => Vec::new(),
        };
        // Commands that change nothing work beside a running primary and write nothing.
        Ok(match access {
            Access::Read => Db::open_read_only_cf(path, opts, families)?,
            Access::Write | Access::Create => Db::open_cf(path, opts, families)?,
        })
    }

    /// The handle of the family `--cf` names.
    fn family(&self, db: &Db) -> Result<ColumnFamily, CliError> {
        db.cf(self.cf).ok_or_else(|| {
            CliError::msg(format!(
                "column family {:?} does not exist (list-cf lists them)",
                self.cf
            ))
        })
    }
}

/// Runs a command that opens the database.
pub(crate) fn run(ctx: &Context, command: &Command, out: &mut dyn Write) -> Result<(), CliError> {
    match command {
        Command::ListCf => list_cf(ctx, out),
        Command::Get { key } => get(ctx, key, out),
        Command::Put {
            key,
            value,
            create_if_missing,
        } => put(ctx, key, value, *create_if_missing),
        Command::Delete { key } => delete(ctx, key),
        Command::Scan(args) => scan(ctx, args, out),
        Command::Dump => dump(ctx, out),
        Command::CreateCf {
            name,
            create_if_missing,
        } => create_cf(ctx, name, *create_if_missing),
        Command::DropCf { name } => drop_cf(ctx, name),
        Command::Stats { property } => stats(ctx, property.as_deref(), out),
        Command::Verify => verify(ctx, out),
        Command::Compact { from, to } => compact(ctx, from, to),
        Command::Checkpoint { dir, flush } => checkpoint(ctx, dir, *flush),
        Command::ApproximateSize { from, to } => approximate_size(ctx, from, to, out),
        Command::Repair => crate::ops_commands::repair(ctx, out),
        Command::Ingest { files, move_files } => {
            crate::ops_commands::ingest(ctx, files, *move_files)
        }
        Command::SstDump { .. }
        | Command::WalDump { .. }
        | Command::BlobDump { .. }
        | Command::ManifestDump { .. }
        | Command::Backup { .. } => Err(CliError::msg(
            "this command is not run through an open database",
        )),
    }
}

fn list_cf(ctx: &Context, out: &mut dyn Write) -> Result<(), CliError> {
    // Reads the MANIFEST only: no lock, nothing written.
    for name in Db::list_cf(ctx.require_db()?, &Options::default())? {
        writeln!(out, "{name}")?;
    }
    Ok(())
}

fn get(ctx: &Context, key: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let key = ctx.parse(key, "key")?;
    let db = ctx.open(Access::Read)?;
    let cf = ctx.family(&db)?;
    match db.get_cf(&cf, &key)? {
        Some(v) => Ok(writeln!(out, "{}", ctx.codec.show(&v))?),
        None => Err(CliError::msg(format!(
            "key {} not found",
            ctx.codec.show(&key)
        ))),
    }
}

fn put(ctx: &Context, key: &str, value: &str, create: bool) -> Result<(), CliError> {
    let (key, value) = (ctx.parse(key, "key")?, ctx.parse(value, "value")?);
    let db = ctx.open(if create {
        Access::Create
    } else {
        Access::Write
    })?;
    let cf = ctx.family(&db)?;
    db.put_cf_opt(&synced(), &cf, &key, &value)?;
    Ok(db.close()?)
}

fn delete(ctx: &Context, key: &str) -> Result<(), CliError> {
    let key = ctx.parse(key, "key")?;
    let db = ctx.open(Access::Write)?;
    let cf = ctx.family(&db)?;
    db.delete_cf_opt(&synced(), &cf, &key)?;
    Ok(db.close()?)
}

/// A one-off write from the command line is synced: it is durable when `shale` returns.
fn synced() -> WriteOptions {
    WriteOptions {
        sync: true,
        ..WriteOptions::default()
    }
}

fn scan(ctx: &Context, args: &ScanArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let mut lower = ctx.parse_opt(&args.from, "--from key")?;
    let mut upper = ctx.parse_opt(&args.to, "--to key")?;
    if let Some(p) = ctx.parse_opt(&args.prefix, "prefix")? {
        // The keys with prefix p are [p, successor of p): intersect with --from/--to.
        lower = Some(lower.map_or(p.clone(), |l| l.max(p.clone())));
        if let Some(end) = prefix_successor(&p) {
            upper = Some(upper.map_or(end.clone(), |u| u.min(end)));
        }
    }
    let db = ctx.open(Access::Read)?;
    let cf = ctx.family(&db)?;
    let ro = ReadOptions {
        iterate_lower_bound: lower,
        iterate_upper_bound: upper,
        fill_cache: false,
        ..ReadOptions::default()
    };
    let mut it = db.iter_cf(&cf, &ro)?;
    if args.reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    let mut printed = 0u64;
    while it.valid() && args.limit.is_none_or(|l| printed < l) {
        let value = it.try_value()?;
        writeln!(
            out,
            "{}\t{}",
            ctx.codec.show(it.key()),
            ctx.codec.show(value)
        )?;
        printed += 1;
        if args.reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    Ok(it.status()?)
}

/// The smallest key after every key starting with `p`; `None` if there is none.
fn prefix_successor(p: &[u8]) -> Option<Vec<u8>> {
    let keep = p.iter().rposition(|&b| b != 0xff)?;
    let mut s = p[..=keep].to_vec();
    s[keep] += 1;
    Some(s)
}

/// Every entry as stored, all versions, then the range tombstones.
fn dump(ctx: &Context, out: &mut dyn Write) -> Result<(), CliError> {
    let db = ctx.open(Access::Read)?;
    let cf = ctx.family(&db)?;
    let (mut it, tombstones) = internal_entries(&db, &cf)?;
    it.seek_to_first();
    while it.valid() {
        let parsed = parse_internal_key(it.key()).ok_or_else(|| {
            CliError::msg(format!(
                "an entry's internal key does not parse: {}",
                ctx.codec.show(it.key())
            ))
        })?;
        writeln!(
            out,
            "{}\t{}\t{}\t{}",
            ctx.codec.show(parsed.user_key),
            parsed.sequence,
            kind_name(parsed.kind),
            show_value(ctx.codec, parsed.kind, it.value())
        )?;
        it.next();
    }
    it.status()?;
    for t in tombstones {
        writeln!(
            out,
            "{}\t{}\tRANGE_DELETE\t{}",
            ctx.codec.show(&t.start),
            t.seq,
            ctx.codec.show(&t.end)
        )?;
    }
    Ok(())
}

fn create_cf(ctx: &Context, name: &str, create: bool) -> Result<(), CliError> {
    let db = ctx.open(if create {
        Access::Create
    } else {
        Access::Write
    })?;
    db.create_cf(name, CfOptions::default())?;
    Ok(db.close()?)
}

fn drop_cf(ctx: &Context, name: &str) -> Result<(), CliError> {
    let db = ctx.open(Access::Write)?;
    if db.cf(name).is_none() {
        return Err(CliError::msg(format!(
            "column family {name:?} does not exist (list-cf lists them)"
        )));
    }
    db.drop_cf(name)?;
    Ok(db.close()?)
}

/// `shaledb.stats`, `shaledb.blob-stats`, then [`STATS_PROPERTIES`]; or one property.
fn stats(ctx: &Context, property: Option<&str>, out: &mut dyn Write) -> Result<(), CliError> {
    let db = ctx.open(Access::Read)?;
    let cf = ctx.family(&db)?;
    if let Some(name) = property {
        let value = db
            .property_cf(&cf, name)
            .ok_or_else(|| CliError::msg(format!("there is no property {name:?}")))?;
        writeln!(out, "{}", value.trim_end_matches('\n'))?;
        return Ok(());
    }
    for name in ["shaledb.stats", "shaledb.blob-stats"] {
        if let Some(text) = db.property_cf(&cf, name) {
            writeln!(out, "{}", text.trim_end_matches('\n'))?;
        }
    }
    for name in STATS_PROPERTIES {
        match db.property_cf(&cf, name) {
            Some(value) if value.is_empty() => writeln!(out, "{name}: none")?,
            Some(value) => writeln!(out, "{name}: {value}")?,
            None => {}
        }
    }
    Ok(())
}

fn verify(ctx: &Context, out: &mut dyn Write) -> Result<(), CliError> {
    let db = ctx.open(Access::Read)?;
    let spinner = Spinner::start("verifying checksums");
    db.verify_checksums()?;
    // Then each file whole against the checksum the MANIFEST recorded when it was written.
    db.verify_file_checksums()?;
    drop(spinner);
    writeln!(out, "ok")?;
    Ok(())
}

fn compact(ctx: &Context, from: &Option<String>, to: &Option<String>) -> Result<(), CliError> {
    let from = ctx.parse_opt(from, "--from key")?;
    let to = ctx.parse_opt(to, "--to key")?;
    let db = ctx.open(Access::Write)?;
    let cf = ctx.family(&db)?;
    let spinner = Spinner::start("compacting");
    db.compact_range_cf(&cf, from.as_deref(), to.as_deref())?;
    drop(spinner);
    Ok(db.close()?)
}

fn checkpoint(ctx: &Context, dir: &Path, flush: bool) -> Result<(), CliError> {
    // A checkpoint pauses the primary's deletions, which only the primary can do.
    let db = ctx.open(Access::Write)?;
    let spinner = Spinner::start("writing the checkpoint");
    let opts = shaledb::CheckpointOptions {
        // 0: flush whatever the logs' size.
        log_size_for_flush: if flush { 0 } else { u64::MAX },
    };
    db.checkpoint_opt(dir, &opts)?;
    drop(spinner);
    Ok(())
}

fn approximate_size(
    ctx: &Context,
    from: &Option<String>,
    to: &Option<String>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let from = ctx.parse_opt(from, "--from key")?;
    let to = ctx.parse_opt(to, "--to key")?;
    let db = ctx.open(Access::Read)?;
    let cf = ctx.family(&db)?;
    let range = (
        from.map_or(Bound::Unbounded, Bound::Included),
        to.map_or(Bound::Unbounded, Bound::Excluded),
    );
    writeln!(out, "{}", db.approximate_size_cf(&cf, range)?)?;
    Ok(())
}
