//! CRC32C checksums (hardware accelerated by the `crc32c` crate) and the masking LevelDB uses
//! so that a CRC stored inside checksummed data does not checksum to a fixed point.

const MASK_DELTA: u32 = 0xa282_ead8;

/// CRC32C of `data`.
#[inline]
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Continues a CRC32C over more bytes.
#[inline]
pub(crate) fn crc32c_extend(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// Masks a CRC before storing it.
#[inline]
pub(crate) fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Reverses [`mask`].
#[inline]
pub(crate) fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_value_and_mask_round_trip() {
        // RFC 3720 test vector: 32 bytes of zeros.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        let c = crc32c(b"hello");
        assert_ne!(mask(c), c);
        assert_eq!(unmask(mask(c)), c);
        assert_eq!(crc32c_extend(crc32c(b"hel"), b"lo"), c);
    }
}
