//! The ids callers name compactd's resources by (sessions, pins, kept conversations): checked
//! once, where they come in — a path, a query, a body, an MCP argument — so that nothing below
//! ever holds one that no resource could have. No stored id holds a control character (NUL
//! least of all: PostgreSQL's text cannot hold it, and the two stores must answer alike) or runs
//! longer than [`MAX_ID_BYTES`]; such an id names nothing, and never reaches SQL.
//!
//! An [`Id`] is made only by [`Id::parse`] (or deserialized through it), so a function that takes
//! one cannot be handed an unchecked string.

use std::fmt;

/// Longest id, in bytes: compactd's own are 36 (a UUID) or 34 (a recall id); an entry id pi
/// writes is 8.
pub const MAX_ID_BYTES: usize = 256;

/// What makes a string no id; its message starts with [`BadId::PREFIX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadId {
    Empty,
    TooLong,
    /// A control character (NUL, a line break, an escape).
    Control,
}

impl BadId {
    /// How every message of a bad id begins: the HTTP layer tells it from other shape errors.
    pub const PREFIX: &'static str = "not an id";
}

impl fmt::Display for BadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self {
            BadId::Empty => "it is empty".to_owned(),
            BadId::TooLong => format!("it is longer than {MAX_ID_BYTES} bytes"),
            BadId::Control => "it holds a control character (such as NUL)".to_owned(),
        };
        write!(f, "{}: {why}", BadId::PREFIX)
    }
}

impl std::error::Error for BadId {}

/// A well-formed id: 1 to [`MAX_ID_BYTES`] bytes, no control character. Whether it names
/// anything (of the caller's) is the store's to say.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct Id(String);

impl Id {
    /// `text` as an id, surrounding whitespace aside.
    pub fn parse(text: impl Into<String>) -> Result<Id, BadId> {
        let mut text = text.into();
        if text.trim().len() != text.len() {
            text = text.trim().to_owned();
        }
        if text.is_empty() {
            return Err(BadId::Empty);
        }
        if text.len() > MAX_ID_BYTES {
            return Err(BadId::TooLong);
        }
        if text.chars().any(char::is_control) {
            return Err(BadId::Control);
        }
        Ok(Id(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::ops::Deref for Id {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Id {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Id {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// Written as the string it is, so that messages quoting an id read the same as before.
impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Id> for String {
    fn from(id: Id) -> String {
        id.0
    }
}

impl TryFrom<String> for Id {
    type Error = BadId;

    fn try_from(text: String) -> Result<Id, BadId> {
        Id::parse(text)
    }
}

impl TryFrom<&str> for Id {
    type Error = BadId;

    fn try_from(text: &str) -> Result<Id, BadId> {
        Id::parse(text)
    }
}

impl<'de> serde::Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Id, D::Error> {
        let text = String::deserialize(deserializer)?;
        Id::parse(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_short_printable_text() {
        assert_eq!(
            Id::parse(" 0b6e4a6e-2f0e-4c55-9f57-5d3c1f8f0a11 ")
                .unwrap()
                .as_str(),
            "0b6e4a6e-2f0e-4c55-9f57-5d3c1f8f0a11"
        );
        assert_eq!(Id::parse("r_ab12").unwrap().to_string(), "r_ab12");
        assert_eq!(Id::parse("abc\0"), Err(BadId::Control));
        assert_eq!(Id::parse("a\u{1b}[31m"), Err(BadId::Control));
        assert_eq!(Id::parse("  "), Err(BadId::Empty));
        assert_eq!(Id::parse("x".repeat(MAX_ID_BYTES + 1)), Err(BadId::TooLong));
        assert!(Id::parse("é".repeat(MAX_ID_BYTES / 2)).is_ok());
        assert!(BadId::Control.to_string().starts_with(BadId::PREFIX));
        let read: Result<Id, _> = serde_json::from_str(r#""abc\u0000""#);
        assert!(read.unwrap_err().to_string().starts_with(BadId::PREFIX));
        assert_eq!(format!("{:?}", Id::parse("s1").unwrap()), "\"s1\"");
    }
}
