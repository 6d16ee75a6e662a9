//! Durations in keylatch's one grammar: [`parse_duration`], and the serde form of
//! [`Config`](super::Config)'s durations.
//!
//! May import: nothing of the crate.

use std::time::Duration;

/// Parses a duration in keylatch's one grammar, humantime's: `"250ms"`, `"30s"`, `"2m"`,
/// `"1h 30m"`. A bare number is refused with a message that says to add a unit.
///
/// # Errors
/// A message for people: what is wrong and an example.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "{text:?} has no unit: write {text}ms, {text}s or {text}m"
        ));
    }
    humantime::parse_duration(text).map_err(|e| format!("{text:?}: {e} (examples: 500ms, 10s, 2m)"))
}

/// Durations in configuration files: humantime text both ways (`"30s"`).
#[cfg(feature = "serde")]
pub(super) mod serde_form {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(crate) fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_duration(*value))
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Number(f64),
        Text(String),
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        match Repr::deserialize(d)? {
            Repr::Number(n) => Err(D::Error::custom(format!(
                "the duration {n} has no unit: write \"{n}ms\", \"{n}s\" or \"{n}m\""
            ))),
            Repr::Text(text) => super::parse_duration(&text).map_err(D::Error::custom),
        }
    }
}
