//! The models as configured: `openai:MODEL`, `anthropic:MODEL` or `extractive`, a model optionally
//! followed by `@TOKENS`, its context window.

/// A link of the chain as configured: `openai:MODEL`, `anthropic:MODEL` or `extractive`, a model
/// optionally followed by `@TOKENS`, its context window (model names may contain `:` and `@`;
/// only a last `@` followed by digits is a window).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    OpenAi { model: String, window: Option<u64> },
    Anthropic { model: String, window: Option<u64> },
    Extractive,
}

impl ModelSpec {
    pub(crate) fn openai(model: &str) -> ModelSpec {
        ModelSpec::OpenAi {
            model: model.to_owned(),
            window: None,
        }
    }

    pub(crate) fn anthropic(model: &str) -> ModelSpec {
        ModelSpec::Anthropic {
            model: model.to_owned(),
            window: None,
        }
    }

    /// `provider:model`, without the window: the name the link goes by in metrics and answers.
    pub(crate) fn name(&self) -> String {
        match self {
            ModelSpec::OpenAi { model, .. } => format!("openai:{model}"),
            ModelSpec::Anthropic { model, .. } => format!("anthropic:{model}"),
            ModelSpec::Extractive => "extractive".to_owned(),
        }
    }

    /// The configured window, else the published one of a known model.
    pub(crate) fn window(&self) -> Option<u64> {
        match self {
            ModelSpec::OpenAi { model, window } | ModelSpec::Anthropic { model, window } => {
                window.or_else(|| super::window::known_window(model))
            }
            ModelSpec::Extractive => None,
        }
    }
}

impl std::str::FromStr for ModelSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let (model_part, window) = match text.rsplit_once('@') {
            Some((model, digits))
                if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) =>
            {
                let window: u64 = digits
                    .parse()
                    .map_err(|_| format!("{text:?}: the window after @ is not a number"))?;
                if window < 256 {
                    return Err(format!(
                        "{text:?}: a context window of {window} tokens is too small to summarize in"
                    ));
                }
                (model, Some(window))
            }
            _ => (text, None),
        };
        match model_part.split_once(':') {
            None if model_part == "extractive" && window.is_none() => Ok(ModelSpec::Extractive),
            Some(("openai", model)) if !model.is_empty() => Ok(ModelSpec::OpenAi {
                model: model.to_owned(),
                window,
            }),
            Some(("anthropic", model)) if !model.is_empty() => Ok(ModelSpec::Anthropic {
                model: model.to_owned(),
                window,
            }),
            _ => Err(format!(
                "{text:?} is not a model: use openai:MODEL, anthropic:MODEL or extractive, \
                 optionally with @TOKENS, the model's context window \
                 (Ollama, vLLM, LM Studio and OpenRouter are openai: with COMPACTD_OPENAI_BASE_URL)"
            )),
        }
    }
}

impl std::fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())?;
        match self {
            ModelSpec::OpenAi {
                window: Some(w), ..
            }
            | ModelSpec::Anthropic {
                window: Some(w), ..
            } => write!(f, "@{w}"),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_specs_parse_and_print() {
        assert_eq!(
            "openai:gpt-4.1-mini".parse(),
            Ok(ModelSpec::openai("gpt-4.1-mini"))
        );
        assert_eq!(
            " anthropic:claude-haiku-4-5".parse(),
            Ok(ModelSpec::anthropic("claude-haiku-4-5"))
        );
        assert_eq!("extractive".parse(), Ok(ModelSpec::Extractive));
        assert_eq!(
            "openai:a:b".parse::<ModelSpec>().unwrap().to_string(),
            "openai:a:b"
        );
        // A window after the last `@`; names may hold `:` and `@`.
        let spec: ModelSpec = "openai:qwen2.5-coder:0.5b@8192".parse().unwrap();
        assert_eq!(
            spec,
            ModelSpec::OpenAi {
                model: "qwen2.5-coder:0.5b".into(),
                window: Some(8192)
            }
        );
        assert_eq!(spec.to_string(), "openai:qwen2.5-coder:0.5b@8192");
        assert_eq!(spec.name(), "openai:qwen2.5-coder:0.5b");
        assert_eq!(
            "openai:org@host/model".parse(),
            Ok(ModelSpec::openai("org@host/model"))
        );
        assert_eq!(ModelSpec::anthropic("claude-x").window(), Some(200_000));
        for bad in [
            "",
            "ollama:llama3",
            "openai:",
            "gpt-4",
            "openai:m@12",
            "extractive@9000",
        ] {
            assert!(bad.parse::<ModelSpec>().is_err(), "{bad}");
        }
    }
}
