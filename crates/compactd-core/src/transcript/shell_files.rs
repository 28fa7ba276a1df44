//! The files a shell command changes: agents edit through their shell as often as through their
//! edit tools — Codex runs `apply_patch <<'PATCH'` in `shell`, others `sed -i`, `cat > f <<EOF`,
//! `tee`, `mv`, `rm`. Read by the command's structure (its words, redirections and here-documents,
//! quoted as the shell quotes them), never by what a file is called. Conservative: a path the
//! command computes (`$VAR`, a glob) or a device is not a file it names.

use super::files::{FileOp, patch_files};

/// The files `script` changes, in the order it names them.
pub(super) fn shell_file_ops(script: &str) -> Vec<(FileOp, String)> {
    let mut out = Vec::new();
    let mut commands = String::new();
    let mut lines = script.lines();
    while let Some(line) = lines.next() {
        commands.push_str(line);
        commands.push('\n');
        let Some(word) = heredoc_word(line) else {
            continue;
        };
        // The here-document's body is input, not commands; a patch in it is a patch.
        let mut body = String::new();
        for next in lines.by_ref() {
            if next.trim() == word {
                break;
            }
            body.push_str(next);
            body.push('\n');
        }
        if line.contains("apply_patch") || body.contains("*** Begin Patch") {
            out.extend(patch_files(&body));
        }
    }
    // Relative paths are the directory's a `cd` before them went to.
    let mut cwd: Option<String> = None;
    for command in split_commands(&commands) {
        if let [cd, dir] = command.as_slice()
            && cd == "cd"
            && named(dir.trim_end_matches('/')).is_some()
        {
            cwd = Some(within(cwd.as_deref(), dir));
            continue;
        }
        out.extend(
            command_ops(&command)
                .into_iter()
                .map(|(op, path)| (op, within(cwd.as_deref(), &path))),
        );
    }
    out
}

/// `path` as seen from `dir` (itself when absolute, or when there is no directory).
fn within(dir: Option<&str>, path: &str) -> String {
    match dir {
        Some(dir) if !path.starts_with('/') && !path.starts_with('~') => {
            let path = path.strip_prefix("./").unwrap_or(path);
            format!("{}/{path}", dir.trim_end_matches('/'))
        }
        _ => path.to_owned(),
    }
}

/// The delimiter of a here-document the line opens (`<<EOF`, `<<-'EOF'`, `<< "PATCH"`).
fn heredoc_word(line: &str) -> Option<String> {
    let at = line.find("<<")?;
    let rest = line[at + 2..].trim_start_matches('-').trim_start();
    if rest.starts_with('<') {
        return None; // a here-string, `<<<`
    }
    let word: String = rest
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// The simple commands of a script, each as its words (quotes removed), split where the shell
/// splits them: `;`, `&&`, `||`, `|`, `&` and newlines outside quotes.
fn split_commands(script: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut chars = script.chars().peekable();
    let end_word = |word: &mut String, words: &mut Vec<String>, quoted: &mut bool| {
        if !word.is_empty() || *quoted {
            words.push(std::mem::take(word));
        }
        *quoted = false;
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                quoted = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        c => word.push(c),
                    }
                }
            }
            '\\' => word.extend(chars.next().filter(|c| *c != '\n')),
            // A comment runs to the end of its line.
            '#' if word.is_empty() && !quoted => {
                while chars.peek().is_some_and(|c| *c != '\n') {
                    chars.next();
                }
            }
            ' ' | '\t' => end_word(&mut word, &mut words, &mut quoted),
            ';' | '\n' | '|' | '&' => {
                // `&>`, `>&2`, `2>&1` are redirections, not separators.
                if c == '&' && (word.ends_with('>') || chars.peek() == Some(&'>')) {
                    word.push(c);
                    continue;
                }
                end_word(&mut word, &mut words, &mut quoted);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            '>' => {
                // A redirection is a word of its own: `cmd>file` reads as `cmd > file`.
                let fd_prefix = word.chars().all(|c| c.is_ascii_digit() || c == '&');
                if !fd_prefix {
                    end_word(&mut word, &mut words, &mut quoted);
                }
                word.push('>');
                if chars.peek() == Some(&'>') {
                    word.push('>');
                    chars.next();
                }
                if chars.peek() == Some(&'&') {
                    word.push('&');
                    chars.next();
                    continue;
                }
                end_word(&mut word, &mut words, &mut quoted);
            }
            c => word.push(c),
        }
    }
    end_word(&mut word, &mut words, &mut quoted);
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

/// A file a command names itself: not computed (`$`, globs), not a device, not a directory
/// (`.`, `..`, a path ending in `/`).
fn named(path: &str) -> Option<String> {
    let plain = !path.is_empty()
        && !matches!(path, "." | "..")
        && !path.ends_with('/')
        && !path.starts_with('-')
        && !path.starts_with("/dev/")
        && !path.contains(['$', '*', '?', '[', '`', '(', ')', '<', '>', '{']);
    plain.then(|| path.to_owned())
}

/// What one simple command changes: its output redirections and, by its name, its operands.
fn command_ops(words: &[String]) -> Vec<(FileOp, String)> {
    let mut out = Vec::new();
    let mut rest: Vec<&str> = Vec::new();
    let mut iter = words.iter().map(String::as_str);
    while let Some(word) = iter.next() {
        match word {
            ">" | ">>" | "1>" | "1>>" | "&>" | "&>>" => {
                out.extend(iter.next().and_then(named).map(|p| (FileOp::Write, p)))
            }
            w if w.ends_with('>') || w.ends_with(">&") || w.ends_with(">>") => {
                // Another descriptor's redirection (`2>`, `>&`): its target is not a file written
                // by the command's work.
                iter.next();
            }
            w if w.starts_with(">&") || w.contains(">&") => {}
            w => rest.push(w),
        }
    }
    // Assignments and wrappers before the command itself.
    let mut at = 0;
    while at < rest.len()
        && (rest[at].contains('=') && !rest[at].starts_with('-')
            || [
                "sudo", "env", "command", "time", "nohup", "do", "then", "else", "elif", "!", "{",
            ]
            .contains(&rest[at]))
    {
        at += 1;
    }
    let rest = &rest[at..];
    let Some((&name, args)) = rest.split_first() else {
        return out;
    };
    let name = name.rsplit('/').next().unwrap_or(name);
    let operands: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !a.starts_with('-'))
        .collect();
    let all = |op: FileOp, paths: &[&str]| -> Vec<(FileOp, String)> {
        paths
            .iter()
            .filter_map(|p| named(p).map(|p| (op, p)))
            .collect()
    };
    match name {
        "sed" | "perl" | "ruby" => out.extend(all(FileOp::Edit, &in_place_files(name, args))),
        "tee" | "touch" => out.extend(all(FileOp::Write, &operands)),
        "rm" | "unlink" => out.extend(all(FileOp::Edit, &operands)),
        "cp" | "install" if operands.len() >= 2 => {
            out.extend(all(FileOp::Write, &operands[operands.len() - 1..]));
        }
        "mv" if operands.len() >= 2 => {
            out.extend(all(FileOp::Edit, &operands[..operands.len() - 1]));
            out.extend(all(FileOp::Write, &operands[operands.len() - 1..]));
        }
        "git" => match operands.first().copied() {
            Some("mv") if operands.len() >= 3 => {
                out.extend(all(FileOp::Edit, &operands[1..operands.len() - 1]));
                out.extend(all(FileOp::Write, &operands[operands.len() - 1..]));
            }
            Some("rm") => out.extend(all(FileOp::Edit, &operands[1..])),
            _ => {}
        },
        "apply_patch" | "applypatch" => {
            for arg in args {
                out.extend(patch_files(arg));
            }
        }
        _ => {}
    }
    out
}

/// The files `sed -i`, `perl -pi` or `ruby -pi` edits in place (none without the flag): its
/// operands but the script, which is the first unless an option (`-e`, `-f`) gave it.
fn in_place_files<'a>(name: &str, args: &[&'a str]) -> Vec<&'a str> {
    let short = |a: &str| a.starts_with('-') && !a.starts_with("--");
    let in_place = args.iter().any(|a| {
        *a == "--in-place" || (short(a) && a[1..].starts_with(['i', 'p', 'n']) && a.contains('i'))
    });
    if !in_place {
        return Vec::new();
    }
    let mut operands = Vec::new();
    let mut given = false;
    let mut iter = args.iter().peekable();
    while let Some(arg) = iter.next() {
        // BSD sed's `-i ''`: the backup suffix, empty, is the next word.
        if *arg == "-i" && name == "sed" && iter.peek().is_some_and(|next| next.is_empty()) {
            iter.next();
            continue;
        }
        let takes_script = matches!(*arg, "-e" | "-f" | "--expression" | "--file")
            || (name != "sed" && short(arg) && arg.ends_with('e'));
        if takes_script {
            given = true;
            iter.next();
        } else if !arg.starts_with('-') {
            operands.push(*arg);
        }
    }
    if !given && !operands.is_empty() {
        operands.remove(0);
    }
    operands
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changed(script: &str) -> Vec<String> {
        shell_file_ops(script)
            .into_iter()
            .filter(|(op, _)| op.modifies())
            .map(|(_, p)| p)
            .collect()
    }

    #[test]
    fn a_patch_through_the_shell_is_its_files() {
        let script = "apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: src/parser.rs\n@@\n-a > b\n+a >= b\n*** Add File: tests/neg.rs\n+fn t() {}\n*** End Patch\nPATCH";
        assert_eq!(changed(script), ["src/parser.rs", "tests/neg.rs"]);
        let inline =
            "apply_patch '*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** End Patch'";
        assert_eq!(changed(inline), ["a.py"]);
    }

    #[test]
    fn redirections_and_in_place_edits_change_files() {
        assert_eq!(changed("cat > notes.md <<EOF\n# a > b\nEOF"), ["notes.md"]);
        assert_eq!(
            changed("echo 'x' >> log.txt && cargo test 2>&1 | tee out.txt"),
            ["log.txt", "out.txt"]
        );
        assert_eq!(
            changed("sed -i 's/a/b/' src/lib.rs src/main.rs"),
            ["src/lib.rs", "src/main.rs"]
        );
        assert_eq!(changed("sed -i.bak -e 's/a/b/' conf.ini"), ["conf.ini"]);
        assert_eq!(changed("perl -pi -e 's/a/b/' x.pl"), ["x.pl"]);
        assert_eq!(changed("perl -i -pe 's/a/b/' y.pl"), ["y.pl"]);
        assert_eq!(changed("sed -i -e s/a/b/ -e s/c/d/ f.txt"), ["f.txt"]);
        assert_eq!(changed("sed -i '' 's/a/b/g' mac.ts"), ["mac.ts"]);
        assert_eq!(
            changed("mv a.ts src/ && cp b.ts . && cp c.ts d.ts"),
            ["a.ts", "d.ts"]
        );
        assert_eq!(
            changed("mv old.rs new.rs; rm -f junk.txt"),
            ["old.rs", "new.rs", "junk.txt"]
        );
        assert_eq!(changed("git mv a.rs b.rs"), ["a.rs", "b.rs"]);
        assert_eq!(
            changed("for f in a b; do rm x.txt; done # > not.txt"),
            ["x.txt"]
        );
        assert_eq!(
            changed("cd /w/src && mv main-new.ts main.ts\ncd core && rm ./old.ts /tmp/x.log"),
            [
                "/w/src/main-new.ts",
                "/w/src/main.ts",
                "/w/src/core/old.ts",
                "/tmp/x.log"
            ]
        );
        assert_eq!(changed("printf '%s' \"$x\">out.json"), ["out.json"]);
    }

    #[test]
    fn reading_and_what_the_command_computes_change_nothing() {
        for script in [
            "cat src/lib.rs",
            "grep -rn 'a > b' src/",
            "cargo test 2>/dev/null",
            "ls > /dev/null 2>&1",
            "echo hi > $OUT",
            "sed 's/a/b/' file.txt",
            "python - <<EOF\nopen('x.txt', 'w').write('>')\nEOF",
            "cmd 2> err.log",
            "cd /w\n# config -> utils/config\nfor f in *.ts; do sed -i '' 's|a|b|g' \"$f\"; done",
        ] {
            assert!(
                changed(script).is_empty(),
                "{script}: {:?}",
                changed(script)
            );
        }
    }
}
