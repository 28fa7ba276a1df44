//! The Anthropic Messages API: `POST {base}/v1/messages`.

use serde::Deserialize;
use serde_json::json;

use super::{AttemptError, Summary, SummaryRequest, TokenUsage, exchange, is_overflow_message};

#[derive(Clone)]
pub struct AnthropicClient {
    http: reqwest::Client,
    base_url: String,
    api_key: String,
    version: String,
}

impl std::fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("base_url", &self.base_url)
            .field("api_key", &"<redacted>")
            .field("version", &self.version)
            .finish()
    }
}

impl AnthropicClient {
    /// `base_url` without the `/v1` path, e.g. `https://api.anthropic.com`.
    pub fn new(http: reqwest::Client, base_url: &str, api_key: String, version: String) -> Self {
        AnthropicClient {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            version,
        }
    }

    pub async fn complete(
        &self,
        model: &str,
        request: &SummaryRequest,
    ) -> Result<Summary, AttemptError> {
        let body = json!({
            "model": model,
            "max_tokens": request.max_tokens,
            "system": request.system_prompt,
            "messages": [{"role": "user", "content": request.prompt}],
        });
        let call = self
            .http
            .post(format!("{}/v1/messages", self.base_url))
            .header("x-api-key", &self.api_key)
            .header("anthropic-version", &self.version)
            .json(&body);
        // Errors: {"type":"error","error":{"type":"overloaded_error","message":"…"}}; 529
        // "overloaded" is Anthropic's retryable server status.
        let bytes = exchange(call).await?.map_err(|reply| {
            reply.into_error(|r| {
                r.kind == "invalid_request_error" && is_overflow_message(&r.message)
            })
        })?;
        let parsed: MessagesResponse = serde_json::from_slice(&bytes)
            .map_err(|e| AttemptError::Malformed(format!("not a Messages response: {e}")))?;
        let text = parsed
            .content
            .iter()
            .filter(|block| block.kind == "text")
            .filter_map(|block| block.text.as_deref())
            .collect::<Vec<_>>()
            .join("\n");
        if text.trim().is_empty() {
            return Err(AttemptError::Empty);
        }
        let usage = parsed.usage.unwrap_or_default();
        Ok(Summary {
            text,
            model: format!("anthropic:{model}"),
            usage: TokenUsage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
            },
        })
    }
}

#[derive(Deserialize)]
struct MessagesResponse {
    content: Vec<ContentBlock>,
    usage: Option<MessagesUsage>,
}

#[derive(Deserialize)]
struct ContentBlock {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct MessagesUsage {
    input_tokens: u64,
    output_tokens: u64,
}
