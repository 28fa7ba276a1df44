use super::{Placeholders, Redactor};
use compactd_testkit::samples;

fn redactor() -> Redactor {
    Redactor::new(None).unwrap()
}

#[test]
fn every_family_is_found_by_its_rule_and_replaced_whole() {
    let redactor = redactor();
    for seed in [1, 2, 3] {
        for sample in samples::all(seed) {
            let text = format!("some context first\n{}\nand after", sample.line);
            let mut names = Placeholders::default();
            let redacted = redactor.redact(&text, &mut names);
            assert!(
                !redacted.contains(&sample.secret),
                "{} leaked: {redacted}",
                sample.family
            );
            assert!(
                redacted.contains(&format!("[REDACTED:{}:1]", sample.rule)),
                "{}: {redacted}",
                sample.family
            );
            assert!(redacted.starts_with("some context first\n"));
            assert!(redacted.ends_with("\nand after"));
        }
    }
}

#[test]
fn the_same_secret_gets_the_same_placeholder_and_others_the_next_number() {
    let redactor = redactor();
    let a = &samples::all(1)[5];
    let b = &samples::all(2)[5];
    assert_eq!(a.rule, "github-pat");
    let mut names = Placeholders::default();
    let first = redactor.redact(
        &format!("{} then {} then {}", a.secret, b.secret, a.secret),
        &mut names,
    );
    assert_eq!(
        first,
        "[REDACTED:github-pat:1] then [REDACTED:github-pat:2] then [REDACTED:github-pat:1]"
    );
    // A later text of the same summarization (the model's answer) uses the same names.
    assert_eq!(
        redactor.redact(&format!("echo {}", b.secret), &mut names),
        "echo [REDACTED:github-pat:2]"
    );
    assert_eq!(names.counts["github-pat"], 4);
    assert_eq!(names.total(), 4);
    assert!(!format!("{names:?}").contains(&a.secret));
}

#[test]
fn what_only_looks_like_a_secret_is_left_alone() {
    let redactor = redactor();
    for text in [
        // gitleaks' allowlists: AWS's documented example key, placeholders, variables.
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
        "DB_PASSWORD=${DB_PASSWORD}",
        "export ANTHROPIC_API_KEY=sk-ant-...",
        "API_TOKEN=changeme",
        "postgres://app:${PGPASSWORD}@db/app",
        "the api key rotation is documented in docs/keys.md",
        "let token = read_token(&path)?;",
        "https://example.com/path/to/page",
        // Already redacted text stays as it is.
        "DB_PASSWORD=[REDACTED:env-assignment:1]",
    ] {
        let mut names = Placeholders::default();
        assert_eq!(redactor.redact(text, &mut names), text, "{text}");
    }
}

#[test]
fn the_real_sessions_hold_no_secrets_and_keep_their_text() {
    // The shared fixtures and oh-my-pi's recorded requests hold no secrets, only documentation
    // placeholders such as `export ANTHROPIC_API_KEY=sk-ant-...`: nothing is found.
    let redactor = redactor();
    let root = compactd_testkit::fixtures();
    for name in [
        "large-session.jsonl",
        "before-compaction.jsonl",
        "omp-requests/before.jsonl",
        "omp-requests/large.jsonl",
        "omp-requests-18.3/before.jsonl",
        "omp-requests-18.3/large.jsonl",
        "agent-requests/claude-code-2.1.330.jsonl",
        "agent-requests/codex-0.169.0-custom-provider.jsonl",
        "agent-requests/codex-0.169.0-openai-provider.jsonl",
        "agent-requests/opencode-1.18.33.jsonl",
        "pi15/s0000.jsonl",
        "pi15/s0001.jsonl",
        "pi15/s0002.jsonl",
    ] {
        let text = std::fs::read_to_string(root.join(name)).unwrap();
        let found = redactor.find(&text);
        assert!(
            found.is_empty(),
            "{name}: {:?}",
            found.iter().map(|f| &f.rule).collect::<Vec<_>>()
        );
    }
}

#[test]
fn operators_add_rules_in_gitleaks_format() {
    let extra = r#"
[[rules]]
id = "acme-internal-token"
regex = '''\b(acme_[a-z0-9]{12})\b'''
keywords = ["acme_"]
"#;
    let redactor = Redactor::new(Some(extra)).unwrap();
    let mut names = Placeholders::default();
    assert_eq!(
        redactor.redact("token acme_0123456789ab here", &mut names),
        "token [REDACTED:acme-internal-token:1] here"
    );
    let broken = Redactor::new(Some("[[rules]]\nid = \"x\"\nregex = '''(unclosed'''\n"));
    assert!(broken.unwrap_err().contains("rule x"));
}

#[test]
fn text_that_is_not_ascii_around_a_secret_is_kept_exactly() {
    let redactor = redactor();
    let sample = &samples::all(4)[5];
    let text = format!("héllo 🦀 {} ✓ \u{FFFD}", sample.secret);
    let mut names = Placeholders::default();
    assert_eq!(
        redactor.redact(&text, &mut names),
        "héllo 🦀 [REDACTED:github-pat:1] ✓ \u{FFFD}"
    );
}

#[test]
fn braces_that_open_no_repetition_are_literals_as_in_go() {
    assert_eq!(
        super::rules::go_braces(r"^\$(?:\d+|{\d+})$"),
        r"^\$(?:\d+|\{\d+})$"
    );
    assert_eq!(
        super::rules::go_braces(r"a{2,3}[{]\{x{,}"),
        r"a{2,3}[{]\{x\{,}"
    );
    assert_eq!(super::rules::go_braces(r"[]{]{1}"), r"[\]{]{1}");
}

#[test]
fn secrets_in_the_shapes_tools_write_are_found() {
    let redactor = redactor();
    for seed in [1, 2, 3, 4] {
        for (secret, text) in samples::tool_shapes(seed) {
            let mut names = Placeholders::default();
            let redacted = redactor.redact(&text, &mut names);
            assert!(
                !redacted.contains(&secret),
                "left in: {redacted} (from {text})"
            );
            assert!(redacted.contains("[REDACTED:"), "{redacted}");
        }
    }
}

#[test]
fn the_unescaped_view_keeps_every_position() {
    let text = r#"a\"b\\c\nd\u00e9 é\t"#;
    let view = super::unescaped_view(text).unwrap();
    assert_eq!(view.len(), text.len());
    assert_eq!(view, r#"a "b  c  d\u00e9 é  "#);
    assert!(super::unescaped_view("no escapes here").is_none());
}

#[test]
fn ordinary_code_has_no_secrets() {
    // Checksums, digests, commit ids, UUIDs, base64 data, lock files and identifiers that say
    // key, token or secret: nothing is a secret, nothing is found.
    let redactor = redactor();
    for seed in 0..20 {
        let text = samples::ordinary_code(seed);
        let found = redactor.find(&text);
        assert!(
            found.is_empty(),
            "seed {seed}: {:?}",
            found
                .iter()
                .map(|f| format!("{} {:?}", f.rule, &text[f.start..f.end]))
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn compactds_own_sources_have_no_secrets() {
    // compactd's own code, lock file, docs and scripts: real ordinary code (the redaction rules,
    // their samples and tests excepted, which hold secrets on purpose).
    let root = compactd_testkit::workspace_root();
    let root = root.as_path();
    let redactor = redactor();
    let mut files = vec![
        root.join("Cargo.lock"),
        root.join("README.md"),
        root.join("BENCHMARKS.md"),
    ];
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    for dir in ["src", "crates", "templates", "scripts"] {
        walk(&root.join(dir), &mut files);
    }
    let mut scanned = 0;
    for file in files {
        if file.starts_with(root.join("crates/compactd-core/src/redact"))
            || file.ends_with("crates/compactd-testkit/src/samples.rs")
        {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        scanned += 1;
        // A test that secrets never print holds one on purpose.
        let deliberate = |f: &super::Finding| {
            file.ends_with("src/config/mod.rs") && &text[f.start..f.end] == "pw-secret"
        };
        let found: Vec<_> = redactor
            .find(&text)
            .into_iter()
            .filter(|f| !deliberate(f))
            .collect();
        assert!(
            found.is_empty(),
            "{}: {:?}",
            file.display(),
            found
                .iter()
                .map(|f| format!("{} {:?}", f.rule, &text[f.start..f.end]))
                .collect::<Vec<_>>()
        );
    }
    assert!(scanned > 100, "{scanned}");
}

/// The screen (one pass for the rules that run on nearly every text) changes what runs, never
/// what is found: every sample, bare, inside JSON written in a string (found through the view),
/// and next to ordinary code, is found the same with the screen and without it.
#[test]
fn the_screen_finds_what_each_rule_alone_finds() {
    use super::{Compiled, builtin_rules, unescaped_view};
    let screened = Compiled::new(builtin_rules());
    let alone = Compiled::with_screen(builtin_rules(), false);
    let screen = screened
        .screen
        .as_ref()
        .expect("the built-in rules have a screen");
    let ids: Vec<&str> = screen
        .rules
        .iter()
        .map(|&i| screened.set.rules[i].id.as_str())
        .collect();
    for id in [
        "generic-api-key",
        "env-assignment",
        "discord-bot-token",
        "jwt",
        "twilio-api-key",
    ] {
        assert!(ids.contains(&id), "{id} is not screened: {ids:?}");
    }
    let find = |compiled: &Compiled, text: &str| {
        let global: Vec<_> = compiled.set.allowlists.iter().collect();
        let view = unescaped_view(text);
        let mut found = Vec::new();
        compiled.find(text, view.as_deref(), &global, &mut found);
        found.sort_by(|a, b| (a.start, a.end, &a.rule).cmp(&(b.start, b.end, &b.rule)));
        found
    };
    let mut texts = Vec::new();
    for seed in [1, 2, 3] {
        for sample in samples::all(seed) {
            texts.push(format!("let key = hash(prompt);\n{}\nok", sample.line));
            texts.push(
                serde_json::to_string(&format!("{{\"config\": {:?}}}", sample.line)).unwrap(),
            );
        }
    }
    let mut found_any = 0;
    for text in &texts {
        let expected = find(&alone, text);
        found_any += usize::from(!expected.is_empty());
        assert_eq!(find(&screened, text), expected, "{text}");
    }
    assert!(found_any > texts.len() / 2, "the samples are found at all");
}

#[test]
fn a_value_under_a_key_named_like_a_secret_is_found_whatever_its_shape() {
    let redactor = redactor();
    let mut rng = fastrand::Rng::with_seed(64);
    const URLSAFE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const HEX: &[u8] = b"0123456789abcdef";
    let mut of = |alphabet: &[u8], n: usize| -> String {
        (0..n)
            .map(|_| alphabet[rng.usize(..alphabet.len())] as char)
            .collect()
    };
    for _ in 0..100 {
        // The last two segments of a Discord bot token (`abc.def`, which reads as a code path
        // without its key), a UUID (a Heroku key), a password of any letters.
        let values = [
            format!("{}.{}", of(URLSAFE, 6), of(URLSAFE, 38)),
            format!(
                "{}-{}-4{}-a{}-{}",
                of(HEX, 8),
                of(HEX, 4),
                of(HEX, 3),
                of(HEX, 3),
                of(HEX, 12)
            ),
            format!("{}!{}", of(URLSAFE, 6), of(URLSAFE, 9)),
        ];
        for value in &values {
            for text in [
                format!("bash(command=\"ls\", env={{\"SECRET_VALUE\":\"{value}\"}})"),
                format!("{{\"headers\": {{\"X-Api-Key\": \"{value}\"}}}}"),
                format!("requests.get(url, headers={{'Authorization': 'Bearer {value}'}})"),
                format!("db:\n  password: \"{value}\"\n"),
                format!("{{\\\"client_secret\\\": \\\"{value}\\\"}}"),
            ] {
                let redacted = redactor.redact(&text, &mut Placeholders::default());
                assert!(!redacted.contains(value.as_str()), "{text} -> {redacted}");
            }
        }
    }
    // Names and numbers under such keys are what they say.
    for text in [
        r#"{"token_type": "Bearer", "max_tokens": "4096", "tokenizer": "cl100k_base"}"#,
        r#"{"secretName": "DATABASE_URL", "password_field": "passwordInput"}"#,
        r#"{"api_key": "${OPENAI_API_KEY}", "token": "<your token>", "password": "changeme"}"#,
        r#"{"auth_key": "[REDACTED:generic-api-key:1]"}"#,
    ] {
        assert_eq!(redactor.redact(text, &mut Placeholders::default()), text);
    }
}

#[test]
fn a_uuid_assigned_to_a_secrets_name_is_one_however_the_command_goes_on() {
    let redactor = redactor();
    let uuid = "0f8e3c2a-9b4d-4e6f-a1b2-c3d4e5f60718";
    for text in [
        format!("export HEROKU_API_KEY={uuid} && heroku apps"),
        format!("export HEROKU_API_KEY={uuid}&& heroku apps"),
        format!("CLIENT_SECRET={uuid}|tee log"),
        format!("bash(command=\"export SERVICE_TOKEN={uuid} && deploy\")"),
    ] {
        let redacted = redactor.redact(&text, &mut Placeholders::default());
        assert!(!redacted.contains(uuid), "{text} -> {redacted}");
    }
    // A UUID beside a word like key in ordinary code is an id.
    let code = format!("let cache_key = \"{uuid}\";");
    assert_eq!(redactor.redact(&code, &mut Placeholders::default()), code);
}
