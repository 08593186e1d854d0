//! Keys and values on the command line and in output: escaped text (the default) or hex.
//!
//! Text: printable ASCII stays as it is, a backslash is `\\`, every other byte `\xNN`, so an
//! entry never spans two lines or hides a tab, and what `shale` prints can be given back to it
//! as an argument. Hex: two lowercase digits a byte (input: either case, an optional `0x`).

use std::fmt::Write;

/// How keys and values are written and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    /// Escaped text.
    Text,
    /// Hexadecimal digits.
    Hex,
}

impl Codec {
    /// `bytes` as one line of output.
    pub(crate) fn show(self, bytes: &[u8]) -> String {
        match self {
            Codec::Text => escape(bytes),
            Codec::Hex => to_hex(bytes),
        }
    }

    /// Reads a key or value given on the command line; `what` names it in the error.
    pub(crate) fn parse(self, arg: &str, what: &str) -> Result<Vec<u8>, String> {
        let parsed = match self {
            Codec::Text => unescape(arg),
            Codec::Hex => from_hex(arg),
        };
        parsed.map_err(|e| format!("the {what} {arg:?} is not valid: {e}"))
    }
}

/// Printable ASCII as is, `\` as `\\`, anything else as `\xNN`.
pub(crate) fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out
}

/// The inverse of [`escape`]: `\\` and `\xNN` (either case) are the only escapes.
pub(crate) fn unescape(s: &str) -> Result<Vec<u8>, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        match bytes.get(i + 1) {
            Some(b'\\') => {
                out.push(b'\\');
                i += 2;
            }
            Some(b'x') => {
                let byte = bytes
                    .get(i + 2..i + 4)
                    .and_then(|d| hex_byte(d[0], d[1]))
                    .ok_or_else(|| format!("\\x at byte {i} must be followed by two hex digits"))?;
                out.push(byte);
                i += 4;
            }
            _ => {
                return Err(format!(
                    "unknown escape at byte {i} (write a backslash as \\\\, any byte as \\xNN)"
                ))
            }
        }
    }
    Ok(out)
}

/// Two lowercase hex digits a byte.
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Hex digits (either case, optionally after `0x`), two a byte.
pub(crate) fn from_hex(s: &str) -> Result<Vec<u8>, String> {
    let digits = s.strip_prefix("0x").unwrap_or(s).as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err(format!(
            "hex needs two digits a byte, and {} is an odd count",
            digits.len()
        ));
    }
    digits
        .chunks(2)
        .enumerate()
        .map(|(i, d)| hex_byte(d[0], d[1]).ok_or_else(|| format!("byte {i} is not two hex digits")))
        .collect()
}

fn hex_byte(high: u8, low: u8) -> Option<u8> {
    Some(hex_digit(high)? << 4 | hex_digit(low)?)
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn escape_keeps_printable_ascii_and_escapes_the_rest() {
        assert_eq!(escape(b"key 1"), "key 1");
        assert_eq!(escape(b"a\\b"), "a\\\\b");
        assert_eq!(escape(b"\x00\t\n\x7f\xff"), "\\x00\\x09\\x0a\\x7f\\xff");
        assert_eq!(escape("é".as_bytes()), "\\xc3\\xa9");
        assert_eq!(escape(b""), "");
    }

    #[test]
    fn unescape_inverts_escape_for_every_byte() {
        let all: Vec<u8> = (0..=255u8).collect();
        assert_eq!(unescape(&escape(&all)).unwrap(), all);
        assert_eq!(
            unescape("\\X").unwrap_err(),
            "unknown escape at byte 0 (write a backslash as \\\\, any byte as \\xNN)"
        );
        assert_eq!(unescape("\\xAb").unwrap(), vec![0xab]);
    }

    #[test]
    fn unescape_rejects_bad_escapes() {
        assert_eq!(
            unescape("ab\\x1").unwrap_err(),
            "\\x at byte 2 must be followed by two hex digits"
        );
        assert_eq!(
            unescape("\\xg0").unwrap_err(),
            "\\x at byte 0 must be followed by two hex digits"
        );
        assert!(unescape("trailing\\").is_err());
    }

    #[test]
    fn hex_round_trips_and_rejects_bad_input() {
        assert_eq!(to_hex(&[0x00, 0xab, 0x10]), "00ab10");
        assert_eq!(from_hex("00AB10").unwrap(), vec![0x00, 0xab, 0x10]);
        assert_eq!(from_hex("0x6b").unwrap(), b"k".to_vec());
        assert_eq!(from_hex("").unwrap(), Vec::<u8>::new());
        assert_eq!(
            from_hex("abc").unwrap_err(),
            "hex needs two digits a byte, and 3 is an odd count"
        );
        assert_eq!(from_hex("zz").unwrap_err(), "byte 0 is not two hex digits");
    }

    #[test]
    fn codec_names_the_argument_in_errors() {
        assert_eq!(Codec::Hex.show(b"k\x00"), "6b00");
        assert_eq!(Codec::Text.show(b"k\x00"), "k\\x00");
        assert_eq!(
            Codec::Hex.parse("q", "key").unwrap_err(),
            "the key \"q\" is not valid: hex needs two digits a byte, and 1 is an odd count"
        );
    }
}
