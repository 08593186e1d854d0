//! Little-endian fixed-width integers and LEB128 varints, the building blocks of every format.
//!
//! Decoders never trust their input: they return `None` on truncated or overlong encodings and
//! the caller turns that into `Error::Corruption` with its file and offset.

/// Appends `v` as 4 little-endian bytes.
pub(crate) fn put_fixed32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as 8 little-endian bytes.
pub(crate) fn put_fixed64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Reads 4 little-endian bytes at the start of `src`.
pub(crate) fn decode_fixed32(src: &[u8]) -> Option<u32> {
    let b: [u8; 4] = src.get(..4)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

/// Reads 8 little-endian bytes at the start of `src`.
pub(crate) fn decode_fixed64(src: &[u8]) -> Option<u64> {
    let b: [u8; 8] = src.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// Appends `v` as a LEB128 varint (1 to 5 bytes).
pub(crate) fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// Appends `v` as a LEB128 varint (1 to 10 bytes).
pub(crate) fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Number of bytes `put_varint64(v)` writes.
pub(crate) fn varint_length(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Decodes a varint32 from the start of `src`; returns the value and the bytes consumed.
pub(crate) fn get_varint32(src: &[u8]) -> Option<(u32, usize)> {
    // Fast path: one byte.
    if let Some(&b) = src.first() {
        if b < 0x80 {
            return Some((u32::from(b), 1));
        }
    }
    let (v, n) = get_varint_limited(src, 5)?;
    let v = u32::try_from(v).ok()?;
    Some((v, n))
}

/// Decodes a varint64 from the start of `src`; returns the value and the bytes consumed.
pub(crate) fn get_varint64(src: &[u8]) -> Option<(u64, usize)> {
    get_varint_limited(src, 10)
}

fn get_varint_limited(src: &[u8], max_bytes: usize) -> Option<(u64, usize)> {
    let mut result: u64 = 0;
    for (i, &byte) in src.iter().take(max_bytes).enumerate() {
        let shift = 7 * i as u32;
        let part = u64::from(byte & 0x7f);
        if shift == 63 && part > 1 {
            return None;
        }
        result |= part << shift;
        if byte < 0x80 {
            return Some((result, i + 1));
        }
    }
    None
}

/// Appends a varint length followed by the bytes.
pub(crate) fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint64(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

/// A cursor over untrusted bytes: each getter returns `None` when the input is too short or
/// malformed, never panics.
#[derive(Debug, Clone)]
pub(crate) struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// Starts decoding at the beginning of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }
    /// Bytes consumed so far.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }
    /// Bytes left.
    pub(crate) fn remaining(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }
    /// True when all bytes were consumed.
    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
    /// Reads one byte.
    pub(crate) fn u8(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }
    /// Reads a fixed32.
    pub(crate) fn fixed32(&mut self) -> Option<u32> {
        let v = decode_fixed32(self.remaining())?;
        self.pos += 4;
        Some(v)
    }
    /// Reads a fixed64.
    pub(crate) fn fixed64(&mut self) -> Option<u64> {
        let v = decode_fixed64(self.remaining())?;
        self.pos += 8;
        Some(v)
    }
    /// Reads a varint32.
    pub(crate) fn varint32(&mut self) -> Option<u32> {
        let (v, n) = get_varint32(self.remaining())?;
        self.pos += n;
        Some(v)
    }
    /// Reads a varint64.
    pub(crate) fn varint64(&mut self) -> Option<u64> {
        let (v, n) = get_varint64(self.remaining())?;
        self.pos += n;
        Some(v)
    }
    /// Reads `n` raw bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    /// Reads a varint length and that many bytes.
    pub(crate) fn length_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint64()?).ok()?;
        self.bytes(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_at_boundaries() {
        let values = [
            0u64,
            1,
            127,
            128,
            255,
            16383,
            16384,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ];
        for &v in &values {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            assert_eq!(buf.len(), varint_length(v));
            assert_eq!(get_varint64(&buf), Some((v, buf.len())));
            // Every proper prefix is truncated input.
            for cut in 0..buf.len() {
                assert_eq!(get_varint64(&buf[..cut]), None);
            }
        }
    }

    #[test]
    fn varint32_rejects_values_over_u32() {
        let mut buf = Vec::new();
        put_varint64(&mut buf, u64::from(u32::MAX) + 1);
        assert_eq!(get_varint32(&buf), None);
        let mut buf = Vec::new();
        put_varint32(&mut buf, u32::MAX);
        assert_eq!(get_varint32(&buf), Some((u32::MAX, 5)));
    }

    #[test]
    fn overlong_varint_is_rejected() {
        let buf = [0xffu8; 11];
        assert_eq!(get_varint64(&buf), None);
        // 10th byte may carry only one bit.
        let mut buf = vec![0xffu8; 9];
        buf.push(0x02);
        assert_eq!(get_varint64(&buf), None);
    }

    #[test]
    fn decoder_stops_on_short_input() {
        let mut buf = Vec::new();
        put_length_prefixed(&mut buf, b"hello");
        put_fixed32(&mut buf, 7);
        let mut d = Decoder::new(&buf);
        assert_eq!(d.length_prefixed(), Some(&b"hello"[..]));
        assert_eq!(d.fixed32(), Some(7));
        assert!(d.is_empty());
        assert_eq!(d.fixed64(), None);
        let mut d = Decoder::new(&buf[..3]);
        assert_eq!(d.length_prefixed(), None);
    }
}
