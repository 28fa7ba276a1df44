//! The word lists the extractive summarizer recognizes sentences and error lines by (standing
//! rules: [`super::standing`]).

/// An assistant sentence holding one of these states a decision.
pub const DECISION_WORDS: [&str; 10] = [
    "decided",
    "i'll use",
    "i will use",
    "let's use",
    "we'll use",
    "chose",
    "going with",
    "switch to",
    "instead of",
    "the approach",
];

/// An assistant sentence starting with one of these reports finished work.
pub const COMPLETION_STARTS: [&str; 10] = [
    "i've ",
    "i have ",
    "fixed ",
    "added ",
    "implemented ",
    "updated ",
    "created ",
    "removed ",
    "done",
    "all tests pass",
];

/// Whether an assistant sentence (lower-cased) reports finished work: it starts with one of
/// [`COMPLETION_STARTS`], and one in the first person says what was done to something ("i've
/// fixed", "i have written"), not what was seen or understood ("i have a clear picture", "i've
/// looked at", "i have been").
pub fn reports_work(lower: &str) -> bool {
    let Some(start) = COMPLETION_STARTS.iter().find(|w| lower.starts_with(**w)) else {
        return false;
    };
    if !start.starts_with('i') {
        return true;
    }
    let next = lower[start.len()..]
        .split(|c: char| !c.is_alphabetic())
        .find(|w| !w.is_empty())
        .unwrap_or_default();
    // A participle of doing: regular ones end in "ed"; the irregular ones of editing code.
    const DONE: [&str; 9] = [
        "made",
        "written",
        "done",
        "run",
        "set",
        "built",
        "put",
        "rewritten",
        "split",
    ];
    // Participles of looking and learning: narration, not work.
    const SEEN: [&str; 14] = [
        "looked",
        "noticed",
        "noted",
        "examined",
        "explored",
        "reviewed",
        "analyzed",
        "analysed",
        "investigated",
        "checked",
        "identified",
        "learned",
        "gathered",
        "inspected",
    ];
    (next.ends_with("ed") || DONE.contains(&next)) && !SEEN.contains(&next)
}

/// Case-sensitive marks of an error message in command output.
const ERROR_MARKS: [&str; 9] = [
    "Error:",
    "error:",
    "error[",
    "ERROR",
    "Exception",
    " FAILED",
    "FAIL ",
    "panicked at",
    "Traceback",
];

/// Lower-case phrases of error messages.
const ERROR_PHRASES: [&str; 8] = [
    "exited with code",
    "no such file or directory",
    "command not found",
    "permission denied",
    "cannot find",
    "is not defined",
    "failed to",
    "segmentation fault",
];

/// Code that mentions errors without being one.
const CODE_MARKS: [&str; 8] = [
    "console.error",
    "catch (",
    "throw new",
    "=>",
    "error(",
    "Error(",
    "\": \"",
    "errors:",
];

/// A line of a file shown with its line number (`1522:    except X as error:`, `cat -n`'s
/// `  12\tcode`): code, whatever it names.
fn is_listing(line: &str) -> bool {
    let line = line.trim_start();
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0
        && matches!(
            line.as_bytes().get(digits..digits + 2),
            Some([b':', b' ' | b'\t']) | Some([b'\t', _])
        )
}

/// A line a program printed at warning level: not an error, whatever it mentions.
fn is_warning(line: &str) -> bool {
    let lower = line.trim_start().to_ascii_lowercase();
    // Its level opens it, or follows the timestamp a logger puts first.
    let head = &lower[..lower.floor_char_boundary(40)];
    lower.starts_with("warning") || lower.starts_with("warn ") || head.contains("[warn")
}

/// Whether a line of command output reads as an error message rather than code or prose.
pub fn is_error_line(line: &str) -> bool {
    if line.len() < 8
        || line.starts_with("//")
        || line.starts_with('*')
        || line.starts_with("[... ")
        || is_listing(line)
        || is_warning(line)
    {
        return false;
    }
    if CODE_MARKS.iter().any(|m| line.contains(m))
        && !line.starts_with("Error")
        && !line.starts_with("error")
    {
        return false;
    }
    let lower = line.to_lowercase();
    lower.starts_with("error")
        || lower.starts_with("fatal")
        || lower.starts_with("npm err")
        || ERROR_MARKS.iter().any(|m| line.contains(m))
        || ERROR_PHRASES.iter().any(|p| lower.contains(p))
}

#[cfg(test)]
mod tests {
    use super::{is_error_line, reports_work};

    #[test]
    fn finished_work_is_told_from_narration() {
        for done in [
            "i've fixed the off-by-one in src/parse.rs",
            "i have written the migration",
            "fixed the flaky test",
            "all tests pass now",
        ] {
            assert!(reports_work(done), "{done}");
        }
        for narration in [
            "i have a clear picture of the module now",
            "i have been missed an import of binascii",
            "i've looked at the parser and it reads fine",
            "i have enough context",
            "the tests are slow",
        ] {
            assert!(!reports_work(narration), "{narration}");
        }
    }

    #[test]
    fn listings_and_warnings_are_no_errors() {
        for line in [
            "1522:            except FieldInstanceResolutionError as error:",
            "  12\tthrow ValueError(\"bad\")",
            "Warning: _curses.error: setupterm: could not find terminfo database",
            "17:05:02.790 [warning] TailWorker: failed to start adapter for x: :file_not_found",
        ] {
            assert!(!is_error_line(line), "{line}");
        }
        assert!(is_error_line(
            "src/main.rs:42: error: expected `;`, found `}`"
        ));
    }

    #[test]
    fn error_lines_are_told_from_code() {
        for error in [
            "error[E0308]: mismatched types",
            "Error: Cannot find module 'x'",
            "npm ERR! code E404",
            "thread 'main' panicked at src/main.rs:3:5",
            "Command exited with code 2",
            "bash: foo: command not found",
            "test parse::tests::header ... FAILED",
        ] {
            assert!(is_error_line(error), "{error}");
        }
        for code in [
            "console.error(`failed: ${e}`);",
            "} catch (error) {",
            "throw new Error(\"bad\");",
            "\"toolErrorBg\": \"#3c2828\"",
            "// Ignore errors while editing",
            "the error handling is fine",
        ] {
            assert!(!is_error_line(code), "{code}");
        }
    }
}
