//! Codex's remote compaction v2: its answer is one `compaction` output item whose
//! `encrypted_content` only the provider reads, and Codex sends that item back in every later
//! request. compactd answers with an item of its own and, before forwarding a later request
//! upstream, replaces each of its items with the summary as a message the model reads.
//!
//! The item is compactd's alone and its tenant's alone: the summary is sealed with
//! XChaCha20-Poly1305 under a key derived (HKDF-SHA256) from a secret every replica shares, with
//! the tenant and the key that asked bound in as associated data. So no one else can read it, no
//! one can make compactd expand text of their choosing as its summary, and an item sent by
//! another tenant — or with another key, or after its key was revoked (then it cannot ask at all)
//! — does not open: it passes through as opaque as the provider's own items do.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde_json::{Value, json};

use crate::access::Identity;

/// What compactd's `encrypted_content` starts with (v1, readable base64 under an HMAC, bound to
/// no tenant, is no longer opened).
const PREFIX: &str = "compactd.v2.";

/// What the seal's key is derived for (HKDF's `info`).
const KEY_INFO: &[u8] = b"compactd gateway: Codex compaction items, XChaCha20-Poly1305, v2";

/// How Codex itself hands a local compaction's summary to the model (0.169.0): the expanded
/// item reads the same.
pub(super) const HANDOFF: &str = "Another language model started to solve this problem and produced a summary of its thinking process. You also have access to the state of the tools that were used by that language model. Use this to build on the work that has already been done and avoid duplicating work. Here is the summary produced by the other language model, use the information in this summary to assist with your own analysis:\n";

/// The key compactd's items are sealed with.
#[derive(Clone)]
pub(crate) struct Seal {
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seal(…)")
    }
}

/// Who an item is for: the tenant and the key (none for the anonymous caller), unambiguously.
fn bound_to(who: &Identity) -> Vec<u8> {
    let key = who.key_id.as_deref().unwrap_or_default();
    let mut out = Vec::with_capacity(16 + who.tenant.len() + key.len());
    out.extend_from_slice(PREFIX.as_bytes());
    out.extend_from_slice(&(who.tenant.len() as u64).to_be_bytes());
    out.extend_from_slice(who.tenant.as_bytes());
    out.extend_from_slice(key.as_bytes());
    out
}

impl Seal {
    /// The seal under `secret` (the replicas' shared secret).
    pub(crate) fn new(secret: &[u8]) -> Seal {
        let mut key = [0u8; 32];
        hkdf::Hkdf::<sha2::Sha256>::new(None, secret)
            .expand(KEY_INFO, &mut key)
            .expect("32 bytes is a valid HKDF-SHA256 length");
        Seal {
            cipher: XChaCha20Poly1305::new(&key.into()),
        }
    }

    /// The compaction item that carries `summary` for `who`, to stand beside the user messages
    /// the client keeps (Codex's remote compaction, `responses.compact`).
    pub(crate) fn item(&self, summary: &str, who: &Identity) -> Value {
        self.item_sealing(summary, who, false)
    }

    /// The compaction item of a turn compacted in line (`context_management`): it stands for
    /// everything before it, which is dropped when it comes back.
    pub(crate) fn item_replacing(&self, summary: &str, who: &Identity) -> Value {
        self.item_sealing(summary, who, true)
    }

    fn item_sealing(&self, summary: &str, who: &Identity, replaces: bool) -> Value {
        json!({
            "type": "compaction",
            "id": format!("cmp_compactd{:016x}", fastrand::u64(..)),
            "encrypted_content": self.seal_payload(summary, who, replaces),
        })
    }

    /// `summary` sealed for `who`: what [`Seal::open`] opens (an item's `encrypted_content`, an
    /// Anthropic block's `signature`).
    pub(crate) fn seal(&self, summary: &str, who: &Identity) -> String {
        self.seal_payload(summary, who, false)
    }

    fn seal_payload(&self, summary: &str, who: &Identity, replaces: bool) -> String {
        let mut payload = json!({"summary": summary, "at": compactd_store::now_ms()});
        if replaces {
            payload["replaces"] = json!(true);
        }
        let payload = payload.to_string();
        // 192-bit nonces: drawn at random, they do not repeat.
        let mut nonce = [0u8; 24];
        getrandom::fill(&mut nonce).expect("the OS random source works");
        let aad = bound_to(who);
        let sealed = self
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: payload.as_bytes(),
                    aad: &aad,
                },
            )
            .expect("sealing a payload in memory does not fail");
        let mut content = nonce.to_vec();
        content.extend_from_slice(&sealed);
        format!("{PREFIX}{}", B64.encode(content))
    }

    /// The summary compactd sealed for `who`; `None` for anyone else's, or a forged one.
    pub(crate) fn open(&self, encrypted_content: &str, who: &Identity) -> Option<String> {
        self.open_payload(encrypted_content, who)
            .map(|(summary, _)| summary)
    }

    /// The summary compactd sealed for `who`, and whether it replaces what came before it.
    fn open_payload(&self, encrypted_content: &str, who: &Identity) -> Option<(String, bool)> {
        let content = B64.decode(encrypted_content.strip_prefix(PREFIX)?).ok()?;
        if content.len() < 24 {
            return None;
        }
        let (nonce, sealed) = content.split_at(24);
        let aad = bound_to(who);
        let payload = self
            .cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: &aad,
                },
            )
            .ok()?;
        let payload: Value = serde_json::from_slice(&payload).ok()?;
        let replaces = payload.get("replaces").and_then(Value::as_bool) == Some(true);
        Some((payload.get("summary")?.as_str()?.to_owned(), replaces))
    }

    /// Replaces the compaction items compactd made for `who` in a Responses body's `input` with
    /// the summary they carry, as a user message; an item of a turn compacted in line takes
    /// everything before it along. Returns how many it replaced.
    pub(crate) fn expand(&self, body: &mut Value, who: &Identity) -> usize {
        let Some(input) = body.get_mut("input").and_then(Value::as_array_mut) else {
            return 0;
        };
        let mut expanded = 0;
        let mut replaced_through = None;
        for (at, item) in input.iter_mut().enumerate() {
            if item.get("type").and_then(Value::as_str) != Some("compaction") {
                continue;
            }
            let Some((summary, replaces)) = item
                .get("encrypted_content")
                .and_then(Value::as_str)
                .and_then(|content| self.open_payload(content, who))
            else {
                continue;
            };
            *item = json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": format!("{HANDOFF}{summary}")}]});
            expanded += 1;
            if replaces {
                replaced_through = Some(at);
            }
        }
        if let Some(at) = replaced_through {
            input.drain(..at);
        }
        expanded
    }
}

/// Whether a body may hold one of compactd's items (a cheap look before parsing it).
pub(crate) fn may_hold_item(body: &[u8]) -> bool {
    static SEALED: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(PREFIX.as_bytes()));
    SEALED.find(body).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(tenant: &str, key: &str) -> Identity {
        Identity {
            tenant: tenant.into(),
            key_id: Some(key.into()),
        }
    }

    #[test]
    fn items_open_only_with_the_secret_and_for_the_caller_that_sealed_them() {
        let seal = Seal::new(b"one secret");
        let a = caller("team-a", "k1");
        let item = seal.item("## Goal\nfix the parser 🦀", &a);
        let content = item["encrypted_content"].as_str().unwrap();
        assert_eq!(
            seal.open(content, &a).as_deref(),
            Some("## Goal\nfix the parser 🦀")
        );
        // Sealed, not encoded: the summary cannot be read off the item.
        let raw = B64.decode(content.strip_prefix(PREFIX).unwrap()).unwrap();
        assert!(!String::from_utf8_lossy(&raw).contains("fix the parser"));
        assert!(
            !content.contains("Z29hbA"),
            "no base64 of the text: {content}"
        );
        assert_eq!(Seal::new(b"another secret").open(content, &a), None);
        // Another tenant, another key of the same tenant, the anonymous caller: none opens it.
        assert_eq!(seal.open(content, &caller("team-b", "k1")), None);
        assert_eq!(seal.open(content, &caller("team-a", "k2")), None);
        assert_eq!(seal.open(content, &Identity::anonymous()), None);
        // A tenant and key that run together into the same bytes are still told apart.
        let ab = seal.item("s", &caller("ab", "c"));
        let text = ab["encrypted_content"].as_str().unwrap();
        assert_eq!(seal.open(text, &caller("a", "bc")), None);
        // A changed byte, a provider's item: nothing.
        let mut bytes = B64.decode(content.strip_prefix(PREFIX).unwrap()).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let forged = format!("{PREFIX}{}", B64.encode(bytes));
        assert_eq!(seal.open(&forged, &a), None);
        assert_eq!(seal.open("gAAAAABprovider-encrypted", &a), None);
        assert_eq!(seal.open("compactd.v2.", &a), None);
    }

    #[test]
    fn an_item_of_a_turn_compacted_in_line_takes_what_came_before_it() {
        let seal = Seal::new(b"k");
        let a = caller("a", "1");
        let user = |text: &str| json!({"role": "user", "content": text});
        let mut body = json!({"input": [user("old"), seal.item("kept beside", &a), user("older"),
            seal.item_replacing("all of it", &a), user("next")]});
        assert_eq!(seal.expand(&mut body, &a), 2);
        let input = body["input"].as_array().unwrap();
        assert_eq!(input.len(), 2, "{body}");
        assert!(
            input[0]["content"][0]["text"]
                .as_str()
                .unwrap()
                .ends_with("all of it")
        );
        assert_eq!(input[1], user("next"));
    }

    #[test]
    fn only_the_callers_own_items_are_expanded() {
        let seal = Seal::new(b"k");
        let a = caller("a", "1");
        let ours = seal.item("the summary", &a);
        let another_tenants = seal.item("b's summary", &caller("b", "2"));
        let theirs =
            json!({"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-opaque"});
        let mut body = json!({"input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            ours, theirs.clone(), another_tenants.clone(),
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "next"}]},
        ]});
        assert_eq!(seal.expand(&mut body, &a), 1);
        let input = body["input"].as_array().unwrap();
        assert_eq!(input[1]["role"], "user");
        let text = input[1]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with(HANDOFF) && text.ends_with("the summary"));
        assert_eq!(input[2], theirs);
        assert_eq!(input[3], another_tenants);
    }
}
