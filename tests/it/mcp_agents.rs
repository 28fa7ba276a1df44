//! The real agents connect to compactd's MCP server (issue 57) configured as README says:
//! `claude mcp add --transport http compactd URL/mcp --header "Authorization: Bearer KEY"` and an
//! OpenCode `mcp` entry with the same URL and header; `claude mcp list` and `opencode mcp list`
//! report it connected (the tools they are given: `tests/it/threads.rs`, `tests/it/recall.rs`).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use compactd::store::Store;
use compactd::test_tiers::agents_bin;
use serde_json::json;

use crate::support::TestApp;

on_both_backends!(claude_code_and_opencode_connect_to_compactds_mcp_server);

/// An agent run in a home of its own, as a user runs it.
fn agent(bin: &str, home: &Path, args: &[&str]) -> String {
    let out = Command::new(agents_bin().join(bin))
        .args(args)
        .current_dir(home)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

async fn claude_code_and_opencode_connect_to_compactds_mcp_server(store: Arc<dyn Store>) {
    compactd::needs!(Agents);
    let (key, record) = compactd::access::new_key("a", None, compactd::store::now_ms());
    store.create_key(&record).await.unwrap();
    let app = TestApp::with_store(crate::support::config(), store).await;
    let url = format!("{}/mcp", app.url);
    let home = std::env::temp_dir().join(format!(
        "compactd-mcp-agents-{}-{}",
        std::process::id(),
        record.key_id
    ));
    std::fs::create_dir_all(&home).unwrap();
    let bearer = format!("Authorization: Bearer {key}");
    // The checks run the agents' own processes: off the runtime's threads.
    let (claude, opencode) = tokio::task::spawn_blocking(move || {
        let added = agent(
            "claude",
            &home,
            &[
                "mcp",
                "add",
                "--transport",
                "http",
                "compactd",
                &url,
                "--header",
                &bearer,
            ],
        );
        assert!(added.contains("Added HTTP MCP server compactd"), "{added}");
        let claude = agent("claude", &home, &["mcp", "list"]);
        std::fs::write(
            home.join("opencode.json"),
            json!({"$schema": "https://opencode.ai/config.json", "mcp": {"compactd": {
                "type": "remote", "url": url, "enabled": true,
                "headers": {"Authorization": format!("Bearer {key}")}}}})
            .to_string(),
        )
        .unwrap();
        let opencode = agent("opencode", &home, &["mcp", "list"]);
        (claude, opencode)
    })
    .await
    .unwrap();
    assert!(
        claude.contains("compactd: ") && claude.contains("Connected"),
        "{claude}"
    );
    assert!(
        opencode.contains("compactd") && opencode.contains("connected"),
        "{opencode}"
    );
    assert!(!opencode.contains("failed"), "{opencode}");
}
