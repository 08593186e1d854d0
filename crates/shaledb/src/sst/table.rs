//! Reading a table: open (footer, metaindex, index, filter, properties), point lookups and a
//! two-level iterator (index block -> data block).

use super::block::{Block, BlockIter};
use super::builder::{
    COMPRESSION_DICT_META_KEY, FILTER_META_KEY, PARTITIONED_FILTER_META_KEY, PROPERTIES_META_KEY,
    RANGE_DEL_META_KEY,
};
use super::filter::{self, BloomFilter};
use super::format::{decode_handle_value, read_at, BlockSource, Footer, TableFormat, FOOTER_LEN};
use super::index_block::{IndexBlockIter, IndexForm, IndexHeads};
use super::index_iter::IndexIter;
use super::readahead::Readahead;
use super::{properties, BlockHandle, BlockReadOptions, TableProperties};
use crate::cache::{BlockCache, CompressedSecondaryCache, Priority};
use crate::compression::ZstdDictionary;
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::iter::InternalIterator;
use crate::key::{self, LookupKey, SequenceNumber, ValueKind};
use crate::range_del::FragmentedRangeTombstones;
use crate::statistics::{Statistics, Ticker};
use crate::value::{LookupResult, Value};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Source of block-cache ids: every opened table gets its own, so a reopened or replaced file
/// can never be served another table's cached blocks.
static NEXT_CACHE_ID: AtomicU64 = AtomicU64::new(1);

/// An open table file. Index, filter and properties are held in memory; data blocks are read
/// on demand through the block cache. Shareable between threads.
pub struct Table {
    file: Arc<dyn RandomAccessFile>,
    path: Arc<Path>,
    file_number: u64,
    /// Where the footer starts; every block ends at or before it.
    data_end: u64,
    cache: Option<Arc<BlockCache>>,
    cache_id: u64,
    /// Held for as long as the table is open (bounded by the table cache) and charged to the
    /// block cache through a pinned reservation entry, so a small cache is never thrashed by
    /// re-reading them on every lookup. `None` with `cache_index_and_filter_blocks`: the index
    /// (and the filter) live in the block cache under their offsets and are read again when
    /// evicted (`cached_index`, `cached_filter`).
    index: Option<Arc<Block>>,
    /// Heads of the held `index` (its top level if two-level), which narrow every seek in it;
    /// `None` for a small index, or when the index lives in the block cache.
    index_heads: Option<IndexHeads>,
    index_handle: BlockHandle,
    /// `index` is the top level of a two-level index: its entries locate index partitions,
    /// which are read through the block cache. The top level is always held here.
    two_level: bool,
    /// How the index blocks (and the filter partition index) are encoded.
    index_form: IndexForm,
    metaindex_handle: BlockHandle,
    filter: Option<Arc<BloomFilter>>,
    filter_handle: Option<BlockHandle>,
    /// The top-level index of a partitioned filter (held here; the partitions are read
    /// through the block cache) and its handle. Exclusive with `filter_handle`.
    filter_index: Option<Arc<Block>>,
    filter_index_handle: Option<BlockHandle>,
    properties_handle: BlockHandle,
    props: TableProperties,
    /// The range-deletion block, fragmented; `None` if the table has none (the common case,
    /// which costs a get one branch).
    range_dels: Option<Arc<FragmentedRangeTombstones>>,
    range_del_handle: Option<BlockHandle>,
    /// The zstd dictionary the table's blocks were compressed with, if any.
    dictionary: Option<ZstdDictionary>,
    dict_handle: Option<BlockHandle>,
    /// Counts cache hits and misses and filter answers (`Options::statistics`).
    stats: Option<Arc<Statistics>>,
    /// An ingested table's global sequence number (`Db::ingest`): its keys, written with
    /// sequence number 0, are read as this. `None` for every other table (and for an ingested
    /// one kept at 0), which costs their reads one branch.
    global_seqno: Option<SequenceNumber>,
    /// The file is memory-mapped (`Options::allow_mmap_reads`) and its properties say its
    /// blocks are stored uncompressed: data blocks are slices of the map, so the block cache
    /// is neither consulted nor filled for them (LevelDB does not cache mapped blocks either).
    /// A table whose property is wrong only loses this shortcut: each block's own codec byte
    /// still decides how it is read.
    mapped_raw: bool,
}

thread_local! {
    /// The key buffer point lookups on this thread reuse (see [`Table::get`]).
    static KEY_BUFFER: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// A key buffer grown past this by one huge key is dropped rather than kept per thread.
const MAX_KEPT_KEY_BUFFER: usize = 4096;

/// Block-cache key offset of a table's memory reservation (no block starts there).
const RESERVATION_OFFSET: u64 = u64::MAX;

impl Drop for Table {
    fn drop(&mut self) {
        if let Some(cache) = &self.cache {
            cache.erase(&(self.cache_id, RESERVATION_OFFSET));
        }
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path)
            .field("file_number", &self.file_number)
            .field("props", &self.props)
            .finish_non_exhaustive()
    }
}

impl Table {
    /// Opens the table at `path` of `file_size` bytes, checking its footer (including that it
    /// names `file_number`), and loading its index, filter and properties with checksums
    /// verified.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        file_number: u64,
        file_size: u64,
        block_cache: Option<Arc<BlockCache>>,
    ) -> Result<Table> {
        let cache_id = Table::new_cache_id();
        Table::open_with_cache_id(
            file,
            path,
            file_number,
            file_size,
            block_cache,
            cache_id,
            false,
        )
    }

    /// Reads every key of the table with sequence number `seq` (an ingested table's global
    /// sequence number; `None` or 0 reads the keys as written). The file's keys must all carry
    /// sequence number 0 and distinct user keys, which ingestion checked.
    pub(crate) fn with_global_seqno(mut self, seq: Option<SequenceNumber>) -> Table {
        self.global_seqno = seq.filter(|&s| s > 0);
        self
    }

    /// A block-cache id no table has used: a table writer given it (see
    /// [`super::TableBuilder::warm_cache`]) puts blocks where the table opened with it by
    /// [`Table::open_with_cache_id`] finds them.
    pub fn new_cache_id() -> u64 {
        NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed)
    }

    /// [`Table::open`], reading its blocks from the block cache under `cache_id` (from
    /// [`Table::new_cache_id`], used by no other open table). With `meta_in_cache` (and a
    /// block cache) the index and filter go into the block cache instead of staying in the
    /// table (`Options::cache_index_and_filter_blocks`).
    pub fn open_with_cache_id(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        file_number: u64,
        file_size: u64,
        block_cache: Option<Arc<BlockCache>>,
        cache_id: u64,
        meta_in_cache: bool,
    ) -> Result<Table> {
        let path: Arc<Path> = Arc::from(path);
        let footer_len = FOOTER_LEN as u64;
        if file_size < footer_len {
            return Err(Error::corruption(
                &*path,
                0,
                format!("file of {file_size} bytes is too short to be a table"),
            ));
        }
        let data_end = file_size - footer_len;
        let mut buf = [0u8; FOOTER_LEN];
        read_at(&*file, &path, data_end, &mut buf, "footer")?;
        let footer = Footer::decode(&buf, &path, data_end, file_number)?;

        let plain = BlockSource::new(&*file, &path, data_end);
        let metaindex = plain.block(footer.metaindex, true, "metaindex block", None)?;
        let meta_corrupt = |d: &str| Error::corruption(&*path, footer.metaindex.offset, d);
        let mut filter_handle = None;
        let mut filter_index_handle = None;
        let mut properties_handle = None;
        let mut range_del_handle = None;
        let mut dict_handle = None;
        let mut it = BlockIter::new_bytewise(Arc::new(metaindex))
            .with_origin(path.clone(), footer.metaindex.offset);
        it.seek_to_first();
        while it.valid() {
            let slot = if it.key() == FILTER_META_KEY.as_bytes() {
                &mut filter_handle
            } else if it.key() == PROPERTIES_META_KEY.as_bytes() {
                &mut properties_handle
            } else if it.key() == RANGE_DEL_META_KEY.as_bytes() {
                &mut range_del_handle
            } else if it.key() == COMPRESSION_DICT_META_KEY.as_bytes() {
                &mut dict_handle
            } else if it.key() == PARTITIONED_FILTER_META_KEY.as_bytes() {
                &mut filter_index_handle
            } else {
                it.next();
                continue;
            };
            let h = decode_handle_value(it.value())
                .ok_or_else(|| meta_corrupt("bad block handle in metaindex"))?;
            *slot = Some(h);
            it.next();
        }
        it.status()?;
        let dictionary = read_dictionary(plain, &footer, dict_handle)?;
        let index = plain.with_dictionary(dictionary.as_ref()).block(
            footer.index,
            true,
            "index block",
            None,
        )?;
        let properties_handle =
            properties_handle.ok_or_else(|| meta_corrupt("metaindex lists no properties block"))?;
        let props_block = plain.block(properties_handle, true, "properties block", None)?;
        let mut props = properties::decode(Arc::new(props_block))
            .map_err(|e| Error::corruption(&*path, properties_handle.offset, e))?;
        props.file_size = file_size;
        let two_level = footer.version.two_level_index(props.index_two_level);
        let index_form = footer.version.index_form(props.index_user_keys);
        match (filter_handle, filter_index_handle) {
            (Some(_), Some(_)) => return Err(meta_corrupt("metaindex lists two filters")),
            (None, Some(_)) if !two_level => {
                return Err(meta_corrupt(
                    "a table without a two-level index lists a partitioned filter",
                ))
            }
            _ => {}
        }

        let filter = match filter_handle {
            Some(h) => Some(Arc::new(read_filter(plain, h)?)),
            None => None,
        };
        let filter_index = match filter_index_handle {
            Some(h) => Some(Arc::new(plain.block(
                h,
                true,
                "filter partition index",
                None,
            )?)),
            None => None,
        };
        let range_dels = match range_del_handle {
            Some(h) => {
                let block = plain.block(h, true, "range-deletion block", None)?;
                let t = FragmentedRangeTombstones::decode_block(Arc::new(block), &path, h.offset)?;
                (!t.is_empty()).then(|| Arc::new(t))
            }
            None => None,
        };
        let index_in_cache = block_cache.is_some() && meta_in_cache && !two_level;
        let index_heads = match index_in_cache {
            true => None,
            false => IndexHeads::build(&index, index_form),
        };
        let mut index = Some(Arc::new(index));
        let mut filter = filter;
        match &block_cache {
            // A two-level index keeps its top level (and that of its filter) here; its
            // partitions go through the cache in any case.
            Some(cache) if index_in_cache => {
                if let Some(b) = index.take() {
                    insert_high_priority(cache, (cache_id, footer.index.offset), b);
                }
                if let (Some(f), Some(h)) = (filter.take(), filter_handle) {
                    insert_high_priority(cache, (cache_id, h.offset), f);
                }
            }
            Some(cache) => {
                let charge = index.as_ref().map_or(0, |i| i.size())
                    + index_heads.as_ref().map_or(0, IndexHeads::heap_size)
                    + filter.as_ref().map_or(0, |f| f.size())
                    + filter_index.as_ref().map_or(0, |f| f.size());
                cache.insert_pinned((cache_id, RESERVATION_OFFSET), Arc::new(()), charge);
            }
            None => {}
        }

        let mapped_raw = file.mapping().is_some() && props.compression == "none";
        Ok(Table {
            file,
            path,
            file_number,
            data_end,
            cache: block_cache,
            cache_id,
            index,
            index_heads,
            index_handle: footer.index,
            two_level,
            index_form,
            metaindex_handle: footer.metaindex,
            filter,
            filter_handle,
            filter_index,
            filter_index_handle,
            properties_handle,
            props,
            range_dels,
            range_del_handle,
            dictionary,
            dict_handle,
            stats: None,
            global_seqno: None,
            mapped_raw,
        })
    }

    /// Looks `lookup` up: the newest entry for its user key with a sequence number at or
    /// below the lookup's. Consults the bloom filter first. Allocates nothing when the block is
    /// cached: a found value pins the cached block (see [`Value`]). A value from a block read
    /// around the cache (`fill_cache` false) is copied out, so the block is not kept alive.
    pub fn get(&self, lookup: &LookupKey, opts: BlockReadOptions) -> Result<LookupResult> {
        self.get_entry(lookup, opts).map(|(r, _)| r)
    }

    /// [`Table::get`] that also returns the sequence number of the entry found (0 if none),
    /// which range tombstones from newer sources are compared with.
    pub fn get_entry(
        &self,
        lookup: &LookupKey,
        opts: BlockReadOptions,
    ) -> Result<(LookupResult, SequenceNumber)> {
        if self.filter_index.is_none() {
            let may = self.may_contain(lookup.user_key());
            self.note_filter(may);
            if !may {
                return Ok((LookupResult::NotPresent, 0));
            }
        }
        // One key buffer per thread serves the index and data block iterators of every get.
        let mut buf = KEY_BUFFER.take();
        let may = self.filter_index.is_none() || {
            let may = self.lookup_may_match(lookup, &mut buf);
            self.note_filter(may);
            may
        };
        let result = match may {
            true => self.get_with_buffer(lookup, opts, &mut buf),
            false => Ok((LookupResult::NotPresent, 0)),
        };
        if buf.capacity() <= MAX_KEPT_KEY_BUFFER {
            KEY_BUFFER.set(buf);
        }
        result
    }

    fn get_with_buffer(
        &self,
        lookup: &LookupKey,
        opts: BlockReadOptions,
        buf: &mut Vec<u8>,
    ) -> Result<(LookupResult, SequenceNumber)> {
        let Some(handle) = self.index_lookup(lookup, buf)? else {
            return Ok((LookupResult::NotPresent, 0));
        };
        let (block, cached) = self.data_block(handle, opts)?;
        self.find_in_block(&block, cached, handle, lookup, buf)
    }

    /// Looks several keys up, in ascending order of user key, each at its own sequence number:
    /// `out[i]` becomes what [`Table::get_entry`] would return for `lookups[i]`. The phases run
    /// over the whole batch (filter, then index, then data blocks), so keys sharing a data
    /// block read or pin it once and the memory accesses of different keys overlap.
    pub fn multi_get_entries(
        &self,
        lookups: &[&LookupKey],
        opts: BlockReadOptions,
        out: &mut [(LookupResult, SequenceNumber)],
    ) -> Result<()> {
        let plan = self.multi_get_plan(lookups, out)?;
        self.multi_get_search(lookups, &plan, &[], opts, out)
    }

    /// The first half of [`Table::multi_get_entries`] (filter and index, no data block read):
    /// sets every `out[i]` to not found and returns, in key order, each key the filter lets
    /// through with the data block to search for it. Keys sharing a block are adjacent.
    pub(crate) fn multi_get_plan(
        &self,
        lookups: &[&LookupKey],
        out: &mut [(LookupResult, SequenceNumber)],
    ) -> Result<Vec<(usize, BlockHandle)>> {
        debug_assert_eq!(lookups.len(), out.len());
        let mut buf = KEY_BUFFER.take();
        let mut plan = Vec::with_capacity(lookups.len());
        let mut result = Ok(());
        for (i, lookup) in lookups.iter().enumerate() {
            out[i] = (LookupResult::NotPresent, 0);
            let may = self.lookup_may_match(lookup, &mut buf);
            self.note_filter(may);
            if !may {
                continue;
            }
            match self.index_lookup(lookup, &mut buf) {
                Ok(Some(handle)) => plan.push((i, handle)),
                Ok(None) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if buf.capacity() <= MAX_KEPT_KEY_BUFFER {
            KEY_BUFFER.set(buf);
        }
        result.map(|()| plan)
    }

    /// The second half of [`Table::multi_get_entries`]: searches each planned block, taken
    /// from `preloaded` (blocks already read, with whether the cache holds them) if there,
    /// else from the cache or the file, once per block.
    pub(crate) fn multi_get_search(
        &self,
        lookups: &[&LookupKey],
        plan: &[(usize, BlockHandle)],
        preloaded: &[(BlockHandle, Arc<Block>, bool)],
        opts: BlockReadOptions,
        out: &mut [(LookupResult, SequenceNumber)],
    ) -> Result<()> {
        let mut buf = KEY_BUFFER.take();
        let mut block: Option<(BlockHandle, Arc<Block>, bool)> = None;
        // `preloaded` is in plan order (ascending offsets), perhaps with gaps.
        let mut next_preloaded = preloaded.iter().peekable();
        let mut result = Ok(());
        for &(i, handle) in plan {
            let (b, cached) = match &block {
                Some((h, b, cached)) if *h == handle => (b.clone(), *cached),
                _ => {
                    while next_preloaded
                        .next_if(|(h, ..)| h.offset < handle.offset)
                        .is_some()
                    {}
                    let loaded = match next_preloaded.next_if(|(h, ..)| *h == handle) {
                        Some((_, b, cached)) => Ok((b.clone(), *cached)),
                        None => self.data_block(handle, opts),
                    };
                    match loaded {
                        Ok((b, cached)) => {
                            block = Some((handle, b.clone(), cached));
                            (b, cached)
                        }
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    }
                }
            };
            match self.find_in_block(&b, cached, handle, lookups[i], &mut buf) {
                Ok(found) => out[i] = found,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if buf.capacity() <= MAX_KEPT_KEY_BUFFER {
            KEY_BUFFER.set(buf);
        }
        result
    }

    /// The data block at `handle` if the block cache holds it (or, in a mapped table of
    /// uncompressed blocks, the block's slice of the map, which needs no read either).
    pub(crate) fn cached_data_block(
        &self,
        handle: BlockHandle,
        opts: BlockReadOptions,
    ) -> Option<Arc<Block>> {
        if self.mapped_raw {
            // A damaged block is left to the caller's read, which reports it.
            return self.data_block(handle, opts).ok().map(|(b, _)| b);
        }
        let b = self.cached::<Block>(&(self.cache_id, handle.offset));
        self.note_cache(
            b.is_some(),
            Ticker::BlockCacheDataHit,
            Ticker::BlockCacheDataMiss,
        );
        b
    }

    /// Counts statistics (`Options::statistics`) from now on.
    pub(crate) fn set_statistics(&mut self, stats: Option<Arc<Statistics>>) {
        self.stats = stats;
    }

    /// A block-cache lookup ([`cached`](Self::cached)), counted as `hit` or `miss`.
    #[inline]
    fn cached_counted<T: Send + Sync + 'static>(
        &self,
        key: &(u64, u64),
        hit: Ticker,
        miss: Ticker,
    ) -> Option<Arc<T>> {
        let cached = self.cached::<T>(key);
        self.note_cache(cached.is_some(), hit, miss);
        cached
    }

    /// Counts a block-cache lookup as a hit or a miss (`Options::statistics`).
    #[inline]
    fn note_cache(&self, found: bool, hit: Ticker, miss: Ticker) {
        if let Some(s) = &self.stats {
            s.add(if found { hit } else { miss }, 1);
        }
    }

    /// Counts a point lookup's filter answer (if the table has a filter).
    #[inline]
    fn note_filter(&self, may_contain: bool) {
        if let Some(s) = &self.stats {
            let has_filter = self.filter.is_some()
                || self.filter_handle.is_some()
                || self.filter_index.is_some();
            if has_filter {
                s.add(Ticker::BloomChecked, 1);
                if !may_contain {
                    s.add(Ticker::BloomUseful, 1);
                }
            }
        }
    }

    /// The handle of the only data block that can hold `lookup`'s newest visible version;
    /// `None` if every key of the table is before it.
    fn index_lookup(&self, lookup: &LookupKey, buf: &mut Vec<u8>) -> Result<Option<BlockHandle>> {
        let loaded;
        let block: &Block = match &self.index {
            Some(b) => b,
            None => {
                loaded = self.cached_index()?;
                &loaded
            }
        };
        let target = lookup.internal_key();
        let heads = self.index_heads();
        let found = self.seek_index_block(block, self.index_handle.offset, target, heads, buf)?;
        match (self.two_level, found) {
            (true, Some(partition)) => {
                let block = self.index_partition(partition)?;
                self.seek_index_block(&block, partition.offset, target, None, buf)
            }
            (_, found) => Ok(found),
        }
    }

    /// The handle in the first entry of index block `block` (at file offset `offset`) whose
    /// key is at or after `target`; `None` if there is none. `heads` are `block`'s, if any.
    fn seek_index_block(
        &self,
        block: &Block,
        offset: u64,
        target: &[u8],
        heads: Option<&IndexHeads>,
        buf: &mut Vec<u8>,
    ) -> Result<Option<BlockHandle>> {
        let mut index = IndexBlockIter::new(block, self.index_form)
            .with_block_offset(offset)
            .with_limit(self.data_end)
            .with_key_buffer(std::mem::take(buf));
        index.seek_with_heads(target, heads);
        let handle = index.valid().then(|| index.handle());
        let status = index.status();
        *buf = index.into_key_buffer();
        status.map_err(|e| self.name_file(e))?;
        Ok(handle)
    }

    /// An index partition, from the block cache or read (checksum verified) and cached with
    /// high priority.
    pub(super) fn index_partition(&self, h: BlockHandle) -> Result<Arc<Block>> {
        let key = (self.cache_id, h.offset);
        let cached = self.cached_counted::<Block>(
            &key,
            Ticker::BlockCacheIndexHit,
            Ticker::BlockCacheIndexMiss,
        );
        if let Some(b) = cached {
            return Ok(b);
        }
        let block = Arc::new(self.source().block(h, true, "index partition", None)?);
        if let Some(cache) = &self.cache {
            insert_high_priority(cache, key, block.clone());
        }
        Ok(block)
    }

    /// False only if the table certainly holds no entry for `lookup`'s user key. With a
    /// partitioned filter, the partition checked is the one whose data blocks the index
    /// search for `lookup` ends in (the partitions are cut with the index partitions).
    fn lookup_may_match(&self, lookup: &LookupKey, buf: &mut Vec<u8>) -> bool {
        let hash = filter::key_hash(lookup.user_key());
        match &self.filter_index {
            None => self.filter_may_contain(hash),
            Some(top) => self.partition_may_contain(top, lookup.internal_key(), hash, buf),
        }
    }

    /// The answer of the filter partition for the first partition whose key is at or after
    /// `seek_key`: false if there is none (every key of the table is before `seek_key`);
    /// true if the partition cannot be read (the data read then reports the damage).
    fn partition_may_contain(
        &self,
        top: &Block,
        seek_key: &[u8],
        hash: u64,
        buf: &mut Vec<u8>,
    ) -> bool {
        let mut it = IndexBlockIter::new(top, self.index_form)
            .with_limit(self.data_end)
            .with_key_buffer(std::mem::take(buf));
        it.seek(seek_key);
        let handle = it.valid().then(|| it.handle());
        let past_end = !it.valid() && it.status().is_ok();
        *buf = it.into_key_buffer();
        match handle {
            _ if past_end => false,
            Some(h) => self
                .cached_filter(h)
                .is_none_or(|f| f.may_contain_hash(hash)),
            None => true,
        }
    }

    /// [`Table::partition_may_contain`] for the partition where entries of user key (or
    /// prefix) `user` would start.
    fn partition_may_contain_user_key(&self, top: &Block, user: &[u8], hash: u64) -> bool {
        // The newest possible entry of `user`: built on the stack for keys of usual length.
        let seek = LookupKey::new(user, key::MAX_SEQUENCE);
        let mut buf = KEY_BUFFER.take();
        let answer = self.partition_may_contain(top, seek.internal_key(), hash, &mut buf);
        if buf.capacity() <= MAX_KEPT_KEY_BUFFER {
            KEY_BUFFER.set(buf);
        }
        answer
    }

    /// Looks `lookup` up in data block `block` (at `handle`), pinning a found value in it
    /// when the block cache holds it or it is mapped (`cached`).
    fn find_in_block(
        &self,
        block: &Arc<Block>,
        cached: bool,
        handle: BlockHandle,
        lookup: &LookupKey,
        buf: &mut Vec<u8>,
    ) -> Result<(LookupResult, SequenceNumber)> {
        let target = lookup.internal_key();
        let mut it = BlockIter::new(&**block)
            .with_block_offset(handle.offset)
            .with_key_buffer(std::mem::take(buf));
        // If the block has no key >= lookup, the next block's first key is > this block's
        // separator >= lookup and has a larger user key (a separator only shares the user key
        // of its block's last entry when it is that entry), so there is no match.
        it.seek_for_get(target);
        let found = if it.valid() {
            match key::parse_internal_key(it.key()) {
                Some(p) if p.user_key == lookup.user_key() => {
                    Some((p.kind, it.value_range(), p.sequence))
                }
                Some(_) => None,
                None => {
                    return Err(Error::corruption(
                        &*self.path,
                        handle.offset,
                        "data block holds a malformed internal key",
                    ))
                }
            }
        } else {
            None
        };
        let status = it.status();
        *buf = it.into_key_buffer();
        status.map_err(|e| self.name_file(e))?;
        let Some((kind, range, mut seq)) = found else {
            return Ok((LookupResult::NotPresent, 0));
        };
        if let Some(global) = self.global_seqno {
            // The file holds one entry per user key, written at 0 and read at `global`: a
            // lookup below it does not see the entry (and there is no older one here).
            if global > lookup.sequence() {
                return Ok((LookupResult::NotPresent, 0));
            }
            seq = global;
        }
        let result = match kind {
            ValueKind::Delete | ValueKind::SingleDelete => LookupResult::Deleted,
            ValueKind::Merge => LookupResult::Merge,
            ValueKind::Put | ValueKind::BlobIndex => {
                let value = if cached {
                    Value::pinned(block.clone(), range)
                } else {
                    block.data().get(range).map(|v| Value::from_vec(v.to_vec()))
                };
                let value = value.ok_or_else(|| {
                    Error::corruption(&*self.path, handle.offset, "value outside its block")
                })?;
                if kind == ValueKind::Put {
                    LookupResult::Found(value)
                } else {
                    LookupResult::Blob(value)
                }
            }
            ValueKind::RangeDeletion => {
                return Err(Error::corruption(
                    &*self.path,
                    handle.offset,
                    "data block holds a range deletion",
                ))
            }
        };
        Ok((result, seq))
    }

    /// Puts this table's path into a corruption error raised by a block iterator that was not
    /// given it (the point-lookup path does not clone the path's `Arc`).
    fn name_file(&self, e: Error) -> Error {
        match e {
            Error::Corruption { offset, detail, .. } => Error::Corruption {
                file: self.path.to_path_buf(),
                offset,
                detail,
            },
            e => e,
        }
    }

    /// A two-level iterator over the whole table.
    pub fn iter(self: &Arc<Self>, opts: BlockReadOptions) -> TableIterator {
        TableIterator {
            global_seqno: self.global_seqno,
            table: self.clone(),
            index: None,
            data: None,
            data_handle: BlockHandle::default(),
            opts,
            readahead: Readahead::auto(),
            error: None,
            global_key: Vec::new(),
        }
    }

    /// The table's range tombstones, fragmented (`None` if it has none).
    pub fn range_tombstones(&self) -> Option<&Arc<FragmentedRangeTombstones>> {
        self.range_dels.as_ref()
    }

    /// The newest range tombstone of this table covering `user_key` visible at `read_seq`;
    /// 0 if none.
    #[inline]
    pub fn max_covering_tombstone_seq(&self, user_key: &[u8], read_seq: SequenceNumber) -> u64 {
        match &self.range_dels {
            Some(t) => t.max_covering_seq(user_key, read_seq),
            None => 0,
        }
    }

    /// The properties recorded when the table was written (`file_size` is the file's length).
    pub fn properties(&self) -> &TableProperties {
        &self.props
    }

    /// The table's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The table's file number.
    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    /// Approximate byte offset in the file where entries >= `ikey` start; the offset of the
    /// metadata (about the data size) for keys past the last.
    pub fn approximate_offset_of(&self, ikey: &[u8]) -> u64 {
        let Ok(mut index) = self.index_iter() else {
            return self.metaindex_handle.offset;
        };
        index.seek(self, ikey);
        if index.valid() {
            return index.handle().offset;
        }
        self.metaindex_handle.offset
    }

    /// Up to `max` user keys spread evenly over the table's data blocks (index separators,
    /// every k-th): where a compaction may split its inputs (subcompactions). Empty if the
    /// index cannot be read.
    pub(crate) fn key_anchors(&self, max: usize) -> Vec<Vec<u8>> {
        let Ok(mut index) = self.index_iter() else {
            return Vec::new();
        };
        let blocks = self.props.num_data_blocks.max(1) as usize;
        let step = blocks.div_ceil(max.max(1)).max(1);
        let mut out = Vec::new();
        index.seek_to_first(self);
        let mut i = 0usize;
        while index.valid() {
            if i % step == step - 1 {
                let separator = index.key();
                let user_key = match self.index_form.user_keys {
                    true => separator,
                    false => key::user_key(separator),
                };
                out.push(user_key.to_vec());
            }
            i += 1;
            index.next(self);
        }
        out
    }

    /// False only if the table certainly holds no key with `prefix`, the prefix that the
    /// extractor with id `extractor_id` gives; true if the table's filter was not built with
    /// that extractor's prefixes.
    pub fn may_contain_prefix(&self, prefix: &[u8], extractor_id: &str) -> bool {
        if self.props.prefix_extractor.is_empty() || self.props.prefix_extractor != extractor_id {
            return true;
        }
        let hash = filter::key_hash(prefix);
        match &self.filter_index {
            None => self.filter_may_contain(hash),
            Some(top) => self.partition_may_contain_user_key(top, prefix, hash),
        }
    }

    /// False only if the table certainly holds no entry for `user_key` (bloom filter check);
    /// true if there is no filter.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        let hash = filter::key_hash(user_key);
        match &self.filter_index {
            None => self.filter_may_contain(hash),
            Some(top) => self.partition_may_contain_user_key(top, user_key, hash),
        }
    }

    /// The filter's answer for `hash`; true without a filter, or when a filter evicted from
    /// the block cache cannot be read again (the lookup then reads the data, which reports
    /// the error if the file is damaged).
    fn filter_may_contain(&self, hash: u64) -> bool {
        match (&self.filter, self.filter_handle) {
            (Some(f), _) => f.may_contain_hash(hash),
            (None, Some(h)) if self.index.is_none() => self
                .cached_filter(h)
                .is_none_or(|f| f.may_contain_hash(hash)),
            _ => true,
        }
    }

    /// The index from the block cache, read again (checksum verified) if it was evicted.
    fn cached_index(&self) -> Result<Arc<Block>> {
        let key = (self.cache_id, self.index_handle.offset);
        let cached = self.cached_counted::<Block>(
            &key,
            Ticker::BlockCacheIndexHit,
            Ticker::BlockCacheIndexMiss,
        );
        if let Some(b) = cached {
            return Ok(b);
        }
        let block = Arc::new(
            self.source()
                .block(self.index_handle, true, "index block", None)?,
        );
        if let Some(cache) = &self.cache {
            insert_high_priority(cache, key, block.clone());
        }
        Ok(block)
    }

    /// The filter (at `h`) from the block cache, read again if it was evicted; `None` if that
    /// read fails.
    fn cached_filter(&self, h: BlockHandle) -> Option<Arc<BloomFilter>> {
        let key = (self.cache_id, h.offset);
        let cached = self.cached_counted::<BloomFilter>(
            &key,
            Ticker::BlockCacheFilterHit,
            Ticker::BlockCacheFilterMiss,
        );
        if let Some(f) = cached {
            return Some(f);
        }
        let f = Arc::new(read_filter(self.source(), h).ok()?);
        if let Some(cache) = &self.cache {
            insert_high_priority(cache, key, f.clone());
        }
        Some(f)
    }

    /// Reads every block from disk (bypassing the cache) with checksums verified and checks
    /// that every data block decodes and that keys are in strictly increasing order.
    pub fn verify_checksums(&self) -> Result<()> {
        let mut metas = vec![
            (self.index_handle, "index block"),
            (self.metaindex_handle, "metaindex block"),
            (self.properties_handle, "properties block"),
        ];
        if let Some(h) = self.filter_handle {
            metas.push((h, "filter block"));
        }
        if let Some(h) = self.range_del_handle {
            metas.push((h, "range-deletion block"));
        }
        if let Some(h) = self.dict_handle {
            metas.push((h, "compression dictionary block"));
        }
        if let Some(h) = self.filter_index_handle {
            metas.push((h, "filter partition index"));
        }
        if self.two_level {
            metas.extend(
                self.partition_handles(self.index.as_deref(), self.index_handle)?
                    .into_iter()
                    .map(|h| (h, "index partition")),
            );
        }
        if let Some(h) = self.filter_index_handle {
            metas.extend(
                self.partition_handles(self.filter_index.as_deref(), h)?
                    .into_iter()
                    .map(|h| (h, "filter partition")),
            );
        }
        for (h, what) in metas {
            self.source().contents(h, true, what, None)?;
        }
        let mut index = self.index_iter()?;
        index.seek_to_first(self);
        let mut last_key: Vec<u8> = Vec::new();
        let mut first = true;
        while index.valid() {
            let h = index.handle();
            let block = self.source().block(h, true, "data block", None)?;
            let mut it = BlockIter::new(Arc::new(block)).with_origin(self.path.clone(), h.offset);
            it.seek_to_first();
            while it.valid() {
                if key::parse_internal_key(it.key()).is_none() {
                    return Err(Error::corruption(
                        &*self.path,
                        h.offset,
                        "data block holds a malformed internal key",
                    ));
                }
                if !first && key::compare_internal(&last_key, it.key()) != std::cmp::Ordering::Less
                {
                    return Err(Error::corruption(
                        &*self.path,
                        h.offset,
                        "keys out of order",
                    ));
                }
                if self.beyond_separator(it.key(), index.key()) {
                    return Err(Error::corruption(
                        &*self.path,
                        h.offset,
                        "key beyond its index separator",
                    ));
                }
                first = false;
                last_key.clear();
                last_key.extend_from_slice(it.key());
                it.next();
            }
            it.status()?;
            index.next(self);
        }
        index.status()
    }

    /// True if data key `ikey` sorts after index key `separator` (an internal key, or a
    /// user key in a user-keyed index).
    fn beyond_separator(&self, ikey: &[u8], separator: &[u8]) -> bool {
        match self.index_form.user_keys {
            true => key::user_key(ikey) > separator,
            false => key::compare_internal(ikey, separator) == std::cmp::Ordering::Greater,
        }
    }

    /// The handles in the top-level block `top` (at `at`) of a partitioned index or filter.
    fn partition_handles(&self, top: Option<&Block>, at: BlockHandle) -> Result<Vec<BlockHandle>> {
        let mut out = Vec::new();
        let Some(top) = top else {
            return Ok(out);
        };
        let mut it = IndexBlockIter::new(top, self.index_form)
            .with_origin(self.path.clone(), at.offset)
            .with_limit(self.data_end);
        it.seek_to_first();
        while it.valid() {
            out.push(it.handle());
            it.next();
        }
        it.status()?;
        Ok(out)
    }

    #[cfg(test)]
    pub(super) fn index_handle_for_tests(&self) -> BlockHandle {
        self.index_handle
    }

    #[cfg(test)]
    pub(super) fn first_data_handle_for_tests(&self) -> BlockHandle {
        let Ok(mut it) = self.index_iter() else {
            return BlockHandle::default();
        };
        it.seek_to_first(self);
        match it.valid() {
            true => it.handle(),
            false => BlockHandle::default(),
        }
    }

    /// The handles of every data block, in order.
    #[cfg(test)]
    pub(crate) fn data_handles_for_tests(&self) -> Vec<BlockHandle> {
        let mut out = Vec::new();
        let Ok(mut it) = self.index_iter() else {
            return out;
        };
        it.seek_to_first(self);
        while it.valid() {
            out.push(it.handle());
            it.next(self);
        }
        out
    }

    /// Where this table's blocks are read from.
    fn source(&self) -> BlockSource<'_> {
        BlockSource::new(&*self.file, &self.path, self.data_end)
            .with_dictionary(self.dictionary.as_ref())
    }

    fn index_iter(&self) -> Result<IndexIter> {
        let block = match &self.index {
            Some(b) => b.clone(),
            None => self.cached_index()?,
        };
        let top = self.index_block_iter(block, self.index_handle.offset);
        Ok(match self.two_level {
            true => IndexIter::two_level(top),
            false => IndexIter::Flat(top),
        })
    }

    /// True if the table has no filter: a get that does not find its key here has searched
    /// a data block (a read in vain, which seek compaction counts; version/seeks.rs).
    #[inline]
    pub(crate) fn has_no_filter(&self) -> bool {
        self.filter_handle.is_none() && self.filter_index_handle.is_none()
    }

    /// The heads of the index block this table holds (the top level of a two-level index),
    /// for seeks in that block only.
    pub(super) fn index_heads(&self) -> Option<&IndexHeads> {
        self.index_heads.as_ref()
    }

    /// An iterator over index block (or partition) `block` at file offset `offset`.
    pub(super) fn index_block_iter(&self, block: Arc<Block>, offset: u64) -> IndexBlockIter {
        IndexBlockIter::new(block, self.index_form)
            .with_origin(self.path.clone(), offset)
            .with_limit(self.data_end)
    }

    fn cached<T: Send + Sync + 'static>(&self, key: &(u64, u64)) -> Option<Arc<T>> {
        let v = self.cache.as_ref()?.get(key)?;
        v.downcast::<T>().ok()
    }

    /// A data block, from the cache if there, else read (and cached if `fill_cache`); the flag
    /// says whether a value may pin the block rather than copy out of it: the block is (now)
    /// held by the cache, or is a slice of the mapped file.
    pub(crate) fn data_block(
        &self,
        handle: BlockHandle,
        opts: BlockReadOptions,
    ) -> Result<(Arc<Block>, bool)> {
        self.data_block_with(handle, opts, None)
    }

    /// [`Table::data_block`], reading a missing block through `readahead` if given.
    fn data_block_with(
        &self,
        handle: BlockHandle,
        opts: BlockReadOptions,
        readahead: Option<&mut Readahead>,
    ) -> Result<(Arc<Block>, bool)> {
        if self.mapped_raw {
            let block = self
                .source()
                .block(handle, opts.verify_checksums, "data block", None)?;
            // Pinnable: the block holds the map, which outlives any value pinning it.
            return Ok((Arc::new(block), true));
        }
        let key = (self.cache_id, handle.offset);
        let cached = self.cached_counted::<Block>(
            &key,
            Ticker::BlockCacheDataHit,
            Ticker::BlockCacheDataMiss,
        );
        if let Some(b) = cached {
            return Ok((b, true));
        }
        // Without a secondary tier a miss pays this one branch more.
        if let Some(tier) = self.cache.as_deref().and_then(BlockCache::secondary) {
            return self.data_block_two_tier(tier, key, handle, opts, readahead);
        }
        let block = Arc::new(self.source().block(
            handle,
            opts.verify_checksums,
            "data block",
            readahead,
        )?);
        Ok(self.fill_primary(key, block, opts))
    }

    /// A primary-cache miss with a compressed secondary tier: a block held there is
    /// decompressed (no IO); else it is read from the file and, if compressed and
    /// `fill_cache`, admitted to the tier in its stored form. Either way it then goes into
    /// the primary if `fill_cache`.
    fn data_block_two_tier(
        &self,
        tier: &CompressedSecondaryCache,
        key: (u64, u64),
        handle: BlockHandle,
        opts: BlockReadOptions,
        readahead: Option<&mut Readahead>,
    ) -> Result<(Arc<Block>, bool)> {
        let stored = tier.get(&key);
        self.note_cache(
            stored.is_some(),
            Ticker::CompressedSecondaryCacheHit,
            Ticker::CompressedSecondaryCacheMiss,
        );
        let source = self.source();
        let block = match stored {
            Some(s) => source.block_from_stored(&s, handle, "data block")?,
            None if opts.fill_cache => {
                let (block, stored) = source.block_and_stored(
                    handle,
                    opts.verify_checksums,
                    "data block",
                    readahead,
                )?;
                if let Some(s) = stored {
                    tier.insert(key, s);
                }
                block
            }
            None => source.block(handle, opts.verify_checksums, "data block", readahead)?,
        };
        Ok(self.fill_primary(key, Arc::new(block), opts))
    }

    /// Puts a block just read or decompressed into the primary cache if `fill_cache`;
    /// returns it with whether the cache now holds it.
    fn fill_primary(
        &self,
        key: (u64, u64),
        block: Arc<Block>,
        opts: BlockReadOptions,
    ) -> (Arc<Block>, bool) {
        match &self.cache {
            // A slice of the mapped file costs no memory to keep and nothing to read again.
            _ if block.is_mapped() => (block, true),
            Some(cache) if opts.fill_cache => {
                let charge = block.cache_charge();
                cache.insert(key, block.clone(), charge);
                (block, true)
            }
            _ => (block, false),
        }
    }
}

/// Iterates a table: an index-block iterator picks the data block, a block iterator walks it.
pub struct TableIterator {
    table: Arc<Table>,
    /// Loaded at the first positioning call (through the block cache).
    index: Option<IndexIter>,
    data: Option<BlockIter>,
    data_handle: BlockHandle,
    opts: BlockReadOptions,
    /// Data blocks missing from the cache are read through this (see `readahead.rs`).
    readahead: Readahead,
    error: Option<Error>,
    /// The table's global sequence number (see [`Table::with_global_seqno`]); with it, `key`
    /// returns `global_key`, the current key with its sequence number replaced.
    global_seqno: Option<SequenceNumber>,
    global_key: Vec<u8>,
}

impl TableIterator {
    /// Reads blocks `bytes` at a time (`Options::compaction_readahead_size`) instead of with
    /// the automatic readahead: a compaction reads every block of its inputs in order.
    pub fn with_compaction_readahead(mut self, bytes: usize) -> Self {
        self.readahead = Readahead::fixed(bytes);
        self
    }

    /// Loads the data block the index iterator points at (keeps the current one if it is the
    /// same block). On error, records it and leaves no data iterator.
    fn init_data_block(&mut self) {
        let Some(index) = self.index.as_ref().filter(|i| i.valid()) else {
            self.data = None;
            return;
        };
        let handle = index.handle();
        if self.data.is_some() && handle == self.data_handle {
            return;
        }
        match self
            .table
            .data_block_with(handle, self.opts, Some(&mut self.readahead))
        {
            Ok((block, _)) => {
                match &mut self.data {
                    Some(d) => d.reset_to(block, handle.offset),
                    None => {
                        self.data = Some(
                            BlockIter::new(block)
                                .with_origin(self.table.path.clone(), handle.offset),
                        )
                    }
                }
                self.data_handle = handle;
            }
            Err(e) => self.fail(e),
        }
    }

    fn index_valid(&self) -> bool {
        self.index.as_ref().is_some_and(|i| i.valid())
    }

    /// Loads the index iterator if needed; false (with the error recorded) if it failed.
    fn ensure_index(&mut self) -> bool {
        if self.error.is_some() {
            return false;
        }
        if self.index.is_none() {
            match self.table.index_iter() {
                Ok(i) => self.index = Some(i),
                Err(e) => {
                    self.fail(e);
                    return false;
                }
            }
        }
        true
    }

    fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.data = None;
    }

    /// True if the data iterator stopped because of an error (which is then recorded).
    fn data_failed(&mut self) -> bool {
        if let Some(d) = &self.data {
            if let Err(e) = d.status() {
                self.fail(e);
                return true;
            }
        }
        self.error.is_some()
    }

    fn skip_empty_forward(&mut self) {
        while !self.data.as_ref().is_some_and(|d| d.valid()) {
            if self.data_failed() || !self.index_valid() {
                self.data = None;
                return;
            }
            if let Some(i) = &mut self.index {
                i.next(&self.table);
            }
            self.init_data_block();
            if let Some(d) = &mut self.data {
                d.seek_to_first();
            }
        }
    }

    /// With a global sequence number: builds the current key as readers see it. Called after
    /// every move; one branch for other tables.
    #[inline]
    fn present_key(&mut self) {
        let (Some(seq), Some(d)) = (self.global_seqno, &self.data) else {
            return;
        };
        if !d.valid() {
            return;
        }
        let k = d.key();
        self.global_key.clear();
        match k.len().checked_sub(8) {
            Some(at) => {
                // The kind byte (the trailer's low byte) stays; the sequence number becomes
                // the global one.
                self.global_key.extend_from_slice(&k[..at]);
                let trailer = (seq << 8) | u64::from(k[at]);
                self.global_key.extend_from_slice(&trailer.to_le_bytes());
            }
            // Malformed: passed on as it is, for the reader to report.
            None => self.global_key.extend_from_slice(k),
        }
    }

    fn skip_empty_backward(&mut self) {
        while !self.data.as_ref().is_some_and(|d| d.valid()) {
            if self.data_failed() || !self.index_valid() {
                self.data = None;
                return;
            }
            if let Some(i) = &mut self.index {
                i.prev(&self.table);
            }
            self.init_data_block();
            if let Some(d) = &mut self.data {
                d.seek_to_last();
            }
        }
    }
}

impl InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        self.error.is_none() && self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn seek_to_first(&mut self) {
        if !self.ensure_index() {
            return;
        }
        if let Some(i) = &mut self.index {
            i.seek_to_first(&self.table);
        }
        self.init_data_block();
        if let Some(d) = &mut self.data {
            d.seek_to_first();
        }
        self.skip_empty_forward();
        self.present_key();
    }

    fn seek_to_last(&mut self) {
        if !self.ensure_index() {
            return;
        }
        if let Some(i) = &mut self.index {
            i.seek_to_last(&self.table);
        }
        self.init_data_block();
        if let Some(d) = &mut self.data {
            d.seek_to_last();
        }
        self.skip_empty_backward();
        self.present_key();
    }

    fn seek(&mut self, target: &[u8]) {
        if !self.ensure_index() {
            return;
        }
        if let Some(i) = &mut self.index {
            i.seek(&self.table, target);
        }
        self.init_data_block();
        if let Some(d) = &mut self.data {
            d.seek(target);
        }
        self.skip_empty_forward();
        self.present_key();
        if self.global_seqno.is_some()
            && self.valid()
            && key::compare_internal(&self.global_key, target) == std::cmp::Ordering::Less
        {
            // The entry found has the target's user key but, read at the global sequence
            // number, sorts before it; user keys are distinct, so the next entry is the one.
            self.next();
        }
    }

    fn next(&mut self) {
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.next();
        }
        self.skip_empty_forward();
        self.present_key();
    }

    fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.prev();
        }
        self.skip_empty_backward();
        self.present_key();
    }

    fn key(&self) -> &[u8] {
        match &self.data {
            Some(_) if self.global_seqno.is_some() => &self.global_key,
            Some(d) => d.key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match &self.data {
            Some(d) => d.value(),
            None => &[],
        }
    }

    fn pinned_value(&self) -> Option<crate::Value> {
        self.data.as_ref()?.pinned_value()
    }

    fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.duplicate());
        }
        if let Some(i) = &self.index {
            i.status()?;
        }
        match &self.data {
            Some(d) => d.status(),
            None => Ok(()),
        }
    }
}

/// Inserts an index or filter block (or partition) with high priority: the CLOCK sweep evicts
/// data blocks first while such entries hold at most half the shard (RocksDB's high-priority
/// pool).
fn insert_high_priority<T: MetaSize + Send + Sync + 'static>(
    cache: &BlockCache,
    key: (u64, u64),
    v: Arc<T>,
) {
    let charge = v.heap_size();
    cache.insert_with_priority(key, v, charge, Priority::High);
}

/// The bytes an index block or filter holds (what the block cache charges for it).
trait MetaSize {
    fn heap_size(&self) -> usize;
}

impl MetaSize for Block {
    fn heap_size(&self) -> usize {
        self.size()
    }
}

impl MetaSize for BloomFilter {
    fn heap_size(&self) -> usize {
        self.size()
    }
}

/// The table's zstd dictionary: required by a format-2 table, optional in formats 3 and 4
/// (the metaindex says), refused in format 1.
fn read_dictionary(
    src: BlockSource<'_>,
    footer: &Footer,
    handle: Option<BlockHandle>,
) -> Result<Option<ZstdDictionary>> {
    let corrupt = |offset: u64, d: &str| Error::corruption(src.path, offset, d);
    let h = match (footer.version, handle) {
        (
            TableFormat::V1
            | TableFormat::V3Partitioned
            | TableFormat::V4SmallIndex
            | TableFormat::V5DataHash,
            None,
        ) => return Ok(None),
        (
            TableFormat::V2Dictionary
            | TableFormat::V3Partitioned
            | TableFormat::V4SmallIndex
            | TableFormat::V5DataHash,
            Some(h),
        ) => h,
        (TableFormat::V2Dictionary, None) => {
            return Err(corrupt(
                footer.metaindex.offset,
                "format-2 table lists no compression dictionary",
            ))
        }
        (TableFormat::V1, Some(h)) => {
            return Err(corrupt(
                h.offset,
                "format-1 table lists a compression dictionary",
            ))
        }
    };
    let bytes = src.contents(h, true, "compression dictionary block", None)?;
    ZstdDictionary::new(&bytes)
        .map(Some)
        .ok_or_else(|| corrupt(h.offset, "compression dictionary is not usable by zstd"))
}

fn read_filter(src: BlockSource<'_>, h: BlockHandle) -> Result<BloomFilter> {
    let data = src.contents(h, true, "filter block", None)?;
    BloomFilter::new(data).map_err(|e| Error::corruption(src.path, h.offset, e))
}
