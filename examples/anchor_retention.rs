//! Anchor retention, not part of the service: summarizes the compactions of the shared fixture
//! sessions (history and turn prefix, through `compactor::compact`) and the oh-my-pi request
//! samples (every dialect, history and short-summary calls) through the pipeline — the chain
//! configured from the environment as for `compactd serve` (`COMPACTD_MODELS`,
//! `COMPACTD_OPENAI_BASE_URL`, …), then the fidelity gate — and prints, per anchor kind, how many
//! anchors the model's answer kept, the repair call restored, compactd appended, and the summary
//! still misses. BENCHMARKS.md records its output.
//!
//!   cargo run --release --example anchor_retention [-- omp|fixtures]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use compactd::app::compaction::compactor::{CompactionRequest, compact};
use compactd::config::SummarizerConfig;
use compactd::pipeline::events::{Event, Observer, Run};
use compactd::pipeline::{Admission, Context, Endpoint, Limiter, Pipeline, Purpose};
use compactd::summarizer::SummaryRequest;
use compactd_core::fidelity::AnchorKind;
use compactd_core::prompts::Prompts;
use compactd_core::session::{ParseOptions, Session};
use serde_json::Value;

#[derive(Parser)]
struct Args {
    /// `omp`, `fixtures`, or both when absent.
    only: Option<String>,
    #[command(flatten)]
    summarizers: SummarizerConfig,
}

/// Outcomes by kind: kept, repaired, appended, missing; and who wrote the summaries.
#[derive(Default)]
struct Tally {
    by_kind: Mutex<BTreeMap<&'static str, [u64; 4]>>,
    repair_calls: Mutex<u64>,
    writers: Mutex<BTreeMap<String, u64>>,
}

impl Observer for Tally {
    fn observe(&self, _run: Run<'_>, event: &Event<'_>) {
        if let Event::Gated { report, anchors } = event {
            let mut by_kind = self.by_kind.lock().unwrap();
            for anchor in *anchors {
                let slot = match anchor.outcome {
                    "kept" => 0,
                    "repaired" => 1,
                    "appended" => 2,
                    _ => 3,
                };
                by_kind.entry(anchor.kind.label()).or_default()[slot] += 1;
            }
            *self.repair_calls.lock().unwrap() += u64::from(report.repair_call);
        }
        if let Event::Finished { outcome, .. } = event {
            let writer = match outcome {
                Ok(summary) => summary.model.clone(),
                Err(error) => format!("failed ({})", error.label()),
            };
            *self.writers.lock().unwrap().entry(writer).or_default() += 1;
        }
    }
}

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let config = args.summarizers;
    let prompts = Prompts::builtin();
    // Checkpoints (history, turn prefix) and oh-my-pi's 2–3 sentence summaries, counted apart:
    // the gate repairs the first and only reports on the second.
    let tally = Arc::new(Tally::default());
    let short_tally = Arc::new(Tally::default());
    let pipeline_with = |tally: Arc<Tally>| {
        Pipeline::new(
            compactd::app::build_chain(&config, &prompts).unwrap(),
            Admission::new(Limiter::new(4, 64), 0),
            vec![tally],
        )
    };
    let pipeline = pipeline_with(tally.clone());
    let short_pipeline = pipeline_with(short_tally.clone());
    let context = Context::new(Endpoint::Cli, "", None);
    let chain = pipeline.chain.names().join(",");
    let started = Instant::now();
    let mut runs = 0;
    let mut model_time = Duration::ZERO;
    if args.only.as_deref() != Some("omp") {
        for file in ["large-session.jsonl", "before-compaction.jsonl"] {
            let session = Session::parse(&fixture(file), ParseOptions::default()).unwrap();
            let began = Instant::now();
            let outcome = compact(
                &session,
                session.ids(),
                &CompactionRequest::default(),
                &pipeline,
                &context,
                &prompts,
            )
            .await
            .unwrap();
            model_time += began.elapsed();
            runs += outcome.summarizer_calls;
            eprintln!(
                "{file}: {} calls, {:?}",
                outcome.summarizer_calls,
                began.elapsed()
            );
        }
    }
    if args.only.as_deref() != Some("fixtures") {
        for file in ["before.jsonl", "large.jsonl"] {
            let text = String::from_utf8(fixture(&format!("omp-requests/{file}"))).unwrap();
            for line in text.lines() {
                let recorded: Value = serde_json::from_str(line).unwrap();
                let request = &recorded["request"];
                let began = Instant::now();
                let pipeline = if recorded["call"] == "short-summary" {
                    &short_pipeline
                } else {
                    &pipeline
                };
                pipeline
                    .summarize(
                        &context,
                        Purpose::Prompt,
                        SummaryRequest::from_prompt(
                            request["systemPrompt"].as_str().unwrap().to_owned(),
                            request["prompt"].as_str().unwrap().to_owned(),
                            request["maxTokens"].as_u64().unwrap_or(13_107),
                        ),
                    )
                    .await
                    .ok();
                model_time += began.elapsed();
                runs += 1;
                eprintln!(
                    "{file} {} {}: {:?}",
                    recorded["model"],
                    recorded["call"],
                    began.elapsed()
                );
            }
        }
    }
    println!(
        "chain: {chain}; {runs} summaries; {:?} in all",
        started.elapsed()
    );
    print_table("Checkpoints (history and turn-prefix summaries)", &tally);
    if args.only.as_deref() != Some("fixtures") {
        print_table(
            "oh-my-pi's short summaries (reported, not repaired)",
            &short_tally,
        );
    }
}

fn print_table(title: &str, tally: &Tally) {
    println!();
    println!(
        "{title}; repair calls: {}",
        tally.repair_calls.lock().unwrap()
    );
    println!();
    println!(
        "| kind | anchors | kept by the model | repaired by the repair call | appended by compactd | missing |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let by_kind = tally.by_kind.lock().unwrap();
    for kind in AnchorKind::ALL {
        let [kept, repaired, appended, missing] =
            by_kind.get(kind.label()).copied().unwrap_or_default();
        let total = kept + repaired + appended + missing;
        if total == 0 {
            continue;
        }
        let pct = |n: u64| format!("{n} ({:.0} %)", 100.0 * n as f64 / total as f64);
        println!(
            "| {} | {total} | {} | {} | {} | {} |",
            kind.label(),
            pct(kept),
            pct(repaired),
            pct(appended),
            pct(missing)
        );
    }
}
