//! The documentation keeps up with the code: every setting is in docs/configuration.md's table
//! and in .env.example, with the default the code has; the Docker commands of docs/operations.md
//! are what the Docker test runs; README.md is a front page whose links all lead somewhere in the
//! repository.

use clap::CommandFactory;
use compactd::cli::Cli;

#[test]
fn every_setting_is_documented_with_its_default() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/docs/configuration.md")).unwrap();
    let example = std::fs::read_to_string(format!("{root}/.env.example")).unwrap();
    let command = Cli::command();
    let serve = command.find_subcommand("serve").unwrap();
    let mut checked = 0;
    for arg in serve.get_arguments() {
        let Some(env) = arg.get_env() else { continue };
        let env = env.to_str().unwrap();
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{env}` |")))
            .unwrap_or_else(|| panic!("{env} has no row in docs/configuration.md's table"));
        assert!(
            example.contains(&format!("{env}=")),
            "{env} is not in .env.example"
        );
        for default in arg.get_default_values() {
            let default = default.to_str().unwrap();
            assert!(
                row.contains(&format!("`{default}`")),
                "docs/configuration.md gives another default for {env}: {row}"
            );
            assert!(
                example.contains(&format!("{env}={default}")),
                ".env.example gives another default for {env}"
            );
        }
        checked += 1;
    }
    assert!(checked >= 25, "only {checked} settings found");
    // And the tables name no setting that is not one: a removed one is in its own table.
    let settings: Vec<String> = (serve.get_arguments())
        .filter_map(|arg| arg.get_env().map(|env| env.to_string_lossy().into_owned()))
        .collect();
    let removed = readme.split("**Removed settings.**").nth(1).unwrap();
    for row in readme
        .split("**Removed settings.**")
        .next()
        .unwrap()
        .lines()
    {
        let Some(name) = row.strip_prefix("| `COMPACTD_") else {
            continue;
        };
        let name = format!("COMPACTD_{}", name.split('`').next().unwrap());
        assert!(
            settings.contains(&name),
            "{name} is documented but not read"
        );
    }
    for (name, _) in compactd::config::REMOVED {
        assert!(!settings.contains(&name.to_string()), "{name} is read");
        assert!(removed.contains(&format!("`{name}`")), "{name}: no row");
        assert!(!example.contains(name), "{name} is in .env.example");
    }
}

/// A deployment that still sets a removed setting is told at start, naming it and what took its
/// place (not silently ignored).
#[test]
fn a_removed_setting_set_is_named_at_start() {
    let served = crate::support::binary::Served::start(&[
        ("COMPACTD_BACKOFF_MS", "100"),
        ("COMPACTD_LOG", "warn"),
    ]);
    let logged = served.kill_9();
    let warning = logged
        .lines()
        .find(|line| line.contains("COMPACTD_BACKOFF_MS"))
        .unwrap_or_else(|| panic!("no warning: {logged}"));
    assert!(warning.contains("removed setting"), "{warning}");
    assert!(warning.contains("500 ms"), "{warning}");
}

/// The Docker section (docs/operations.md) is exactly what `scripts/docker-test.sh` runs: every
/// command of its code blocks (comments aside) is a line of the script.
#[test]
fn the_docker_section_is_what_the_docker_test_runs() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/docs/operations.md")).unwrap();
    let script = std::fs::read_to_string(format!("{root}/scripts/docker-test.sh")).unwrap();
    // The test builds in another profile (`--build-arg PROFILE=…`); the command is README's.
    let script: String = script
        .lines()
        .map(|line| match line.split_once(" --build-arg ") {
            Some((head, rest)) => {
                format!("{head} {}\n", rest.split_once(' ').map_or("", |(_, r)| r))
            }
            None => format!("{line}\n"),
        })
        .collect();
    let section = readme
        .split("## Running with Docker\n")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    let mut commands = 0;
    for block in section.split("```sh\n").skip(1) {
        for line in block.split("```").next().unwrap().lines() {
            let command = line.split(" #").next().unwrap().trim();
            if command.is_empty() {
                continue;
            }
            assert!(
                script.lines().any(|l| l.contains(command)),
                "docs/operations.md runs `{command}`, scripts/docker-test.sh does not"
            );
            commands += 1;
        }
    }
    assert!(commands >= 9, "{commands}");
}

/// README.md is a front page (about 250 lines) and every relative link of it and of docs/ leads
/// to a file of the repository, and to a heading of that file where it names one; nothing links
/// outside the repository.
#[test]
fn readme_is_a_front_page_and_every_link_leads_somewhere() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 280, "README.md has {lines} lines");
    let mut files = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let anchor = |heading: &str| -> String {
        heading
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect()
    };
    let anchors_of = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| {
                l.trim_start_matches('#')
                    .strip_prefix(' ')
                    .filter(|_| l.starts_with('#'))
            })
            .map(anchor)
            .collect()
    };
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(
            !text.contains("../shared/"),
            "{} points outside the repository",
            file.display()
        );
        for (_, rest) in text
            .match_indices("](")
            .map(|(at, _)| ((), &text[at + 2..]))
        {
            let target = &rest[..rest.find(')').unwrap()];
            if target.starts_with("http") || target.starts_with("mailto:") {
                continue;
            }
            let (path, heading) = target.split_once('#').unwrap_or((target, ""));
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let resolved = resolved
                .canonicalize()
                .unwrap_or_else(|_| panic!("{}: {target} does not exist", file.display()));
            assert!(
                resolved.starts_with(root),
                "{}: {target} is outside the repository",
                file.display()
            );
            if !heading.is_empty() {
                let there = std::fs::read_to_string(&resolved).unwrap();
                assert!(
                    anchors_of(&there).iter().any(|a| a == heading),
                    "{}: {target} names no heading of {}",
                    file.display(),
                    resolved.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 15, "{checked} links");
}
