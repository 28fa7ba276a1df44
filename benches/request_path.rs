//! Criterion benchmarks of what compactd does per `/v1/compact` request besides waiting for the
//! model (issue 26), stage by stage, on the body `scripts/bench/service.sh` sends: a 3 KB
//! remoteEndpoint prompt whose conversation edits 12 files, and a summary that keeps every anchor.
//!
//! Run: `cargo bench --bench request_path`. Results go in BENCHMARKS.md.

use std::hint::black_box;
use std::time::Duration;

use compactd_core::fidelity::{anchors, gate};
use compactd_core::redact::{Placeholders, Redactor};
use compactd_core::transcript::Shape;
use criterion::{Criterion, criterion_group, criterion_main};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FILES: [&str; 12] = [
    "src/http/server.rs",
    "src/http/auth.rs",
    "src/store/sql.rs",
    "src/store/sqlite.rs",
    "src/app/wire.rs",
    "src/pipeline/cache.rs",
    "src/pipeline/gate.rs",
    "src/redact/rules.rs",
    "src/fidelity/anchors.rs",
    "src/config/stages.rs",
    "src/session/parse.rs",
    "src/summarizer/link.rs",
];

/// The prompt and summary of `scripts/bench/service/bodies.py`.
fn body() -> (String, String) {
    let mut parts = vec![
        "[User]: The cache keys collide when two tenants send the same prompt (run 1). Please fix \
         that and keep the tests green."
            .to_owned(),
    ];
    for file in FILES {
        parts.push(format!(
            "[Assistant tool calls]: edit(path=\"{file}\", oldText=\"let key = hash(prompt);\", \
             newText=\"let key = hash((tenant, prompt));\")"
        ));
        parts.push(format!(
            "[Tool result]: Successfully replaced text in {file}."
        ));
    }
    parts.push(
        "[User]: Now make sure the migration runs on both stores before you call it done.".into(),
    );
    let prompt = format!(
        "<conversation>\n{}\n</conversation>\n\nSummarize the conversation above using the required \
         format: ## Goal, ## Constraints & Preferences, ## Progress, ## Key Decisions, ## Next \
         Steps, ## Critical Context.",
        parts.join("\n\n")
    );
    let edited: String = FILES.iter().map(|f| format!("- Edited {f}\n")).collect();
    let summary = format!(
        "## Goal\nThe cache keys collide when two tenants send the same prompt (run 1). Please fix \
         that and keep the tests green.\n\n## Progress\n### Done\n{edited}\n## Next \
         Steps\n1. Now make sure the migration runs on both stores before you call it done.\n\n\
         <read-files>\n</read-files>\n<modified-files>\n{}\n</modified-files>\n",
        FILES.join("\n")
    );
    (prompt, summary)
}

fn stages(c: &mut Criterion) {
    let (prompt, summary) = body();
    let redactor = Redactor::new(None).unwrap();
    let shape = Shape::of_prompt(&prompt);
    let anchors = anchors::of_shape(&shape, 16_384);
    // The 12 files and the latest request at least (the gate also anchors what else it finds).
    assert!(anchors.len() >= 13, "{}", anchors.len());
    assert!(gate::check(&summary, &anchors).iter().all(|k| *k));
    let mut group = c.benchmark_group("request path (3 KB remoteEndpoint prompt)");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("read the prompt (shape)", |b| {
        // The shape itself: a request reads it lazily (and once), so building one reads nothing.
        b.iter(|| Shape::of_prompt(black_box(&prompt)))
    });
    group.bench_function("redact the prompt", |b| {
        b.iter(|| redactor.redact(black_box(&prompt), &mut Placeholders::default()))
    });
    group.bench_function("redact the summary", |b| {
        b.iter(|| redactor.redact(black_box(&summary), &mut Placeholders::default()))
    });
    group.bench_function("anchors", |b| {
        b.iter(|| anchors::of_shape(black_box(&shape), 16_384))
    });
    group.bench_function("check the summary", |b| {
        b.iter(|| gate::check(black_box(&summary), &anchors))
    });
    group.bench_function("request JSON (baseline)", |b| {
        b.iter(|| serde_json::to_vec(&serde_json::json!({"model": "m", "messages": [{"role": "user", "content": black_box(&prompt)}]})))
    });
    group.finish();
}

/// Standing-rule detection (issue 28): every user turn of the labelled sets, as one request's
/// worth of turns would be read.
fn standing_rules(c: &mut Criterion) {
    use compactd_core::fidelity::standing;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/standing-rules");
    let turns: Vec<String> = ["fixture-turns.jsonl", "own-turns.jsonl"]
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(format!("{dir}/{f}"))
                .unwrap()
                .lines()
                .map(|l| {
                    serde_json::from_str::<serde_json::Value>(l).unwrap()["turn"]
                        .as_str()
                        .unwrap()
                        .to_owned()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let bytes: usize = turns.iter().map(String::len).sum();
    let mut group = c.benchmark_group(format!(
        "standing rules ({} user turns, {} KB)",
        turns.len(),
        bytes / 1024
    ));
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(5));
    group.throughput(criterion::Throughput::Bytes(bytes as u64));
    group.bench_function("detect", |b| {
        b.iter(|| {
            turns
                .iter()
                .map(|t| standing::of_turn(black_box(t)).len())
                .sum::<usize>()
        })
    });
    group.finish();
}

/// What an ordinary Claude Code turn costs the gateway when compactd takes its clearing edits out
/// (`agents/context_edits/spliced.rs`): the recorded 50 KB turn's top-level members found without
/// decoding it, against what that replaced (the turn parsed into a `Value` and written again) and
/// against a copy of the turn (what forwarding any body costs at least once).
fn passthrough(c: &mut Criterion) {
    let line = include_str!("../tests/fixtures/agent-requests/claude-code-2.1.330.jsonl")
        .lines()
        .find(|l| l.starts_with("{\"seq\": 2,"))
        .expect("seq 2");
    let recorded: serde_json::Value = serde_json::from_str(line).unwrap();
    let turn = recorded["body"].to_string().into_bytes();
    let mut group = c.benchmark_group("passthrough");
    group.bench_function("copy the turn", |b| b.iter(|| black_box(turn.clone())));
    group.bench_function(
        "members of the turn (the splice when thinking is searched)",
        |b| b.iter(|| compactd_core::js_json::members(black_box(&turn)).map(|m| m.len())),
    );
    group.bench_function(
        "members read back to context_management (the splice)",
        |b| {
            b.iter(|| {
                let turn = black_box(&turn);
                let mut end = turn.iter().rposition(|&c| c == b'}').unwrap();
                loop {
                    let (member, delimiter) =
                        compactd_core::js_json::member_before(turn, end).unwrap();
                    if &turn[member.key.clone()] == b"\"context_management\"" {
                        // The check for the same key earlier in the body.
                        let earlier = &turn[..member.key.start];
                        break memchr::memmem::find(earlier, b"\"context_management\"");
                    }
                    end = delimiter;
                }
            })
        },
    );
    group.bench_function("parse and write the turn (before)", |b| {
        b.iter(|| {
            let value: serde_json::Value = serde_json::from_slice(black_box(&turn)).unwrap();
            value.to_string().len()
        })
    });
    group.finish();
}

criterion_group!(benches, stages, standing_rules, passthrough);
criterion_main!(benches);
