//! Block compression codecs. The codec id is stored in every block trailer, so a table may mix
//! codecs and a reader needs no option to decode it.

use std::io::{Read, Write};

/// A block compression codec. The numeric ids match RocksDB's for familiarity and are part of
/// the on-disk format (docs/format/block.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CompressionType {
    /// Stored as is.
    None = 0,
    /// Snappy (raw format, crate `snap`).
    Snappy = 1,
    /// Zlib (raw deflate with zlib header, crate `flate2`).
    Zlib = 2,
    /// LZ4 block format with a 4-byte little-endian uncompressed-size prefix (crate `lz4_flex`).
    Lz4 = 4,
    /// Zstandard frame (crate `zstd`).
    Zstd = 7,
}

impl CompressionType {
    /// Decodes an on-disk codec id.
    pub(crate) fn from_u8(b: u8) -> Option<CompressionType> {
        match b {
            0 => Some(CompressionType::None),
            1 => Some(CompressionType::Snappy),
            2 => Some(CompressionType::Zlib),
            4 => Some(CompressionType::Lz4),
            7 => Some(CompressionType::Zstd),
            _ => None,
        }
    }

    /// Parses a codec name as db_bench spells it (`none`, `snappy`, `zlib`, `lz4`, `zstd`).
    pub fn from_name(name: &str) -> Option<CompressionType> {
        match name.to_ascii_lowercase().as_str() {
            "none" | "no" | "kNoCompression" => Some(CompressionType::None),
            "snappy" => Some(CompressionType::Snappy),
            "zlib" => Some(CompressionType::Zlib),
            "lz4" => Some(CompressionType::Lz4),
            "zstd" => Some(CompressionType::Zstd),
            _ => None,
        }
    }

    /// The codec's name.
    pub fn name(self) -> &'static str {
        match self {
            CompressionType::None => "none",
            CompressionType::Snappy => "snappy",
            CompressionType::Zlib => "zlib",
            CompressionType::Lz4 => "lz4",
            CompressionType::Zstd => "zstd",
        }
    }
}

/// A codec at a level, keeping its state between blocks: a table builder compresses every
/// block with one, so zstd's context (hundreds of KiB) is set up once per table, not per block.
pub(crate) struct Compressor {
    kind: CompressionType,
    /// The codec's level (`Options::compression_level`); `None`: the codec's default.
    level: Option<i32>,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    /// Snappy's encoder, made at the first block: a new one allocates and zeroes a 32 KiB
    /// hash table for every block over 1 KiB.
    snappy: Option<Box<snap::raw::Encoder>>,
    /// The zstd dictionary blocks are compressed with (`Options::max_dict_bytes`).
    dictionary: Option<Vec<u8>>,
}

/// zstd's level when none is set (the zstd library's own default).
const ZSTD_DEFAULT_LEVEL: i32 = 3;

impl Compressor {
    pub(crate) fn new(kind: CompressionType, level: Option<i32>) -> Self {
        Compressor {
            kind,
            level,
            zstd: None,
            snappy: None,
            dictionary: None,
        }
    }

    /// Compresses the next blocks with `dictionary` (zstd only; other codecs ignore it).
    pub(crate) fn set_dictionary(&mut self, dictionary: Vec<u8>) {
        self.zstd = None;
        self.dictionary = Some(dictionary);
    }

    pub(crate) fn kind(&self) -> CompressionType {
        self.kind
    }

    /// Compresses `input` into `out` (cleared first). Returns false if the codec failed, in
    /// which case the caller stores the block uncompressed.
    pub(crate) fn compress(&mut self, input: &[u8], out: &mut Vec<u8>) -> bool {
        match self.kind {
            CompressionType::Zstd => {
                out.clear();
                if self.zstd.is_none() {
                    let level = self.level.unwrap_or(ZSTD_DEFAULT_LEVEL);
                    let made = match &self.dictionary {
                        Some(d) => zstd::bulk::Compressor::with_dictionary(level, d),
                        None => zstd::bulk::Compressor::new(level),
                    };
                    match made {
                        Ok(c) => self.zstd = Some(c),
                        Err(_) => return false,
                    }
                }
                let Some(z) = self.zstd.as_mut() else {
                    return false;
                };
                out.reserve(zstd::zstd_safe::compress_bound(input.len()));
                z.compress_to_buffer(input, out).is_ok()
            }
            CompressionType::Snappy => {
                let encoder = self
                    .snappy
                    .get_or_insert_with(|| Box::new(snap::raw::Encoder::new()));
                compress_snappy(encoder, input, out)
            }
            CompressionType::Zlib => compress_zlib(self.level, input, out),
            CompressionType::Lz4 => {
                *out = lz4_flex::block::compress_prepend_size(input);
                true
            }
            CompressionType::None => {
                out.clear();
                out.extend_from_slice(input);
                true
            }
        }
    }
}

/// Compresses `input` into `out` (cleared first) with `encoder`.
fn compress_snappy(encoder: &mut snap::raw::Encoder, input: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    out.resize(snap::raw::max_compress_len(input.len()), 0);
    match encoder.compress(input, out) {
        Ok(n) => {
            out.truncate(n);
            true
        }
        Err(_) => false,
    }
}

/// Compresses `input` into `out` with zlib at `level` (the codec's default if `None`).
fn compress_zlib(level: Option<i32>, input: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let level = match level {
        Some(l) => flate2::Compression::new(l.clamp(0, 9) as u32),
        None => flate2::Compression::default(),
    };
    let mut enc = flate2::write::ZlibEncoder::new(std::mem::take(out), level);
    if enc.write_all(input).is_err() {
        return false;
    }
    match enc.finish() {
        Ok(v) => {
            *out = v;
            true
        }
        Err(_) => false,
    }
}

thread_local! {
    /// Each thread's zstd decompression context, reused from block to block (setting one up
    /// costs an allocation of about 100 KiB).
    static ZSTD_DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

thread_local! {
    /// Each thread's zstd context for blocks compressed with a table's dictionary.
    static ZSTD_DICT_CONTEXT: std::cell::RefCell<Option<zstd::zstd_safe::DCtx<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// A table's zstd dictionary, prepared once for decompression (`Options::max_dict_bytes`).
pub(crate) struct ZstdDictionary(zstd::zstd_safe::DDict<'static>);

impl ZstdDictionary {
    /// Prepares `bytes` (a trained zstd dictionary or raw content; zstd takes either).
    pub(crate) fn new(bytes: &[u8]) -> Option<ZstdDictionary> {
        zstd::zstd_safe::DDict::try_create(bytes).map(ZstdDictionary)
    }
}

impl std::fmt::Debug for ZstdDictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ZstdDictionary")
    }
}

/// Trains a zstd dictionary of at most `max_bytes` on `samples` (RocksDB's
/// `zstd_max_train_bytes`); `None` where zstd cannot (too few or too uniform samples).
pub(crate) fn train_zstd_dictionary(samples: &[&[u8]], max_bytes: usize) -> Option<Vec<u8>> {
    zstd::dict::from_samples(samples, max_bytes)
        .ok()
        .filter(|d| !d.is_empty())
}

fn zstd_decompress_with(
    input: &[u8],
    limit: usize,
    dict: &ZstdDictionary,
) -> Result<Vec<u8>, String> {
    ZSTD_DICT_CONTEXT.with(|cell| {
        let mut slot = cell.borrow_mut();
        let ctx = slot.get_or_insert_with(zstd::zstd_safe::DCtx::create);
        let mut out = Vec::with_capacity(limit);
        ctx.decompress_using_ddict(&mut out, input, &dict.0)
            .map_err(|code| format!("zstd: {}", zstd::zstd_safe::get_error_name(code)))?;
        Ok(out)
    })
}

fn zstd_decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    ZSTD_DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new().map_err(|e| format!("zstd: {e}"))?);
        }
        match slot.as_mut() {
            Some(d) => d.decompress(input, limit).map_err(|e| format!("zstd: {e}")),
            None => Err("zstd: no decompression context".to_string()),
        }
    })
}

/// Decompresses `input` (a block of a table without a dictionary).
#[cfg(test)]
pub(crate) fn decompress(
    kind: CompressionType,
    input: &[u8],
    limit: usize,
) -> Result<Vec<u8>, String> {
    decompress_with(kind, input, limit, None)
}

/// Decompresses `input`, with the zstd dictionary of the table the block comes from if it has
/// one. `limit` bounds the output size so a corrupt length cannot make us allocate without
/// bound. Errors are returned as a message; the caller adds file and offset.
pub(crate) fn decompress_with(
    kind: CompressionType,
    input: &[u8],
    limit: usize,
    dict: Option<&ZstdDictionary>,
) -> Result<Vec<u8>, String> {
    match kind {
        CompressionType::None => Ok(input.to_vec()),
        CompressionType::Snappy => {
            let n = snap::raw::decompress_len(input).map_err(|e| format!("snappy: {e}"))?;
            if n > limit {
                return Err(format!(
                    "snappy block claims {n} bytes, over the limit {limit}"
                ));
            }
            snap::raw::Decoder::new()
                .decompress_vec(input)
                .map_err(|e| format!("snappy: {e}"))
        }
        CompressionType::Zlib => {
            let mut out = Vec::new();
            let dec = flate2::read::ZlibDecoder::new(input);
            dec.take(limit as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| format!("zlib: {e}"))?;
            if out.len() > limit {
                return Err(format!("zlib block inflates past the limit {limit}"));
            }
            Ok(out)
        }
        CompressionType::Lz4 => {
            let n = input
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
                .ok_or_else(|| "lz4 block too short".to_string())? as usize;
            if n > limit {
                return Err(format!(
                    "lz4 block claims {n} bytes, over the limit {limit}"
                ));
            }
            lz4_flex::block::decompress_size_prepended(input).map_err(|e| format!("lz4: {e}"))
        }
        CompressionType::Zstd => {
            if let Ok(Some(n)) = zstd::zstd_safe::get_frame_content_size(input) {
                if n > limit as u64 {
                    return Err(format!(
                        "zstd block claims {n} bytes, over the limit {limit}"
                    ));
                }
            }
            match dict {
                Some(d) => zstd_decompress_with(input, limit, d),
                None => zstd_decompress(input, limit),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        for kind in [
            CompressionType::None,
            CompressionType::Snappy,
            CompressionType::Zlib,
            CompressionType::Lz4,
            CompressionType::Zstd,
        ] {
            let mut out = Vec::new();
            assert!(
                Compressor::new(kind, None).compress(&data, &mut out),
                "{kind:?}"
            );
            if kind != CompressionType::None {
                assert!(out.len() < data.len(), "{kind:?} did not shrink");
            }
            assert_eq!(decompress(kind, &out, data.len()).as_deref(), Ok(&data[..]));
            assert_eq!(CompressionType::from_u8(kind as u8), Some(kind));
            assert_eq!(CompressionType::from_name(kind.name()), Some(kind));
        }
    }

    #[test]
    fn limits_and_garbage_are_errors_not_panics() {
        let data = vec![7u8; 5000];
        for kind in [
            CompressionType::Snappy,
            CompressionType::Zlib,
            CompressionType::Lz4,
            CompressionType::Zstd,
        ] {
            let mut out = Vec::new();
            assert!(Compressor::new(kind, None).compress(&data, &mut out));
            assert!(
                decompress(kind, &out, 100).is_err(),
                "{kind:?} ignored limit"
            );
            let garbage = [0xffu8, 0xff, 0xff, 0x7f, 1, 2, 3];
            assert!(decompress(kind, &garbage, 1 << 20).is_err(), "{kind:?}");
        }
    }

    #[test]
    fn levels_trade_size_and_a_reused_context_gives_the_same_bytes() {
        let data: Vec<u8> = (0..64 * 1024u32)
            .map(|i| {
                b"lineitem|1996-03-13|DELIVER IN PERSON|TRUCK|"[(i % 44) as usize]
                    ^ (i / 4096) as u8
            })
            .collect();
        for kind in [CompressionType::Zstd, CompressionType::Zlib] {
            let mut fast = Vec::new();
            let mut tight = Vec::new();
            assert!(Compressor::new(kind, Some(1)).compress(&data, &mut fast));
            assert!(Compressor::new(kind, Some(19)).compress(&data, &mut tight));
            assert!(
                tight.len() <= fast.len(),
                "{kind:?}: {} > {}",
                tight.len(),
                fast.len()
            );
            for out in [&fast, &tight] {
                assert_eq!(decompress(kind, out, data.len()).as_deref(), Ok(&data[..]));
            }
        }
        // One compressor for many blocks (as a table builder uses it) writes what a fresh one
        // writes for each.
        let mut reused = Compressor::new(CompressionType::Zstd, Some(5));
        for chunk in data.chunks(4096) {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            assert!(reused.compress(chunk, &mut a));
            assert!(Compressor::new(CompressionType::Zstd, Some(5)).compress(chunk, &mut b));
            assert_eq!(a, b);
        }
    }

    /// Snappy's encoder is kept from block to block: each block, small (a stack table) or
    /// large (the heap table it keeps), compresses to exactly what a fresh encoder writes.
    #[test]
    fn a_kept_snappy_encoder_writes_what_a_fresh_one_writes() {
        let data: Vec<u8> = (0..200_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 7 + b'a')
            .collect();
        let mut reused = Compressor::new(CompressionType::Snappy, None);
        let mut at = 0;
        for size in [4096, 300, 65_536, 17, 1025, 4096, 40_000, 512] {
            let block = &data[at..at + size];
            at += size;
            let (mut a, mut b) = (Vec::new(), Vec::new());
            assert!(reused.compress(block, &mut a));
            assert!(Compressor::new(CompressionType::Snappy, None).compress(block, &mut b));
            assert_eq!(a, b, "block of {size} bytes");
            let back = decompress(CompressionType::Snappy, &a, size);
            assert_eq!(back.as_deref(), Ok(block));
        }
    }
}
