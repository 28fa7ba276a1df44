//! The real agents, run headless as a user runs them, with compactd as the gateway at their model
//! base URL and a fake provider behind it: Claude Code 2.1.330, Codex 0.169.0 (a custom provider,
//! and the built-in `openai` one with its remote compaction v2) and OpenCode 1.18.33, as pinned
//! and fetched by `scripts/agents.sh install` (`scripts/test.sh` runs it first; the binaries are
//! found in `COMPACTD_AGENTS_BIN` or `target/agents/bin`).
//!
//! Each one runs an ordinary turn — the provider sees it with the agent's own key and headers —
//! then compacts: compactd answers (its model writes the summary; the provider never sees the
//! agent's compaction request), and the agent's next request to the provider carries compactd's
//! summary.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use wiremock::{MockServer, Request};

use crate::model_provider::{ModelProvider, ToolCall};

use crate::gateway_support::MODEL_SUMMARY;
use crate::support::{FakeUpstream, Reply, TestApp, chain_config};

/// What the agents' key is (a dummy the provider checks it receives).
const AGENT_KEY: &str = "sk-agent-own-key-for-the-provider";

/// Where the real agents are (tests that run them say `compactd::needs!(Agents)` first).
pub fn agents_bin() -> PathBuf {
    compactd::test_tiers::agents_bin()
}

/// compactd as the gateway before the fake provider, and a scratch repository and home.
struct Rig {
    app: TestApp,
    provider: MockServer,
    model: FakeUpstream,
    spike: Arc<AtomicU64>,
    /// The provider's next answer is this tool call.
    tool: Arc<Mutex<Option<ToolCall>>>,
    repo: PathBuf,
    home: PathBuf,
    bin: PathBuf,
}

impl Rig {
    async fn start(name: &str) -> Rig {
        let bin = agents_bin();
        let spike = Arc::new(AtomicU64::new(0));
        let tool = Arc::new(Mutex::new(None));
        let provider = MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::any())
            .respond_with(ModelProvider {
                spike: spike.clone(),
                tool: tool.clone(),
            })
            .mount(&provider)
            .await;
        let model = FakeUpstream::start(vec![], Reply::openai(MODEL_SUMMARY)).await;
        let mut config = chain_config(&model, "openai:compactd-summarizer", true);
        config.gateway.enabled = true;
        config.gateway.anthropic_upstream = provider.uri().parse().unwrap();
        config.gateway.openai_upstream = format!("{}/v1", provider.uri()).parse().unwrap();
        let app = TestApp::spawn(config).await;
        let root = std::env::temp_dir().join(format!(
            "compactd-agent-{name}-{}-{:x}",
            std::process::id(),
            fastrand::u64(..)
        ));
        let (repo, home) = (root.join("repo"), root.join("home"));
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            repo.join("calc.py"),
            "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
        )
        .unwrap();
        let git = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(&repo)
            .status()
            .unwrap();
        assert!(git.success());
        Rig {
            app,
            provider,
            model,
            spike,
            tool,
            repo,
            home,
            bin,
        }
    }

    /// Runs `program ARGS` in the repository with a clean environment plus `env`.
    async fn run(&self, program: &str, args: &[&str], env: &[(&str, String)]) -> String {
        let mut command = tokio::process::Command::new(self.bin.join(program));
        command
            .args(args)
            .current_dir(&self.repo)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_DATA_HOME", self.home.join(".local/share"))
            .env("XDG_CACHE_HOME", self.home.join(".cache"))
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        for (name, value) in env {
            command.env(name, value);
        }
        let output = tokio::time::timeout(Duration::from_secs(180), command.output())
            .await
            .unwrap_or_else(|_| panic!("{program} {args:?} did not finish"))
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "{program} {args:?} failed: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }

    async fn received(&self) -> Vec<Request> {
        self.provider.received_requests().await.unwrap_or_default()
    }

    /// The provider's requests from the `from`-th on, as text.
    async fn bodies_since(&self, from: usize) -> Vec<String> {
        self.received().await[from..]
            .iter()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect()
    }

    /// The next answer of the provider is a call of `tool` with `arguments`.
    fn call_tool(&self, tool: &str, arguments: serde_json::Value) {
        *self.tool.lock().unwrap() = Some((tool.to_owned(), arguments));
    }

    /// What compactd's model was asked to summarize held the tool call the provider made and the
    /// file the agent read with it: the agent's tool history, read by compactd.
    fn assert_tool_history(&self, tool: &str) {
        let asked = self.model.received();
        let first = asked
            .first()
            .expect("compactd's model was asked")
            .body
            .to_string();
        assert!(
            first.contains(tool),
            "the {tool} call is in the conversation: {first}"
        );
        assert!(
            first.contains("return a + b"),
            "the tool's result is in the conversation: {first}"
        );
    }

    /// compactd's model wrote a summary, and the provider never saw a compaction request.
    async fn assert_compactd_compacted(&self, compaction_marker: &str) {
        assert!(
            !self.model.received().is_empty(),
            "compactd's model was asked"
        );
        for body in self.bodies_since(0).await {
            assert!(
                !body.contains(compaction_marker),
                "the provider saw the agent's compaction request"
            );
        }
    }
}

fn header<'r>(request: &'r Request, name: &str) -> Option<&'r str> {
    request.headers.get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn claude_code_compacts_through_compactd() {
    compactd::needs!(Agents);
    let rig = Rig::start("claude").await;
    let env = [
        ("ANTHROPIC_BASE_URL", rig.app.url.clone()),
        ("ANTHROPIC_API_KEY", AGENT_KEY.to_owned()),
        ("DISABLE_TELEMETRY", "1".to_owned()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        ("DISABLE_AUTOUPDATER", "1".to_owned()),
    ];
    let json = ["--output-format", "json"];
    rig.call_tool("Read", json!({"file_path": rig.repo.join("calc.py")}));
    let turn = |prompt: &'static str, more: bool| {
        let mut args = vec!["-p", prompt];
        if more {
            args.push("--continue");
        }
        args.extend(json);
        args
    };
    rig.run(
        "claude",
        &turn("What does calc.py do? Answer briefly.", false),
        &env,
    )
    .await;
    let first = rig.received().await;
    let ordinary = first
        .last()
        .expect("the ordinary turn reached the provider");
    assert_eq!(header(ordinary, "x-api-key"), Some(AGENT_KEY));
    assert!(
        header(ordinary, "user-agent")
            .unwrap()
            .starts_with("claude-cli/2.1.330")
    );
    assert!(String::from_utf8_lossy(&ordinary.body).contains("What does calc.py do?"));

    rig.run("claude", &turn("/compact", true), &env).await;
    rig.assert_compactd_compacted("Your task is to create a detailed summary")
        .await;
    rig.assert_tool_history("Read");
    let seen = rig.received().await.len();
    rig.run("claude", &turn("And what about subtraction?", true), &env)
        .await;
    let next = rig.bodies_since(seen).await;
    let next = next.last().expect("the next turn reached the provider");
    assert!(next.contains("This session is being continued from a previous conversation"));
    assert!(next.contains("SUMMARY BY COMPACTD'S MODEL"), "{next}");
}

/// Codex's `config.toml` with compaction after 5000 tokens, with `provider` settings.
fn codex_config(home: &Path, provider: &str) {
    let config = format!(
        "model = \"gpt-5.5\"\nmodel_auto_compact_token_limit = 5000\napproval_policy = \"never\"\nsandbox_mode = \"read-only\"\n{provider}"
    );
    std::fs::write(home.join("config.toml"), config).unwrap();
}

/// Two Codex turns, the first answered with more tokens than the compaction limit: the second
/// compacts first.
async fn codex_compacts(rig: &Rig, env: &[(&str, String)]) {
    rig.call_tool("exec_command", json!({"cmd": "cat calc.py"}));
    rig.spike.store(200_000, Ordering::SeqCst);
    rig.run(
        "codex",
        &[
            "exec",
            "--skip-git-repo-check",
            "What does calc.py do? Answer briefly.",
        ],
        env,
    )
    .await;
    let first = rig.received().await;
    let ordinary = first
        .last()
        .expect("the ordinary turn reached the provider");
    assert_eq!(
        header(ordinary, "authorization"),
        Some(format!("Bearer {AGENT_KEY}").as_str())
    );
    assert!(String::from_utf8_lossy(&ordinary.body).contains("What does calc.py do?"));
    let seen = first.len();
    rig.run(
        "codex",
        &[
            "exec",
            "--skip-git-repo-check",
            "resume",
            "--last",
            "And what about subtraction?",
        ],
        env,
    )
    .await;
    rig.assert_compactd_compacted("compaction_trigger").await;
    rig.assert_compactd_compacted("CONTEXT CHECKPOINT COMPACTION")
        .await;
    rig.assert_tool_history("cat calc.py");
    let next = rig.bodies_since(seen).await;
    let next = next.last().expect("the next turn reached the provider");
    assert!(next.contains("SUMMARY BY COMPACTD'S MODEL"), "{next}");
    assert!(
        !next.contains("compactd.v2."),
        "compactd's item was expanded"
    );
}

#[tokio::test]
async fn codex_with_a_custom_provider_compacts_through_compactd() {
    compactd::needs!(Agents);
    let rig = Rig::start("codex-custom").await;
    let codex_home = rig.home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    codex_config(
        &codex_home,
        &format!(
            "model_provider = \"fake\"\n[model_providers.fake]\nname = \"Fake\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\nenv_key = \"FAKE_API_KEY\"\n",
            rig.app.url
        ),
    );
    let env = [
        ("CODEX_HOME", codex_home.display().to_string()),
        ("FAKE_API_KEY", AGENT_KEY.to_owned()),
    ];
    codex_compacts(&rig, &env).await;
}

#[tokio::test]
async fn codex_with_the_openai_provider_compacts_remotely_through_compactd() {
    compactd::needs!(Agents);
    let rig = Rig::start("codex-openai").await;
    let codex_home = rig.home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    codex_config(
        &codex_home,
        &format!(
            "model_provider = \"openai\"\nopenai_base_url = \"{}/v1\"\n",
            rig.app.url
        ),
    );
    let env = [
        ("CODEX_HOME", codex_home.display().to_string()),
        ("CODEX_API_KEY", AGENT_KEY.to_owned()),
    ];
    codex_compacts(&rig, &env).await;
}

#[tokio::test]
async fn opencode_compacts_through_compactd() {
    compactd::needs!(Agents);
    let rig = Rig::start("opencode").await;
    let config = json!({
        "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible", "name": "Fake",
            "options": {"baseURL": format!("{}/v1", rig.app.url), "apiKey": AGENT_KEY},
            "models": {
                "fake-model": {"name": "Fake Model", "limit": {"context": 20000, "output": 4000}},
                "fake-compact-model": {"name": "Fake Compaction Model", "limit": {"context": 20000, "output": 4000}}
            }
        }},
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "agent": {"compaction": {"model": "fake/fake-compact-model"}},
        "autoupdate": false,
        "share": "disabled"
    });
    std::fs::write(rig.repo.join("opencode.json"), config.to_string()).unwrap();
    let env = [
        ("OPENCODE_DISABLE_MODELS_FETCH", "1".to_owned()),
        ("OPENCODE_DISABLE_AUTOUPDATE", "1".to_owned()),
    ];
    rig.run(
        "opencode",
        &["run", "What does calc.py do? Answer briefly."],
        &env,
    )
    .await;
    let first = rig.received().await;
    let ordinary = first
        .iter()
        .find(|r| String::from_utf8_lossy(&r.body).contains("What does calc.py do?"))
        .expect("the ordinary turn reached the provider");
    assert_eq!(
        header(ordinary, "authorization"),
        Some(format!("Bearer {AGENT_KEY}").as_str())
    );
    // The next reply overflows the window: OpenCode compacts, then continues on its own.
    rig.call_tool("read", json!({"filePath": rig.repo.join("calc.py")}));
    rig.spike.store(19_000, Ordering::SeqCst);
    let seen = first.len();
    rig.run(
        "opencode",
        &[
            "run",
            "--continue",
            "Please rename add to plus (just tell me).",
        ],
        &env,
    )
    .await;
    rig.run(
        "opencode",
        &["run", "--continue", "And what about subtraction?"],
        &env,
    )
    .await;
    rig.assert_compactd_compacted("You are a context summarization agent")
        .await;
    rig.assert_tool_history("read");
    let after = rig.bodies_since(seen).await;
    assert!(
        after
            .iter()
            .any(|b| b.contains("SUMMARY BY COMPACTD'S MODEL")),
        "a later turn carries compactd's summary"
    );
}
