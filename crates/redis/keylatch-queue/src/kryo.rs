//! [`Kryo5`]: the scalars of Redisson's default codec, `Kryo5Codec` (Kryo 5's
//! `writeClassAndObject`, references off), byte for byte. Imports `codec` of this crate.
//!
//! The wire format, from Kryo 5's source (`Kryo`, `DefaultClassResolver`, `Output`,
//! `DefaultSerializers`):
//! - The class: a positive varint of its registration id + 2 (0 is null). The default
//!   registrations are `int` 0, `String` 1, …, `long` 7, and a wrapper shares its primitive's:
//!   `Integer` is `02`, `String` `03`, `Long` `09`.
//! - `Integer`: a zigzag varint (`writeVarInt(v, false)`), 1 to 5 bytes, 7 bits a byte, low
//!   first, the high bit saying another byte follows.
//! - `Long`: a zigzag varlong, 1 to 9 bytes: eight bytes of 7 bits, then a ninth carrying 8 bits
//!   with no continuation bit (zigzag values of 2^56 and more, |v| ≥ 2^55). A plain LEB128
//!   writes 10.
//! - `String`: an ASCII string of 2 to 32 characters is its bytes with the last one's high bit
//!   set. Any other string (empty, one character, longer, or not ASCII) is the character count +
//!   1 as a varint whose first byte holds a flag bit (0x80), a continuation bit (0x40) and 6
//!   bits, then each UTF-16 unit in 1 to 3 bytes (a character beyond the BMP is two 3-byte
//!   surrogates, as CESU-8 writes it). `"é"` is `03 82 C3 A9`.

use keylatch_core::{Error, Result};

use crate::codec::Codec;

/// A value of Redisson's default `Kryo5Codec` that this codec carries: `java.lang.String`,
/// `java.lang.Integer` or `java.lang.Long`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KryoScalar {
    /// A `java.lang.String`.
    String(String),
    /// A `java.lang.Integer`.
    Integer(i32),
    /// A `java.lang.Long`.
    Long(i64),
}

/// Redisson's default codec, `Kryo5Codec`, for its scalars ([`KryoScalar`]); stored values of
/// any other class are refused with [`Error::Codec`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Kryo5;

const NULL: u64 = 0;
const INTEGER: u64 = 2;
const STRING: u64 = 3;
const LONG: u64 = 9;

fn refused(reason: String) -> Error {
    Error::Codec {
        codec: "kryo5",
        reason,
    }
}

impl Codec for Kryo5 {
    type Value = KryoScalar;
    const NAME: &'static str = "kryo5";

    fn encode(value: &KryoScalar) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        match value {
            KryoScalar::Integer(n) => {
                out.push(INTEGER as u8);
                let zigzag = ((n << 1) ^ (n >> 31)) as u32;
                write_varlong(&mut out, u64::from(zigzag));
            }
            KryoScalar::Long(n) => {
                out.push(LONG as u8);
                write_varlong(&mut out, ((n << 1) ^ (n >> 63)) as u64);
            }
            KryoScalar::String(text) => {
                out.push(STRING as u8);
                write_string(&mut out, text);
            }
        }
        Ok(out)
    }

    fn decode(bytes: Vec<u8>) -> Result<KryoScalar> {
        let mut input = Input {
            bytes: &bytes,
            at: 0,
        };
        let value = match input.varlong(5)? {
            INTEGER => {
                let zigzag = u32::try_from(input.varlong(5)?)
                    .map_err(|_| refused("an Integer's varint is too long".to_owned()))?;
                KryoScalar::Integer(((zigzag >> 1) as i32) ^ -((zigzag & 1) as i32))
            }
            LONG => {
                let zigzag = input.varlong(9)?;
                KryoScalar::Long(((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64))
            }
            STRING => KryoScalar::String(input.string()?),
            NULL => return Err(refused("the stored value is null".to_owned())),
            id => {
                return Err(refused(format!(
                    "the stored class (registration {}) is not String, Integer or Long",
                    id.saturating_sub(2)
                )));
            }
        };
        if input.at != bytes.len() {
            return Err(refused("bytes left after the value".to_owned()));
        }
        Ok(value)
    }
}

/// Kryo's `writeVarLong` (and `writeVarInt` for values below 2^32): 7 bits a byte, and a ninth
/// byte of 8 bits.
fn write_varlong(out: &mut Vec<u8>, mut value: u64) {
    for _ in 0..8 {
        if value >> 7 == 0 {
            out.push(value as u8);
            return;
        }
        out.push((value as u8 & 0x7F) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn write_string(out: &mut Vec<u8>, text: &str) {
    let units: Vec<u16> = text.encode_utf16().collect();
    if (2..=32).contains(&units.len()) && text.is_ascii() {
        out.extend_from_slice(text.as_bytes());
        if let Some(last) = out.last_mut() {
            *last |= 0x80;
        }
        return;
    }
    // `writeVarIntFlag(true, count + 1, true)`.
    let count = units.len() as u64 + 1;
    let first = (count & 0x3F) as u8 | 0x80;
    if count >> 6 == 0 {
        out.push(first);
    } else {
        out.push(first | 0x40);
        write_varlong(out, count >> 6);
    }
    for unit in units {
        let c = u32::from(unit);
        if c <= 0x7F {
            out.push(c as u8);
        } else if c > 0x7FF {
            out.push(0xE0 | (c >> 12 & 0x0F) as u8);
            out.push(0x80 | (c >> 6 & 0x3F) as u8);
            out.push(0x80 | (c & 0x3F) as u8);
        } else {
            out.push(0xC0 | (c >> 6 & 0x1F) as u8);
            out.push(0x80 | (c & 0x3F) as u8);
        }
    }
}

struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> Result<u8> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| refused("the stored bytes end early".to_owned()))?;
        self.at += 1;
        Ok(b)
    }

    /// A varint of at most `max` bytes (the ninth, for a long, of 8 bits).
    fn varlong(&mut self, max: usize) -> Result<u64> {
        let mut value = 0u64;
        for i in 0..max {
            let b = self.byte()?;
            if i == 8 {
                return Ok(value | u64::from(b) << 56);
            }
            value |= u64::from(b & 0x7F) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(refused("a varint is too long".to_owned()))
    }

    fn string(&mut self) -> Result<String> {
        let first = self.byte()?;
        if first & 0x80 == 0 {
            // ASCII, up to the byte with its high bit set.
            let mut text = String::new();
            let mut b = first;
            loop {
                text.push(char::from(b & 0x7F));
                if b & 0x80 != 0 {
                    return Ok(text);
                }
                b = self.byte()?;
            }
        }
        let mut count = u64::from(first & 0x3F);
        if first & 0x40 != 0 {
            count |= self.varlong(5)? << 6;
        }
        let count = match count {
            0 => return Err(refused("the stored string is null".to_owned())),
            n => usize::try_from(n - 1).map_err(|_| refused("too long".to_owned()))?,
        };
        if count > self.bytes.len() - self.at {
            return Err(refused("the stored bytes end early".to_owned()));
        }
        let mut units = Vec::with_capacity(count);
        for _ in 0..count {
            let b = u16::from(self.byte()?);
            let unit = match b >> 4 {
                0..=7 => b,
                12 | 13 => (b & 0x1F) << 6 | u16::from(self.byte()? & 0x3F),
                14 => {
                    (b & 0x0F) << 12
                        | u16::from(self.byte()? & 0x3F) << 6
                        | u16::from(self.byte()? & 0x3F)
                }
                _ => return Err(refused("a malformed character".to_owned())),
            };
            units.push(unit);
        }
        String::from_utf16(&units).map_err(|_| refused("a lone surrogate".to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(value: KryoScalar) -> Vec<u8> {
        let encoded = Kryo5::encode(&value).unwrap();
        assert_eq!(Kryo5::decode(encoded.clone()).unwrap(), value, "round trip");
        encoded
    }

    fn s(text: &str) -> Vec<u8> {
        bytes(KryoScalar::String(text.to_owned()))
    }

    #[test]
    fn strings_take_the_ascii_shortcut_only_from_2_to_32_characters() {
        assert_eq!(s(""), [0x03, 0x81]);
        assert_eq!(s("a"), [0x03, 0x82, b'a'], "one character: no shortcut");
        assert_eq!(s("ab"), [0x03, b'a', b'b' | 0x80]);
        assert_eq!(s("é"), [0x03, 0x82, 0xC3, 0xA9]);
        let ascii32 = "x".repeat(32);
        let mut expected = vec![0x03];
        expected.extend_from_slice(&ascii32.as_bytes()[..31]);
        expected.push(b'x' | 0x80);
        assert_eq!(s(&ascii32), expected);
        // 33 characters: the count + 1 (34) in the flagged varint, then the bytes.
        let ascii33 = "x".repeat(33);
        let mut expected = vec![0x03, 0x80 | 34];
        expected.extend_from_slice(ascii33.as_bytes());
        assert_eq!(s(&ascii33), expected);
        // 100 characters: 101 = 0b1_100101: 6 bits with the flag and continuation, then 1.
        let long = "y".repeat(100);
        assert_eq!(&s(&long)[..3], [0x03, 0x80 | 0x40 | 0x25, 0x01]);
        // Beyond the BMP: two surrogates of 3 bytes each (U+1F600 = D83D DE00).
        assert_eq!(
            s("\u{1F600}"),
            [0x03, 0x83, 0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80]
        );
        assert_eq!(s("a\u{0}"), [0x03, b'a', 0x80], "NUL is one byte");
    }

    #[test]
    fn integers_and_longs_are_zigzag_varints_with_a_9_byte_long_form() {
        let int = |n| bytes(KryoScalar::Integer(n));
        let long = |n| bytes(KryoScalar::Long(n));
        assert_eq!(int(0), [0x02, 0x00]);
        assert_eq!(int(-1), [0x02, 0x01]);
        assert_eq!(int(1), [0x02, 0x02]);
        assert_eq!(int(64), [0x02, 0x80, 0x01]);
        assert_eq!(int(i32::MAX), [0x02, 0xFE, 0xFF, 0xFF, 0xFF, 0x0F]);
        assert_eq!(int(i32::MIN), [0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]);
        assert_eq!(long(42), [0x09, 0x54]);
        assert_eq!(long(-42), [0x09, 0x53]);
        // |v| < 2^55: 8 bytes at most, the eighth with no continuation bit.
        assert_eq!(
            long((1 << 55) - 1),
            [0x09, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]
        );
        // |v| >= 2^55: the 9-byte form, its last byte of 8 bits.
        assert_eq!(
            long(1 << 55),
            [0x09, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]
        );
        assert_eq!(
            long(i64::MAX),
            [0x09, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        );
        assert_eq!(
            long(i64::MIN),
            [0x09, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        );
    }

    #[test]
    fn other_classes_and_malformed_bytes_are_refused() {
        let refused = |b: &[u8]| matches!(Kryo5::decode(b.to_vec()), Err(Error::Codec { .. }));
        assert!(refused(&[0x00]), "null");
        assert!(refused(&[0x0A, 0x00]), "a double");
        assert!(refused(&[0x01, 0x81]), "a class by name");
        assert!(refused(&[0x09]), "a long cut short");
        assert!(refused(&[0x09, 0x54, 0x00]), "bytes after the value");
        assert!(refused(&[0x03, 0x80]), "a null string");
        assert!(refused(&[0x03, 0x83, b'a']), "a string cut short");
        assert!(refused(&[0x03, 0x82, 0xED, 0xA0, 0xBD]), "a lone surrogate");
    }
}
