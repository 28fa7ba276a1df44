//! Criterion benchmarks of the compaction core: parse + migrate + plan + serialize, the whole
//! work of `compactd plan`, over the shared fixtures and a generated 20 MB v3 session.
//!
//! Run: `cargo bench --bench core`. Results and the machine go in BENCHMARKS.md.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use compactd_core::compaction::{CompactionSettings, PlanOutcome};
use compactd_core::session::{ParseOptions, Session};
use compactd_testkit::synth;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// The allocator the `compactd` binary uses, so the numbers are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

/// A v3 session of at least 20 MB: the migrated large fixture repeated in one chain.
fn synthetic_20mb() -> Vec<u8> {
    let template =
        Session::parse(&fixture("large-session.jsonl"), ParseOptions::default()).unwrap();
    synth::repeat_session(&template, 20 * 1024 * 1024).into_bytes()
}

/// Everything `compactd plan` does after reading the file.
fn plan(bytes: &[u8]) -> PlanOutcome {
    let session = Session::parse(bytes, ParseOptions::default()).unwrap();
    let path = session.active_path(None).unwrap();
    PlanOutcome::for_path(&path, &CompactionSettings::default())
}

fn pipeline(c: &mut Criterion) {
    let inputs = [
        (
            "large-session (v1, 0.97 MB)",
            fixture("large-session.jsonl"),
        ),
        (
            "before-compaction (v1, 2.4 MB)",
            fixture("before-compaction.jsonl"),
        ),
        ("synthetic (v3, 20 MB)", synthetic_20mb()),
    ];
    let mut group = c.benchmark_group("parse+migrate+plan+serialize");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    for (name, bytes) in &inputs {
        assert!(
            plan(bytes).plan.is_some(),
            "{name} has something to compact"
        );
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(*name, |b| b.iter(|| plan(black_box(bytes))));
    }
    group.finish();

    // The stages of the 20 MB case on their own, to see what bounds the whole.
    let big = &inputs[2].1;
    let mut group = c.benchmark_group("stages (synthetic 20 MB)");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Bytes(big.len() as u64));
    group.bench_function("parse", |b| {
        b.iter(|| Session::parse(black_box(big), ParseOptions::default()).unwrap())
    });
    let session = Session::parse(big, ParseOptions::default()).unwrap();
    group.bench_function("plan+serialize", |b| {
        b.iter(|| {
            let path = session.active_path(None).unwrap();
            PlanOutcome::for_path(black_box(&path), &CompactionSettings::default())
        })
    });
    group.finish();
}

/// The fidelity gate's own work on a 400 KB prompt (its anchors, then a check of a summary),
/// beside the extractive summarizer on the same prompt as the baseline.
/// The real conversations of both fixtures, as compactd serializes them for a history summary,
/// joined and cut at a message boundary at 400 KB.
fn conversation_400kb() -> String {
    let mut conversation = String::new();
    for file in ["before-compaction.jsonl", "large-session.jsonl"] {
        let session = Session::parse(&fixture(file), ParseOptions::default()).unwrap();
        let path = session.active_path(None).unwrap();
        let plan = PlanOutcome::for_path(&path, &CompactionSettings::default())
            .plan
            .unwrap();
        if !conversation.is_empty() {
            conversation.push_str("\n\n");
        }
        conversation.push_str(&plan.conversation);
    }
    let cut = conversation[..400 * 1024].rfind("\n\n[").unwrap();
    conversation.truncate(cut);
    conversation
}

fn fidelity(c: &mut Criterion) {
    use compactd::summarizer::{SummaryRequest, extractive};
    use compactd_core::fidelity::{anchors, gate};
    let conversation = &conversation_400kb();
    let prompts = compactd_core::prompts::Prompts::builtin();
    let prompt =
        compactd_core::transcript::prompt::history_prompt(&prompts, conversation, None, None);
    let request = SummaryRequest::from_prompt(prompts.system.clone(), prompt.clone(), 13_107);
    let summary = extractive::summarize(&request).text;
    let mut group = c.benchmark_group(format!("fidelity gate ({} KB prompt)", prompt.len() / 1024));
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Bytes(prompt.len() as u64));
    group.bench_function("anchors + check", |b| {
        b.iter(|| {
            let anchors = anchors::of_shape(
                &compactd_core::transcript::Shape::of_prompt(black_box(&prompt)),
                16_384,
            );
            gate::check(black_box(&summary), &anchors)
        })
    });
    group.bench_function("extractive summarizer (baseline)", |b| {
        b.iter(|| extractive::summarize(black_box(&request)))
    });
    group.finish();
}

/// Redaction of a 400 KB prompt: the real conversations (no secrets: every rule whose keywords
/// occur still runs) and the same with one secret of every family planted every 20 KB. Baseline
/// in the same run: one copy of the prompt (the least any rewrite costs).
fn redaction(c: &mut Criterion) {
    use compactd_core::redact::{Placeholders, Redactor};
    use compactd_testkit::samples;
    let clean = conversation_400kb();
    let mut planted = String::with_capacity(clean.len() + 16 * 1024);
    let secrets = samples::all(1);
    let mut next = 0;
    for line in clean.split_inclusive('\n') {
        planted.push_str(line);
        if planted.len() >= (next + 1) * 20 * 1024 {
            planted.push_str(&secrets[next % secrets.len()].line);
            planted.push('\n');
            next += 1;
        }
    }
    let redactor = Redactor::new(None).unwrap();
    let found = redactor.find(&planted).len();
    assert!(found >= 20, "{found} secrets found");
    let mut group = c.benchmark_group(format!("redaction ({} KB prompt)", clean.len() / 1024));
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Bytes(clean.len() as u64));
    group.bench_function("redact, no secrets", |b| {
        b.iter(|| redactor.redact(black_box(&clean), &mut Placeholders::default()))
    });
    group.bench_function(format!("redact, {found} secrets planted"), |b| {
        b.iter(|| redactor.redact(black_box(&planted), &mut Placeholders::default()))
    });
    group.bench_function("copy (baseline)", |b| {
        b.iter(|| black_box(&clean).to_owned())
    });
    group.finish();
}

criterion_group!(benches, pipeline, fidelity, redaction);
criterion_main!(benches);
