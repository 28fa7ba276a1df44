//! The real agents connect to compactd's MCP server (issue 57) configured as README says:
//! `claude mcp add --transport http compactd URL/mcp --header "Authorization: Bearer KEY"` and an
//! OpenCode `mcp` entry with the same URL and header; `claude mcp list` and `opencode mcp list`
//! report it connected (the tools they are given: `tests/it/threads/read.rs`, `tests/it/recall/endpoint.rs`).
//! Then each, its model scripted to call them, calls `read_thread` and `handoff` on a stored
//! session and gets compactd's answers back as the tools' results.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use compactd_store::Store;
use compactd_testkit::agents_bin;
use serde_json::json;

use crate::support::TestApp;
use crate::support::agent_player::Player;
use crate::support::agent_scenario::Agent;
use crate::support::fake_provider::{Answer, FakeProvider, Scripted};

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

/// compactd's MCP server configured for `player`'s agent as README says; the prefix the agent
/// gives compactd's tools.
async fn connect(player: &Player, url: &str, key: &str) -> &'static str {
    match player.agent {
        Agent::ClaudeCode => {
            let bearer = format!("Authorization: Bearer {key}");
            let args = [
                "mcp",
                "add",
                "--transport",
                "http",
                "compactd",
                url,
                "--header",
                &bearer,
            ];
            player.run("claude", &args).await;
            "mcp__compactd__"
        }
        _ => {
            let path = player.repo.join("opencode.json");
            let mut config: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            config["mcp"] = json!({"compactd": {"type": "remote", "url": url, "enabled": true,
                "headers": {"Authorization": format!("Bearer {key}")}}});
            std::fs::write(&path, config.to_string()).unwrap();
            "compactd_"
        }
    }
}

async fn claude_code_and_opencode_connect_to_compactds_mcp_server(store: Arc<dyn Store>) {
    compactd_testkit::needs!(Agents);
    let (key, record) = compactd::access::new_key("a", None, compactd_store::now_ms());
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

#[sqlx::test(migrations = false)]
async fn claude_code_and_opencode_call_read_thread_and_handoff(pool: sqlx::SqlitePool) {
    compactd_testkit::needs!(Agents);
    let store: Arc<dyn Store> =
        Arc::new(compactd_store::SqliteStore::from_pool(pool).await.unwrap());
    let keys = crate::support::tenant_keys(store.as_ref(), &["a"]).await;
    let app = TestApp::with_store(crate::support::config(), store).await;
    let (file, _) = crate::threads::read::session();
    let thread = crate::threads::read::upload(&app, &keys[0], file).await;
    let provider = FakeProvider::agents().await;
    let url = format!("{}/mcp", app.url);
    let goal = "Move the job queue to Redis streams";
    let question = "Which backend does the job queue use?";
    let sessions = |n: usize| {
        let app = &app;
        let key = &keys[0];
        async move {
            let listed: serde_json::Value = app
                .send(
                    app.client
                        .get(format!("{}/v1/sessions", app.url))
                        .bearer_auth(key),
                )
                .await
                .json()
                .await
                .unwrap();
            assert_eq!(listed["sessions"].as_array().unwrap().len(), n, "{listed}");
        }
    };
    for (n, agent) in [Agent::ClaudeCode, Agent::OpenCode].into_iter().enumerate() {
        let player = Player::new(agent, &agents_bin(), &provider.url, "sk-fake-provider");
        let prefix = connect(&player, &url, &keys[0]).await;
        let call = |tool: &str, arguments: serde_json::Value| Scripted {
            answer: Answer::Call {
                name: format!("{prefix}{tool}"),
                arguments,
            },
            spike: 0,
        };
        provider.script([
            call(
                "read_thread",
                json!({"thread": thread, "question": question}),
            ),
            call("handoff", json!({"thread": thread, "goal": goal})),
            Scripted {
                answer: Answer::Text,
                spike: 0,
            },
        ]);
        let before = provider.posts().len();
        let prompt = format!(
            "Ask compactd's read_thread which backend the job queue of thread {thread} uses, then hand it off for: {goal}"
        );
        match agent {
            Agent::ClaudeCode => {
                let tools = format!("{prefix}read_thread {prefix}handoff");
                let args = [
                    "-p",
                    &prompt,
                    "--output-format",
                    "json",
                    "--allowedTools",
                    &tools,
                ];
                player.run("claude", &args).await;
            }
            _ => {
                player.turn(true, &prompt).await;
            }
        }
        // The tools' results went back to the model: compactd's answer citing the reversal,
        // and the handoff's draft with its new session.
        let posts = provider.posts();
        let sent: Vec<String> = posts[before..].iter().map(|p| p.text()).collect();
        assert!(
            sent.iter()
                .any(|t| t.contains("e02002") && t.contains("citations")),
            "{:?}: no read_thread result in {sent:#?}",
            agent.name()
        );
        assert!(
            sent.iter()
                .any(|t| t.contains("draftedBy")
                    && t.contains("Move the job queue to Redis streams")),
            "{:?}: no handoff result",
            agent.name()
        );
        // The handoff's new session is stored beside the thread.
        sessions(n + 2).await;
    }
}

/// Behind the gateway, an agent hands off its own thread: `handoff {goal}` without a thread is
/// the conversation compactd last saw for that agent's session (Claude Code names it in
/// `X-Claude-Code-Session-Id`, OpenCode in `x-session-id`). The draft holds the file the
/// thread edited and the user's rule.
#[sqlx::test(migrations = false)]
async fn agents_behind_the_gateway_hand_off_their_own_thread(pool: sqlx::SqlitePool) {
    use crate::support::agent_scenario::{Op, script};
    compactd_testkit::needs!(Agents);
    let store: Arc<dyn Store> =
        Arc::new(compactd_store::SqliteStore::from_pool(pool).await.unwrap());
    let keys = crate::support::tenant_keys(store.as_ref(), &["a"]).await;
    let provider = FakeProvider::agents().await;
    let mut config = crate::support::config();
    config.gateway.enabled = true;
    config.gateway.anthropic_upstream = provider.url.parse().unwrap();
    config.gateway.context_edits = compactd::config::ContextEdits::Upstream;
    config.gateway.openai_upstream = format!("{}/v1", provider.url).parse().unwrap();
    let app = TestApp::with_store(config, store).await;
    let url = format!("{}/mcp", app.url);
    let gateway = format!("{}/k/{}", app.url, keys[0]);
    let goal = "Add a docstring to add in calc.py";
    for agent in [Agent::ClaudeCode, Agent::OpenCode] {
        let player = Player::new(agent, &agents_bin(), &gateway, "sk-agent-own");
        let prefix = connect(&player, &url, &keys[0]).await;
        let edit = Op::Edit {
            file: "calc.py",
            old: "return a + b",
            new: "return b + a",
        };
        provider.script(script(agent, &player.repo, &[edit], None));
        player
            .turn(
                true,
                "Swap the operands in calc.py's add. Never push to main.",
            )
            .await;
        provider.script([
            Scripted {
                answer: Answer::Call {
                    name: format!("{prefix}handoff"),
                    arguments: json!({"goal": goal}),
                },
                spike: 0,
            },
            Scripted {
                answer: Answer::Text,
                spike: 0,
            },
        ]);
        let before = provider.posts().len();
        let prompt = format!("Hand this thread off with compactd's handoff tool: {goal}");
        match agent {
            Agent::ClaudeCode => {
                let tool = format!("{prefix}handoff");
                let args = [
                    "-p",
                    &prompt,
                    "--continue",
                    "--output-format",
                    "json",
                    "--allowedTools",
                    &tool,
                ];
                player.run("claude", &args).await;
            }
            _ => {
                player.turn(false, &prompt).await;
            }
        }
        let sent: Vec<String> = provider.posts()[before..]
            .iter()
            .map(|p| p.text())
            .collect();
        let result = sent
            .iter()
            .find(|t| t.contains("draftedBy"))
            .unwrap_or_else(|| panic!("{}: no handoff result in {sent:#?}", agent.name()));
        let session = format!("{} session ", agent.name());
        for expected in [goal, "calc.py", "Never push to main.", session.as_str()] {
            assert!(
                result.contains(expected),
                "{}: {expected} in {result}",
                agent.name()
            );
        }
    }
}
