//! What an agent writes into its user's turns, told apart from what the user wrote. Claude Code
//! opens a user message with `<system-reminder>` blocks (the project's CLAUDE.md, the git status,
//! attribution rules), records a slash command the user ran as `<command-name>`,
//! `<local-command-stdout>` and a `<local-command-caveat>`, a `!` shell command as `<bash-input>`,
//! and after a compaction replays the calls it kept as reminders ("Called the Read tool with the
//! following input: …", "Result of calling the Read tool: …"); Codex sends its
//! `<environment_context>` and the project's AGENTS.md as user messages; OpenCode adds
//! `<system-reminder>` blocks too.
//!
//! None of it is the user's: a summary that takes a reminder for the latest request, a goal or a
//! rule has lost the user. The structured readers split each user text into [`Piece`]s: the
//! user's own words stay the user's, the agent's markup becomes the agent's (developer) text, a
//! replayed call becomes the call and its result. Recognized by structure — an element of one of
//! the agents' wrapper tags that starts a line — never by the words inside.

use serde_json::Value;

/// One part of a user message's text.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece<'a> {
    /// What the user wrote.
    User(&'a str),
    /// The agent's own text: reminders, environment notes, a pasted rules file, command echoes.
    Agent(&'a str),
    /// A shell command the user ran from the prompt (`!cmd`), with what it printed.
    Command { command: &'a str, output: String },
    /// A call the agent replayed after a compaction, with its arguments.
    Call { tool: &'a str, arguments: Value },
    /// The result of such a call.
    Result { tool: &'a str, text: &'a str },
}

/// The wrapper tags agents put their own text in, inside a user turn.
const AGENT_TAGS: [&str; 17] = [
    // Claude Code (and OpenCode's reminders).
    "system-reminder",
    "local-command-caveat",
    "local-command-stdout",
    "local-command-stderr",
    "command-name",
    "command-message",
    "command-args",
    "bash-stdout",
    "bash-stderr",
    "user-prompt-submit-hook",
    "task-notification",
    "cross-session-message",
    // Codex.
    "environment_context",
    "user_instructions",
    "turn_aborted",
    "user_shell_command",
    // OpenCode's loaded skill.
    "skill_content",
];

/// Claude Code's `!command` echo.
const BASH_INPUT: &str = "bash-input";

/// How Claude Code replays a kept call and its result after a compaction.
const CALLED: (&str, &str) = ("Called the ", " tool with the following input: ");
const RESULT: (&str, &str) = ("Result of calling the ", " tool: ");

/// How Claude Code opens the text of a skill it loaded into a user turn: this line, then the
/// skill's own markdown.
const SKILL_HEADER: &str = "Base directory for this skill:";

/// How Claude Code marks, as a user text of its own, that the user stopped a turn.
const INTERRUPTED: &str = "[Request interrupted by user";

/// The first lines of the other texts Claude Code writes as user turns of its own: a skill
/// invoked again (its note instead of its text), a Stop hook's feedback, another session's
/// message.
const AGENT_OPENINGS: [&str; 3] = [
    "(Re-invocation of /",
    "Stop hook feedback:",
    "Another Claude session sent a message:",
];

/// The pieces of a user message's text, in order (empty user text left out).
pub fn pieces(text: &str) -> Vec<Piece<'_>> {
    if opens_rules_file(text) || is_agents_note(text) {
        return vec![Piece::Agent(text)];
    }
    // The cheap answer for most turns: no markup at all.
    if !text.contains('<') {
        return vec![Piece::User(text)];
    }
    let mut out = Vec::new();
    let mut user_from = 0;
    let mut at = 0;
    while at < text.len() {
        // An element opens a line (indentation aside).
        let element = if text.as_bytes()[at] == b'<' && starts_line(text, at) {
            element_at(text, at)
        } else {
            None
        };
        let Some((tag, end)) = element else {
            at += text[at..].chars().next().map_or(1, char::len_utf8);
            continue;
        };
        push_user(&mut out, &text[user_from..at]);
        let whole = &text[at..end];
        let inner = inner_of(whole, tag);
        match tag {
            BASH_INPUT => out.push(Piece::Command {
                command: inner.trim(),
                output: String::new(),
            }),
            "bash-stdout" | "bash-stderr" => match out.last_mut() {
                Some(Piece::Command { output, .. }) => {
                    if !inner.trim().is_empty() {
                        output.push_str(inner.trim());
                        output.push('\n');
                    }
                }
                _ => out.push(Piece::Agent(whole)),
            },
            "system-reminder" => out.push(replayed(inner).unwrap_or(Piece::Agent(whole))),
            _ => out.push(Piece::Agent(whole)),
        }
        at = end;
        // The newline that ends the element belongs to it.
        if text[at..].starts_with('\n') {
            at += 1;
        }
        user_from = at;
    }
    push_user(&mut out, &text[user_from..]);
    pointers_are_the_agents(&mut out);
    expansions_are_the_agents(&mut out);
    marks_are_the_agents(&mut out);
    out
}

/// A custom command's echo followed, in the same text, by what the agent expanded it into (a
/// text dialect writes both into one user turn): the expansion is the agent's ([`command_of`]
/// gives the command as the user typed it). A built-in command (its caveat or output in the
/// text) expands into nothing.
fn expansions_are_the_agents(pieces: &mut [Piece<'_>]) {
    if is_local_command(pieces) || command_of(pieces).is_none() {
        return;
    }
    let Some(echo) = pieces
        .iter()
        .rposition(|p| matches!(p, Piece::Agent(w) if w.starts_with("<command-")))
    else {
        return;
    };
    if let Some(Piece::User(expansion)) = pieces.get(echo + 1) {
        pieces[echo + 1] = Piece::Agent(expansion);
    }
}

/// Claude Code's marks of an interrupted turn, on lines of their own among the user's words.
fn marks_are_the_agents(pieces: &mut Vec<Piece<'_>>) {
    let is_mark = |l: &str| l.trim().starts_with(INTERRUPTED) && l.trim().ends_with(']');
    let mut at = 0;
    while at < pieces.len() {
        let Piece::User(text) = pieces[at] else {
            at += 1;
            continue;
        };
        if !text.lines().any(is_mark) {
            at += 1;
            continue;
        }
        // Runs of the user's lines stay one piece each, as written.
        let mut split = Vec::new();
        let mut run: Option<usize> = None;
        let mut offset = 0;
        for line in text.split_inclusive('\n') {
            if is_mark(line) {
                if let Some(from) = run.take() {
                    push_user(&mut split, &text[from..offset]);
                }
                split.push(Piece::Agent(line.trim()));
            } else if run.is_none() {
                run = Some(offset);
            }
            offset += line.len();
        }
        if let Some(from) = run {
            push_user(&mut split, &text[from..]);
        }
        let n = split.len();
        pieces.splice(at..at + 1, split);
        at += n;
    }
}

/// Claude Code follows a task notification with one line pointing at the task's output file
/// ("… the result: /tmp/…/tasks/b0be39e.output"): a line naming the file the notification names
/// is the notification's.
fn pointers_are_the_agents(pieces: &mut Vec<Piece<'_>>) {
    let mut at = 1;
    while at < pieces.len() {
        let (Piece::Agent(notice), Piece::User(text)) = (&pieces[at - 1], &pieces[at]) else {
            at += 1;
            continue;
        };
        let text: &str = text;
        let file = notice
            .strip_prefix("<task-notification>")
            .and_then(|n| n.split_once("<output-file>"))
            .and_then(|(_, n)| n.split_once("</output-file>"))
            .map(|(file, _)| file.trim())
            .filter(|file| !file.is_empty());
        let (line, rest) = text.split_once('\n').unwrap_or((text, ""));
        if file.is_some_and(|file| line.contains(file)) {
            pieces[at] = Piece::Agent(line);
            if !rest.trim().is_empty() {
                pieces.insert(at + 1, Piece::User(rest.trim()));
            }
        }
        at += 1;
    }
}

/// A whole text the agent wrote as a user turn: a skill it loaded (its header line, then the
/// skill), or its one-line mark of an interrupted turn.
fn is_agents_note(text: &str) -> bool {
    let text = text.trim();
    let first = text.lines().next().unwrap_or_default();
    (first.starts_with(SKILL_HEADER) && first.len() > SKILL_HEADER.len() + 1)
        || (text.starts_with(INTERRUPTED) && text.ends_with(']') && !text.contains('\n'))
        || AGENT_OPENINGS.iter().any(|o| first.starts_with(o))
        || skill_loaded_note(first)
}

/// "Skill /name was loaded earlier …", "Skill /name is already loaded above.": Claude Code's
/// note for a skill invoked again.
fn skill_loaded_note(first: &str) -> bool {
    let Some(rest) = first.strip_prefix("Skill /") else {
        return false;
    };
    let Some((name, after)) = rest.split_once(' ') else {
        return false;
    };
    !name.is_empty()
        && (after.starts_with("was loaded earlier") || after.starts_with("is already loaded"))
}

/// A user turn that is a harness's report of what a command printed, not a person's words: its
/// text is only elements (`<returncode>0</returncode>\n<output>…</output>`, mini-swe-agent's
/// observation), or it ends at a shell prompt (SWE-agent's `(Current directory: …)\nbash-$`).
/// Whether it is the task or an observation depends on its place: the caller asks only after the
/// task.
pub fn is_observation(text: &str) -> bool {
    let text = text.trim();
    let last = text.lines().last().unwrap_or_default().trim();
    let prompt = last.len() <= 40
        && last.ends_with(['$', '#'])
        && !last.contains(' ')
        && text.lines().count() > 1;
    prompt || only_elements(text)
}

/// Whether `text` is one or more elements (`<tag …>…</tag>` or `<tag/>`), each opening a line,
/// with nothing but whitespace between them.
fn only_elements(text: &str) -> bool {
    let mut rest = text.trim();
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let Some(open) = rest.strip_prefix('<') else {
            return false;
        };
        let name: String = open
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
            .collect();
        if name.is_empty() {
            return false;
        }
        let close = format!("</{name}>");
        let Some(end) = rest.find(&close) else {
            return false;
        };
        rest = rest[end + close.len()..].trim_start();
    }
    true
}

/// The slash command a user ran, as typed (`/name args`), when `pieces` record one.
pub fn command_of(pieces: &[Piece<'_>]) -> Option<String> {
    let inner = |tag: &str| {
        pieces.iter().find_map(|p| match p {
            Piece::Agent(whole) if whole.starts_with(&format!("<{tag}>")) => {
                Some(inner_of(whole, tag).trim().to_owned())
            }
            _ => None,
        })
    };
    let name = inner("command-name").filter(|n| n.starts_with('/'))?;
    let args = inner("command-args").unwrap_or_default();
    Some(format!("{name} {args}").trim().to_owned())
}

/// Whether `pieces` hold the caveat Claude Code puts before the echo of a command it ran itself
/// (`/model`, `/mcp`, `/compact`): such a command expands into no prompt.
pub fn is_local_command(pieces: &[Piece<'_>]) -> bool {
    pieces
        .iter()
        .any(|p| matches!(p, Piece::Agent(w) if w.starts_with("<local-command-")))
}

fn starts_line(text: &str, at: usize) -> bool {
    let line = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[line..at].chars().all(|c| c == ' ' || c == '\t')
}

fn push_user<'a>(out: &mut Vec<Piece<'a>>, text: &'a str) {
    if !text.trim().is_empty() {
        out.push(Piece::User(text.trim()));
    }
}

/// The agent's element that opens at `at` (a `<` at a line's start): its tag and where it ends.
fn element_at(text: &str, at: usize) -> Option<(&'static str, usize)> {
    let rest = &text[at + 1..];
    let tag = AGENT_TAGS
        .iter()
        .chain(std::iter::once(&BASH_INPUT))
        .find(|tag| {
            rest.starts_with(**tag)
                && rest[tag.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c == '>' || c.is_whitespace())
        })?;
    let close = format!("</{tag}>");
    let end = rest.find(&close)? + 1 + close.len();
    Some((tag, at + end))
}

/// What an element holds between its tags.
fn inner_of<'a>(element: &'a str, tag: &str) -> &'a str {
    let open_end = element.find('>').map_or(0, |i| i + 1);
    let close = element.len() - (tag.len() + 3);
    element.get(open_end..close).unwrap_or_default()
}

/// A reminder that replays a kept call or its result.
fn replayed(inner: &str) -> Option<Piece<'_>> {
    let body = inner.trim();
    if let Some(rest) = body.strip_prefix(CALLED.0) {
        let (tool, arguments) = rest.split_once(CALLED.1)?;
        let arguments: Value = serde_json::from_str(arguments.trim()).ok()?;
        return (is_name(tool) && arguments.is_object()).then_some(Piece::Call { tool, arguments });
    }
    let rest = body.strip_prefix(RESULT.0)?;
    let (tool, text) = rest.split_once(RESULT.1)?;
    is_name(tool).then_some(Piece::Result { tool, text })
}

fn is_name(tool: &str) -> bool {
    !tool.is_empty()
        && tool.len() <= 64
        && tool
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
}

/// A whole message that is a project rules file an agent pasted (Codex's "# AGENTS.md
/// instructions for …" followed by its `<INSTRUCTIONS>`).
fn opens_rules_file(text: &str) -> bool {
    let first = text.trim_start().lines().next().unwrap_or_default();
    first.starts_with("# ")
        && first.to_ascii_lowercase().contains(".md instructions for")
        && text.contains("<INSTRUCTIONS>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reminders_and_command_echoes_are_the_agents_and_the_prompt_is_the_users() {
        let text = "<system-reminder>\nAs you answer the user's questions…\n</system-reminder>\n<local-command-caveat>Caveat.</local-command-caveat>\n<command-name>/compact</command-name>\n            <command-message>compact</command-message>\n<local-command-stdout>Compacted (ctrl+o to see full summary)</local-command-stdout>\nThanks. Anything else?";
        let pieces = pieces(text);
        assert_eq!(pieces.last(), Some(&Piece::User("Thanks. Anything else?")));
        let user: Vec<_> = pieces
            .iter()
            .filter(|p| matches!(p, Piece::User(_)))
            .collect();
        assert_eq!(user.len(), 1, "an indented element is one too: {pieces:?}");
        assert!(matches!(pieces[0], Piece::Agent(a) if a.starts_with("<system-reminder>")));
    }

    #[test]
    fn a_task_notification_and_its_pointer_are_the_agents() {
        let text = "<task-notification>\n<task-id>b0be39e</task-id>\n<output-file>/tmp/c/tasks/b0be39e.output</output-file>\n<status>completed</status>\n<summary>Background command \"Force recompile\" completed (exit code 0)</summary>\n</task-notification>\nRead the output file to retrieve the result: /tmp/c/tasks/b0be39e.output";
        assert!(pieces(text).iter().all(|p| matches!(p, Piece::Agent(_))));
        // What the user writes after a notification stays theirs.
        let typed = format!("{text}\nnow push it");
        assert_eq!(pieces(&typed).last(), Some(&Piece::User("now push it")));
    }

    #[test]
    fn a_loaded_skill_and_an_interruption_mark_are_the_agents() {
        let skill = "Base directory for this skill: /home/u/.claude/skills/hex-docs\n\n# Hex Documentation Search\n\nPrompt user before fetching external packages.";
        assert_eq!(pieces(skill), vec![Piece::Agent(skill)]);
        let mark = "[Request interrupted by user for tool use]";
        assert_eq!(pieces(mark), vec![Piece::Agent(mark)]);
        for note in [
            "Skill /hex-docs-search was loaded earlier in this conversation; its instructions still apply.",
            "(Re-invocation of /hex-docs-search — the skill's text is above.)",
            "Stop hook feedback:\n[bd prime]: run the tests before stopping",
        ] {
            assert_eq!(pieces(note), vec![Piece::Agent(note)], "{note}");
        }
        let asked = "Skill /hex-docs-search: can you load it again?";
        assert_eq!(pieces(asked), vec![Piece::User(asked)]);
        let typed = "[Request interrupted by user] is what I see; why?\nit stops";
        assert_eq!(pieces(typed), vec![Piece::User(typed)]);
    }

    #[test]
    fn a_harnesss_observations_are_told_from_a_persons_words() {
        for observation in [
            "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n</output>",
            "<returncode>0</returncode>\n<warning>\nThe output was too long.\n</warning>",
            "AUTHORS.rst\nsetup.py\n\n(Open file: n/a)\n(Current directory: /repo)\nbash-$",
        ] {
            assert!(is_observation(observation), "{observation}");
        }
        for words in [
            "fix the <b>bold</b> rendering",
            "<pr_description>\nFix it\n</pr_description>\nand then run the tests",
            "costs $",
            "what does `ls $` print?",
        ] {
            assert!(!is_observation(words), "{words}");
        }
    }

    #[test]
    fn a_tag_the_user_types_mid_line_is_the_users() {
        let text = "Why does <system-reminder> show up in the logs?";
        assert_eq!(pieces(text), vec![Piece::User(text)]);
        let unclosed = "<system-reminder> is what I see at the top";
        assert_eq!(pieces(unclosed), vec![Piece::User(unclosed)]);
    }

    #[test]
    fn replayed_calls_and_shell_commands_keep_what_they_did() {
        let text = "<system-reminder>\nCalled the Write tool with the following input: {\"file_path\":\"/w/test_calc.py\",\"content\":\"x\"}\n</system-reminder>\n<system-reminder>\nResult of calling the Write tool: File created.\n</system-reminder>\n<bash-input>cargo test</bash-input>\n<bash-stderr>error[E0308]: mismatched types</bash-stderr>";
        let pieces = pieces(text);
        assert_eq!(
            pieces[0],
            Piece::Call {
                tool: "Write",
                arguments: json!({"file_path": "/w/test_calc.py", "content": "x"})
            }
        );
        assert_eq!(
            pieces[1],
            Piece::Result {
                tool: "Write",
                text: "File created."
            }
        );
        assert_eq!(
            pieces[2],
            Piece::Command {
                command: "cargo test",
                output: "error[E0308]: mismatched types\n".into()
            }
        );
    }

    #[test]
    fn codexs_environment_and_agents_md_are_the_agents() {
        let environment = "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>";
        assert_eq!(pieces(environment), vec![Piece::Agent(environment)]);
        let rules = "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\n- Never push to main.\n</INSTRUCTIONS>";
        assert_eq!(pieces(rules), vec![Piece::Agent(rules)]);
    }
}
