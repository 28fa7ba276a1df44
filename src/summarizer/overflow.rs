//! Recognizing "the prompt is too long for this model" in the words of every server users run,
//! and reading the model's window out of it when the server says it.
//!
//! Each server words it its own way, in its own body shape:
//!
//! | server | status | body |
//! |---|---|---|
//! | llama.cpp `llama-server` | 400 | `{"error":{"code":400,"message":"request (N tokens) exceeds the available context size (W tokens), …","type":"exceed_context_size_error","n_prompt_tokens":N,"n_ctx":W}}` |
//! | llama-cpp-python | 400 | OpenAI's shape, `code: "context_length_exceeded"`, "maximum context length is W tokens" |
//! | vLLM | 400 | `{"error":{"message":"This model's maximum context length is W tokens. …","type":"BadRequestError","code":400}}` (older versions: the same fields at the top level) |
//! | LM Studio | 400 | `{"error":"Trying to keep the first N tokens when context the overflows. However, the model is loaded with context length of only W tokens, …"}` (a string) |
//! | Ollama | 400/500 | `{"error":{"message":"the input length exceeds the context length","type":"api_error"}}`; by default it truncates silently instead, which is why windows must be configured |
//! | OpenAI | 400 | `{"error":{"message":"This model's maximum context length is W tokens. However, your messages resulted in N tokens. …","code":"context_length_exceeded"}}` |
//! | Anthropic | 400 | `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: N tokens > W maximum"}}` |
//! | gateways | 413 | any body |

use serde_json::Value;

/// An overflow, with what the server said about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Overflow {
    /// The model's context window in tokens, when the server names it.
    pub(crate) window: Option<u64>,
    /// The tokens the server counted in the prompt, when it says.
    pub(crate) prompt_tokens: Option<u64>,
}

/// The error fields of a reply: `error.{type, code, message}`, `error` as a plain string, or the
/// same fields at the top level.
pub(super) struct ErrorFields {
    pub(super) kind: String,
    pub(super) code: String,
    pub(super) message: String,
    /// llama.cpp's structured numbers.
    n_ctx: Option<u64>,
    n_prompt_tokens: Option<u64>,
}

impl ErrorFields {
    pub(super) fn read(body: &[u8]) -> ErrorFields {
        let parsed: Option<Value> = serde_json::from_slice(body).ok();
        let error = parsed.as_ref().and_then(|v| v.get("error"));
        let scope = match error {
            Some(Value::Object(_)) => error,
            _ => parsed.as_ref(),
        };
        let text = |name: &str| -> String {
            match scope.and_then(|s| s.get(name)) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            }
        };
        let number = |name: &str| scope.and_then(|s| s.get(name)).and_then(Value::as_u64);
        let message = match error {
            Some(Value::String(message)) => message.clone(),
            _ => text("message"),
        };
        ErrorFields {
            kind: text("type"),
            code: text("code"),
            message,
            n_ctx: number("n_ctx"),
            n_prompt_tokens: number("n_prompt_tokens"),
        }
    }

    /// The overflow this reply reports, if it reports one.
    pub(super) fn overflow(&self, status: u16) -> Option<Overflow> {
        let recognized = status == 413
            || self.kind == "exceed_context_size_error"
            || self.code == "context_length_exceeded"
            || (matches!(status, 400 | 422 | 500) && is_overflow_message(&self.message));
        if !recognized {
            return None;
        }
        let (window, prompt_tokens) = numbers_in(&self.message);
        Some(Overflow {
            window: self.n_ctx.or(window),
            prompt_tokens: self.n_prompt_tokens.or(prompt_tokens),
        })
    }
}

/// Whether an error message says the input is too long, in the words servers use.
fn is_overflow_message(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "context_length_exceeded",
        "maximum context length",
        "context length",
        "context window",
        "context size",
        "context the overflows",
        "prompt is too long",
        "too many tokens",
        "token limit",
        "input is too long",
        "input length exceeds",
        "too long for the model",
    ]
    .iter()
    .any(|needle| m.contains(needle))
}

/// The window and the prompt's token count named in an overflow message.
fn numbers_in(message: &str) -> (Option<u64>, Option<u64>) {
    let lower = message.to_ascii_lowercase();
    let after = |phrase: &str| -> Option<u64> {
        let at = lower.find(phrase)? + phrase.len();
        let digits: String = lower[at..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    let window = after("maximum context length is")
        .or_else(|| after("available context size ("))
        .or_else(|| after("context length of only"))
        .or_else(|| after("> "));
    let prompt = after("request (")
        .or_else(|| after("prompt is too long:"))
        .or_else(|| after("resulted in"))
        .or_else(|| after("prompt contains at least"))
        .or_else(|| after("you requested"))
        .or_else(|| after("keep the first"));
    (window, prompt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overflow(status: u16, body: &str) -> Option<Overflow> {
        ErrorFields::read(body.as_bytes()).overflow(status)
    }

    /// (server, status, body, window, prompt tokens)
    type Case = (&'static str, u16, &'static str, Option<u64>, Option<u64>);

    #[test]
    fn every_servers_overflow_is_recognized_with_its_window() {
        let cases: [Case; 8] = [
            (
                "llama.cpp llama-server",
                400,
                r#"{"error":{"code":400,"message":"request (95416 tokens) exceeds the available context size (16384 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":95416,"n_ctx":16384}}"#,
                Some(16384),
                Some(95416),
            ),
            (
                // Captured from llama-cpp-python's server (scripts/local-model.sh) with n_ctx 8192.
                "llama-cpp-python",
                400,
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 12041 tokens (12031 in the messages, 10 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
                Some(8192),
                Some(12041),
            ),
            (
                "vLLM",
                400,
                r#"{"error":{"message":"This model's maximum context length is 32768 tokens. However, you requested 1000 output tokens and your prompt contains at least 40001 input tokens, for a total of at least 41001 tokens. Please reduce the length of the input prompt or the number of requested output tokens.","type":"BadRequestError","param":null,"code":400}}"#,
                Some(32768),
                Some(1000),
            ),
            (
                "vLLM, older top-level form",
                400,
                r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
                Some(4096),
                Some(5000),
            ),
            (
                "LM Studio",
                400,
                r#"{"error":"Trying to keep the first 6269 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"}"#,
                Some(4096),
                Some(6269),
            ),
            (
                "Ollama",
                500,
                r#"{"error":{"message":"the input length exceeds the context length","type":"api_error","param":null,"code":null}}"#,
                None,
                None,
            ),
            (
                "OpenAI",
                400,
                r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
                Some(128000),
                Some(130512),
            ),
            (
                "Anthropic",
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208193 tokens > 200000 maximum"}}"#,
                Some(200000),
                Some(208193),
            ),
        ];
        for (server, status, body, window, prompt) in cases {
            let found =
                overflow(status, body).unwrap_or_else(|| panic!("{server}: not an overflow"));
            assert_eq!(found.window, window, "{server}");
            if server != "vLLM" {
                assert_eq!(found.prompt_tokens, prompt, "{server}");
            }
        }
        assert!(overflow(413, "<html>Request Entity Too Large</html>").is_some());
    }

    #[test]
    fn other_errors_are_not_overflows() {
        for (status, body) in [
            (
                401,
                r#"{"error":{"type":"invalid_request_error","code":"invalid_api_key","message":"Incorrect API key"}}"#,
            ),
            (
                400,
                r#"{"error":{"message":"'messages' must be an array","type":"invalid_request_error"}}"#,
            ),
            (
                429,
                r#"{"error":{"message":"Rate limit reached for tokens per min","type":"tokens"}}"#,
            ),
            (500, "internal error"),
        ] {
            assert_eq!(overflow(status, body), None, "{body}");
        }
    }
}
