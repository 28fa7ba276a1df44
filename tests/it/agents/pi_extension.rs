//! compactd's pi extension (`integrations/pi/`) in the real pinned pi (`scripts/agents.sh`), run
//! in RPC mode as an editor runs it: a turn with pi's own model (a fake provider), then
//! `compact` — the extension uploads the session to compactd, compactd writes the compaction
//! (its model, not pi's), pi saves compactd's summary as its entry and sends it to its model on
//! the next turn; a second compaction appends to the same stored session. With compactd down,
//! pi compacts by itself. `/handoff <goal>` opens a new session with compactd's draft.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::support::gateway::MODEL_SUMMARY;
use crate::support::{FakeProvider, Reply, TestApp, chain_config};
use compactd_testkit::agents_bin;

/// pi in RPC mode: commands in on stdin, events and responses out on stdout, one JSON a line.
struct Pi {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Pi {
    fn start(root: &Path, compactd: &str) -> Pi {
        let extension = Path::new(env!("CARGO_MANIFEST_DIR")).join("integrations/pi/index.js");
        let mut child = tokio::process::Command::new(agents_bin().join("pi"))
            .args(["--mode", "rpc", "--model", "fake/fake-model", "-e"])
            .arg(&extension)
            .current_dir(root.join("repo"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", root.join("home"))
            .env("PI_CODING_AGENT_DIR", root.join("agent"))
            .env("COMPACTD_URL", compactd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Pi {
            child,
            stdin,
            stdout,
        }
    }

    async fn send(&mut self, command: Value) {
        let line = format!("{command}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// Reads pi's output until a line `is` accepts, which it returns.
    async fn until(&mut self, is: impl Fn(&Value) -> bool) -> Value {
        let read = async {
            loop {
                let line = self.stdout.next_line().await.unwrap().expect("pi exited");
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
            .expect("pi answered in time")
    }

    async fn prompt(&mut self, message: &str) {
        self.send(json!({"type": "prompt", "message": message}))
            .await;
        self.until(|v| v["type"] == "agent_settled").await;
    }

    async fn compact(&mut self) -> Value {
        self.send(json!({"id": "c", "type": "compact"})).await;
        self.until(|v| v["type"] == "response" && v["command"] == "compact")
            .await
    }
}

/// A scratch repository, home and pi agent directory whose model is the fake `provider`, with
/// compaction keeping little, so that a short session has something to summarize.
fn scratch(provider: &FakeProvider) -> std::path::PathBuf {
    let root = std::env::temp_dir().join(format!(
        "compactd-pi-{}-{:x}",
        std::process::id(),
        fastrand::u64(..)
    ));
    for dir in ["repo", "home", "agent"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(
        root.join("repo/calc.py"),
        "def add(a, b):\n    return a + b\n",
    )
    .unwrap();
    let models = json!({"providers": {"fake": {
        "baseUrl": format!("{}/v1", provider.url), "api": "openai-completions", "apiKey": "dummy",
        "models": [{"id": "fake-model", "contextWindow": 200000, "maxTokens": 4000}]
    }}});
    std::fs::write(root.join("agent/models.json"), models.to_string()).unwrap();
    let settings =
        json!({"compaction": {"enabled": false, "keepRecentTokens": 1, "reserveTokens": 1000}});
    std::fs::write(root.join("agent/settings.json"), settings.to_string()).unwrap();
    root
}

fn bodies(provider: &FakeProvider) -> Vec<String> {
    provider
        .received()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.bytes).into_owned())
        .collect()
}

#[tokio::test]
async fn pi_compacts_through_the_extension_with_compactds_summary() {
    compactd_testkit::needs!(Agents);
    let provider = FakeProvider::agents().await;
    let model = FakeProvider::start(vec![], Reply::openai(MODEL_SUMMARY)).await;
    let app = TestApp::spawn(chain_config(&model, "openai:compactd-summarizer", false)).await;
    let root = scratch(&provider);
    let mut pi = Pi::start(&root, &app.url);
    pi.prompt("What does calc.py do? Answer briefly.").await;
    pi.prompt("Now suggest a docstring for add.").await;
    let compacted = pi.compact().await;
    assert_eq!(compacted["success"], true, "{compacted}");
    let summary = compacted["data"]["summary"].as_str().unwrap();
    assert!(summary.contains("SUMMARY BY COMPACTD'S MODEL"), "{summary}");
    assert!(!model.received().is_empty(), "compactd's model wrote it");
    let asked_pi_model = bodies(&provider);
    assert!(
        asked_pi_model.iter().all(|b| !b.contains("<conversation>")),
        "pi's own model was not asked to summarize"
    );
    // compactd holds the session, with its entry.
    let sessions: Value = app.sessions().await.json().await.unwrap();
    let stored = sessions["sessions"].as_array().unwrap();
    assert_eq!(stored.len(), 1, "{sessions}");

    // The next turn carries compactd's summary to pi's model.
    let before = asked_pi_model.len();
    pi.prompt("And what about subtraction?").await;
    let next = bodies(&provider);
    assert!(
        next[before..]
            .iter()
            .any(|b| b.contains("SUMMARY BY COMPACTD"))
    );

    // A second compaction appends to the same stored session.
    pi.prompt("Thanks. Anything else?").await;
    let again = pi.compact().await;
    assert_eq!(again["success"], true, "{again}");
    let sessions: Value = app.sessions().await.json().await.unwrap();
    assert_eq!(
        sessions["sessions"].as_array().unwrap().len(),
        1,
        "{sessions}"
    );
    let id = sessions["sessions"][0]["id"].as_str().unwrap();
    let history: Value = app
        .client
        .get(format!("{}/v1/sessions/{id}/compactions", app.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // compactd's two entries, and the copy of the first that pi saved in its file and the
    // second compaction brought along.
    let sources: Vec<&str> = history["compactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["compactd", "upload", "compactd"], "{history}");

    // pi's own file holds compactd's entries.
    let file = walk(&root.join("agent"))
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let text = std::fs::read_to_string(file).unwrap();
    let entries: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let compactions: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "compaction")
        .collect();
    assert_eq!(compactions.len(), 2);
    assert!(
        compactions
            .iter()
            .all(|c| c["details"]["compactd"]["session"] == id)
    );
    drop(pi.child);
}

/// Zero-wait (issue 67): the extension sends each turn's entries to compactd as the turn ends,
/// with the model's window and pi's settings; past the share, compactd summarizes the session
/// while pi works, and pi's compaction is answered from that summary without a model call.
#[tokio::test]
async fn pi_compacts_at_once_from_the_summary_compactd_prepared_while_it_worked() {
    compactd_testkit::needs!(Agents);
    let provider = FakeProvider::agents().await;
    let model = FakeProvider::start(vec![], Reply::openai(MODEL_SUMMARY)).await;
    let mut config = chain_config(&model, "openai:compactd-summarizer", false);
    // A share the short session passes (pi's model has a 200,000-token window).
    config.gateway.prepare_at = 0.0001;
    let app = TestApp::spawn(config).await;
    let root = scratch(&provider);
    let mut pi = Pi::start(&root, &app.url);
    pi.prompt("What does calc.py do? Answer briefly.").await;
    pi.prompt("Now suggest a docstring for add.").await;
    let prepared = r#"compactd_prepared_summaries_total{outcome="prepared"}"#;
    app.wait_for_metric(prepared, 1.0).await;
    crate::gateway::prepare::settled(&app).await;

    let calls = model.received().len();
    let compacted = pi.compact().await;
    assert_eq!(compacted["success"], true, "{compacted}");
    assert_eq!(
        model.received().len(),
        calls,
        "no model call while pi waits"
    );
    let used = r#"compactd_prepared_summaries_total{outcome="used"}"#;
    assert_eq!(app.metric(used).await, 1.0);
    let summary = compacted["data"]["summary"].as_str().unwrap();
    assert!(summary.contains("SUMMARY BY COMPACTD'S MODEL"), "{summary}");
    assert!(
        summary.contains("Now suggest a docstring for add."),
        "the latest request verbatim: {summary}"
    );
    drop(pi.child);
}

#[tokio::test]
async fn with_compactd_down_pi_compacts_by_itself() {
    compactd_testkit::needs!(Agents);
    let provider = FakeProvider::agents().await;
    let gone = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let root = scratch(&provider);
    let mut pi = Pi::start(&root, &format!("http://{gone}"));
    pi.prompt("What does calc.py do? Answer briefly.").await;
    pi.prompt("Now suggest a docstring for add.").await;
    let compacted = pi.compact().await;
    assert_eq!(compacted["success"], true, "{compacted}");
    // pi's own summarization: its model was asked, and answered.
    let asked = bodies(&provider);
    assert!(asked.iter().any(|b| b.contains("<conversation>")));
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// `/handoff <goal>` in pi 1.6's RPC mode: compactd drafts the prompt from the session (the goal
/// first, the user's rule kept), the draft opens in the client's editor, and pi opens a new
/// session whose header names the old file as its parent, the edited prompt in its editor; sent,
/// it is the new session's first user message and all its model sees of the old thread.
#[tokio::test]
async fn pi_hands_off_to_a_new_session_through_the_extension() {
    compactd_testkit::needs!(Agents);
    let provider = FakeProvider::agents().await;
    let app = TestApp::spawn(crate::support::config()).await;
    let root = scratch(&provider);
    let mut pi = Pi::start(&root, &app.url);
    pi.prompt("Never call unwrap() in library code. What does calc.py do?")
        .await;
    pi.prompt("Now suggest a docstring for add.").await;
    pi.send(json!({"id": "s1", "type": "get_state"})).await;
    let before = pi
        .until(|v| v["type"] == "response" && v["id"] == "s1")
        .await["data"]["sessionFile"]
        .as_str()
        .unwrap()
        .to_owned();

    let goal = "Write the docstring for add in calc.py";
    pi.send(json!({"id": "h", "type": "prompt", "message": format!("/handoff {goal}")}))
        .await;
    let editor = pi
        .until(|v| v["type"] == "extension_ui_request" && v["method"] == "editor")
        .await;
    let draft = editor["prefill"].as_str().unwrap();
    assert!(draft.starts_with(goal), "{draft}");
    assert!(
        draft.contains("Never call unwrap() in library code."),
        "{draft}"
    );
    let edited = format!("{draft}\nKeep it to one line.");
    pi.send(json!({"type": "extension_ui_response", "id": editor["id"], "value": edited}))
        .await;
    let ready = pi
        .until(|v| v["type"] == "extension_ui_request" && v["method"] == "set_editor_text")
        .await;
    assert_eq!(ready["text"], edited.as_str());
    pi.send(json!({"id": "s2", "type": "get_state"})).await;
    let after = pi
        .until(|v| v["type"] == "response" && v["id"] == "s2")
        .await["data"]["sessionFile"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(after, before, "a new session");

    // The user sends the prompt: the new session's first message, and all its model is told.
    let asked_before = bodies(&provider).len();
    pi.prompt(&edited).await;
    let asked = bodies(&provider);
    let first_turn = &asked[asked_before..];
    assert!(
        first_turn
            .iter()
            .any(|b| b.contains("Keep it to one line."))
    );
    assert!(
        first_turn
            .iter()
            .all(|b| !b.contains("What does calc.py do?")),
        "the old thread stays behind"
    );
    let text = std::fs::read_to_string(&after).unwrap();
    let entries: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        entries[0]["parentSession"],
        before.as_str(),
        "{}",
        entries[0]
    );
    // (pi 1.6 records its system prompt as a message of its own first.)
    let first = entries
        .iter()
        .find(|e| e["type"] == "message" && e["message"]["role"] == "user")
        .expect("a user message");
    let content = &first["message"]["content"];
    let said = content
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| content[0]["text"].as_str().unwrap().to_owned());
    assert_eq!(said, edited);
    // compactd holds the old session, the draft's new one, and the new session as its first
    // turn left it (the extension sends each turn, in the background).
    let synced = crate::support::eventually("the new session synced by its turn", || async {
        let sessions: Value = app.sessions().await.json().await.unwrap();
        let held = sessions["sessions"].as_array().cloned().unwrap_or_default();
        let new = held
            .iter()
            .find(|s| s["headerId"] == entries[0]["id"])
            .cloned();
        new.map(|new| (held.len(), new))
    })
    .await;
    assert_eq!(synced.0, 3, "the old session, the draft's and the new one");
    let count = synced.1["entryCount"].as_u64().unwrap_or_default() as usize;
    assert!(
        (2..entries.len()).contains(&count),
        "its turn's entries: {}",
        synced.1
    );
    drop(pi.child);
}
