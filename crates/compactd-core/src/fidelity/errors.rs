//! The errors of a conversation as a summary says them: the message without the agent's markup
//! around it, a traceback as its exception, and where it happened (the command or the tool).

use super::facts::{Facts, clip, first_line};
use super::words::is_error_line;

impl Facts {
    pub(super) fn collect_errors(&mut self, index: usize, text: &str, source: Option<&str>) {
        let mut lines = text.lines();
        while let Some(raw) = lines.next() {
            let line = raw.trim();
            if line.contains(TRACEBACK) {
                // A traceback's header says nothing: the exception is the first line after the
                // indented frames.
                let exception = lines
                    .by_ref()
                    .find(|l| !l.trim().is_empty() && !l.starts_with([' ', '\t']));
                if let Some(exception) = exception.filter(|l| !l.trim().starts_with("File ")) {
                    self.push_error(index, exception.trim(), source);
                }
                continue;
            }
            if is_error_line(line) {
                self.push_error(index, line, source);
            }
        }
    }

    pub(super) fn push_error(&mut self, index: usize, line: &str, source: Option<&str>) {
        // A program that printed `\n` literally meant a line break: the message is its first line.
        let line = line.split("\\n").next().unwrap_or_default();
        let line = clip(&without_markup(line), 300);
        if line.chars().count() < 4 || line.contains(TRACEBACK) {
            return;
        }
        self.errors.retain(|(_, seen)| *seen != line);
        if let Some(source) = source.map(str::trim).filter(|s| !s.is_empty()) {
            self.error_sources
                .insert(line.clone(), clip(first_line(source), 120));
        }
        self.errors.push((index, line));
    }

    /// An error said as a sentence with where it happened: "`cargo test` failed: error[E0308]:
    /// mismatched types".
    pub fn error_sentence(&self, error: &str) -> String {
        match self.error_sources.get(error) {
            Some(source) => format!("`{}` failed: {error}", source.replace('`', "'")),
            None => error.to_owned(),
        }
    }
}

/// A Python traceback's header line.
const TRACEBACK: &str = "Traceback (most recent call last)";

/// A line without the agent's markup around it (`<tool_use_error>…</tool_use_error>`, an
/// observation's `<output>`): the error is the text inside.
fn without_markup(line: &str) -> String {
    // A linter's list of findings marks each with a bullet of its own.
    let mut text = line.trim().trim_start_matches(['-', '*']).trim_start();
    loop {
        let before = text;
        if let Some(rest) = text.strip_prefix('<')
            && let Some((tag, after)) = rest.split_once('>')
            && is_tag_name(tag)
        {
            text = after.trim_start();
        }
        if let Some(at) = text.rfind("</")
            && text.ends_with('>')
            && is_tag_name(&text[at + 2..text.len() - 1])
        {
            text = text[..at].trim_end();
        }
        if text == before {
            return text.to_owned();
        }
    }
}

fn is_tag_name(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 40
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}
