//! Writes a table file from entries in internal-key order.

use super::block::{Block, BlockBuilder};
use super::format::{append_block_trailer, maybe_compress, Footer, TableFormat, BLOCK_TRAILER_LEN};
use super::index_block::{IndexBlockBuilder, IndexForm};
use super::{filter, properties, BlockHandle, TableBuilderOptions, TableProperties};
use crate::cache::BlockCache;
use crate::compression::{CompressionType, Compressor};
use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::key::{self, ValueKind, KIND_FOR_SEEK, MAX_SEQUENCE};
use crate::range_del::FragmentedRangeTombstones;
use std::path::PathBuf;
use std::sync::Arc;

/// Metaindex key of the whole-table bloom filter block.
pub(crate) const FILTER_META_KEY: &str = "filter.shaledb.bloom";
/// Metaindex key of the top-level index of a partitioned filter (formats 3 and 4).
pub(crate) const PARTITIONED_FILTER_META_KEY: &str = "partitionedfilter.shaledb.bloom";
/// Metaindex key of the properties block.
pub(crate) const PROPERTIES_META_KEY: &str = "shaledb.properties";
/// Metaindex key of the range-deletion block (RocksDB's name for it).
pub(crate) const RANGE_DEL_META_KEY: &str = "rocksdb.range_del";
/// Metaindex key of the zstd dictionary block (RocksDB's name for it).
pub(crate) const COMPRESSION_DICT_META_KEY: &str = "rocksdb.compression_dict";

/// Builds one table file. Entries must be added in strictly increasing internal-key order;
/// then `finish` writes the metadata and footer and syncs the file.
pub(crate) struct TableBuilder {
    opts: TableBuilderOptions,
    file: Box<dyn WritableFile>,
    path: PathBuf,
    file_number: u64,
    /// Bytes written to the file so far.
    offset: u64,
    /// CRC-32C of the bytes written so far (the whole file's once finished).
    crc: u32,
    data_block: BlockBuilder,
    /// Every data block's index entry, until `finish` knows the table's index key form.
    index_entries: IndexEntries,
    /// With `partition_index`: the index partitions, cut by `finish`.
    index_partitions: Vec<IndexPartition>,
    /// With `partition_filters`: where each data block's keys end in `filter_hashes`.
    block_hash_ends: Vec<usize>,
    /// With `partition_filters` and a prefix extractor: the prefix hash of each data block's
    /// first key (see `filter_partitions`).
    block_first_prefix: Vec<Option<u64>>,
    last_key: Vec<u8>,
    /// Handle of the last data block written, whose index entry waits for the next key so the
    /// separator can be shortened.
    pending_index: Option<BlockHandle>,
    filter_hashes: Vec<u64>,
    /// The prefix of the last key whose prefix went into the filter.
    last_prefix: Option<Vec<u8>>,
    props: TableProperties,
    /// Set after a failed write: the file is in an unknown state, refuse to go on.
    failed: bool,
    scratch: Vec<u8>,
    stored: Vec<u8>,
    /// Compresses data and index blocks (keeps zstd's context from block to block).
    compressor: Compressor,
    /// The table's range tombstones, written as one block by `finish`.
    range_dels: Option<FragmentedRangeTombstones>,
    /// Where each data block goes as it is written, under the cache id the table will be
    /// opened with (`prepopulate_block_cache`).
    warm_cache: Option<(Arc<BlockCache>, u64)>,
    /// Data blocks held back until the zstd dictionary is built from them (`with_dictionary`).
    dict_samples: Option<DictionarySamples>,
    /// The dictionary the data blocks were compressed with, written by `finish`.
    dictionary: Option<Vec<u8>>,
    /// What the data block being built holds, to decide whether it is compressed.
    block_values: BlockValues,
}

/// Whether a data block's entries carry values or only blob references (and tombstones),
/// counted as entries are added.
#[derive(Default, Clone, Copy)]
struct BlockValues {
    references: bool,
    inline_values: bool,
}

impl BlockValues {
    fn note(&mut self, kind: ValueKind) {
        match kind {
            ValueKind::BlobIndex => self.references = true,
            ValueKind::Put | ValueKind::Merge => self.inline_values = true,
            ValueKind::Delete | ValueKind::SingleDelete | ValueKind::RangeDeletion => {}
        }
    }

    /// Blob references and no value: what `compress_blob_reference_blocks` is about.
    fn only_references(self) -> bool {
        self.references && !self.inline_values
    }
}

/// The first data blocks of a table that builds a zstd dictionary: held uncompressed (with
/// their index separators once known) until there are enough to build it from.
struct DictionarySamples {
    blocks: Vec<HeldBlock>,
    bytes: usize,
    /// Build the dictionary once this many bytes are held (or at `finish`).
    target: usize,
    max_dict_bytes: usize,
    /// Train (zstd's trainer) rather than use the blocks' bytes as they are.
    train: bool,
}

/// The index entries of a table being built: internal-key separators, back to back, with
/// their data blocks' handles. Whether the index can be keyed by user keys is known only once
/// every block boundary is (RocksDB's index builder likewise keeps both forms until Finish).
#[derive(Default)]
struct IndexEntries {
    separators: Vec<u8>,
    /// Per data block: where its separator ends in `separators`, and its handle.
    entries: Vec<(usize, BlockHandle)>,
    /// Some user key's versions continue from one data block into the next: the separator
    /// between them needs its sequence number, so the index keeps internal keys.
    user_key_spans_blocks: bool,
}

impl IndexEntries {
    fn push(&mut self, separator: &[u8], handle: BlockHandle) {
        self.separators.extend_from_slice(separator);
        self.entries.push((self.separators.len(), handle));
    }

    /// The entries in order: (internal-key separator, handle).
    fn iter(&self) -> impl Iterator<Item = (&[u8], BlockHandle)> + '_ {
        let starts = std::iter::once(0).chain(self.entries.iter().map(|&(end, _)| end));
        starts
            .zip(&self.entries)
            .map(|(start, &(end, h))| (self.separators.get(start..end).unwrap_or(&[]), h))
    }
}

/// A finished index partition: its entries, the key of its last data block (its key in
/// the top-level index) and how many data blocks the partitions up to it cover.
struct IndexPartition {
    raw: Vec<u8>,
    last_separator: Vec<u8>,
    blocks_end: usize,
}

struct HeldBlock {
    raw: Vec<u8>,
    codec: CompressionType,
    /// The index separator after this block; `None` until the next block's first key is added.
    separator: Option<Vec<u8>>,
}

impl TableBuilder {
    /// Starts a table written to `file` (already created at `path`); `file_number` is recorded
    /// in the footer and checked by [`super::Table::open`].
    pub(crate) fn new(
        opts: TableBuilderOptions,
        file: Box<dyn WritableFile>,
        path: PathBuf,
        file_number: u64,
    ) -> Self {
        let data_block = match opts.data_block_hash_ratio {
            Some(ratio) if !opts.legacy_format => {
                BlockBuilder::new(opts.restart_interval).with_hash_index(ratio)
            }
            _ => BlockBuilder::new(opts.restart_interval),
        };
        let compressor = Compressor::new(opts.compression, opts.compression_level);
        let props = TableProperties {
            compression: opts.compression.name().to_string(),
            prefix_extractor: match (&opts.prefix_extractor, opts.bloom_bits_per_key) {
                (Some(ex), bits) if bits > 0 => ex.id(),
                _ => String::new(),
            },
            ..TableProperties::default()
        };
        TableBuilder {
            opts,
            file,
            path,
            file_number,
            offset: 0,
            crc: 0,
            data_block,
            index_entries: IndexEntries::default(),
            index_partitions: Vec::new(),
            block_hash_ends: Vec::new(),
            block_first_prefix: Vec::new(),
            last_key: Vec::new(),
            pending_index: None,
            filter_hashes: Vec::new(),
            last_prefix: None,
            props,
            failed: false,
            scratch: Vec::new(),
            stored: Vec::new(),
            compressor,
            range_dels: None,
            warm_cache: None,
            dict_samples: None,
            dictionary: None,
            block_values: BlockValues::default(),
        }
    }

    /// Compresses the data blocks (zstd only) with a dictionary of at most `max_dict_bytes`
    /// built from the table's first blocks: trained on `train_bytes` of them, or, with
    /// `train_bytes` 0, their first `max_dict_bytes` as they are (`Options::max_dict_bytes`,
    /// `zstd_max_train_bytes`). Without zstd, or with `max_dict_bytes` 0, nothing changes.
    pub(crate) fn with_dictionary(mut self, max_dict_bytes: usize, train_bytes: usize) -> Self {
        if self.opts.compression == CompressionType::Zstd && max_dict_bytes > 0 {
            self.dict_samples = Some(DictionarySamples {
                blocks: Vec::new(),
                bytes: 0,
                target: train_bytes.max(max_dict_bytes),
                max_dict_bytes,
                train: train_bytes > 0,
            });
        }
        self
    }

    /// Inserts every data block into `cache` as it is written, keyed as a
    /// [`super::Table`] opened with `cache_id` reads them (see `TableCache::reserve_cache_id`).
    pub(crate) fn warm_cache(mut self, cache: Arc<BlockCache>, cache_id: u64) -> Self {
        self.warm_cache = Some((cache, cache_id));
        self
    }

    /// Marks the table as an external file for ingestion (`SstFileWriter`), format `version`.
    pub(crate) fn set_external_file_version(&mut self, version: u64) {
        self.props.external_file_version = version;
    }

    /// Records the newest write time of the table's values (a family with a TTL).
    pub(crate) fn set_newest_write_time(&mut self, t: u64) {
        self.props.newest_write_time = t;
    }

    /// Records the blob references the table holds, ascending by blob file number.
    pub(crate) fn set_blob_references(&mut self, refs: Vec<super::BlobReferences>) {
        self.props.blob_references = refs;
    }

    /// Records the column family the table belongs to (read back by repair).
    pub(crate) fn set_column_family(&mut self, id: u32, name: &str) {
        self.props.column_family_id = Some(id);
        self.props.column_family_name = name.to_string();
    }

    /// Sets the table's range tombstones (already clipped to the table's key range).
    pub(crate) fn set_range_tombstones(&mut self, t: FragmentedRangeTombstones) {
        self.range_dels = (!t.is_empty()).then_some(t);
    }

    /// Adds an entry. REQUIRES: `ikey` sorts strictly after every key added before.
    pub(crate) fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        self.check_ok()?;
        debug_assert!(
            self.props.num_entries == 0
                || key::compare_internal(&self.last_key, ikey) == std::cmp::Ordering::Less,
            "table keys out of order"
        );
        debug_assert!(key::parse_internal_key(ikey).is_some(), "bad internal key");
        let user_key = key::user_key(ikey);
        if self.data_block.is_empty()
            && self.props.num_entries > 0
            && key::user_key(&self.last_key) == user_key
        {
            self.index_entries.user_key_spans_blocks = true;
        }
        if let Some(handle) = self.pending_index.take() {
            let sep = separator(&self.last_key, ikey);
            self.add_index_entry(&sep, handle);
        }
        if let Some(held) = self.dict_samples.as_mut().and_then(|d| d.blocks.last_mut()) {
            if held.separator.is_none() {
                held.separator = Some(separator(&self.last_key, ikey));
            }
        }
        // A filter partition must hold every key of its blocks, even a key whose versions
        // started in the block before.
        let block_start = self.opts.partition_filters && self.data_block.is_empty();
        if self.opts.bloom_bits_per_key > 0
            && (self.props.num_entries == 0
                || block_start
                || key::user_key(&self.last_key) != user_key)
        {
            self.filter_hashes.push(filter::key_hash(user_key));
            if block_start {
                self.last_prefix = None;
                let prefix = self
                    .opts
                    .prefix_extractor
                    .as_ref()
                    .and_then(|ex| ex.prefix(user_key));
                self.block_first_prefix.push(prefix.map(filter::key_hash));
            }
            self.add_prefix_to_filter(user_key);
        }
        if let Some(p) = key::parse_internal_key(ikey) {
            if self.props.num_entries == 0 {
                self.props.smallest_seqno = p.sequence;
                self.props.largest_seqno = p.sequence;
            } else {
                self.props.smallest_seqno = self.props.smallest_seqno.min(p.sequence);
                self.props.largest_seqno = self.props.largest_seqno.max(p.sequence);
            }
            if p.kind.is_deletion() {
                self.props.num_deletions += 1;
            }
            self.block_values.note(p.kind);
        }
        self.props.num_entries += 1;
        self.props.raw_key_size += ikey.len() as u64;
        self.props.raw_value_size += value.len() as u64;
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        self.data_block.add(ikey, value);
        if self.data_block.size_estimate() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// With a prefix extractor, a new prefix goes into the filter too (keys arrive in order,
    /// so a prefix's keys are adjacent).
    fn add_prefix_to_filter(&mut self, user_key: &[u8]) {
        let Some(ex) = &self.opts.prefix_extractor else {
            return;
        };
        let Some(prefix) = ex.prefix(user_key) else {
            return;
        };
        if self.last_prefix.as_deref() != Some(prefix) {
            self.filter_hashes.push(filter::key_hash(prefix));
            self.last_prefix = Some(prefix.to_vec());
        }
    }

    /// Entries added so far.
    #[cfg(test)]
    pub(crate) fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Bytes written so far plus the size of the block being built: what the file would
    /// roughly be if finished now (used to cut compaction outputs).
    pub(crate) fn file_size(&self) -> u64 {
        let pending = if self.data_block.is_empty() {
            0
        } else {
            self.data_block.size_estimate() as u64
        };
        let held = self.dict_samples.as_ref().map_or(0, |d| d.bytes as u64);
        self.offset + pending + held
    }

    /// Writes the last data block, the filter, properties, metaindex, index and footer, then
    /// syncs the file. Returns the table's properties (with `file_size` set).
    pub(crate) fn finish(self) -> Result<TableProperties> {
        self.finish_with_checksum().map(|(props, _)| props)
    }

    /// [`finish`](Self::finish), also returning the CRC-32C of every byte of the file
    /// (computed as it was written: the file is not read back).
    pub(crate) fn finish_with_checksum(mut self) -> Result<(TableProperties, u32)> {
        self.check_ok()?;
        self.flush_data_block()?;
        self.write_held_blocks()?;
        if let Some(handle) = self.pending_index.take() {
            let sep = successor(&self.last_key);
            self.add_index_entry(&sep, handle);
        }
        let form = self.index_form();
        if self.opts.partition_index {
            self.index_partitions = self.cut_index_partitions(form);
        }

        let mut meta: Vec<(&str, BlockHandle)> = Vec::new();
        if self.opts.bloom_bits_per_key > 0 && self.props.num_entries > 0 {
            meta.push(self.write_filter(form)?);
        }

        if let Some(dict) = self.dictionary.take() {
            let h = self.write_block(&dict, CompressionType::None)?;
            meta.push((COMPRESSION_DICT_META_KEY, h));
        }

        if let Some(t) = self.range_dels.take() {
            let mut block = BlockBuilder::new(1);
            for (k, end) in t.block_entries() {
                block.add(&k, end);
            }
            let raw = block.finish();
            let h = self.write_block(&raw, CompressionType::None)?;
            meta.push((RANGE_DEL_META_KEY, h));
        }

        // The index is stored last, but its size goes into the properties: encode it first.
        let index_raw = match self.opts.partition_index {
            true => self.write_index_partitions(form)?,
            false => self.flat_index(form),
        };
        if !self.opts.legacy_format {
            self.props.index_user_keys = form.user_keys;
            self.props.index_two_level = self.opts.partition_index;
        }
        let index_kind = maybe_compress(
            &index_raw,
            &mut self.compressor,
            &mut self.scratch,
            &mut self.stored,
        );
        let index_stored = std::mem::take(&mut self.stored);
        self.props.index_size += (index_stored.len() + BLOCK_TRAILER_LEN) as u64;

        let props_raw = properties::encode(&self.props);
        let h = self.write_block(&props_raw, CompressionType::None)?;
        meta.push((PROPERTIES_META_KEY, h));

        meta.sort_by(|a, b| a.0.cmp(b.0));
        let mut metaindex = BlockBuilder::new(1);
        for (name, h) in &meta {
            let mut v = Vec::new();
            h.encode_to(&mut v);
            metaindex.add(name.as_bytes(), &v);
        }
        let metaindex_raw = metaindex.finish();
        let metaindex_handle = self.write_block(&metaindex_raw, CompressionType::None)?;
        let index_handle = self.write_stored(&index_stored, index_kind)?;

        let footer = Footer {
            metaindex: metaindex_handle,
            index: index_handle,
            file_number: self.file_number,
            version: TableFormat::for_table(
                meta.iter().any(|(k, _)| *k == COMPRESSION_DICT_META_KEY),
                self.opts.partition_index,
                self.opts.legacy_format,
                self.opts.data_block_hash_ratio.is_some(),
            ),
        }
        .encode();
        self.append(&footer)?;
        let path = self.path.clone();
        self.file
            .sync()
            .map_err(|e| Error::io(format!("syncing table {}", path.display()), e))?;
        self.props.file_size = self.offset;
        Ok((self.props, self.crc))
    }

    /// Drops the builder without finishing the file; the caller deletes it.
    pub(crate) fn abandon(self) {}

    fn check_ok(&self) -> Result<()> {
        if self.failed {
            return Err(Error::io(
                format!("building table {}", self.path.display()),
                std::io::Error::other("an earlier write to this table failed"),
            ));
        }
        Ok(())
    }

    fn add_index_entry(&mut self, sep: &[u8], handle: BlockHandle) {
        self.index_entries.push(sep, handle);
    }

    /// How the table's index blocks are encoded: format 4 (user keys unless a user key spans
    /// two data blocks), or formats 1 to 3 when asked.
    fn index_form(&self) -> IndexForm {
        match self.opts.legacy_format {
            true => IndexForm::LEGACY,
            false => IndexForm::v4(!self.index_entries.user_key_spans_blocks),
        }
    }

    fn index_block_builder(&self, form: IndexForm) -> IndexBlockBuilder {
        IndexBlockBuilder::new(form, self.opts.index_restart_interval)
    }

    /// The one index block of a table without partitions.
    fn flat_index(&self, form: IndexForm) -> Vec<u8> {
        let mut block = self.index_block_builder(form);
        for (sep, h) in self.index_entries.iter() {
            block.add(form.key_of(sep), h);
        }
        block.finish()
    }

    /// Cuts the index into partitions, each ended after the entry that brings it to
    /// `metadata_block_size` bytes (the last holds the rest).
    fn cut_index_partitions(&self, form: IndexForm) -> Vec<IndexPartition> {
        let mut out = Vec::new();
        let mut block = self.index_block_builder(form);
        let n = self.index_entries.entries.len();
        for (i, (sep, h)) in self.index_entries.iter().enumerate() {
            let key = form.key_of(sep);
            block.add(key, h);
            if block.size_estimate() >= self.opts.metadata_block_size || i + 1 == n {
                out.push(IndexPartition {
                    raw: block.finish(),
                    last_separator: key.to_vec(),
                    blocks_end: i + 1,
                });
            }
        }
        out
    }

    /// Writes the bloom filter: one block, or with `partition_filters` one per index partition
    /// and their top-level index. Returns its metaindex entry.
    fn write_filter(&mut self, form: IndexForm) -> Result<(&'static str, BlockHandle)> {
        let bits = self.opts.bloom_bits_per_key;
        if !self.opts.partition_filters {
            let f = filter::build(&self.filter_hashes, bits);
            // Filter bits look random: compressing them would not pay.
            let h = self.write_block(&f, CompressionType::None)?;
            self.props.filter_size = h.size + BLOCK_TRAILER_LEN as u64;
            return Ok((FILTER_META_KEY, h));
        }
        let mut top = self.index_block_builder(form);
        let mut size = 0;
        for (keys, separator) in self.filter_partitions() {
            let f = filter::build(&keys, bits);
            let h = self.write_block(&f, CompressionType::None)?;
            size += h.size + BLOCK_TRAILER_LEN as u64;
            top.add(&separator, h);
            self.props.filter_partitions += 1;
        }
        let h = self.write_block(&top.finish(), CompressionType::None)?;
        self.props.filter_size = size + h.size + BLOCK_TRAILER_LEN as u64;
        Ok((PARTITIONED_FILTER_META_KEY, h))
    }

    /// The hashes of each filter partition with its key in the top-level filter index: the
    /// keys of the data blocks of one index partition, plus the prefix of the next
    /// partition's first key. A prefix check reads the partition a seek to the prefix lands
    /// in; that is the one before the prefix's first key only if the separator between them
    /// is at or above the prefix, which `key::shortest_separator` never produces (it stays
    /// below the next key's first differing byte), but RocksDB's separators did, and one
    /// hash per partition keeps the filter from depending on the separator rule.
    fn filter_partitions(&self) -> Vec<(Vec<u64>, Vec<u8>)> {
        let mut out = Vec::with_capacity(self.index_partitions.len());
        let mut start = 0;
        for p in &self.index_partitions {
            let end = p
                .blocks_end
                .checked_sub(1)
                .and_then(|b| self.block_hash_ends.get(b))
                .copied()
                .unwrap_or(start);
            let mut keys = self.filter_hashes.get(start..end).unwrap_or(&[]).to_vec();
            if let Some(Some(next_prefix)) = self.block_first_prefix.get(p.blocks_end) {
                keys.push(*next_prefix);
            }
            out.push((keys, p.last_separator.clone()));
            start = end;
        }
        out
    }

    /// Writes the index partitions (compressed as data blocks are) and returns the raw
    /// top-level index: each partition's last separator and handle.
    fn write_index_partitions(&mut self, form: IndexForm) -> Result<Vec<u8>> {
        let mut top = self.index_block_builder(form);
        let partitions = std::mem::take(&mut self.index_partitions);
        for p in &partitions {
            let h = self.write_block(&p.raw, self.opts.compression)?;
            self.props.index_size += h.size + BLOCK_TRAILER_LEN as u64;
            top.add(&p.last_separator, h);
        }
        self.props.index_partitions = partitions.len() as u64;
        Ok(top.finish())
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let raw = self.data_block.finish();
        let codec = self.data_block_codec();
        self.block_values = BlockValues::default();
        if self.opts.partition_filters {
            self.block_hash_ends.push(self.filter_hashes.len());
        }
        if let Some(samples) = self.dict_samples.as_mut() {
            samples.bytes += raw.len();
            samples.blocks.push(HeldBlock {
                raw: raw.clone(),
                codec,
                separator: None,
            });
            let full = samples.bytes >= samples.target;
            self.data_block.reuse_buffer(raw);
            if full {
                self.write_held_blocks()?;
            }
            return Ok(());
        }
        let h = self.write_data_block(&raw, codec);
        // The next block grows into the same buffer instead of a fresh one.
        self.data_block.reuse_buffer(raw);
        self.pending_index = Some(h?);
        Ok(())
    }

    /// Builds the dictionary from the held blocks, then writes them with it (and their index
    /// entries, but the last one's if its separator is not known yet). Nothing if none held.
    fn write_held_blocks(&mut self) -> Result<()> {
        let Some(samples) = self.dict_samples.take() else {
            return Ok(());
        };
        if let Some(dict) = build_dictionary(&samples) {
            self.compressor.set_dictionary(dict.clone());
            self.dictionary = Some(dict);
        }
        for held in samples.blocks {
            let h = self.write_data_block(&held.raw, held.codec)?;
            match held.separator {
                Some(sep) => self.add_index_entry(&sep, h),
                None => self.pending_index = Some(h),
            }
        }
        Ok(())
    }

    /// The codec of the data block just finished: none for a block of blob references unless
    /// `compress_blob_reference_blocks` (a get of a blob value reads its reference's block on
    /// every block-cache miss, and such blocks are a small share of the family's bytes).
    fn data_block_codec(&self) -> CompressionType {
        match self.block_values.only_references() && !self.opts.compress_blob_reference_blocks {
            true => CompressionType::None,
            false => self.opts.compression,
        }
    }

    /// Writes one data block (and puts it into the block cache if asked).
    fn write_data_block(&mut self, raw: &[u8], codec: CompressionType) -> Result<BlockHandle> {
        let h = self.write_block(raw, codec)?;
        if let Some((cache, cache_id)) = &self.warm_cache {
            // What a read of the block would produce: its uncompressed contents, validated.
            if let Ok(block) = Block::new(raw.to_vec()) {
                let charge = block.cache_charge();
                cache.insert((*cache_id, h.offset), Arc::new(block), charge);
            }
        }
        self.props.num_data_blocks += 1;
        self.props.data_size += h.size + BLOCK_TRAILER_LEN as u64;
        Ok(h)
    }

    fn write_block(&mut self, raw: &[u8], kind: CompressionType) -> Result<BlockHandle> {
        if kind == CompressionType::None {
            // Stored as is: no need to copy it into `stored` first.
            return self.write_stored(raw, kind);
        }
        let kind = maybe_compress(
            raw,
            &mut self.compressor,
            &mut self.scratch,
            &mut self.stored,
        );
        let stored = std::mem::take(&mut self.stored);
        let h = self.write_stored(&stored, kind);
        self.stored = stored;
        h
    }

    fn write_stored(&mut self, stored: &[u8], kind: CompressionType) -> Result<BlockHandle> {
        let handle = BlockHandle {
            offset: self.offset,
            size: stored.len() as u64,
        };
        let mut trailer = Vec::with_capacity(BLOCK_TRAILER_LEN);
        append_block_trailer(&mut trailer, stored, kind, handle.offset);
        self.append(stored)?;
        self.append(&trailer)?;
        Ok(handle)
    }

    fn append(&mut self, data: &[u8]) -> Result<()> {
        if let Err(e) = self.file.append(data) {
            self.failed = true;
            return Err(Error::io(
                format!("writing table {}", self.path.display()),
                e,
            ));
        }
        self.offset += data.len() as u64;
        self.crc = crate::checksum::crc32c_extend(self.crc, data);
        Ok(())
    }
}

/// An index key `k` with `last <= k < next` in internal order, as short as possible.
fn separator(last: &[u8], next: &[u8]) -> Vec<u8> {
    let last_user = key::user_key(last);
    let sep = key::shortest_separator(last_user, key::user_key(next));
    with_seek_trailer(sep, last_user, last)
}

/// An index key `k >= last` for the final block.
fn successor(last: &[u8]) -> Vec<u8> {
    let last_user = key::user_key(last);
    with_seek_trailer(key::short_successor(last_user), last_user, last)
}

/// A shortened user key gets the smallest trailer of its user key (the newest possible entry),
/// which sorts after every key with the original, smaller user key. If no shortening was
/// possible the full last key is used: a seek trailer on the same user key would sort before
/// the last entry.
fn with_seek_trailer(mut short_user: Vec<u8>, last_user: &[u8], last: &[u8]) -> Vec<u8> {
    if short_user.as_slice() > last_user {
        short_user.extend_from_slice(&key::pack_trailer(MAX_SEQUENCE, KIND_FOR_SEEK).to_le_bytes());
        short_user
    } else {
        last.to_vec()
    }
}

/// The dictionary for `samples`: trained by zstd, or their first bytes as they are; `None`
/// if training fails (the table is then compressed without one).
fn build_dictionary(samples: &DictionarySamples) -> Option<Vec<u8>> {
    let raws: Vec<&[u8]> = samples.blocks.iter().map(|b| b.raw.as_slice()).collect();
    if samples.train {
        return crate::compression::train_zstd_dictionary(&raws, samples.max_dict_bytes);
    }
    let mut dict = Vec::with_capacity(samples.max_dict_bytes);
    for raw in raws {
        let room = samples.max_dict_bytes - dict.len();
        dict.extend_from_slice(&raw[..raw.len().min(room)]);
        if dict.len() == samples.max_dict_bytes {
            break;
        }
    }
    (!dict.is_empty()).then_some(dict)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};
    use std::cmp::Ordering;

    #[test]
    fn separators_bound_their_blocks() {
        let cases: &[(&[u8], u64, &[u8], u64)] = &[
            (b"abcd", 5, b"abzz", 1),
            (b"abc", 5, b"abd", 9),
            (b"ab", 5, b"abc", 9),
            (b"a", 5, b"a", 3),
            (b"a\xff", 1, b"b", 1),
            (b"", 1, b"a", 1),
        ];
        for &(lk, ls, nk, ns) in cases {
            let last = make_internal_key(lk, ls, ValueKind::Put);
            let next = make_internal_key(nk, ns, ValueKind::Delete);
            let sep = separator(&last, &next);
            assert_ne!(key::compare_internal(&sep, &last), Ordering::Less, "{lk:?}");
            assert_eq!(key::compare_internal(&sep, &next), Ordering::Less, "{lk:?}");
        }
        let sep = separator(
            &make_internal_key(b"abcd", 5, ValueKind::Put),
            &make_internal_key(b"abzz", 5, ValueKind::Put),
        );
        assert_eq!(key::user_key(&sep), b"abd");
        for lk in [&b"abc"[..], b"\xff\xff", b""] {
            let last = make_internal_key(lk, 0, ValueKind::Delete);
            let s = successor(&last);
            assert_ne!(key::compare_internal(&s, &last), Ordering::Less);
        }
    }
}
