//! Text a user pins to a stored session: every later compaction of it carries each pin verbatim
//! (in a `## Pinned` section), checked by the fidelity gate as a critical anchor. Pins belong to
//! the session's tenant and go with the session.

use crate::access::Identity;
use crate::app::{App, AppError};
use compactd_core::ids::Id;
use compactd_store::{PinAdded, PinRecord, now_ms};

/// Longest pin, in characters: a rule or a fact, not a document.
pub(crate) const MAX_PIN_CHARS: usize = 2000;

/// Most pins a session may have: each is carried by every summary.
pub(crate) const MAX_PINS: usize = 50;

/// A pin's text as stored (trimmed), or why it cannot be one: the same rule for the API, the
/// console and `compactd compact --pin`.
pub(crate) fn check_pin(text: &str) -> Result<&str, AppError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(AppError::invalid("text", "text: the pin is empty"));
    }
    let chars = text.chars().count();
    if chars > MAX_PIN_CHARS {
        return Err(AppError::invalid(
            "text",
            format!("text: the pin is {chars} characters, over the limit of {MAX_PIN_CHARS}"),
        ));
    }
    Ok(text)
}

impl App {
    /// Pins `text` to `who`'s session; `false` with the pin it already has when the text is
    /// pinned already.
    pub(crate) async fn add_pin(
        &self,
        who: &Identity,
        id: &Id,
        text: &str,
    ) -> Result<(PinRecord, bool), AppError> {
        let text = check_pin(text)?;
        self.session(who, id).await?;
        let pin = PinRecord {
            pin_id: crate::access::random_id(),
            session_id: id.to_string(),
            text: text.to_owned(),
            created_at_ms: now_ms(),
        };
        match self.store.add_pin(&pin, MAX_PINS as i64).await? {
            PinAdded::Added => Ok((pin, true)),
            PinAdded::Existing(same) => Ok((same, false)),
            PinAdded::Full => Err(AppError::Conflict {
                code: "too_many_pins",
                message: format!(
                    "the session has {MAX_PINS} pins, the most it may have; delete one first"
                ),
            }),
            PinAdded::NoSession => Err(AppError::NotFound(format!("no session with id {id:?}"))),
        }
    }

    /// The pins of `who`'s session, oldest first.
    pub(crate) async fn pins(&self, who: &Identity, id: &Id) -> Result<Vec<PinRecord>, AppError> {
        self.session(who, id).await?;
        Ok(self.store.pins(id).await?)
    }

    /// Removes a pin from `who`'s session.
    pub(crate) async fn delete_pin(
        &self,
        who: &Identity,
        id: &Id,
        pin_id: &Id,
    ) -> Result<(), AppError> {
        self.session(who, id).await?;
        if self.store.delete_pin(id, pin_id).await? {
            Ok(())
        } else {
            Err(AppError::NotFound(format!(
                "no pin with id {pin_id:?} on this session"
            )))
        }
    }
}
