//! One coding session, played by a real agent as a user plays it: the same eight steps for Claude
//! Code, Codex (a custom provider, and the built-in `openai` one) and OpenCode, each with its own
//! command line, configuration and tools. Ordinary turns, a turn of five tool calls, a manual
//! compaction right after it (Claude Code then ends the request with its own system message), an
//! automatic one inside a tool loop, one before a turn, and a second manual one that chains on the
//! others.
//!
//! The agent talks to `base_url`: compactd's gateway (`tests/it/real_agents.rs`) or the fake
//! provider itself (`examples/agent_record.rs`, which records what a new release sends). The fake
//! provider ([`crate::model_provider`]) answers each turn with the step's tool calls, and reports
//! a spike of input tokens where the step says, so that the agent compacts on its own.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::model_provider::{Answer, ModelProvider, Scripted};

/// The agents a session is played with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    ClaudeCode,
    /// Codex with a custom Responses provider: local compaction.
    CodexCustom,
    /// Codex with the built-in `openai` provider at `openai_base_url`: remote compaction v2.
    CodexOpenai,
    OpenCode,
}

impl Agent {
    /// Every agent (the recorder takes one by name).
    #[allow(dead_code)]
    pub const ALL: [Agent; 4] = [
        Agent::ClaudeCode,
        Agent::CodexCustom,
        Agent::CodexOpenai,
        Agent::OpenCode,
    ];

    /// The fixture name's agent part.
    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::CodexCustom => "codex-custom-provider",
            Agent::CodexOpenai => "codex-openai-provider",
            Agent::OpenCode => "opencode",
        }
    }

    /// Input tokens that fill the agent's window, as the session configures it.
    fn spike(self) -> u64 {
        match self {
            // claude-opus-5-5: a window of 1,000,000.
            Agent::ClaudeCode => 985_000,
            // `model_auto_compact_token_limit = 5000`.
            Agent::CodexCustom | Agent::CodexOpenai => 200_000,
            // A context of 20,000 with 4,000 for output.
            Agent::OpenCode => 19_000,
        }
    }
}

/// What a tool call does, whatever the agent calls its tool.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    Read(&'static str),
    Edit {
        file: &'static str,
        old: &'static str,
        new: &'static str,
    },
    Write {
        file: &'static str,
        content: &'static str,
    },
    Shell(&'static str),
}

impl Op {
    /// The file the operation changes.
    pub fn modifies(self) -> Option<&'static str> {
        match self {
            Op::Edit { file, .. } | Op::Write { file, .. } => Some(file),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub enum Step {
    /// The user's prompt; the provider answers with these calls, then text. `spike` is the
    /// answer (0: the first call, `ops.len()`: the text that ends the turn) that fills the window.
    Turn {
        prompt: &'static str,
        ops: Vec<Op>,
        spike: Option<usize>,
    },
    /// A manual compaction: Claude Code's and the Codex TUI's `/compact`, OpenCode's summarize.
    Compact,
}

/// The session every agent plays.
pub fn session() -> Vec<Step> {
    let turn = |prompt, ops, spike| Step::Turn { prompt, ops, spike };
    vec![
        turn(
            "What does calc.py do? Answer briefly.",
            vec![Op::Read("calc.py")],
            None,
        ),
        turn(
            "Rule: never edit sub. Add a docstring to add, list the files, and start notes.md.",
            vec![
                Op::Read("calc.py"),
                Op::Edit {
                    file: "calc.py",
                    old: "    return a + b",
                    new: "    \"\"\"Add two numbers.\"\"\"\n    return a + b",
                },
                Op::Shell("ls"),
                Op::Write {
                    file: "notes.md",
                    content: "# Notes\n",
                },
                Op::Read("notes.md"),
            ],
            None,
        ),
        Step::Compact,
        turn(
            "Now add a test file for add.",
            vec![
                Op::Write {
                    file: "test_calc.py",
                    content: "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
                },
                Op::Read("test_calc.py"),
            ],
            Some(0),
        ),
        turn("And what about subtraction?", vec![], Some(0)),
        turn(
            "Please rename add to plus (just tell me, do not edit).",
            vec![],
            None,
        ),
        Step::Compact,
        turn("Last question: what is 2+2?", vec![], None),
    ]
}

/// A step's label on the requests it made: `turn N` or `compact`.
pub fn label(index: usize, step: &Step) -> String {
    match step {
        Step::Turn { .. } => format!("{index}: turn"),
        Step::Compact => format!("{index}: compact"),
    }
}

/// The agent's call for `op`, with paths in `repo`.
fn call(agent: Agent, repo: &Path, op: Op) -> Answer {
    let path = |file: &str| repo.join(file).display().to_string();
    let call = |name: &str, arguments: Value| Answer::Call {
        name: name.to_owned(),
        arguments,
    };
    match agent {
        Agent::ClaudeCode => match op {
            Op::Read(file) => call("Read", json!({"file_path": path(file)})),
            Op::Edit { file, old, new } => call(
                "Edit",
                json!({"file_path": path(file), "old_string": old, "new_string": new}),
            ),
            Op::Write { file, content } => call(
                "Write",
                json!({"file_path": path(file), "content": content}),
            ),
            Op::Shell(command) => call(
                "Bash",
                json!({"command": command, "description": "Run a command"}),
            ),
        },
        Agent::OpenCode => match op {
            Op::Read(file) => call("read", json!({"filePath": path(file)})),
            Op::Edit { file, old, new } => call(
                "edit",
                json!({"filePath": path(file), "oldString": old, "newString": new}),
            ),
            Op::Write { file, content } => {
                call("write", json!({"filePath": path(file), "content": content}))
            }
            Op::Shell(command) => call(
                "bash",
                json!({"command": command, "description": "Run a command"}),
            ),
        },
        Agent::CodexCustom | Agent::CodexOpenai => match op {
            Op::Read(file) => call("exec_command", json!({"cmd": format!("cat {file}")})),
            Op::Shell(command) => call("exec_command", json!({"cmd": command})),
            Op::Edit { file, old, new } => Answer::Custom {
                name: "apply_patch".into(),
                input: format!(
                    "*** Begin Patch\n*** Update File: {file}\n@@\n{}\n{}\n*** End Patch\n",
                    prefixed("-", old),
                    prefixed("+", new)
                ),
            },
            Op::Write { file, content } => Answer::Custom {
                name: "apply_patch".into(),
                input: format!(
                    "*** Begin Patch\n*** Add File: {file}\n{}\n*** End Patch\n",
                    prefixed("+", content.trim_end())
                ),
            },
        },
    }
}

fn prefixed(mark: &str, text: &str) -> String {
    text.lines()
        .map(|l| format!("{mark}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The answers a turn's requests get: its calls, then text; the spike where the step says.
pub fn script(agent: Agent, repo: &Path, ops: &[Op], spike: Option<usize>) -> Vec<Scripted> {
    let mut answers: Vec<Answer> = ops.iter().map(|op| call(agent, repo, *op)).collect();
    answers.push(Answer::Text);
    answers
        .into_iter()
        .enumerate()
        .map(|(at, answer)| Scripted {
            answer,
            spike: if spike == Some(at) { agent.spike() } else { 0 },
        })
        .collect()
}

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
        wait_for(&screen, "summarize conversation", "the command's completion").await;
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
            if until(|| screen().contains("codex exited"), Duration::from_secs(10)).await {
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
        name.splitn(7, '-').nth(6).expect("a rollout's id").to_owned()
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
    pub async fn play(&self, provider: &ModelProvider, steps: &[Step], recording: bool) {
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

/// The files the session changed before the compaction made during the step labelled `label`
/// with `request`: every change of the steps before, and those of its own step the request holds.
fn changed(steps: &[Step], label: &str, request: &str) -> Vec<&'static str> {
    let index: usize = label
        .split(':')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .expect("a step label");
    let mut files = Vec::new();
    for (at, step) in steps.iter().enumerate().take(index + 1) {
        let Step::Turn { ops, .. } = step else {
            continue;
        };
        for file in ops.iter().filter_map(|op| op.modifies()) {
            if !files.contains(&file) && (at < index || request.contains(file)) {
                files.push(file);
            }
        }
    }
    files
}

/// What the summary of one compaction must keep.
#[derive(Debug)]
pub struct Expected {
    /// The latest request the compacted history held, verbatim.
    pub latest: &'static str,
    /// The files the session changed before the compaction.
    pub modified: Vec<&'static str>,
}

/// The agent's own text, which is never the user's and never a summary's.
pub const FRAMING: [&str; 6] = [
    "This session is being continued from a previous conversation",
    "The messages after this summary are the most recent messages",
    "<system-reminder>",
    "<local-command-",
    "<command-name>",
    "Another language model started to solve this problem",
];

impl Expected {
    /// For the compaction made during the step labelled `step`, whose request was `request`: the
    /// latest of the session's prompts the request holds, and the files changed before it: by
    /// the steps before its own, and by the calls of its own turn the request holds (an agent
    /// compacts before a turn or inside it). `since`: the step and request of an earlier
    /// compaction whose summary was not compactd's (a replay): only what changed after it counts.
    pub fn at(
        steps: &[Step],
        step: &str,
        request: &str,
        since: Option<(&str, &str)>,
    ) -> Expected {
        let latest = steps
            .iter()
            .filter_map(|s| match s {
                Step::Turn { prompt, .. } => Some(*prompt),
                Step::Compact => None,
            })
            .filter(|prompt| request.contains(prompt))
            .last()
            .expect("the compaction holds one of the session's prompts");
        let mut modified = changed(steps, step, request);
        if let Some((step, request)) = since {
            let before = changed(steps, step, request);
            modified.retain(|file| !before.contains(file));
        }
        Expected { latest, modified }
    }

    /// What `summary` lacks of what it must keep — and the agent's framing it holds. `carried`:
    /// text of the previous summary that must be carried on.
    pub fn missing_from(&self, summary: &str, carried: Option<&str>) -> Vec<String> {
        let mut missing = Vec::new();
        if !summary.contains(self.latest) {
            missing.push(format!("the latest request is missing: {:?}", self.latest));
        }
        for file in &self.modified {
            if !summary.contains(file) {
                missing.push(format!("the changed file {file} is missing"));
            }
        }
        if let Some(carried) = carried
            && !summary.contains(carried)
        {
            missing.push(format!("the previous summary was not carried: {carried:?}"));
        }
        for framing in FRAMING {
            if summary.contains(framing) {
                missing.push(format!("the agent's framing is in it: {framing:?}"));
            }
        }
        missing
    }
}

/// The compaction item of a Responses answer (remote compaction v2), if it holds one.
pub fn compaction_item(body: &str) -> Option<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|e| e["type"] == "response.output_item.done" && e["item"]["type"] == "compaction")
        .map(|e| e["item"].clone())
}

/// The summary in the message Codex's model reads in place of a compaction item: what follows
/// the handoff's opening paragraph (which ends with a colon and a newline).
pub fn handed_over(body: &Value) -> String {
    let texts = body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|item| item["content"].as_array().into_iter().flatten())
        .filter_map(|part| part["text"].as_str());
    texts
        .filter_map(|text| text.split_once(":\n").map(|(_, summary)| summary.to_owned()))
        .collect()
}

/// The text an agent reads from an answer of compactd's, in its wire.
pub fn answer_text(body: &str) -> String {
    let mut text = String::new();
    for data in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        let piece = match event["type"].as_str() {
            Some("content_block_delta") => event.pointer("/delta/text"),
            Some("response.output_text.delta") => event.get("delta"),
            _ => event.pointer("/choices/0/delta/content"),
        };
        text.push_str(piece.and_then(Value::as_str).unwrap_or_default());
    }
    text
}

