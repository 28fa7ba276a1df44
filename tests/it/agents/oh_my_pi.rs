//! oh-my-pi 18.3.4 (its own bundle, run by Bun, `scripts/agents.sh`) behind compactd's gateway, in
//! RPC mode as an editor runs it, configured as README says: a turn with its model (a fake
//! provider behind compactd), then `compact`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::support::TestApp;
use crate::support::gateway::{MODEL_SUMMARY, summarizer_model};
use compactd_testkit::agents_bin;

/// oh-my-pi in RPC mode: commands in on stdin, frames out on stdout, one JSON a line.
struct Omp {
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Omp {
    fn start(root: &Path, model: &str) -> Omp {
        Omp::start_with(root, model, &[])
    }

    /// [`Omp::start`] with more environment (a provider's token).
    fn start_with(root: &Path, model: &str, env: &[(&str, &str)]) -> Omp {
        let mut child = tokio::process::Command::new(agents_bin().join("omp"))
            .args(["--mode", "rpc", "--model", model])
            .current_dir(root.join("repo"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", root.join("home"))
            .env("OMP_SKIP_SETUP", "1")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Omp {
            _child: child,
            stdin,
            stdout,
        }
    }

    async fn send(&mut self, command: Value) {
        let line = format!("{command}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// Reads oh-my-pi's frames until one `is` accepts, which it returns.
    async fn until(&mut self, is: impl Fn(&Value) -> bool) -> Value {
        let read = async {
            loop {
                let line = self.stdout.next_line().await.unwrap().expect("omp exited");
                let Ok(value) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if is(&value) {
                    return value;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(120), read)
            .await
            .expect("omp answered in time")
    }

    async fn prompt(&mut self, message: &str) {
        self.send(json!({"id": "p", "type": "prompt", "message": message}))
            .await;
        self.until(|v| v["type"] == "prompt_result").await;
    }

    async fn compact(&mut self) -> Value {
        self.send(json!({"id": "c", "type": "compact"})).await;
        self.until(|v| v["type"] == "response" && v["command"] == "compact")
            .await
    }
}

/// A scratch repository and home whose oh-my-pi reaches its models through compactd at `url`.
fn scratch(url: &str) -> PathBuf {
    scratch_with(url, "", &format!("  remoteEndpoint: {url}/v1/compact\n"))
}

/// [`scratch`] with `anthropic` provider settings and compaction settings of the test's own.
fn scratch_with(url: &str, anthropic: &str, compaction: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!(
        "compactd-omp-{}-{:x}",
        std::process::id(),
        fastrand::u64(..)
    ));
    for dir in ["repo", "home/.omp/agent"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(
        root.join("repo/calc.py"),
        "def add(a, b):\n    return a + b\n",
    )
    .unwrap();
    let models = format!(
        "providers:\n  openai:\n    baseUrl: {url}/v1\n    apiKey: sk-provider-key\n  openai-codex:\n    baseUrl: {url}\n  anthropic:\n    baseUrl: {url}\n    apiKey: sk-ant-provider-key\n{anthropic}"
    );
    std::fs::write(root.join("home/.omp/agent/models.yml"), models).unwrap();
    let config = format!("compaction:\n{compaction}  keepRecentTokens: 1\n  asyncEnabled: false\n");
    std::fs::write(root.join("home/.omp/agent/config.yml"), config).unwrap();
    root
}

/// compactd's gateway in front of the fake provider, its own summaries by its fake model.
async fn compactd() -> (
    TestApp,
    crate::support::FakeProvider,
    crate::support::FakeProvider,
) {
    compactd_with(summarizer_model().await, None).await
}

/// [`compactd`] with its summaries by `model`, preparing sessions' summaries ahead past `share`
/// of their window.
async fn compactd_with(
    model: crate::support::FakeProvider,
    share: Option<f64>,
) -> (
    TestApp,
    crate::support::FakeProvider,
    crate::support::FakeProvider,
) {
    let provider = crate::support::FakeProvider::agents().await;
    let mut config = crate::support::chain_config(&model, "openai:compactd-summarizer", false);
    config.gateway.enabled = true;
    config.gateway.anthropic_upstream = provider.url.parse().unwrap();
    config.gateway.context_edits = compactd::config::ContextEdits::Upstream;
    config.gateway.openai_upstream = format!("{}/v1", provider.url).parse().unwrap();
    config.gateway.codex_upstream = provider.url.parse().unwrap();
    if let Some(share) = share {
        config.gateway.prepare_at = share;
    }
    (TestApp::spawn(config).await, model, provider)
}

#[tokio::test]
async fn oh_my_pi_on_an_openai_route_gets_its_compaction_from_compactd() {
    compactd_testkit::needs!(Agents);
    let (app, model, provider) = compactd().await;
    let root = scratch(&app.url);
    let mut omp = Omp::start(&root, "openai/gpt-5.2");
    omp.prompt("What does calc.py do? Answer briefly.").await;
    omp.prompt("Now suggest a docstring for add.").await;
    let compacted = omp.compact().await;
    assert_eq!(compacted["success"], true, "{compacted}");
    // Its native lane (`/responses/compact`) was answered by compactd: the history oh-my-pi keeps
    // is the user's messages and compactd's item.
    let kept = &compacted["data"]["preserveData"]["openaiRemoteCompaction"];
    let item = &kept["compactionItem"];
    assert!(
        item["encrypted_content"]
            .as_str()
            .is_some_and(|c| c.starts_with("compactd.v2.")),
        "{compacted}"
    );
    assert!(!model.received().is_empty(), "compactd's model wrote it");
    let turns = provider.posts();
    assert_eq!(
        turns.len(),
        2,
        "the provider saw the two turns, no compaction"
    );

    // The next turn carries compactd's summary to the provider, in place of the item.
    omp.prompt("And what about subtraction?").await;
    let next = provider.posts().pop().unwrap().text();
    assert!(next.contains("SUMMARY BY COMPACTD"), "{next}");
    assert!(!next.contains("compactd.v2."));
    let _ = std::fs::remove_dir_all(&root);
}

/// A ChatGPT login's token as oh-my-pi reads it: a JWT whose claims name the account (the fake
/// provider checks no signature).
fn chatgpt_token() -> String {
    use base64::Engine;
    let claims = json!({"https://api.openai.com/auth": {"chatgpt_account_id": "acct_test"},
        "exp": 9_999_999_999u64});
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("eyJhbGciOiJub25lIn0.{payload}.sig")
}

/// The `openai-codex` route (a ChatGPT login) posts to `<baseUrl>/codex/responses`, its compaction
/// a stream whose input ends in a `compaction_trigger`: compactd answers it on that path, and the
/// turns go to the Codex upstream.
#[tokio::test]
async fn oh_my_pi_on_the_codex_route_gets_its_compaction_from_compactd() {
    compactd_testkit::needs!(Agents);
    let (app, model, provider) = compactd().await;
    let root = scratch(&app.url);
    let token = chatgpt_token();
    let mut omp = Omp::start_with(
        &root,
        "openai-codex/gpt-5.5",
        &[("OPENAI_CODEX_OAUTH_TOKEN", &token)],
    );
    omp.prompt("What does calc.py do? Answer briefly.").await;
    omp.prompt("Now suggest a docstring for add.").await;
    let turns = provider.posts();
    assert_eq!(turns.len(), 2, "the two turns reached the Codex upstream");
    assert!(
        turns.iter().all(|t| t.path == "/codex/responses"),
        "{:?}",
        turns.iter().map(|t| &t.path).collect::<Vec<_>>()
    );
    let compacted = omp.compact().await;
    assert_eq!(compacted["success"], true, "{compacted}");
    assert!(!model.received().is_empty(), "compactd's model wrote it");
    assert_eq!(provider.posts().len(), 2, "the provider saw no compaction");
    // Its v2 lane: the Codex remote compaction compactd serves on the Responses wire.
    assert_eq!(logged_endpoints(&app).await, ["gateway:codex-remote"]);
    let kept = &compacted["data"]["preserveData"]["openaiRemoteCompaction"];
    assert_eq!(kept["provider"], "openai-codex", "{compacted}");
    assert!(kept.to_string().contains("compactd.v2."), "{compacted}");

    omp.prompt("And what about subtraction?").await;
    let next = provider.posts().pop().unwrap().text();
    assert!(next.contains("SUMMARY BY COMPACTD"), "{next}");
    assert!(!next.contains("compactd.v2."));
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test]
async fn oh_my_pi_on_an_anthropic_route_gets_its_compaction_from_compactd() {
    compactd_testkit::needs!(Agents);
    let (app, model, provider) = compactd().await;
    let root = scratch(&app.url);
    let mut omp = Omp::start(&root, "anthropic/claude-sonnet-4-6");
    omp.prompt("What does calc.py do? Answer briefly.").await;
    omp.prompt("Now suggest a docstring for add.").await;
    let compacted = omp.compact().await;
    assert_eq!(compacted["success"], true, "{compacted}");
    let summary = compacted["data"]["summary"].as_str().unwrap();
    assert!(
        summary.contains(MODEL_SUMMARY.lines().nth(1).unwrap()),
        "{compacted}"
    );
    assert!(!model.received().is_empty(), "compactd's model wrote it");
    let turns = provider.posts();
    assert_eq!(
        turns.len(),
        2,
        "the provider saw the two turns, no compaction"
    );

    omp.prompt("And what about subtraction?").await;
    let next = provider.posts().pop().unwrap().text();
    assert!(next.contains("SUMMARY BY COMPACTD"), "{next}");
    let _ = std::fs::remove_dir_all(&root);
}

/// A session of oh-my-pi through the gateway whose summary compactd prepared while it worked
/// (tool output past the cut oh-my-pi writes, compactd's model writing pi's sections), then its
/// compaction; the call-log endpoint that answered from the prepared summary (its row is the
/// extractive summarizer's merge, no model call while oh-my-pi waits).
async fn compacts_from_prepared() -> String {
    use crate::gateway::prepare::{prepared_outcome, settled};
    use crate::support::fake_provider::{Answer, Scripted};
    // compactd's model writes the sections it is asked for (pi's, as oh-my-pi asks for them).
    let written = "## Goal\nPREPARED BY COMPACTD'S MODEL: the user asked what calc.py does.";
    let model = crate::support::FakeProvider::start(vec![], crate::support::Reply::openai(written));
    let (app, model, provider) = compactd_with(model.await, Some(0.001)).await;
    let root = scratch(&app.url);
    let call = |name: &str, arguments: Value| Scripted {
        answer: Answer::Call {
            name: name.into(),
            arguments,
        },
        spike: 0,
    };
    provider.script([
        call("bash", json!({"command": "seq 1 3000"})),
        call("read", json!({"path": "calc.py"})),
    ]);
    let mut omp = Omp::start(&root, "anthropic/claude-sonnet-4-6");
    omp.prompt("What does calc.py do? Run seq first.").await;
    omp.prompt("Now suggest a docstring for add.").await;
    settled(&app).await;
    assert!(prepared_outcome(&app, "prepared").await >= 1.0);
    let compacted = omp.compact().await;
    assert_eq!(compacted["success"], true, "{compacted}");
    assert_eq!(prepared_outcome(&app, "used").await, 1.0, "{compacted}");
    let summary = compacted["data"]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(written),
        "the prepared summary, which compactd's model wrote: {summary}"
    );
    assert!(!model.received().is_empty());

    // Its next compaction too: its turns now open with the summary oh-my-pi carries, which
    // its remote compaction sends apart (`<previous-summary>`).
    provider.script([call("bash", json!({"command": "seq 1 2000"}))]);
    omp.prompt("Add a docstring to add in calc.py.").await;
    omp.prompt("And one for the module.").await;
    settled(&app).await;
    let compacted = omp.compact().await;
    assert_eq!(compacted["success"], true, "{compacted}");
    assert_eq!(prepared_outcome(&app, "used").await, 2.0, "{compacted}");
    let _ = std::fs::remove_dir_all(&root);
    // (Rows are written after the answer.)
    crate::support::eventually("the merged compaction's row", || async {
        let calls: Value = app.get("/v1/calls?limit=50").await.json().await.unwrap();
        let rows = calls["calls"].as_array().cloned().unwrap_or_default();
        rows.iter()
            .find(|c| c["model"] == "extractive")
            .and_then(|c| c["endpoint"].as_str().map(str::to_owned))
    })
    .await
}

/// Zero-wait (issue 67) on the route oh-my-pi takes with today's Claude models: its turns pass
/// through the gateway, and compactd prepares the session's summary meanwhile; its remote
/// compaction (`/v1/compact`, which names no session and writes the conversation in the model's
/// dialect, a long tool output cut) is answered from it, the rest merged in, with no model call
/// while oh-my-pi waits. Its request for a pull request's description from the same conversation
/// (the next call) is not answered with that summary: the model writes it.
#[tokio::test]
async fn oh_my_pis_remote_compaction_is_answered_from_the_summary_prepared_while_it_worked() {
    compactd_testkit::needs!(Agents);
    assert_eq!(compacts_from_prepared().await, "/v1/compact");
}

/// Zero-wait (issue 67) on the route oh-my-pi takes with GPT-5.x: its turns pass through the
/// gateway (`/v1/responses`) while compactd prepares the session's summary, and its native lane
/// (`<baseUrl>/responses/compact`, which it calls first) is answered from it with no model call
/// while oh-my-pi waits; its next turn carries that summary to the provider.
#[tokio::test]
async fn oh_my_pis_native_openai_compaction_is_answered_from_the_summary_prepared_while_it_worked()
{
    compactd_testkit::needs!(Agents);
    use crate::gateway::prepare::{prepared_outcome, settled};
    use crate::support::fake_provider::{Answer, Scripted};
    let written = "## Goal\nPREPARED BY COMPACTD'S MODEL: the user asked what calc.py does.";
    let model = crate::support::FakeProvider::start(vec![], crate::support::Reply::openai(written));
    let (app, model, provider) = compactd_with(model.await, Some(0.001)).await;
    let root = scratch(&app.url);
    provider.script([Scripted {
        answer: Answer::Call {
            name: "read".into(),
            arguments: json!({"path": "calc.py"}),
        },
        spike: 0,
    }]);
    let mut omp = Omp::start(&root, "openai/gpt-5.2");
    omp.prompt("What does calc.py do? Read it first.").await;
    omp.prompt("Now suggest a docstring for add.").await;
    settled(&app).await;
    assert!(prepared_outcome(&app, "prepared").await >= 1.0);
    let calls = model.received().len();
    let compacted = omp.compact().await;
    assert_eq!(compacted["success"], true, "{compacted}");
    assert_eq!(prepared_outcome(&app, "used").await, 1.0, "{compacted}");
    assert_eq!(
        model.received().len(),
        calls,
        "no model call while it waited"
    );
    let item = &compacted["data"]["preserveData"]["openaiRemoteCompaction"]["compactionItem"];
    assert!(
        item["encrypted_content"]
            .as_str()
            .is_some_and(|c| c.starts_with("compactd.v2.")),
        "{compacted}"
    );
    omp.prompt("And what about subtraction?").await;
    let next = provider.posts().pop().unwrap().text();
    assert!(next.contains("PREPARED BY COMPACTD'S MODEL"), "{next}");
    let _ = std::fs::remove_dir_all(&root);
}

/// Without `remoteEndpoint`, oh-my-pi summarizes with its own model, through its provider's base
/// URL (its Anthropic native lane runs only against Anthropic's own hosts): compactd recognizes
/// the rendered summarization prompt and answers it in the wire.
#[tokio::test]
async fn oh_my_pi_without_a_remote_endpoint_is_answered_at_its_base_url() {
    compactd_testkit::needs!(Agents);
    let (app, model, provider) = compactd().await;
    let root = scratch_with(&app.url, "", "");
    let mut omp = Omp::start(&root, "anthropic/claude-sonnet-4-6");
    omp.prompt("What does calc.py do? Answer briefly.").await;
    omp.prompt("Now suggest a docstring for add.").await;
    let compacted = omp.compact().await;
    assert_eq!(compacted["success"], true, "{compacted}");
    let summary = compacted["data"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("SUMMARY BY COMPACTD'S MODEL"),
        "{compacted}"
    );
    assert!(!model.received().is_empty());
    assert_eq!(
        provider.posts().len(),
        2,
        "the provider saw no summarization"
    );
    let endpoints = logged_endpoints(&app).await;
    assert!(
        endpoints.iter().all(|e| e == "gateway:pi-family"),
        "{endpoints:?}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// The endpoints of the call log's rows, once there are any (rows are written after the answer).
async fn logged_endpoints(app: &TestApp) -> Vec<String> {
    let started = std::time::Instant::now();
    loop {
        let calls: Value = app.get("/v1/calls").await.json().await.unwrap();
        let rows = calls["calls"].as_array().cloned().unwrap_or_default();
        if !rows.is_empty() {
            return rows
                .iter()
                .map(|r| r["endpoint"].as_str().unwrap_or_default().to_owned())
                .collect();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no call logged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
