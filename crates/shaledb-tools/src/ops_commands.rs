//! Operations on whole databases: backups, repair and ingestion.

use crate::db_commands::{Access, Context};
use crate::error::CliError;
use crate::progress::Spinner;
use crate::BackupAction;
use shaledb::{BackupEngine, BackupEngineOptions, IngestOptions, Options};
use std::io::Write;
use std::path::{Path, PathBuf};

/// `shale backup ...`.
pub(crate) fn backup(
    ctx: &Context,
    backup_dir: &Path,
    action: &BackupAction,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    // A limit applies to the one command that takes it.
    let opts = match action {
        BackupAction::Create { rate_limit } => BackupEngineOptions {
            backup_rate_limit: rate_limit.unwrap_or(0),
            ..Default::default()
        },
        BackupAction::Restore { rate_limit, .. } => BackupEngineOptions {
            restore_rate_limit: rate_limit.unwrap_or(0),
            ..Default::default()
        },
        _ => BackupEngineOptions::default(),
    };
    let engine = BackupEngine::open_opt(backup_dir, opts)?;
    match action {
        BackupAction::Create { .. } => {
            // A backup pauses the primary's deletions while it copies: a primary open.
            let db = ctx.open(Access::Write)?;
            let spinner = Spinner::start("backing up");
            let id = engine.create_backup(&db)?;
            drop(spinner);
            db.close()?;
            writeln!(out, "backup {id} created")?;
        }
        BackupAction::List => {
            writeln!(out, "id\ttimestamp\tfiles\tbytes")?;
            for b in engine.list()? {
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}",
                    b.id, b.timestamp, b.file_count, b.size
                )?;
            }
        }
        BackupAction::Verify { id } => {
            let spinner = Spinner::start("verifying");
            engine.verify(*id)?;
            drop(spinner);
            writeln!(out, "backup {id} is intact")?;
        }
        BackupAction::Restore { id, dir, .. } => {
            let spinner = Spinner::start("restoring");
            engine.restore(*id, dir)?;
            drop(spinner);
            writeln!(out, "backup {id} restored to {}", dir.display())?;
        }
        BackupAction::Delete { id } => engine.delete(*id)?,
        BackupAction::Purge { keep } => engine.purge_old(*keep)?,
    }
    Ok(())
}

/// `shale repair`: prints the report; a repair that lost data exits with code 1.
pub(crate) fn repair(ctx: &Context, out: &mut dyn Write) -> Result<(), CliError> {
    let spinner = Spinner::start("repairing");
    let report = shaledb::repair(ctx.require_db()?, &Options::default())?;
    drop(spinner);
    write!(out, "{report}")?;
    if report.lost_data() {
        return Err(CliError::msg(
            "repair lost data (see the report above; damaged files are in lost/)",
        ));
    }
    Ok(())
}

/// `shale ingest FILE...`.
pub(crate) fn ingest(ctx: &Context, files: &[PathBuf], move_files: bool) -> Result<(), CliError> {
    let db = ctx.open(Access::Write)?;
    let cf = db
        .cf(ctx.cf)
        .ok_or_else(|| CliError::msg(format!("column family {:?} does not exist", ctx.cf)))?;
    let opts = IngestOptions {
        move_files,
        ..Default::default()
    };
    db.ingest_cf(&cf, files, &opts)?;
    Ok(db.close()?)
}
