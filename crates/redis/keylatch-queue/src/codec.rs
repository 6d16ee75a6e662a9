//! How values become the bytes a queue stores, as Redisson's codecs write them, so that a
//! Redisson client on the other side reads the same values. Imports only the core's error.

use keylatch_core::{Error, Result};

/// Turns values into the bytes stored in the queue and back. A value the codec cannot
/// represent so that the other side reads it back is refused ([`Error::Codec`]) before anything
/// is sent.
pub trait Codec: Send + Sync + 'static {
    /// The values this codec carries.
    type Value: Send + 'static;
    /// The codec's name, for errors.
    const NAME: &'static str;

    /// The stored form of `value`.
    ///
    /// # Errors
    /// [`Error::Codec`] for a value this codec cannot represent portably.
    fn encode(value: &Self::Value) -> Result<Vec<u8>>;

    /// The value stored as `bytes`.
    ///
    /// # Errors
    /// [`Error::Codec`] for bytes this codec did not write.
    fn decode(bytes: Vec<u8>) -> Result<Self::Value>;
}

/// Raw bytes, stored as they are (Redisson's `ByteArrayCodec`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Bytes;

impl Codec for Bytes {
    type Value = Vec<u8>;
    const NAME: &'static str = "bytes";

    fn encode(value: &Vec<u8>) -> Result<Vec<u8>> {
        Ok(value.clone())
    }

    fn decode(bytes: Vec<u8>) -> Result<Vec<u8>> {
        Ok(bytes)
    }
}

/// UTF-8 strings (Redisson's `StringCodec`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Utf8;

impl Codec for Utf8 {
    type Value = String;
    const NAME: &'static str = "string";

    fn encode(value: &String) -> Result<Vec<u8>> {
        Ok(value.as_bytes().to_vec())
    }

    fn decode(bytes: Vec<u8>) -> Result<String> {
        String::from_utf8(bytes).map_err(|err| Error::Codec {
            codec: Self::NAME,
            reason: format!("stored bytes are not UTF-8: {err}"),
        })
    }
}

/// Signed 64-bit integers in decimal (Redisson's `LongCodec`, which writes `Long.toString`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Long;

impl Codec for Long {
    type Value = i64;
    const NAME: &'static str = "long";

    fn encode(value: &i64) -> Result<Vec<u8>> {
        Ok(value.to_string().into_bytes())
    }

    fn decode(bytes: Vec<u8>) -> Result<i64> {
        std::str::from_utf8(&bytes)
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| Error::Codec {
                codec: Self::NAME,
                reason: "stored bytes are not a decimal 64-bit integer".to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_codec_reads_back_what_it_wrote() {
        assert_eq!(
            Bytes::decode(Bytes::encode(&vec![0, 255]).unwrap()).unwrap(),
            vec![0, 255]
        );
        let text = "é ünïcode".to_owned();
        assert_eq!(Utf8::decode(Utf8::encode(&text).unwrap()).unwrap(), text);
        for n in [0, -1, i64::MIN, i64::MAX] {
            assert_eq!(Long::decode(Long::encode(&n).unwrap()).unwrap(), n);
        }
        assert_eq!(Long::encode(&-42).unwrap(), b"-42");
    }

    #[test]
    fn bytes_another_codec_wrote_are_refused() {
        assert!(matches!(Utf8::decode(vec![0xff]), Err(Error::Codec { .. })));
        assert!(matches!(
            Long::decode(b"4x".to_vec()),
            Err(Error::Codec { .. })
        ));
        assert!(matches!(
            Long::decode(b"99999999999999999999".to_vec()),
            Err(Error::Codec { .. })
        ));
    }
}
