//! Redaction as a property of what leaves, not a call each path remembers: a [`Redacted`] value
//! is one every text of which has passed the redactor, and only a [`Redactor`] makes one. What
//! compactd returns, stores, shows, prints, writes or sends to a model takes a `Redacted`, so a
//! new path that forgot to redact does not compile.
//!
//! A type whose texts leave says where they are by implementing [`Screen`]: each text is handed
//! to the [`Screening`], which replaces its secrets — found by the rules in the text, and in JSON
//! values also by the key they sit under (an env map's `"SECRET_VALUE": "…"`).

use serde_json::Value;

use super::{Placeholders, Redactor};

/// A value whose texts have all passed the redactor. Reading it is free; making one is the
/// redactor's ([`Redactor::seal`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Redacted<T>(T);

impl<T> Redacted<T> {
    pub fn get(&self) -> &T {
        &self.0
    }

    /// The value, to be used where it is (a response, a row, a page): it stays redacted.
    pub fn into_inner(self) -> T {
        self.0
    }

    /// A part of a redacted value is redacted (a field, a window of a conversation).
    pub fn part<'a, U: ?Sized>(&'a self, part: impl FnOnce(&'a T) -> &'a U) -> Redacted<&'a U> {
        Redacted(part(&self.0))
    }

    /// What a redacted value is made of, taken apart: each piece is redacted.
    pub fn split<A, B>(self, split: impl FnOnce(T) -> (A, B)) -> (Redacted<A>, Redacted<B>) {
        let (a, b) = split(self.0);
        (Redacted(a), Redacted(b))
    }

    pub fn as_ref(&self) -> Redacted<&T> {
        Redacted(&self.0)
    }

    /// A new value made of this one's parts and compactd's own words (a recall footer naming an
    /// id, a flag), no caller's text: still redacted.
    pub fn map<U>(self, map: impl FnOnce(T) -> U) -> Redacted<U> {
        Redacted(map(self.0))
    }
}

impl<T> std::ops::Deref for Redacted<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: serde::Serialize> serde::Serialize for Redacted<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// A value with texts that may leave compactd: it hands each to the screening.
pub trait Screen {
    fn screen(&mut self, screening: &mut Screening<'_>);
}

/// One redaction of a value's texts, with the placeholders of its summarization (the same
/// secret, the same placeholder, in every text of it).
pub struct Screening<'r> {
    redactor: &'r Redactor,
    placeholders: &'r mut Placeholders,
}

impl Screening<'_> {
    /// `text` with its secrets replaced.
    pub fn text(&mut self, text: &mut String) {
        if !self.redactor.is_enabled() || text.is_empty() {
            return;
        }
        let redacted = self.redactor.redact(text, self.placeholders);
        if redacted != *text {
            *text = redacted;
        }
    }

    /// `value` under `key` in a JSON object: its secrets, or the whole of it when the key names
    /// a secret and the value is not a name or a placeholder.
    pub fn keyed(&mut self, key: &str, value: &mut String) {
        if !self.redactor.is_enabled() {
            return;
        }
        if let Some(redacted) = self.redactor.redact_keyed(key, value, self.placeholders) {
            *value = redacted;
        } else {
            self.text(value);
        }
    }

    /// Secrets replaced so far (each occurrence counts).
    pub fn found(&self) -> u64 {
        self.placeholders.total()
    }

    /// Runs `work`, whose secrets are counted already (texts that are pieces of one screened
    /// before: a request's typed conversation, cut from its prompt).
    pub fn uncounted<R>(&mut self, work: impl FnOnce(&mut Screening<'_>) -> R) -> R {
        let counted = self.placeholders.counts.clone();
        let result = work(self);
        self.placeholders.counts = counted;
        result
    }

    /// Every string of `value`, at any depth, each by its key where it has one.
    pub fn json(&mut self, value: &mut Value) {
        match value {
            Value::String(text) => self.text(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.json(item)),
            Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    match item {
                        Value::String(text) => self.keyed(key, text),
                        other => self.json(other),
                    }
                }
            }
            _ => {}
        }
    }
}

impl Redactor {
    /// `value` with every text it holds redacted, with `placeholders` (those of one
    /// summarization; see [`Placeholders`]). With redaction off (`COMPACTD_REDACT=false`) the
    /// value is as it was: the operator chose so.
    pub fn seal_with<T: Screen>(
        &self,
        mut value: T,
        placeholders: &mut Placeholders,
    ) -> Redacted<T> {
        value.screen(&mut Screening {
            redactor: self,
            placeholders,
        });
        Redacted(value)
    }

    /// `value` redacted with placeholders of its own.
    pub fn seal<T: Screen>(&self, value: T) -> Redacted<T> {
        self.seal_with(value, &mut Placeholders::default())
    }
}

impl Screen for String {
    fn screen(&mut self, screening: &mut Screening<'_>) {
        screening.text(self);
    }
}

impl Screen for Value {
    fn screen(&mut self, screening: &mut Screening<'_>) {
        screening.json(self);
    }
}

impl<T: Screen> Screen for Vec<T> {
    fn screen(&mut self, screening: &mut Screening<'_>) {
        self.iter_mut().for_each(|item| item.screen(screening));
    }
}

impl<T: Screen> Screen for Option<T> {
    fn screen(&mut self, screening: &mut Screening<'_>) {
        if let Some(item) = self {
            item.screen(screening);
        }
    }
}

impl<A: Screen, B: Screen> Screen for (A, B) {
    fn screen(&mut self, screening: &mut Screening<'_>) {
        self.0.screen(screening);
        self.1.screen(screening);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_has_every_text_redacted_and_secrets_by_their_key() {
        let redactor = Redactor::new(None).unwrap();
        let token = "ghp_0123456789abcdefABCDEF0123456789abcd";
        let discord_tail = "GyX3kd.Wq9rT7uZ0pLmN5bVc2xJ4hF8sD6aK1eQ";
        let value = serde_json::json!({
            "command": format!("git push https://x:{token}@github.com/o/r"),
            "env": {"SECRET_VALUE": discord_tail, "HOME": "/home/dev", "DEBUG": "1"},
            "args": [token],
        });
        let sealed = redactor.seal((format!("use {token}"), value));
        let (text, value) = sealed.get();
        assert_eq!(text, "use [REDACTED:github-pat:1]");
        let written = value.to_string();
        assert!(
            !written.contains(token) && !written.contains(discord_tail),
            "{written}"
        );
        assert_eq!(value["env"]["HOME"], "/home/dev");
        assert_eq!(value["env"]["DEBUG"], "1");
        assert!(value["args"][0].as_str().unwrap().starts_with("[REDACTED:"));
        // Off, by the operator's choice: as it was.
        let off = Redactor::disabled().seal(format!("use {token}"));
        assert!(off.contains(token));
    }
}
