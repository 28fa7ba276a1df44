//! README's MCP client configurations, run as written with the real agents (pinned by
//! `scripts/agents.sh`): Claude Code's `claude mcp add` line and OpenCode's `opencode.json`
//! connect to compactd's `/mcp` with a key (each agent's `mcp list` initializes the server and
//! reports it), and report the refusal once the key is revoked; Codex reads README's `config.toml` as a
//! Streamable HTTP server with its bearer token from the environment (its `mcp list` does not
//! connect).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use compactd::access::new_key;
use compactd_store::{SqliteStore, Store, now_ms};

use crate::support::{TestApp, config};
use compactd_testkit::agents_bin;

/// The block of docs/agents.md (where README.md points for each agent's configuration) that
/// follows the line `marker`, up to its closing fence.
fn readme_block(marker: &str) -> String {
    let readme = include_str!("../../../docs/agents.md");
    let start = readme
        .find(marker)
        .unwrap_or_else(|| panic!("docs/agents.md has no {marker:?}"));
    let rest = &readme[start + marker.len()..];
    rest[..rest.find("```").unwrap()].trim().to_owned()
}

struct Scratch {
    home: PathBuf,
    project: PathBuf,
    bin: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        let root = std::env::temp_dir().join(format!(
            "compactd-mcp-clients-{}-{:x}",
            std::process::id(),
            fastrand::u64(..)
        ));
        let (home, project) = (root.join("home"), root.join("project"));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        Scratch {
            home,
            project,
            bin: agents_bin(),
        }
    }

    /// `sh -c script` in the project, with the agents on the PATH, a scratch home and `key` as
    /// `COMPACTD_KEY`; its output (stdout and stderr).
    async fn run(&self, script: &str, key: &str) -> String {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let home = &self.home;
        let output = tokio::time::timeout(
            Duration::from_secs(120),
            tokio::process::Command::new("sh")
                .args(["-c", script])
                .current_dir(&self.project)
                .env_clear()
                .env("PATH", path)
                .env("HOME", home)
                .env("XDG_CONFIG_HOME", home.join(".config"))
                .env("XDG_DATA_HOME", home.join(".local/share"))
                .env("XDG_CACHE_HOME", home.join(".cache"))
                .env("XDG_STATE_HOME", home.join(".local/state"))
                .env("CODEX_HOME", home.join(".codex"))
                .env("NO_COLOR", "1")
                .env("COMPACTD_KEY", key)
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish"))
        .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    }

    fn write(&self, path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

#[tokio::test]
async fn readmes_mcp_configurations_connect_with_the_real_agents() {
    compactd_testkit::needs!(Agents);
    let mut config = config();
    // Not loopback-only: a key is required, as on a team's compactd.
    config.http.listen = "0.0.0.0:0".parse().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::connect_url("sqlite::memory:", Duration::from_secs(2))
            .await
            .unwrap(),
    );
    let (key, record) = new_key("team", None, now_ms());
    store.create_key(&record).await.unwrap();
    let app = TestApp::with_store(config, store.clone()).await;
    let scratch = Scratch::new();
    let here = |text: String| text.replace("http://127.0.0.1:8080", &app.url);

    // Claude Code: README's line, then `claude mcp list`, which connects to each server.
    let add = here(readme_block("```sh\n# Claude Code\n"));
    assert!(
        add.starts_with("claude mcp add --transport http compactd "),
        "{add}"
    );
    let added = scratch.run(&add, &key).await;
    assert!(added.contains("Added HTTP MCP server compactd"), "{added}");
    let listed = scratch.run("claude mcp list", &key).await;
    let line = listed
        .lines()
        .find(|l| l.starts_with("compactd: "))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(line.contains("Connected"), "{listed}");

    // OpenCode: README's opencode.json in the project, then `opencode mcp list`.
    let json = here(readme_block("```jsonc\n// OpenCode, opencode.json\n"));
    scratch.write(&scratch.project.join("opencode.json"), &json);
    let listed = scratch.run("opencode mcp list", &key).await;
    assert!(
        listed.contains("compactd") && listed.contains("connected"),
        "{listed}"
    );

    // A revoked key: both report the server refusing it.
    let (revoked, old) = new_key("team", None, now_ms());
    store.create_key(&old).await.unwrap();
    store.revoke_key(&old.key_id, now_ms()).await.unwrap();
    scratch
        .run(&format!("claude mcp remove compactd && {add}"), &revoked)
        .await;
    let refused = scratch.run("claude mcp list", &revoked).await;
    assert!(
        refused.contains("Failed to connect") && refused.contains("401"),
        "{refused}"
    );
    let refused = scratch.run("opencode mcp list", &revoked).await;
    assert!(refused.contains("needs authentication"), "{refused}");

    // Codex: README's config.toml; it lists the server with the token from the environment.
    let toml = here(readme_block("```toml\n# Codex, ~/.codex/config.toml\n"));
    scratch.write(&scratch.home.join(".codex/config.toml"), &toml);
    let listed = scratch.run("codex mcp list", &key).await;
    let line = listed
        .lines()
        .find(|l| l.starts_with("compactd "))
        .unwrap_or_else(|| panic!("{listed}"));
    for part in [app.url.as_str(), "COMPACTD_KEY", "enabled", "Bearer token"] {
        assert!(line.contains(part), "{part}: {listed}");
    }
}
