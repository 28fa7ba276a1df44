//! Redaction false positives, not part of the service: runs the redaction rules over every text
//! file under the given directories (ordinary code: no real secrets expected) and prints how
//! many findings each rule made, the bytes scanned and the rate. With `-v`, each finding with
//! its file and the line around it (the middle of the secret masked). BENCHMARKS.md records it.
//!
//!   cargo run --release --example redaction_corpus -- [-v] DIR...

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use compactd_core::redact::Redactor;

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            let name = entry.file_name();
            if name != ".git" && name != "target" && name != "node_modules" {
                files(&path, out);
            }
        } else if kind.is_file() {
            out.push(path);
        }
    }
}

fn masked(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() <= 8 {
        return "*".repeat(chars.len());
    }
    let head: String = chars[..4].iter().collect();
    let tail: String = chars[chars.len() - 2..].iter().collect();
    format!("{head}…{tail}")
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let verbose = args.first().is_some_and(|a| a == "-v");
    if verbose {
        args.remove(0);
    }
    let redactor = Redactor::new(None).expect("the built-in rules compile");
    let mut paths = Vec::new();
    for dir in &args {
        files(Path::new(dir), &mut paths);
    }
    paths.sort();
    let (mut scanned, mut texts) = (0usize, 0usize);
    let mut by_rule: BTreeMap<String, usize> = BTreeMap::new();
    let mut spent = Duration::ZERO;
    for path in &paths {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        if bytes.len() > 4 << 20 {
            continue;
        }
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        let started = Instant::now();
        let found = redactor.find(&text);
        spent += started.elapsed();
        scanned += text.len();
        texts += 1;
        for finding in found {
            *by_rule.entry(finding.rule.clone()).or_default() += 1;
            if verbose {
                let line_start = text[..finding.start].rfind('\n').map_or(0, |i| i + 1);
                let line_end = text[finding.end..]
                    .find('\n')
                    .map_or(text.len(), |i| finding.end + i);
                // At most 60 bytes before and 40 after, cut at character boundaries.
                let mut from = line_start.max(finding.start.saturating_sub(60));
                while !text.is_char_boundary(from) {
                    from += 1;
                }
                let mut to = line_end.min(finding.end + 40);
                while !text.is_char_boundary(to) {
                    to -= 1;
                }
                let before = &text[from..finding.start];
                let after = &text[finding.end..to];
                println!(
                    "{}: {} {}[{}]{}",
                    path.display(),
                    finding.rule,
                    before.trim_start(),
                    masked(&text[finding.start..finding.end]),
                    after
                );
            }
        }
    }
    let total: usize = by_rule.values().sum();
    println!(
        "{texts} text files, {:.1} MB: {total} findings in {:.2} s ({:.0} MB/s)",
        scanned as f64 / 1e6,
        spent.as_secs_f64(),
        scanned as f64 / 1e6 / spent.as_secs_f64().max(1e-9)
    );
    for (rule, n) in &by_rule {
        println!("  {rule}: {n}");
    }
}
