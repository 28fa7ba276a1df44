//! The layers docs/architecture.md draws are the code's: every `crate::…` path in `src/` (tests
//! aside) names a module on a lower line of its ```layers block than the module it is written
//! in, every module of `src/lib.rs` is on a line, and the HTTP layer reaches storage and the
//! pipeline only through the application layer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The top-level modules by line of the layers block (0 is the top).
fn layers(root: &Path) -> HashMap<String, usize> {
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let block = doc
        .split("```layers\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/architecture.md has a ```layers block");
    let mut at = HashMap::new();
    for (line, text) in block.lines().enumerate() {
        for module in text.split_whitespace() {
            assert!(
                at.insert(module.to_owned(), line).is_none(),
                "{module} is twice in the layers block"
            );
        }
    }
    at
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            // A folder of tests, or assets.
            if path.file_name().is_some_and(|n| n == "tests") {
                continue;
            }
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a source file that is not a test: a test module (`#[cfg(test)] mod …` and
/// everything after it, where tests live in this crate) and comments left out.
fn code(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut previous = "";
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if previous == "#[cfg(test)]" && trimmed.starts_with("mod ") && !trimmed.ends_with(';') {
            break;
        }
        if trimmed.starts_with("#[cfg(test)]") {
            previous = "#[cfg(test)]";
            continue;
        }
        previous = "";
        if trimmed.starts_with("//") {
            continue;
        }
        lines.push((n + 1, line));
    }
    lines
}

/// `crate::name` paths on a line of code.
fn crate_paths(line: &str) -> impl Iterator<Item = &str> {
    line.match_indices("crate::").filter_map(move |(at, _)| {
        let rest = &line[at + "crate::".len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        // `$crate::` in a macro is the same path.
        (end > 0).then(|| &rest[..end])
    })
}

/// The top-level module a source file belongs to (`src/http/chat.rs` → `http`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_owned())
}

fn test_only(file: &Path) -> bool {
    file.file_name()
        .is_some_and(|n| n == "tests.rs" || n == "proptests.rs")
}

#[test]
fn every_import_goes_down_the_layers_of_docs_architecture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let layers = layers(root);
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';')
        })
        .collect();
    assert!(modules.len() >= 10, "only {modules:?} read from lib.rs");
    for module in &modules {
        assert!(
            layers.contains_key(*module),
            "src/{module} is on no line of docs/architecture.md's layers block"
        );
    }
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut upward = Vec::new();
    let mut checked = 0;
    for file in files.iter().filter(|f| !test_only(f)) {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let own = layers[&module];
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in code(&text) {
            for path in crate_paths(line) {
                let Some(&theirs) = layers.get(path) else {
                    continue;
                };
                checked += 1;
                if path != module && theirs <= own {
                    upward.push(format!(
                        "{}:{n}: {module} uses crate::{path}",
                        file.strip_prefix(root).unwrap().display(),
                    ));
                }
            }
        }
    }
    assert!(checked > 200, "only {checked} crate paths read");
    assert!(
        upward.is_empty(),
        "imports that do not go down the layers:\n{}",
        upward.join("\n")
    );
}

#[test]
fn handlers_reach_storage_and_the_pipeline_only_through_the_application_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src/http"), &mut files);
    sources(&root.join("src/cli"), &mut files);
    let mut reached = Vec::new();
    for file in files.iter().filter(|f| !test_only(f)) {
        let text = std::fs::read_to_string(file).unwrap();
        for (_, line) in code(&text) {
            if line.contains("app.store") || line.contains("app.pipeline") {
                reached.push(format!(
                    "{}: {}",
                    file.strip_prefix(root).unwrap().display(),
                    line.trim()
                ));
            }
        }
    }
    assert!(files.len() > 20, "only {} files read", files.len());
    assert!(
        reached.is_empty(),
        "handlers past the application layer:\n{}",
        reached.join("\n")
    );
}

/// The reader of the layers test itself: a path in a comment or a test module is not an import,
/// and an upward one in code is found.
#[test]
fn the_reader_sees_code_and_not_comments_or_tests() {
    let text = "use crate::store::Store;\n// crate::http is only named\n\
                fn f() { crate::cpu::x(); }\n#[cfg(test)]\nmod tests {\n use crate::http;\n}\n";
    let paths: Vec<&str> = code(text)
        .into_iter()
        .flat_map(|(_, l)| crate_paths(l))
        .collect();
    assert_eq!(paths, ["store", "cpu"]);
    assert_eq!(
        crate_paths("$crate::store::X").collect::<Vec<_>>(),
        ["store"]
    );
}

/// docs/architecture.md lists the pipeline's stages as `pipeline::STAGES` has them, in order,
/// and each lives where it says.
#[test]
fn the_documented_stages_are_the_pipelines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let listed: Vec<(String, String)> = doc
        .lines()
        .filter_map(|line| {
            let (number, rest) = line.split_once(". `")?;
            number.parse::<usize>().ok()?;
            let (name, rest) = rest.split_once("` — `")?;
            let (module, _) = rest.split_once('`')?;
            Some((name.to_owned(), module.to_owned()))
        })
        .collect();
    let stages: Vec<(String, String)> = compactd::pipeline::STAGES
        .iter()
        .map(|s| (s.name.to_owned(), s.module.to_owned()))
        .collect();
    assert_eq!(listed, stages, "docs/architecture.md's stages");
    for (name, module) in &stages {
        assert!(
            root.join("src").join(module).is_file(),
            "stage {name}: no src/{module}"
        );
    }
}

/// The worked examples of docs/architecture.md are the code: each ```rust block, under the
/// `// path` line that names its file, is a piece of that file — its lines, in order, one after
/// another — so the example is code the build compiles, not a sketch of it.
#[test]
fn the_architectures_examples_are_in_the_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut checked = 0;
    for block in doc.split("```rust\n").skip(1) {
        let block = block.split("```").next().unwrap();
        let mut lines = block.lines();
        let path = lines
            .next()
            .and_then(|l| l.strip_prefix("// "))
            .expect("an example opens with the `// path` of its file");
        let path = path.split(',').next().unwrap();
        let file = std::fs::read_to_string(root.join(path)).unwrap();
        let file: Vec<&str> = file.lines().map(str::trim_end).collect();
        let example: Vec<&str> = lines.map(str::trim_end).collect();
        assert!(
            file.windows(example.len()).any(|w| w == example.as_slice()),
            "not a piece of {path}:\n{}",
            example.join("\n")
        );
        checked += 1;
    }
    assert!(checked >= 4, "only {checked} examples checked");
}
