//! Context windows: how many tokens a model takes, and fitting a request into it.
//!
//! A model's window comes from its `@TOKENS` suffix in `COMPACTD_MODELS`, else from the table of
//! known models below, else from what the server said when a prompt overflowed (llama.cpp, vLLM,
//! LM Studio, OpenAI and Anthropic name the window in their error). Once known, compactd never
//! sends more: Ollama, by default, silently drops the start of a prompt longer than its window,
//! and the summary would then cover only the tail.
//!
//! Sizes are measured with the reference's estimate (`ceil(UTF-16 units / 4)`). Real tokenizers
//! count code at about three characters a token, so a server's own count, when an overflow
//! reports it, calibrates the estimate for that model.

use std::collections::HashMap;
use std::sync::Mutex;

use super::SummaryRequest;
use compactd_core::transcript::estimate_tokens;

/// Windows of models whose size is published, by model-name prefix (longest match wins).
const KNOWN: [(&str, u64); 14] = [
    ("claude-", 200_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-5", 272_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("gemini-2.5", 1_048_576),
    ("llama3.1", 131_072),
    ("llama3.2", 131_072),
    ("qwen2.5-coder", 32_768),
    ("qwen3", 40_960),
    ("mistral-small", 32_768),
    ("deepseek-r1", 131_072),
    ("gpt-oss", 131_072),
];

/// The published window of `model`, if it is a known one.
pub(crate) fn known_window(model: &str) -> Option<u64> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    KNOWN
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|&(_, window)| window)
}

/// What an overflow taught about a model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Learned {
    pub(crate) window: Option<u64>,
    /// The server's tokens per estimated token (≥ 1 when its tokenizer counts more).
    pub(crate) ratio: f64,
}

/// Windows learned from overflow errors, per model, shared by every request of this process.
#[derive(Debug, Default)]
pub(crate) struct Learnt(Mutex<HashMap<String, Learned>>);

impl Learnt {
    /// Takes `tokens` for the model's window when it reported an overflow without saying its
    /// window or its count: the next request is fitted (folded) to that.
    pub(crate) fn assume_window(&self, model: &str, tokens: u64) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let entry = map.entry(model.to_owned()).or_insert(Learned {
            window: None,
            ratio: DEFAULT_RATIO,
        });
        entry.window = Some(tokens.max(512));
    }

    pub(crate) fn get(&self, model: &str) -> Option<Learned> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(model)
            .copied()
    }

    /// Records what an overflow said about `model`, for a request whose prompt was estimated at
    /// `estimated` tokens.
    pub(crate) fn learn(
        &self,
        model: &str,
        window: Option<u64>,
        server_tokens: Option<u64>,
        estimated: u64,
    ) {
        if window.is_none() && server_tokens.is_none() {
            return;
        }
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let entry = map.entry(model.to_owned()).or_insert(Learned {
            window: None,
            ratio: 1.0,
        });
        if window.is_some() {
            entry.window = window;
        }
        if let Some(counted) = server_tokens
            && estimated > 0
        {
            entry.ratio = (counted as f64 / estimated as f64).clamp(0.5, 4.0);
        }
    }
}

/// Share of the window a prompt may fill once the output is reserved: the rest is margin for the
/// chat template's own tokens and the estimate's error.
const FILL: f64 = 0.9;

/// Server tokens per estimated token assumed until a model's own count is known: small-vocabulary
/// tokenizers count code at about three characters a token (SmolLM2 counted 9 278 tokens for a
/// prompt estimated at 6 700).
pub(crate) const DEFAULT_RATIO: f64 = 1.4;

/// The output cap for a model with `window` tokens: a summary never gets more than a quarter of
/// the window, so the prompt keeps three quarters.
pub(crate) fn output_cap(requested: u64, window: u64) -> u64 {
    requested.min((window / 4).max(64))
}

/// How many estimated tokens of prompt fit a model with `window` tokens, after the output cap
/// and the system prompt, at `ratio` server tokens per estimated token.
pub(crate) fn prompt_budget(window: u64, request: &SummaryRequest, ratio: f64) -> u64 {
    let output = output_cap(request.max_tokens, window);
    let room = window.saturating_sub(output) as f64 * FILL / ratio.max(0.1);
    (room as u64).saturating_sub(estimate_tokens(&request.system_prompt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_models_have_their_published_windows() {
        assert_eq!(known_window("claude-haiku-4-5"), Some(200_000));
        assert_eq!(known_window("gpt-4.1-mini"), Some(1_047_576));
        assert_eq!(known_window("qwen2.5-coder:0.5b"), Some(32_768));
        assert_eq!(
            known_window("Qwen/Qwen2.5-Coder-1.5B-Instruct"),
            Some(32_768)
        );
        assert_eq!(known_window("SmolLM2-135M-Instruct.Q4_1"), None);
    }

    #[test]
    fn an_overflow_teaches_the_window_and_the_tokenizer_ratio() {
        let learnt = Learnt::default();
        learnt.learn("openai:m", Some(8192), Some(12_000), 10_000);
        assert_eq!(
            learnt.get("openai:m"),
            Some(Learned {
                window: Some(8192),
                ratio: 1.2
            })
        );
        let request = SummaryRequest::plain("x".repeat(400), String::new(), 13_107);
        // 8192 less a 2048 output cap, 90 %, at 1.2 server tokens a token, less 100 of system.
        assert_eq!(prompt_budget(8192, &request, 1.2), 4508);
        assert_eq!(output_cap(13_107, 8192), 2048);
        assert_eq!(output_cap(512, 8192), 512);
    }
}
