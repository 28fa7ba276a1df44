//! OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, llama.cpp server, LM Studio,
//! OpenRouter, …): `POST {base}/chat/completions`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{AttemptError, Summary, SummaryRequest, TokenUsage, exchange, is_overflow_message};

/// One client per provider, built once; it serves every model of the provider in the chain.
#[derive(Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl OpenAiClient {
    /// `base_url` up to and including the API version, e.g. `https://api.openai.com/v1` or
    /// `http://127.0.0.1:11434/v1` for Ollama. The key is optional: local servers need none.
    pub fn new(http: reqwest::Client, base_url: &str, api_key: Option<String>) -> Self {
        OpenAiClient {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key: api_key.filter(|k| !k.is_empty()),
        }
    }

    pub async fn complete(
        &self,
        model: &str,
        request: &SummaryRequest,
    ) -> Result<Summary, AttemptError> {
        let body = json!({
            "model": model,
            "messages": [
                {"role": "system", "content": request.system_prompt},
                {"role": "user", "content": request.prompt},
            ],
            "max_tokens": request.max_tokens,
            "stream": false,
        });
        let mut call = self
            .http
            .post(format!("{}/chat/completions", self.base_url))
            .json(&body);
        if let Some(key) = &self.api_key {
            call = call.bearer_auth(key);
        }
        let bytes = exchange(call).await?.map_err(|reply| {
            reply.into_error(|r| {
                r.code == "context_length_exceeded"
                    || (r.status == 400 && is_overflow_message(&r.message))
            })
        })?;
        let parsed: ChatCompletion = serde_json::from_slice(&bytes)
            .map_err(|e| AttemptError::Malformed(format!("not a chat completion: {e}")))?;
        let choice = parsed
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| AttemptError::Malformed("no choices in the completion".into()))?;
        let text = match choice.message.content {
            Some(Value::String(text)) => text,
            // Some servers answer with content parts; their texts are joined with no separator.
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
            _ => String::new(),
        };
        if text.trim().is_empty() {
            return Err(AttemptError::Empty);
        }
        let usage = parsed.usage.unwrap_or_default();
        Ok(Summary {
            text,
            model: format!("openai:{model}"),
            usage: TokenUsage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
            },
        })
    }
}

#[derive(Deserialize)]
struct ChatCompletion {
    choices: Vec<Choice>,
    usage: Option<ChatUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    content: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ChatUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
}
