//! The user's own words in a user turn: what they wrote, without what they pasted. People paste
//! terminal sessions, stack traces, log lines, session records and code into their messages
//! ("then we need to tackle this bash issue:" and a JSON line of the agent's own session): that
//! text is evidence, not intent, and a rule or a goal read from it is wrong from then on (a
//! tool's "No fixes applied." is no rule of the user's). What is left is the text the summary
//! quotes as the user's: their requests, their questions, their rules.
//!
//! A line is pasted when it is inside a code fence, a record (JSON), quoted output (`> `), a
//! prompt line (`$ `, `➜`, `❯`), a frame of a stack trace, an error or log line, indented like
//! code, a line of code, or mostly symbols. A line holding JSON string escapes (`\n`, `\"`) is a
//! pasted escaped text: it is unescaped first and its lines judged one by one.

use super::standing::{looks_like_code, without_code_spans};

/// The user's own lines of `text`, in order, joined by newlines; empty when all of it is pasted.
pub fn of(text: &str) -> String {
    let mut kept: Vec<String> = Vec::new();
    let mut reader = Reader::default();
    let numbered = numbered_paragraphs(text);
    for (index, line) in text.lines().enumerate() {
        if numbered.contains(&index) {
            continue;
        }
        // A record is dropped whole, escaped text and all; other escaped text is unescaped and
        // its lines judged one by one.
        if !reader.fenced && holds_escapes(line) && !record(line.trim()) {
            for inner in unescape(line).lines() {
                if let Some(own) = reader.judge(inner) {
                    kept.push(own.to_owned());
                }
            }
        } else if let Some(own) = reader.judge(line) {
            kept.push(own.to_owned());
        }
    }
    kept.join("\n")
}

/// Reads a turn line by line: fences, blocks a pasted line opens, and the lines that continue a
/// pasted one (a wrapped error, indented as it was).
#[derive(Default)]
struct Reader {
    fenced: bool,
    /// The open fence holds markdown (tagged `md`, `markdown`, `text`, or untagged): a pasted
    /// conventions file. Its list items and prose are judged as the user's lines are; an
    /// untagged fence's other lines stay pasted.
    fence_prose: Option<bool>,
    /// The paragraph began with a shell prompt: the command's output follows to its end.
    terminal: bool,
    /// Inside `{ … }` or `[ … ]` a pasted line opened.
    block: bool,
    /// The indentation of the pasted line before, when the line before was pasted.
    pasted_indent: Option<usize>,
}

impl Reader {
    /// The line, trimmed, when it is the user's.
    fn judge<'l>(&mut self, line: &'l str) -> Option<&'l str> {
        let trimmed = line.trim();
        let indent = line.len() - line.trim_start().len();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            self.fenced = !self.fenced;
            let tag = trimmed
                .trim_start_matches(['`', '~'])
                .trim()
                .to_ascii_lowercase();
            self.fence_prose = match tag.as_str() {
                "md" | "markdown" | "text" | "txt" => Some(true),
                "" => Some(false),
                _ => None,
            }
            .filter(|_| self.fenced);
            self.pasted_indent = None;
            return None;
        }
        if trimmed.is_empty() {
            self.pasted_indent = None;
            self.terminal = false;
            return None;
        }
        if !self.fenced && PROMPTS.iter().any(|p| trimmed.starts_with(p)) {
            self.terminal = true;
        }
        let continues = self.pasted_indent.is_some_and(|i| i > 0 && i == indent);
        let fenced = match self.fence_prose {
            _ if !self.fenced => false,
            Some(true) => pasted(line),
            Some(false) => list_item(trimmed).is_none_or(pasted),
            None => true,
        };
        let pasted =
            fenced || self.terminal || self.block || continues || (!self.fenced && pasted(line));
        if self.block && (trimmed.starts_with('}') || trimmed.starts_with(']')) {
            self.block = false;
        } else if pasted && !self.fenced && (trimmed.ends_with('{') || trimmed.ends_with('[')) {
            self.block = true;
        }
        self.pasted_indent = pasted.then_some(indent);
        (!pasted).then_some(trimmed)
    }
}

/// The lines of paragraphs copied from a terminal or an editor: two or more lines that open with
/// a line number and a space (`cat -n`, an editor's gutter, a diff's `+ 12 `), the numbers rising
/// by at most three; or three or more lines padded with spaces to the same width (a terminal's
/// screen). A numbered list of the user's (`1. …`, `2) …`) has its mark after the number.
fn numbered_paragraphs(text: &str) -> Vec<usize> {
    let mut pasted = Vec::new();
    let mut paragraph: Vec<usize> = Vec::new();
    let mut numbers: Vec<u64> = Vec::new();
    let mut padded: Vec<usize> = Vec::new();
    let mut close =
        |paragraph: &mut Vec<usize>, numbers: &mut Vec<u64>, padded: &mut Vec<usize>| {
            let rising = numbers.windows(2).all(|w| w[1] > w[0] && w[1] - w[0] <= 3);
            padded.sort_unstable();
            let screen = padded.windows(3).any(|w| w[0] == w[2]);
            if (numbers.len() >= 2 && rising) || screen {
                pasted.append(paragraph);
            }
            paragraph.clear();
            numbers.clear();
            padded.clear();
        };
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            close(&mut paragraph, &mut numbers, &mut padded);
            continue;
        }
        paragraph.push(index);
        if line.len() - line.trim_end().len() >= 3 {
            padded.push(line.chars().count());
        }
        let trimmed = line.trim_start();
        let trimmed = trimmed
            .strip_prefix(['+', '-'])
            .filter(|rest| rest.starts_with(' '))
            .map_or(trimmed, str::trim_start);
        let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
        if (1..=6).contains(&digits)
            && (trimmed.len() == digits || trimmed[digits..].starts_with([' ', '\t', '→', '|']))
            && let Ok(number) = trimmed[..digits].parse()
        {
            numbers.push(number);
        }
    }
    close(&mut paragraph, &mut numbers, &mut padded);
    pasted
}

/// How a shell prompt line begins: the paragraph it opens is a terminal session.
const PROMPTS: [&str; 4] = ["$ ", "➜ ", "❯ ", "% "];

/// The text of a markdown list item (`- x`, `* x`, `1. x`).
pub fn list_item(line: &str) -> Option<&str> {
    if let Some(rest) = line.strip_prefix(['-', '*', '+']) {
        return rest.starts_with(' ').then(|| rest.trim());
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    let rest = &line[digits..];
    (digits > 0 && (rest.starts_with(". ") || rest.starts_with(") "))).then(|| rest[2..].trim())
}

/// The user's words of `text` on one line, for a list item: `of` with its lines joined.
pub fn one_line(text: &str) -> String {
    of(text)
        .lines()
        .map(|l| l.trim_start_matches(['-', '*', '+']).trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" / ")
}

/// Literal escapes of a JSON string in a line: two or more `\n`, or a `\n` with an escaped quote.
fn holds_escapes(text: &str) -> bool {
    let newlines = text.matches("\\n").count();
    newlines >= 2 || (newlines >= 1 && text.contains("\\\""))
}

/// `\n`, `\t`, `\"`, `\\` written out as the characters they stand for.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => {}
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// Whether a line (not inside a fence) was pasted rather than written.
fn pasted(line: &str) -> bool {
    let trimmed = line.trim();
    let lower = trimmed.to_lowercase();
    // Indented four or more (or a tab): code or output, unless it is a nested list item.
    let indent = line.len() - line.trim_start().len();
    let indented = (indent >= 4 || line.starts_with('\t'))
        && !trimmed.starts_with(['-', '*', '+'])
        && !trimmed.starts_with(|c: char| c.is_ascii_digit());
    indented
        || record(trimmed)
        || trimmed.starts_with([
            '>', '$', '➜', '❯', '%', '^', '~', '|', '{', '}', '[', ']', '<',
        ]) && !trimmed.starts_with("<@")
        || stack_frame(trimmed)
        || error_line(trimmed)
        || LOG_STARTS.iter().any(|s| lower.starts_with(s))
        || timestamped(trimmed)
        || {
            // Code the user quoted inline (`t.TempDir()`) is part of their sentence.
            let prose = without_code_spans(trimmed);
            looks_like_code(&prose.to_lowercase()) || mostly_symbols(&prose)
        }
}

/// An error message a tool printed: `error[E0308]: …`, `Error: …`, `npm ERR! …`, `… panicked
/// at …`, `test x ... FAILED`. Stricter than the summarizer's error lines: "why is it not
/// defined?" and "I cannot find the config" are the user's.
fn error_line(line: &str) -> bool {
    const STARTS: [&str; 9] = [
        "Error:", "error:", "error[", "ERROR", "FAIL", "fatal:", "Fatal:", "panic:", "npm ERR",
    ];
    const MARKS: [&str; 4] = [
        "panicked at",
        " FAILED",
        "Traceback (most recent",
        "Exception:",
    ];
    STARTS.iter().any(|s| line.starts_with(s)) || MARKS.iter().any(|m| line.contains(m))
}

/// How log and tool lines begin.
const LOG_STARTS: &[&str] = &[
    "npm ",
    "node:",
    "warning:",
    "warn ",
    "info ",
    "debug ",
    "trace ",
    "note: ",
    "help: ",
    "caused by",
    "traceback",
    "file \"",
    "at ",
    "  at ",
    "-->",
    "= note",
    "process exited",
    "command exited",
    "exit code",
];

/// A JSON record or a line of one: `{"…":`, or two or more `"key":` pairs.
fn record(line: &str) -> bool {
    line.starts_with("{\"") || line.starts_with("[{") || line.matches("\":").count() >= 2
}

/// `at f (file.js:1:2)`, `at file.js:1:2`, `File "x.py", line 3`.
fn stack_frame(line: &str) -> bool {
    (line.starts_with("at ") && line.contains(':') && (line.ends_with(')') || !line.contains(' ')))
        || (line.starts_with("File \"") && line.contains(", line "))
}

/// A line that starts with a date or a clock time: a log line.
fn timestamped(line: &str) -> bool {
    let head: Vec<char> = line.chars().take(10).collect();
    let digits = head.iter().take_while(|c| c.is_ascii_digit()).count();
    (digits == 4 && head.get(4) == Some(&'-')) || (digits == 2 && head.get(2) == Some(&':'))
}

/// Fewer than half of the line's visible characters are letters (a table rule, a hexdump, a
/// path list of numbers); short lines ("ok", "2?") are the user's.
fn mostly_symbols(line: &str) -> bool {
    let visible = line.chars().filter(|c| !c.is_whitespace()).count();
    let letters = line.chars().filter(|c| c.is_alphabetic()).count();
    visible >= 12 && letters * 2 < visible
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pasted_session_record_is_not_the_users() {
        let turn = "then we need to tackle this bash issue:\n\n{\"type\":\"message\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"No fixes applied.\\n\\n> @x/pi-proxy@0.14.2 check\\n> biome check --write .\"}]}}";
        assert_eq!(of(turn), "then we need to tackle this bash issue:");
    }

    #[test]
    fn terminal_sessions_and_traces_are_dropped() {
        let turn = "~/workspaces/pi-mono (refactor)\n➜  pi-mono git:(refactor) npx tsx src/cli.ts -c\nnode:fs:443\n    return binding.readFileUtf8(path);\n                   ^\n\nError: ENOENT: no such file or directory, open '/x/y'\n    at Object.openSync (node:fs:573:18)\n\nwhy does this fail? fix it";
        assert_eq!(of(turn), "why does this fail? fix it");
    }

    #[test]
    fn fenced_code_and_quoted_output_are_dropped_and_lists_kept() {
        let turn = "Please keep these in mind:\n- never push to main\n  - not even tags\n```rust\nfn main() {}\n```\n> test result: FAILED\nthanks";
        assert_eq!(
            of(turn),
            "Please keep these in mind:\n- never push to main\n- not even tags\nthanks"
        );
        assert_eq!(
            one_line(turn),
            "Please keep these in mind: / never push to main / not even tags / thanks"
        );
    }

    #[test]
    fn a_command_and_its_output_are_dropped_to_the_paragraphs_end() {
        let turn = "it hangs here:\n$ cargo test\n   Compiling compactd v0.1.0\nrunning 3 tests\ntest a ... ok\n\nany idea?";
        assert_eq!(of(turn), "it hangs here:\nany idea?");
    }

    #[test]
    fn a_pasted_conventions_file_keeps_its_items() {
        let turn = "our conventions:\n```md\n## Style\n- Use tabs.\n- Never commit secrets.\n```\n```\n- Prefer small PRs.\nerror: the build failed\n```\n```sh\n- rm -rf x\n```";
        assert_eq!(
            of(turn),
            "our conventions:\n## Style\n- Use tabs.\n- Never commit secrets.\n- Prefer small PRs."
        );
    }

    #[test]
    fn a_file_pasted_with_its_line_numbers_is_dropped_and_a_numbered_list_kept() {
        let turn = "remove that\n\n8 - **User Message Text Color**: now respected\ntheme token for text color.\n9 - **Tool Title**: separate colors\n11 ### Fixed\n\nplease:\n1. keep the tests\n2. drop the rest";
        assert_eq!(
            of(turn),
            "remove that\nplease:\n1. keep the tests\n2. drop the rest"
        );
        let diff = "+ 8 - **Color**: now respected  \n theme token for text.  \n + 9 - **Tool Title**: colors\n + 10\nremove that";
        assert_eq!(of(diff), "");
    }

    #[test]
    fn a_terminal_screen_padded_to_its_width_is_dropped() {
        let screen = "look at the selector\n\ndark (current)     \nlight light        \nnord nord          \n\nit broke";
        assert_eq!(of(screen), "look at the selector\nit broke");
        // Two lines with trailing spaces are no screen.
        assert_eq!(
            of("dark (current)     \nlight light        "),
            "dark (current)\nlight light"
        );
    }

    #[test]
    fn escaped_text_is_unescaped_before_it_is_judged() {
        let turn = "Use tabs.\\nNever commit secrets.\\n> npm run check";
        assert_eq!(of(turn), "Use tabs.\nNever commit secrets.");
    }

    #[test]
    fn object_dumps_and_wrapped_errors_are_dropped() {
        let turn = "Error: ENOENT: no such file\n    at readFileSync (node:fs:443:20) {\n  errno: -2,\n  code: 'ENOENT'\n}\n\nthis results in\n\n Error: 400 {\"type\":\"error\",\"message\":\"messages.236: `tool_use`\n ids were found without `tool_result` blocks\n message.\"}}\n\nhow can we prevent this?";
        assert_eq!(of(turn), "this results in\nhow can we prevent this?");
    }

    #[test]
    fn ordinary_prose_stays_whole() {
        for turn in [
            "ok",
            "why are there 2 subscription handlers?",
            "Run `cargo fmt` before every commit.",
            "use format like 'C:/' in paths (Windows users hit this)",
        ] {
            assert_eq!(of(turn), turn);
        }
    }
}
