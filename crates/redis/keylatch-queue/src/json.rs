//! [`JsonJackson`]: values as Redisson's `JsonJacksonCodec` writes them, through serde. Imports
//! `codec` of this crate.
//!
//! Redisson's mapper writes a value with Jackson's default typing (`NON_FINAL`, the class name
//! as an `@class` property, `java.lang.Long` always typed), fields only, nulls left out,
//! properties in alphabetical order. This codec writes the flat objects whose every byte it can
//! know: an object with `@class` first, then the fields in UTF-16 order, each a string, a
//! boolean, a whole number (a Java `long`, `int` or `Integer` field) or a [`JavaLong`] (a
//! `java.lang.Long` field, written `["java.lang.Long",n]`); `None` fields are left out.
//! Anything else (floats, whose text Java writes differently; nested objects and lists, whose
//! type hints depend on Java field types serde does not know) is refused with
//! [`Error::Codec`](keylatch_core::Error::Codec), never written half-right. Strings are
//! escaped as Jackson escapes them (`\b \t \n \f \r`, other controls as `\u00XX` in upper-case
//! hex, characters beyond the BMP as two `\uXXXX` escapes).

use std::fmt::Write;
use std::marker::PhantomData;

use keylatch_core::{Error, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::codec::Codec;

/// A Rust type that stands for a Java class: its fully qualified name, as `@class` carries it.
pub trait JavaClass {
    /// The Java class's name, such as `com.example.Order` (`Outer$Inner` for a nested class).
    const JAVA_CLASS: &'static str;
}

/// Values of `T` as Redisson's `JsonJacksonCodec` writes objects of `T::JAVA_CLASS` (see the
/// module docs for what is written and what is refused). Name fields as the Java class does
/// (`#[serde(rename_all = "camelCase")]`), and give a `java.lang.Long` field the type
/// [`JavaLong`].
#[derive(Debug)]
pub struct JsonJackson<T>(PhantomData<fn() -> T>);

/// A `java.lang.Long` field (a boxed long): Jackson writes it `["java.lang.Long",n]` and reads
/// a plain number there as an error. A primitive `long`, an `int` or an `Integer` field is a
/// plain `i64`/`i32`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JavaLong(pub i64);

const LONG_CLASS: &str = "java.lang.Long";

impl Serialize for JavaLong {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        (LONG_CLASS, self.0).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JavaLong {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let (class, value) = <(String, i64)>::deserialize(deserializer)?;
        if class != LONG_CLASS {
            return Err(serde::de::Error::custom(format!(
                "expected [\"{LONG_CLASS}\", n], got the class {class:?}"
            )));
        }
        Ok(JavaLong(value))
    }
}

fn refused(reason: String) -> Error {
    Error::Codec {
        codec: "json_jackson",
        reason,
    }
}

impl<T> Codec for JsonJackson<T>
where
    T: Serialize + DeserializeOwned + JavaClass + Send + 'static,
{
    type Value = T;
    const NAME: &'static str = "json_jackson";

    fn encode(value: &T) -> Result<Vec<u8>> {
        let tree = serde_json::to_value(value)
            .map_err(|err| refused(format!("the value does not serialize: {err}")))?;
        let Value::Object(fields) = tree else {
            return Err(refused(
                "only objects (structs) are written: Jackson writes other values with type \
                 hints this codec cannot know"
                    .to_owned(),
            ));
        };
        let mut fields: Vec<(&String, &Value)> =
            fields.iter().filter(|(_, v)| !v.is_null()).collect();
        fields.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
        let mut out = String::from("{");
        write_string(&mut out, "@class");
        out.push(':');
        write_string(&mut out, T::JAVA_CLASS);
        for (name, value) in fields {
            if name == "@class" {
                return Err(refused("a field is named @class".to_owned()));
            }
            out.push(',');
            write_string(&mut out, name);
            out.push(':');
            write_scalar(&mut out, name, value)?;
        }
        out.push('}');
        Ok(out.into_bytes())
    }

    fn decode(bytes: Vec<u8>) -> Result<T> {
        let tree: Value = serde_json::from_slice(&bytes)
            .map_err(|err| refused(format!("stored bytes are not JSON: {err}")))?;
        let Value::Object(mut fields) = tree else {
            return Err(refused("stored JSON is not an object".to_owned()));
        };
        match fields.remove("@class") {
            Some(Value::String(class)) if class == T::JAVA_CLASS => {}
            Some(Value::String(class)) => {
                return Err(refused(format!(
                    "stored object is a {class}, not a {}",
                    T::JAVA_CLASS
                )));
            }
            _ => return Err(refused("stored object has no @class".to_owned())),
        }
        serde_json::from_value(Value::Object(fields))
            .map_err(|err| refused(format!("stored object does not fit: {err}")))
    }
}

/// A field's value, or a refusal naming the field.
fn write_scalar(out: &mut String, name: &str, value: &Value) -> Result<()> {
    match value {
        Value::String(text) => write_string(out, text),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) if n.is_i64() => {
            let _ = write!(out, "{}", n.as_i64().unwrap_or_default());
        }
        Value::Number(n) if n.is_u64() => {
            return Err(refused(format!(
                "field {name:?}: {n} does not fit a Java long"
            )));
        }
        Value::Number(_) => {
            return Err(refused(format!(
                "field {name:?}: floating-point numbers are not written (Java's text for them \
                 differs)"
            )));
        }
        Value::Array(items) => match items.as_slice() {
            [Value::String(class), Value::Number(n)] if class == LONG_CLASS && n.is_i64() => {
                let _ = write!(out, "[\"{LONG_CLASS}\",{}]", n.as_i64().unwrap_or_default());
            }
            _ => {
                return Err(refused(format!(
                    "field {name:?}: lists are not written (their type hints depend on the \
                     Java field's type)"
                )));
            }
        },
        Value::Object(_) => {
            return Err(refused(format!(
                "field {name:?}: nested objects are not written (their type hints depend on \
                 the Java field's type)"
            )));
        }
        Value::Null => {}
    }
    Ok(())
}

/// A JSON string as Jackson's UTF-8 generator writes it.
fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c if u32::from(c) > 0xFFFF => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04X}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Order` of `JacksonVectors` (crates/redis/keylatch-queue/tests/jackson/JacksonVectors.java).
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Order {
        id: i64,
        name: String,
        paid: bool,
        qty: Option<i32>,
        note: Option<String>,
        zeta: i32,
        total: Option<JavaLong>,
    }

    impl JavaClass for Order {
        const JAVA_CLASS: &'static str = "JacksonVectors$Order";
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct S {
        s: String,
    }

    impl JavaClass for S {
        const JAVA_CLASS: &'static str = "JacksonVectors$S";
    }

    type J<T> = JsonJackson<T>;

    fn order(total: Option<i64>) -> Order {
        Order {
            id: 42,
            name: "héllo \"w\"\n\u{1}/".to_owned(),
            paid: true,
            qty: Some(3),
            note: None,
            zeta: -7,
            total: total.map(JavaLong),
        }
    }

    #[test]
    fn objects_are_written_byte_for_byte_as_redissons_jackson_writes_them() {
        // Printed by JacksonVectors with Redisson's mapper settings (Jackson 2.14).
        let without = r#"{"@class":"JacksonVectors$Order","id":42,"name":"héllo \"w\"\n\u0001/","paid":true,"qty":3,"zeta":-7}"#;
        let with = r#"{"@class":"JacksonVectors$Order","id":42,"name":"héllo \"w\"\n\u0001/","paid":true,"qty":3,"total":["java.lang.Long",5],"zeta":-7}"#;
        assert_eq!(
            J::<Order>::encode(&order(None)).unwrap(),
            without.as_bytes()
        );
        assert_eq!(
            J::<Order>::encode(&order(Some(5))).unwrap(),
            with.as_bytes()
        );
        assert_eq!(J::<Order>::decode(with.into()).unwrap(), order(Some(5)));
        assert_eq!(J::<Order>::decode(without.into()).unwrap(), order(None));
    }

    #[test]
    fn strings_are_escaped_as_jackson_escapes_them() {
        let mut text: String = (0u8..0x20).map(char::from).collect();
        text.push_str("\u{7f}\u{2028}\u{1F600}<>&'\\");
        let expected = concat!(
            r#"{"@class":"JacksonVectors$S","s":""#,
            r#"\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000B\f\r\u000E\u000F"#,
            r#"\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001A\u001B\u001C"#,
            r#"\u001D\u001E\u001F"#,
            "\u{7f}\u{2028}",
            r#"\uD83D\uDE00<>&'\\"}"#
        );
        let s = S { s: text };
        assert_eq!(
            String::from_utf8(J::<S>::encode(&s).unwrap()).unwrap(),
            expected
        );
        assert_eq!(J::<S>::decode(expected.into()).unwrap(), s);
    }

    #[test]
    fn what_cannot_be_written_portably_is_refused() {
        #[derive(Serialize, Deserialize)]
        struct Bad<V> {
            v: V,
        }
        impl<V> JavaClass for Bad<V> {
            const JAVA_CLASS: &'static str = "Bad";
        }
        let refused = |bytes: Result<Vec<u8>>| matches!(bytes, Err(Error::Codec { .. }));
        assert!(refused(J::<Bad<f64>>::encode(&Bad { v: 0.5 })));
        assert!(refused(J::<Bad<Vec<i32>>>::encode(&Bad { v: vec![1] })));
        assert!(refused(J::<Bad<S>>::encode(&Bad {
            v: S { s: String::new() }
        })));
        assert!(refused(J::<Bad<u64>>::encode(&Bad { v: u64::MAX })));
        assert!(refused(J::<i64>::encode(&1)));
        // Another class, or no class, is refused on reading.
        assert!(matches!(
            J::<S>::decode(br#"{"@class":"Other","s":"x"}"#.to_vec()),
            Err(Error::Codec { .. })
        ));
        assert!(matches!(
            J::<S>::decode(br#"{"s":"x"}"#.to_vec()),
            Err(Error::Codec { .. })
        ));
        // A boxed Long written plain is what Jackson refuses: so does JavaLong.
        assert!(
            J::<Order>::decode(
                br#"{"@class":"JacksonVectors$Order","id":1,"name":"","paid":false,"total":9,"zeta":0}"#
                    .to_vec()
            )
            .is_err()
        );
    }

    impl JavaClass for i64 {
        const JAVA_CLASS: &'static str = "java.lang.Long";
    }
}
