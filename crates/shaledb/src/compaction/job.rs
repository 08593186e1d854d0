//! Writes a sorted stream of internal entries into table files: used by flushes (one L0 file)
//! and compactions (files cut at the level's target size, dropping what no reader can see).
//!
//! Outputs are synced, their directory entry is synced, and each is reopened and its entry
//! count checked before the caller records it in the MANIFEST.

use crate::cache::TableCache;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{self, InternalKey, SequenceNumber, ValueKind};
use crate::options::Options;
use crate::sst::{TableBuilder, TableBuilderOptions};
use crate::version::{filename, FileMetaData, Version};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a compaction may drop.
pub struct DropPolicy {
    /// The oldest sequence number any reader can still ask for.
    pub smallest_snapshot: SequenceNumber,
    /// The version the inputs come from (to tell whether a tombstone still hides anything).
    pub version: Arc<Version>,
    /// The level being written.
    pub output_level: usize,
}

/// Where and how output tables are written.
pub struct OutputSpec<'a> {
    /// The filesystem.
    pub fs: &'a Arc<dyn FileSystem>,
    /// The database directory.
    pub dir: &'a Path,
    /// The database options.
    pub opts: &'a Options,
    /// Used to reopen and check each output.
    pub tables: &'a TableCache,
    /// The level the outputs go to (chooses the codec).
    pub level: usize,
    /// Files are cut once they pass this many bytes, at a user-key boundary.
    pub max_file_size: u64,
}

struct Output {
    builder: TableBuilder,
    meta: FileMetaData,
    /// The last key added; becomes `meta.largest` when the output is finished (kept in one
    /// buffer rather than copied into `meta` per entry).
    largest: Vec<u8>,
}

/// Writes the entries of `input` (positioned by this function) into new tables. Returns the
/// new files' metadata. On error every output file written is removed.
pub fn write_tables(
    spec: &OutputSpec<'_>,
    input: &mut dyn InternalIterator,
    policy: Option<&DropPolicy>,
    new_file_number: &mut dyn FnMut() -> u64,
    shutting_down: &AtomicBool,
) -> Result<Vec<FileMetaData>> {
    let mut done: Vec<FileMetaData> = Vec::new();
    let mut current: Option<Output> = None;
    let res = write_inner(
        spec,
        input,
        policy,
        new_file_number,
        shutting_down,
        &mut done,
        &mut current,
    );
    if let Err(e) = res {
        if let Some(o) = current.take() {
            o.builder.abandon();
            let _ = spec
                .fs
                .remove_file(&filename::table_file(spec.dir, o.meta.number));
        }
        for f in &done {
            spec.tables.evict(f.number);
            let _ = spec
                .fs
                .remove_file(&filename::table_file(spec.dir, f.number));
        }
        return Err(e);
    }
    Ok(done)
}

fn write_inner(
    spec: &OutputSpec<'_>,
    input: &mut dyn InternalIterator,
    policy: Option<&DropPolicy>,
    new_file_number: &mut dyn FnMut() -> u64,
    shutting_down: &AtomicBool,
    done: &mut Vec<FileMetaData>,
    current: &mut Option<Output>,
) -> Result<()> {
    // The user key of the previous entry, in a buffer reused for every key.
    let mut current_user_key: Vec<u8> = Vec::new();
    let mut has_current_user_key = false;
    let mut last_sequence_for_key = SequenceNumber::MAX;
    let mut counter = 0u32;
    input.seek_to_first();
    while input.valid() {
        counter = counter.wrapping_add(1);
        if counter.is_multiple_of(1024) && shutting_down.load(Ordering::Relaxed) {
            return Err(Error::Closed);
        }
        let ikey = input.key();
        let p = key::parse_internal_key(ikey).ok_or_else(|| {
            Error::corruption(
                spec.dir,
                0,
                "compaction input holds an unparseable internal key",
            )
        })?;
        let new_user_key = !has_current_user_key || current_user_key.as_slice() != p.user_key;
        if new_user_key {
            // Cut only between user keys so one key's versions never span two files of a level.
            let full = current
                .as_ref()
                .is_some_and(|o| o.builder.file_size() >= spec.max_file_size);
            if full {
                if let Some(o) = current.take() {
                    done.push(finish_output(spec, o)?);
                }
            }
            current_user_key.clear();
            current_user_key.extend_from_slice(p.user_key);
            has_current_user_key = true;
            last_sequence_for_key = SequenceNumber::MAX;
        }
        let mut drop = false;
        if let Some(policy) = policy {
            if last_sequence_for_key <= policy.smallest_snapshot {
                // A newer version of this key is visible to every reader.
                drop = true;
            } else if p.kind == ValueKind::Delete
                && p.sequence <= policy.smallest_snapshot
                && policy
                    .version
                    .is_base_level_for_key(policy.output_level, p.user_key)
            {
                // Nothing below can hold an older version for this tombstone to hide.
                drop = true;
            }
            last_sequence_for_key = p.sequence;
        }
        if !drop {
            if current.is_none() {
                *current = Some(open_output(spec, new_file_number())?);
            }
            if let Some(o) = current.as_mut() {
                o.builder.add(ikey, input.value())?;
                let m = &mut o.meta;
                if m.num_entries == 0 {
                    m.smallest = InternalKey(ikey.to_vec());
                }
                o.largest.clear();
                o.largest.extend_from_slice(ikey);
                m.smallest_seqno = m.smallest_seqno.min(p.sequence);
                m.largest_seqno = m.largest_seqno.max(p.sequence);
                m.num_entries += 1;
                if p.kind == ValueKind::Delete {
                    m.num_deletions += 1;
                }
            }
        }
        input.next();
    }
    input.status()?;
    if let Some(o) = current.take() {
        done.push(finish_output(spec, o)?);
    }
    if !done.is_empty() {
        spec.fs
            .sync_dir(spec.dir)
            .map_err(|e| Error::io("syncing the database directory", e))?;
    }
    Ok(())
}

fn open_output(spec: &OutputSpec<'_>, number: u64) -> Result<Output> {
    let path = filename::table_file(spec.dir, number);
    let file = spec
        .fs
        .create(&path)
        .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    let opts = TableBuilderOptions {
        block_size: spec.opts.block_size,
        restart_interval: spec.opts.block_restart_interval,
        bloom_bits_per_key: spec.opts.bloom_bits_per_key,
        compression: spec.opts.compression_for_level(spec.level),
    };
    Ok(Output {
        builder: TableBuilder::new(opts, file, path, number),
        meta: FileMetaData {
            number,
            file_size: 0,
            smallest: InternalKey::default(),
            largest: InternalKey::default(),
            smallest_seqno: SequenceNumber::MAX,
            largest_seqno: 0,
            num_entries: 0,
            num_deletions: 0,
        },
        largest: Vec::new(),
    })
}

fn finish_output(spec: &OutputSpec<'_>, o: Output) -> Result<FileMetaData> {
    let mut meta = o.meta;
    meta.largest = InternalKey(o.largest);
    let props = o.builder.finish()?;
    meta.file_size = props.file_size;
    // Read the new table back before anything refers to it.
    let table = spec.tables.get(meta.number, meta.file_size)?;
    if table.properties().num_entries != meta.num_entries {
        return Err(Error::corruption(
            table.path(),
            0,
            format!(
                "new table holds {} entries but {} were written",
                table.properties().num_entries,
                meta.num_entries
            ),
        ));
    }
    Ok(meta)
}
