//! The documentation keeps up with the code: every setting is in README.md's table and in
//! .env.example, with the default the code has.

use clap::CommandFactory;
use compactd::cli::Cli;

#[test]
fn every_setting_is_documented_with_its_default() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
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
            .unwrap_or_else(|| panic!("{env} has no row in README.md's configuration table"));
        assert!(
            example.contains(&format!("{env}=")),
            "{env} is not in .env.example"
        );
        for default in arg.get_default_values() {
            let default = default.to_str().unwrap();
            assert!(
                row.contains(&format!("`{default}`")),
                "README.md gives another default for {env}: {row}"
            );
            assert!(
                example.contains(&format!("{env}={default}")),
                ".env.example gives another default for {env}"
            );
        }
        checked += 1;
    }
    assert!(checked >= 25, "only {checked} settings found");
}

/// README's Docker section is exactly what `scripts/docker-test.sh` runs: every command of its
/// code blocks (comments aside) is a line of the script.
#[test]
fn the_docker_section_is_what_the_docker_test_runs() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let script = std::fs::read_to_string(format!("{root}/scripts/docker-test.sh")).unwrap();
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
                "README runs `{command}`, scripts/docker-test.sh does not"
            );
            commands += 1;
        }
    }
    assert!(commands >= 9, "{commands}");
}
