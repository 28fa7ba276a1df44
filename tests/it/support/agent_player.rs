//! A real agent set up to play [`crate::support::agent_scenario`]'s session as a user plays it: a scratch
//! repository and home, the agent's configuration for the URL it talks to (compactd's gateway or
//! the fake provider), its command line for a turn, and each agent's way to compact by hand —
//! Claude Code's `/compact`, the Codex TUI's `/compact` (driven in tmux), OpenCode's server's
//! `summarize`. Shared with `examples/agent_record.rs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::agent_scenario::{Agent, Step, label, script};
use crate::support::fake_provider::FakeProvider;

/// An agent set up in a scratch repository and home, talking to `base_url`.
pub struct Player {
    pub agent: Agent,
    pub bin: PathBuf,
    pub repo: PathBuf,
    pub home: PathBuf,
    /// The agent's own key for its provider.
    pub key: String,
    /// compactd's URL (with its `/k/KEY` prefix when it has one), or the provider's.
    pub base_url: String,
    /// Codex's TUI, in a tmux server of the player's own (manual compactions).
    tmux: PathBuf,
}

impl Player {
    /// A fresh repository holding `calc.py`, and the agent's configuration for `base_url`.
    pub fn new(agent: Agent, bin: &Path, base_url: &str, key: &str) -> Player {
        let root = std::env::temp_dir().join(format!(
            "compactd-play-{}-{}-{:x}",
            agent.name(),
            std::process::id(),
            fastrand::u64(..)
        ));
        let (repo, home) = (root.join("repo"), root.join("home"));
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::create_dir_all(home.join(".codex")).unwrap();
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
        let player = Player {
            agent,
            bin: bin.to_owned(),
            tmux: root.join("tmux.sock"),
            repo,
            home,
            key: key.to_owned(),
            base_url: base_url.to_owned(),
        };
        player.configure();
        player
    }

    fn configure(&self) {
        let base_url = &self.base_url;
        match self.agent {
            Agent::ClaudeCode => {}
            Agent::CodexCustom | Agent::CodexOpenai => {
                let provider = match self.agent {
                    Agent::CodexCustom => format!(
                        "model_provider = \"fake\"\n\n[model_providers.fake]\nname = \"Fake\"\nbase_url = \"{base_url}/v1\"\nwire_api = \"responses\"\nenv_key = \"FAKE_API_KEY\"\n"
                    ),
                    _ => format!(
                        "model_provider = \"openai\"\nopenai_base_url = \"{base_url}/v1\"\n"
                    ),
                };
                // The TUI's first-run questions (folder trust, a newer model) answered as a user
                // answers them once.
                let config = format!(
                    "model = \"gpt-5.5\"\nmodel_auto_compact_token_limit = 5000\napproval_policy = \"never\"\nsandbox_mode = \"workspace-write\"\n{provider}\n[tui]\nscreen_reader_detection_done = true\n\n[tui.model_availability_nux]\n\"gpt-6.1-sol\" = 1\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n\n[notice.model_migrations]\n\"gpt-5.5\" = \"gpt-6-sol\"\n",
                    self.repo.display()
                );
                std::fs::write(self.home.join(".codex/config.toml"), config).unwrap();
            }
            Agent::OpenCode => {
                let config = json!({
                    "provider": {"fake": {
                        "npm": "@ai-sdk/openai-compatible", "name": "Fake",
                        "options": {"baseURL": format!("{base_url}/v1"), "apiKey": self.key},
                        "models": {
                            "fake-model": {"name": "Fake Model", "limit": {"context": 20000, "output": 4000}},
                            "fake-compact-model": {"name": "Fake Compaction Model", "limit": {"context": 20000, "output": 4000}}
                        }
                    }},
                    "model": "fake/fake-model",
                    "small_model": "fake/fake-model",
                    "agent": {"compaction": {"model": "fake/fake-compact-model"}},
                    "permission": {"edit": "allow", "bash": "allow"},
                    "autoupdate": false,
                    "share": "disabled"
                });
                std::fs::write(self.repo.join("opencode.json"), config.to_string()).unwrap();
            }
        }
    }

    /// The environment the agent runs with (nothing of the test's own but `PATH`).
    fn env(&self) -> Vec<(String, String)> {
        let home = self.home.display().to_string();
        let mut env = vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), home.clone()),
            ("XDG_CONFIG_HOME".into(), format!("{home}/.config")),
            ("XDG_DATA_HOME".into(), format!("{home}/.local/share")),
            ("XDG_CACHE_HOME".into(), format!("{home}/.cache")),
            ("XDG_STATE_HOME".into(), format!("{home}/.local/state")),
            ("NO_COLOR".into(), "1".into()),
        ];
        let more: Vec<(&str, String)> = match self.agent {
            Agent::ClaudeCode => vec![
                ("ANTHROPIC_BASE_URL", self.base_url.clone()),
                ("ANTHROPIC_API_KEY", self.key.clone()),
                ("DISABLE_TELEMETRY", "1".into()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
                ("DISABLE_AUTOUPDATER", "1".into()),
            ],
            Agent::CodexCustom => vec![
                ("CODEX_HOME", format!("{home}/.codex")),
                ("FAKE_API_KEY", self.key.clone()),
            ],
            Agent::CodexOpenai => vec![
                ("CODEX_HOME", format!("{home}/.codex")),
                ("CODEX_API_KEY", self.key.clone()),
            ],
            Agent::OpenCode => vec![
                ("OPENCODE_DISABLE_MODELS_FETCH", "1".into()),
                ("OPENCODE_DISABLE_AUTOUPDATE", "1".into()),
            ],
        };
        env.extend(more.into_iter().map(|(n, v)| (n.to_owned(), v)));
        env
    }

    fn command(&self, program: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(self.bin.join(program));
        command
            .current_dir(&self.repo)
            .env_clear()
            .envs(self.env())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// Runs `program ARGS` to its end; its output.
    pub async fn run(&self, program: &str, args: &[&str]) -> String {
        let output = tokio::time::timeout(
            Duration::from_secs(180),
            self.command(program).args(args).output(),
        )
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

    /// The user's prompt, as a new session (`first`) or continuing the last one.
    pub async fn turn(&self, first: bool, prompt: &str) -> String {
        match self.agent {
            Agent::ClaudeCode => {
                let mut args = vec!["-p", prompt];
                if !first {
                    args.push("--continue");
                }
                args.extend([
                    "--output-format",
                    "json",
                    "--permission-mode",
                    "acceptEdits",
                    "--allowedTools",
                    "Bash(ls:*)",
                ]);
                self.run("claude", &args).await
            }
            Agent::CodexCustom | Agent::CodexOpenai => {
                let mut args = vec!["exec", "--skip-git-repo-check"];
                if !first {
                    args.extend(["resume", "--last"]);
                }
                args.push(prompt);
                self.run("codex", &args).await
            }
            Agent::OpenCode => {
                let mut args = vec!["run"];
                if !first {
                    args.push("--continue");
                }
                args.push(prompt);
                self.run("opencode", &args).await
            }
        }
    }

    /// A manual compaction, as a user asks for one.
    pub async fn compact(&self) {
        match self.agent {
            Agent::ClaudeCode => {
                self.turn(false, "/compact").await;
            }
            Agent::CodexCustom | Agent::CodexOpenai => self.codex_tui_compact().await,
            Agent::OpenCode => self.opencode_summarize().await,
        }
    }

    /// Codex's TUI (`resume --last`) in tmux: `/compact`, then quit once it says it compacted.
    async fn codex_tui_compact(&self) {
        if self.agent == Agent::CodexOpenai {
            // The TUI signs in with the built-in provider's key only through `codex login`.
            let mut login = self.command("codex");
            login
                .args(["login", "--with-api-key"])
                .stdin(std::process::Stdio::piped());
            let mut child = login.spawn().unwrap();
            use tokio::io::AsyncWriteExt;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(self.key.as_bytes()).await.unwrap();
            drop(stdin);
            assert!(child.wait().await.unwrap().success(), "codex login");
        }
        let env: Vec<String> = self
            .env()
            .into_iter()
            .map(|(n, v)| format!("{n}={}", shell_quote(&v)))
            .collect();
        // The shell outlives the TUI, so that its last screen and exit status can be read.
        // The session `exec` played: the TUI's `resume --last` picks only the TUI's own.
        let thread = self.codex_thread();
        let shell = format!(
            "cd {} && env -i TERM=xterm-256color {} {} resume {thread}; echo \"codex exited: $?\"; sleep 600",
            shell_quote(&self.repo.display().to_string()),
            env.join(" "),
            shell_quote(&self.bin.join("codex").display().to_string())
        );
        let socket = self.tmux.display().to_string();
        let tmux = |args: &[&str]| {
            let status = std::process::Command::new("tmux")
                .args(["-S", &socket])
                .args(args)
                .status()
                .unwrap();
            assert!(status.success(), "tmux {args:?}");
        };
        tmux(&["new-session", "-d", "-x", "200", "-y", "50", &shell]);
        let screen = || {
            let out = std::process::Command::new("tmux")
                .args(["-S", &socket, "capture-pane", "-p"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        wait_for(&screen, "Ask Codex", "the TUI's prompt").await;
        // The resumed session's earlier compactions show too: this one is one more.
        let compacted = || screen().matches("Context compacted").count();
        let before = compacted();
        tmux(&["send-keys", "/compact"]);
        // The command's completion pops up under it; Enter picks it (and a first Enter pressed
        // while it opens only fills the prompt), a second one sends it.
        wait_for(
            &screen,
            "summarize conversation",
            "the command's completion",
        )
        .await;
        let mut done = false;
        for _ in 0..3 {
            tmux(&["send-keys", "Enter"]);
            done = until(|| compacted() > before, Duration::from_secs(20)).await;
            if done {
                break;
            }
        }
        assert!(done, "the TUI never compacted: {}", screen());
        // Quit as a user quits; the app-server daemon the TUI started holds the session's writer
        // until it goes too, and the next `exec` needs it.
        tmux(&["send-keys", "/quit"]);
        wait_for(&screen, "exit Codex", "the command's completion").await;
        for _ in 0..3 {
            tmux(&["send-keys", "Enter"]);
            if until(
                || screen().contains("codex exited"),
                Duration::from_secs(10),
            )
            .await
            {
                break;
            }
        }
        wait_for(&screen, "codex exited", "the TUI's exit").await;
        self.stop_codex_daemon().await;
        let _ = std::process::Command::new("tmux")
            .args(["-S", &socket, "kill-server"])
            .status();
    }

    /// Stops the app-server daemon Codex's TUI leaves running for this home.
    async fn stop_codex_daemon(&self) {
        let home = self.home.join(".codex/packages").display().to_string();
        let _ = std::process::Command::new("pkill")
            .args(["-f", &home])
            .status();
        let running = || {
            std::process::Command::new("pgrep")
                .args(["-f", &home])
                .output()
                .is_ok_and(|o| !o.stdout.is_empty())
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while running() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The id of the first session Codex recorded (its rollout file's name ends with it).
    fn codex_thread(&self) -> String {
        fn files(dir: &Path, out: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    files(&path, out);
                } else {
                    out.push(path);
                }
            }
        }
        let mut rollouts = Vec::new();
        files(&self.home.join(".codex/sessions"), &mut rollouts);
        // `rollout-<date>T<time>-<id>.jsonl`: the names sort by when they were made.
        rollouts.sort();
        let name = rollouts
            .first()
            .and_then(|p| p.file_stem())
            .and_then(|s| s.to_str())
            .expect("Codex recorded its session")
            .to_owned();
        name.splitn(7, '-')
            .nth(6)
            .expect("a rollout's id")
            .to_owned()
    }

    /// OpenCode's manual compaction: its server's `summarize` on the session (what the TUI's
    /// `/compact` calls).
    async fn opencode_summarize(&self) {
        let port = free_port();
        let mut server = self.command("opencode");
        server.args(["serve", "--port", &port.to_string()]);
        let _server = server.spawn().unwrap();
        let base = format!("http://127.0.0.1:{port}");
        // A connection the server takes while it starts may never be answered: each try is short.
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let sessions: Value = poll(|| async {
            let response = client.get(format!("{base}/session")).send().await.ok()?;
            response.json().await.ok()
        })
        .await;
        let id = sessions
            .as_array()
            .and_then(|s| s.first())
            .and_then(|s| s["id"].as_str())
            .expect("OpenCode has the session")
            .to_owned();
        let response = client
            .post(format!("{base}/session/{id}/summarize"))
            .json(&json!({"providerID": "fake", "modelID": "fake-model"}))
            .timeout(Duration::from_secs(120))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "summarize: {}",
            response.text().await.unwrap_or_default()
        );
    }

    /// Plays `steps` against `provider`'s script; each request the provider receives is labelled
    /// with its step. `recording`: the provider is reached directly, so each manual compaction's
    /// request is marked as one.
    pub async fn play(&self, provider: &FakeProvider, steps: &[Step], recording: bool) {
        for (index, step) in steps.iter().enumerate() {
            provider.set_step(&label(index, step));
            match step {
                Step::Turn { prompt, ops, spike } => {
                    provider.script(script(self.agent, &self.repo, ops, *spike));
                    self.turn(index == 0, prompt).await;
                }
                Step::Compact => {
                    if recording {
                        provider.compaction_next();
                    }
                    self.compact().await;
                }
            }
        }
    }
}

impl Drop for Player {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["-S", &self.tmux.display().to_string(), "kill-server"])
            .stderr(std::process::Stdio::null())
            .status();
        // Codex's TUI starts an app-server daemon of its own home: it goes with the home.
        let _ = std::process::Command::new("pkill")
            .args(["-f", &self.home.display().to_string()])
            .status();
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `ready` until it answers (30 s at most).
async fn poll<T, F, Fut>(ready: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(value) = ready().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "gave up waiting");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls the screen until it shows `text`.
async fn wait_for(screen: &impl Fn() -> String, text: &str, what: &str) {
    if !within(screen, text, Duration::from_secs(60)).await {
        panic!("{what} never showed: {}", screen());
    }
}

/// Whether the screen shows `text` within `time`.
async fn within(screen: &impl Fn() -> String, text: &str, time: Duration) -> bool {
    until(|| screen().contains(text), time).await
}

/// Whether `done` holds within `time` (polled).
async fn until(done: impl Fn() -> bool, time: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + time;
    while tokio::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}
