//! Parsers for typed settings: durations, URLs, per-model options, and secrets that never print.

use std::time::Duration;

/// Request options by model name (`"*"`: every model), merged into each request body.
pub type ModelOptions =
    std::collections::HashMap<String, serde_json::Map<String, serde_json::Value>>;

/// A secret setting (an API key, a database URL with a password): shown as `<redacted>` by
/// `Debug`, so that no configuration dump or log line prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A secret from the command line or the environment; an empty one counts as unset.
pub(super) fn secret(text: &str) -> Result<Secret, String> {
    Ok(Secret(text.trim().to_owned()))
}

/// A positive number of seconds (fractions allowed).
pub(super) fn seconds(text: &str) -> Result<Duration, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if value.is_finite() && value > 0.0 {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(format!("{text:?} must be a positive number of seconds"))
    }
}

/// A span of time: a number with `s`, `m`, `h` or `d` (seconds without one); `0` is none.
pub(super) fn span(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().last() {
        Some((at, c)) if c.is_ascii_alphabetic() => (&text[..at], c.to_ascii_lowercase()),
        _ => (text, 's'),
    };
    let seconds = match unit {
        's' => 1.0,
        'm' => 60.0,
        'h' => 3600.0,
        'd' => 86_400.0,
        _ => {
            return Err(format!(
                "{text:?}: give a number with s, m, h or d (\"3d\")"
            ));
        }
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a span of time (\"3d\", \"12h\", \"0\")"))?;
    if value.is_finite() && value >= 0.0 {
        Ok(Duration::from_secs_f64(value * seconds))
    } else {
        Err(format!("{text:?} must not be negative"))
    }
}

/// `on`/`off` (also `true`/`false`, `1`/`0`).
pub(super) fn on_off(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err(format!("{text:?} must be on or off")),
    }
}

/// A share strictly between 0 and 1 (`0.6`).
pub(super) fn share(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(share) if share > 0.0 && share < 1.0 => Ok(share),
        _ => Err(format!("{text:?} is not a share between 0 and 1, like 0.6")),
    }
}

/// An `http://` or `https://` URL.
pub(super) fn http_url(text: &str) -> Result<reqwest::Url, String> {
    let url =
        reqwest::Url::parse(text.trim()).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(format!(
            "{text:?} must be an http:// or https:// URL, not {other}://"
        )),
    }
}

/// `{"openai:MODEL": {"temperature": 0.7}, "*": {…}}`.
pub(super) fn model_options(text: &str) -> Result<ModelOptions, String> {
    serde_json::from_str(text).map_err(|e| {
        format!(
            "must be a JSON object of objects, {{\"openai:MODEL\": {{\"temperature\": 0.7}}}}: {e}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_into_their_types_and_refuse_the_rest() {
        assert_eq!(seconds("1.5"), Ok(Duration::from_millis(1500)));
        for bad in ["0", "-1", "nan", "inf", "x"] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
        assert!(http_url("ftp://x").unwrap_err().contains("http://"));
        assert_eq!(
            http_url("http://127.0.0.1:11434/v1").unwrap().as_str(),
            "http://127.0.0.1:11434/v1"
        );
        assert!(model_options(r#"{"m": 1}"#).is_err());
        assert_eq!(
            model_options(r#"{"m": {"seed": 1}}"#).unwrap()["m"]["seed"],
            1
        );
        let key = secret("sk-live-123").unwrap();
        assert_eq!(format!("{key:?}"), "Secret(<redacted>)");
        assert_eq!(key.expose(), "sk-live-123");
    }
}
