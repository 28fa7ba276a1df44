//! Text a user pins to a stored session: every later compaction of it carries each pin verbatim
//! (in a `## Pinned` section), checked by the fidelity gate as a critical anchor. Pins belong to
//! the session's tenant and go with the session.

use super::{App, AppError};
use crate::access::Identity;
use crate::store::{PinRecord, now_ms};

/// Longest pin, in characters: a rule or a fact, not a document.
pub const MAX_PIN_CHARS: usize = 2000;

/// Most pins a session may have: each is carried by every summary.
pub const MAX_PINS: usize = 50;

impl App {
    /// Pins `text` to `who`'s session; `false` with the pin it already has when the text is
    /// pinned already.
    pub async fn add_pin(
        &self,
        who: &Identity,
        id: &str,
        text: &str,
    ) -> Result<(PinRecord, bool), AppError> {
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
        self.session(who, id).await?;
        let pins = self.store.pins(id).await?;
        if let Some(same) = pins.iter().find(|p| p.text == text) {
            return Ok((same.clone(), false));
        }
        if pins.len() >= MAX_PINS {
            return Err(AppError::Conflict {
                code: "too_many_pins",
                message: format!(
                    "the session has {MAX_PINS} pins, the most it may have; delete one first"
                ),
            });
        }
        let pin = PinRecord {
            pin_id: crate::access::random_id(),
            session_id: id.to_owned(),
            text: text.to_owned(),
            created_at_ms: now_ms(),
        };
        self.store.add_pin(&pin).await?;
        Ok((pin, true))
    }

    /// The pins of `who`'s session, oldest first.
    pub async fn pins(&self, who: &Identity, id: &str) -> Result<Vec<PinRecord>, AppError> {
        self.session(who, id).await?;
        Ok(self.store.pins(id).await?)
    }

    /// Removes a pin from `who`'s session.
    pub async fn delete_pin(&self, who: &Identity, id: &str, pin_id: &str) -> Result<(), AppError> {
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
