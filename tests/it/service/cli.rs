//! `compactd plan` and `compactd context` as a user runs them.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

pub fn compactd(args: &[&str], stdin: Option<&[u8]>) -> (i32, Value, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_compactd"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        input.write_all(bytes).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn fixture_path(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn plan_prints_the_plan_of_a_fixture() {
    let (code, json, _) = compactd(&["plan", &fixture_path("large-session.jsonl")], None);
    assert_eq!(code, 0);
    let plan = &json["plan"];
    assert_eq!(plan["firstKeptPathIndex"], 837);
    assert_eq!(plan["turnStartPathIndex"], 834);
    assert_eq!(plan["isSplitTurn"], true);
    assert_eq!(plan["tokensBefore"], 177_657);
    assert_eq!(plan["messagesToSummarize"], 730);
    assert_eq!(plan["turnPrefixMessages"], 3);
    assert_eq!(plan["previousSummary"], Value::Null);
    assert_eq!(plan["entryTokens"].as_object().unwrap().len(), 914);
    let keys: Vec<&str> = json["plan"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(plan["planner"], "pi-0.x", "a file of pi 0.x");
    assert_eq!(
        keys,
        [
            "planner",
            "firstKeptEntryId",
            "firstKeptPathIndex",
            "isSplitTurn",
            "turnStartPathIndex",
            "tokensBefore",
            "previousSummary",
            "messagesToSummarize",
            "turnPrefixMessages",
            "readFiles",
            "modifiedFiles",
            "conversation",
            "turnPrefixConversation",
            "entryTokens"
        ]
    );
}

#[test]
fn plan_reads_standard_input_and_honours_the_settings_and_leaf() {
    let bytes = std::fs::read(fixture_path("before-compaction.jsonl")).unwrap();
    let (code, json, _) = compactd(&["plan", "-", "--keep-recent-tokens", "2000"], Some(&bytes));
    assert_eq!(code, 0);
    assert_eq!(json["plan"]["firstKeptPathIndex"], 1000);
    assert_eq!(json["plan"]["turnPrefixConversation"], "");

    // Planning from an earlier leaf: the path ends there. Migrated v1 ids are random on every
    // read, so plan over the migrated (v3) text, whose ids are fixed.
    let session = compactd_core::session::Session::parse(&bytes, Default::default()).unwrap();
    let bytes = session.to_jsonl().into_bytes();
    let leaf = &session.entries[700].id;
    let (code, json, _) = compactd(&["plan", "-", "--leaf", leaf], Some(&bytes));
    assert_eq!(code, 0);
    let messages_up_to_leaf = session.entries[..=700]
        .iter()
        .filter(|e| e.entry_type().as_str() == "message")
        .count();
    assert_eq!(
        json["plan"]["entryTokens"].as_object().unwrap().len(),
        messages_up_to_leaf
    );
    assert!(
        json["plan"]["entryTokens"].get(leaf).is_some()
            || session.entries[700].entry_type().as_str() != "message"
    );
    assert!(
        json["plan"]["entryTokens"]
            .get(&session.entries[701].id)
            .is_none()
    );
}

/// A large session file is mapped rather than read, standard input is read: both plan byte for
/// byte as the library does.
#[test]
fn a_mapped_file_and_standard_input_plan_as_the_library_does() {
    use compactd_core::session::{ParseOptions, Session};
    use compactd_testkit::synth;
    let template = std::fs::read(fixture_path("large-session.jsonl")).unwrap();
    let template = Session::parse(&template, ParseOptions::default()).unwrap();
    // v3 text, so that ids are the same on every read; larger than what is read, not mapped.
    let text = synth::repeat_session(&template, 3_000_000);
    let file = temp_dir("mapped-plan").join("session.jsonl");
    std::fs::write(&file, &text).unwrap();
    let run = |args: &[&str], stdin: &[u8]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_compactd"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        out.stdout
    };
    let mapped = run(&["plan", file.to_str().unwrap()], b"");
    let read = run(&["plan", "-"], text.as_bytes());

    let session = Session::parse(text.as_bytes(), ParseOptions::default()).unwrap();
    let path = session.active_path(None).unwrap();
    let outcome = compactd_core::compaction::PlanOutcome::for_path(&path, &Default::default());
    assert!(outcome.plan.is_some(), "a plan with a conversation");
    let mut expected = serde_json::to_vec(&outcome).unwrap();
    expected.push(b'\n');
    assert!(
        mapped == expected,
        "the mapped file plans as the library does"
    );
    assert!(read == expected, "standard input plans as the library does");
}

#[test]
fn plan_is_null_with_a_reason_when_there_is_nothing_to_compact() {
    let text = concat!(
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z"}"#,
        "\n",
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi"}}"#,
        "\n",
    );
    let (code, json, _) = compactd(&["plan", "-"], Some(text.as_bytes()));
    assert_eq!(code, 0);
    assert_eq!(json["plan"], Value::Null);
    assert!(
        json["reason"]
            .as_str()
            .unwrap()
            .contains("nothing to summarize")
    );
}

#[test]
fn bad_input_exits_with_status_2_and_names_the_line() {
    let text = concat!(
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z"}"#,
        "\n",
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi"}}"#,
        "\n",
        "{broken\n",
    );
    let (code, json, stderr) = compactd(&["plan", "-"], Some(text.as_bytes()));
    assert_eq!((code, json), (2, Value::Null));
    assert!(stderr.contains("line 3: not valid JSON"), "{stderr}");

    let (code, json, stderr) = compactd(&["plan", "-", "--lenient"], Some(text.as_bytes()));
    assert_eq!(code, 0);
    assert!(json.get("plan").is_some());
    assert!(stderr.contains("skipped 1 malformed line"), "{stderr}");

    let (code, _, stderr) = compactd(&["context", "-", "--leaf", "nope"], Some(text.as_bytes()));
    assert_eq!(code, 2);
    assert!(
        stderr.contains("line 3"),
        "strict reading fails first: {stderr}"
    );

    let (code, _, stderr) = compactd(&["plan", "/definitely/not/here.jsonl"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot read"), "{stderr}");

    let (code, _, _) = compactd(
        &["plan", "-", "--keep-recent-tokens", "-5"],
        Some(text.as_bytes()),
    );
    assert_eq!(code, 2);
}

#[test]
fn context_prints_the_llm_facing_messages() {
    let (code, json, _) = compactd(&["context", &fixture_path("before-compaction.jsonl")], None);
    assert_eq!(code, 0);
    let messages = json.as_array().unwrap();
    assert_eq!(messages.len(), 446);
    assert_eq!(messages[0]["role"], "user");
    assert!(
        messages[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("<summary>\n# Context Checkpoint")
    );
    // bashExecution messages arrive as user messages.
    assert!(messages.iter().any(|m| {
        m["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Ran `"))
    }));
    assert!(
        messages
            .iter()
            .all(|m| ["user", "assistant", "toolResult"].contains(&m["role"].as_str().unwrap()))
    );

    let (code, _, stderr) = compactd(
        &[
            "context",
            &fixture_path("large-session.jsonl"),
            "--leaf",
            "nope",
        ],
        None,
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("no entry with id \"nope\""), "{stderr}");
}

/// `compactd` with the given arguments and a clean environment (extractive summarizer only).
fn compactd_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_compactd"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("compactd-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn compact_prints_the_entry_and_write_appends_it() {
    let dir = temp_dir("compact");
    // A v3 file: the migrated large fixture.
    let v1 = std::fs::read(fixture_path("large-session.jsonl")).unwrap();
    let session = compactd_core::session::Session::parse(&v1, Default::default()).unwrap();
    let file = dir.join("v3.jsonl");
    std::fs::write(&file, session.to_jsonl()).unwrap();
    let path = file.to_str().unwrap();

    // The call is logged in the configured database, as the service logs its own.
    let data_dir = dir.join("data");
    let env = [("COMPACTD_DATA_DIR", data_dir.to_str().unwrap())];
    let (code, stdout, stderr) = compactd_env(&["compact", path, "--write"], &env);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("compacted by extractive"), "{stderr}");
    let calls = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let url = format!("sqlite:{}", data_dir.join("compactd.db").display());
        let store =
            compactd_store::SqliteStore::connect_url(&url, std::time::Duration::from_secs(5))
                .await
                .unwrap();
        compactd_store::Ledger::calls(&store, "", None, 10)
            .await
            .unwrap()
    });
    // The fixture's cut splits a turn: two calls, the history and the turn prefix.
    let mut purposes: Vec<&str> = calls.iter().map(|c| c.purpose.as_str()).collect();
    purposes.sort_unstable();
    assert_eq!(purposes, ["history", "turn_prefix"], "{calls:?}");
    let call = calls.iter().find(|c| c.purpose == "history").unwrap();
    assert_eq!(
        (call.endpoint.as_str(), call.outcome.as_str()),
        ("cli", "ok")
    );
    assert!(calls.iter().all(|c| c.endpoint == "cli" && c.status == 200));
    assert_eq!(call.session_id.as_deref(), Some(session.header.id.as_str()));
    assert_eq!(call.model.as_deref(), Some("extractive"));
    assert!(
        call.prompt_bytes > 100_000 && call.summary_bytes > 100,
        "{call:?}"
    );
    assert_eq!(
        call.prompt, None,
        "texts are not kept unless COMPACTD_STORE_TEXT is set"
    );
    let entry: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(entry["type"], "compaction");
    assert_eq!(entry["parentId"], session.entries.last().unwrap().id);
    assert!(
        entry["summary"]
            .as_str()
            .unwrap()
            .contains("## Critical Context")
    );
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(written, format!("{}{}", session.to_jsonl(), stdout));
    let reread =
        compactd_core::session::Session::parse(written.as_bytes(), Default::default()).unwrap();
    assert!(reread.entries.last().unwrap().is_compaction());

    // Compacting again right away: nothing to compact.
    let (code, _, stderr) = compactd_env(&["compact", path], &env);
    assert_eq!(code, 2);
    assert!(stderr.contains("nothing to compact"), "{stderr}");

    // A v1 file is rewritten as v3 with the entry at the end.
    let old = dir.join("v1.jsonl");
    std::fs::write(&old, &v1).unwrap();
    let (code, stdout, stderr) = compactd_env(&["compact", old.to_str().unwrap(), "--write"], &env);
    assert_eq!(code, 0, "{stderr}");
    let rewritten =
        compactd_core::session::Session::parse(&std::fs::read(&old).unwrap(), Default::default())
            .unwrap();
    assert_eq!(rewritten.source_version, 3);
    assert_eq!(rewritten.entries.len(), 1019);
    assert_eq!(rewritten.entries.last().unwrap().raw, stdout.trim());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A rewrite keeps a private file private and never writes through a link planted at the
/// temporary name an older version used; a pin over the API's limit is refused as the API does.
#[cfg(unix)]
#[test]
fn write_keeps_the_files_mode_ignores_planted_links_and_pins_have_the_apis_limits() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("write-safely");
    let data_dir = dir.join("data");
    let env = [("COMPACTD_DATA_DIR", data_dir.to_str().unwrap())];
    let old = dir.join("v1.jsonl");
    std::fs::write(
        &old,
        std::fs::read(fixture_path("large-session.jsonl")).unwrap(),
    )
    .unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o600)).unwrap();
    let elsewhere = dir.join("someone-elses");
    std::fs::write(&elsewhere, "keep").unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("v1.jsonl.compactd-tmp")).unwrap();

    let long_pin = "x".repeat(2001);
    let (code, _, stderr) = compactd_env(
        &[
            "compact",
            old.to_str().unwrap(),
            "--write",
            "--pin",
            &long_pin,
        ],
        &env,
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("2001 characters, over the limit of 2000"),
        "{stderr}"
    );
    let (code, _, stderr) = compactd_env(
        &["compact", old.to_str().unwrap(), "--write", "--pin", "  "],
        &env,
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("the pin is empty"), "{stderr}");

    let (code, _, stderr) = compactd_env(
        &[
            "compact",
            old.to_str().unwrap(),
            "--write",
            "--pin",
            "keep the API stable",
        ],
        &env,
    );
    assert_eq!(code, 0, "{stderr}");
    let mode = std::fs::metadata(&old).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the rewrite widened the file's permissions");
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "keep");
    let rewritten = std::fs::read_to_string(&old).unwrap();
    assert!(rewritten.contains("keep the API stable"));
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn migrate_applies_the_migrations_of_the_configured_database() {
    let dir = temp_dir("migrate");
    let url = format!("sqlite:{}", dir.join("state.db").display());
    let (code, stdout, stderr) = compactd_env(&["migrate"], &[("DATABASE_URL", &url)]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "migrations applied (sqlite)");
    assert!(dir.join("state.db").exists());
    let (code, _, stderr) = compactd_env(&["migrate"], &[("DATABASE_URL", "mysql://x")]);
    assert_eq!(code, 2);
    assert!(stderr.contains("DATABASE_URL"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn keys_and_migrate_need_only_the_database_whatever_the_summarizers_say() {
    let dir = temp_dir("keys-any-chain");
    let url = format!("sqlite:{}", dir.join("state.db").display());
    // A chain that `serve` would refuse (an Anthropic model, no Anthropic key) and settings of
    // other groups that are not even valid: none of it concerns the key store.
    let env = [
        ("DATABASE_URL", url.as_str()),
        ("COMPACTD_MODELS", "anthropic:claude-haiku-4-5"),
        ("COMPACTD_DEADLINE_SECS", "500"),
        ("COMPACTD_MODEL_OPTIONS", "not json"),
    ];
    for args in [
        &["migrate"][..],
        &["keys", "list"],
        &["keys", "create", "--tenant", "ops"],
    ] {
        let (code, stdout, stderr) = compactd_env(args, &env);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert!(!stdout.is_empty(), "{args:?}");
    }
    let (_, listed, _) = compactd_env(&["keys", "list"], &env);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["tenant"], "ops");
    // `serve` reads every group, and names the setting at fault.
    let (code, _, stderr) = compactd_env(&["serve"], &env);
    assert_eq!(code, 2);
    assert!(stderr.contains("model-options"), "{stderr}");
    let (code, _, stderr) = compactd_env(&[], &env[..3]);
    assert_eq!(code, 2, "no command is `serve`");
    assert!(stderr.contains("COMPACTD_DEADLINE_SECS"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn keys_budget_sets_shows_and_clears_a_tenants_daily_budget() {
    let dir = temp_dir("keys-budget");
    let url = format!("sqlite:{}", dir.join("state.db").display());
    let env = [("DATABASE_URL", url.as_str())];
    let run = |args: &[&str]| {
        let (code, stdout, stderr) = compactd_env(args, &env);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        serde_json::from_str::<Value>(&stdout).unwrap()
    };
    let set = run(&["keys", "budget", "team-a", "--daily-tokens", "250000"]);
    assert_eq!(
        set,
        json!({"tenant": "team-a", "dailyTokens": 250000, "usedToday": 0})
    );
    assert_eq!(run(&["keys", "budget", "team-a"])["dailyTokens"], 250000);
    assert_eq!(
        run(&["keys", "budget", "team-b"])["dailyTokens"],
        Value::Null
    );
    assert_eq!(
        run(&["keys", "budget", "team-a", "--clear"])["dailyTokens"],
        Value::Null
    );
    let (code, _, stderr) =
        compactd_env(&["keys", "budget", "team-a", "--daily-tokens", "0"], &env);
    assert_eq!(code, 2, "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
