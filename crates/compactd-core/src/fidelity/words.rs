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

/// Whether a line of command output reads as an error message rather than code or prose.
pub fn is_error_line(line: &str) -> bool {
    if line.len() < 8
        || line.starts_with("//")
        || line.starts_with('*')
        || line.starts_with("[... ")
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
    use super::is_error_line;

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
