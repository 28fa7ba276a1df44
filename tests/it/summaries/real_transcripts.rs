//! Summaries of real agents' work (issue 68), judged on transcripts no one here wrote: Claude Code
//! sessions, SWE-agent and mini-swe-agent trajectories from public repositories
//! (`tests/fixtures/real-transcripts/SOURCES.md`), each compacted the way its agent asks (Claude
//! Code's compaction request through the gateway; pi's serialization on `/v1/compact` for the
//! others), extractive and behind a model that keeps nothing. The truth of each case was derived
//! from the transcript by `scripts/corpus/real_transcripts.py`, never from compactd: the person's
//! latest request, the files the span edited (edit tools, the trajectory's final diff), the text
//! the agent injected into user turns. `RUBRIC_REPORT=1` prints every summary.

use std::io::Read;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::summaries::rubric::{Must, report, violations};
use crate::summaries::standing_chain::LOSSY;
use crate::support::gateway::{events, gateway_config};
use crate::support::{FakeProvider, Reply, TestApp};

/// One compaction of the corpus and what its summary must hold.
struct Case {
    name: String,
    wire: String,
    headers: Vec<(String, String)>,
    body: Value,
    latest: Option<String>,
    edited: Vec<String>,
    injected: Vec<String>,
}

fn cases() -> Vec<Case> {
    let path = format!(
        "{}/tests/fixtures/real-transcripts/cases.jsonl.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text.lines()
        .map(|line| {
            let case: Value = serde_json::from_str(line).unwrap();
            let strings = |key: &str| -> Vec<String> {
                case[key]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|s| s.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            Case {
                name: case["name"].as_str().unwrap().to_owned(),
                wire: case["wire"].as_str().unwrap().to_owned(),
                headers: case["headers"]
                    .as_object()
                    .map(|h| {
                        h.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                            .collect()
                    })
                    .unwrap_or_default(),
                body: case["body"].clone(),
                latest: case["latest"].as_str().map(str::to_owned),
                edited: strings("edited"),
                injected: strings("injected"),
            }
        })
        .collect()
}

/// The text as its non-blank lines, each trimmed: how a request is compared with its quote.
fn lines_of(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The summary without its quote of the latest request (its label's line and the lines it
/// spans): a request quoted whole may hold a list whose items are also the summary's own.
fn without_the_quote(summary: &str) -> String {
    let mut out = Vec::new();
    let mut quoting = false;
    for line in summary.lines() {
        let trimmed = line.trim();
        if trimmed.contains("Latest user request") {
            quoting = true;
            continue;
        }
        if quoting
            && (trimmed.is_empty()
                || line.starts_with('#')
                || trimmed.starts_with("</")
                || [
                    "- Files ",
                    "- Commands run:",
                    "- Error:",
                    "- Identifiers:",
                    "- Last assistant",
                ]
                .iter()
                .any(|label| trimmed.starts_with(label)))
        {
            quoting = false;
        }
        if !quoting {
            out.push(line);
        }
    }
    out.join("\n")
}

/// Raw tool output anywhere in a summary: an observation's markup or a traceback's header.
fn raw_output(line: &str) -> bool {
    [
        "<returncode>",
        "</output>",
        "<tool_use_error>",
        "Traceback (most recent call last)",
        "<task-notification>",
        "<system-reminder>",
    ]
    .iter()
    .any(|m| line.contains(m))
}

/// What a summary does wrong beyond the shared rubric.
fn more_violations(summary: &str, case: &Case) -> Vec<String> {
    let mut wrong = Vec::new();
    let latest = case.latest.as_deref().map(lines_of);
    let own = lines_of(summary);
    if let Some(latest) = &latest
        && !own.contains(latest.as_str())
    {
        wrong.push(format!(
            "the latest request is not whole ({} chars)",
            latest.len()
        ));
    }
    let mut heading = "";
    for line in summary.lines() {
        if line.starts_with('#') {
            heading = line;
        }
        let quoted = latest
            .as_deref()
            .is_some_and(|l| l.contains(line.trim()) && line.trim().len() > 3);
        if (raw_output(line) || line.contains("\\n") || line.contains("\\\"")) && !quoted {
            wrong.push(format!("raw tool output under {heading:?}: {line:?}"));
        }
        let h = heading.to_lowercase();
        let users = h.contains("goal") || h.contains("constraint") || line.contains("request");
        for injected in &case.injected {
            let head: String = injected.chars().take(60).collect();
            if users && head.len() >= 24 && line.contains(&head) {
                wrong.push(format!(
                    "injected text as the user's under {heading:?}: {line:?}"
                ));
            }
        }
    }
    wrong
}

struct Tally {
    checked: usize,
    edited: usize,
    edited_kept: usize,
    failures: Vec<String>,
}

async fn summarize(app: &TestApp, case: &Case) -> String {
    if case.wire == "anthropic" {
        let mut request = app
            .client
            .post(format!("{}/v1/messages", app.url))
            .json(&case.body);
        for (k, v) in &case.headers {
            if k != "content-type" {
                request = request.header(k, v);
            }
        }
        let response = request
            .header("x-api-key", "sk-ant-test")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{}", case.name);
        let body = response.text().await.unwrap();
        if std::env::var_os("RT_DEBUG").is_some() {
            for line in body.lines().filter(|l| l.starts_with("data: ")) {
                if serde_json::from_str::<Value>(&line[6..]).is_err() {
                    println!("BAD {}: {line}", case.name);
                }
            }
        }
        events(&body)
            .iter()
            .filter(|e| e["type"] == "content_block_delta")
            .filter_map(|e| e.pointer("/delta/text").and_then(Value::as_str))
            .collect()
    } else {
        let mut body = case.body.clone();
        body["maxTokens"] = json!(13107);
        let response = app.compact(&body).await;
        assert_eq!(response.status(), StatusCode::OK, "{}", case.name);
        let answer: Value = response.json().await.unwrap();
        answer["summary"].as_str().unwrap().to_owned()
    }
}

async fn corpus_passes(extractive: bool) -> Tally {
    let model = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    if extractive {
        config.summarizers.models = vec!["extractive".parse().unwrap()];
    }
    let app = TestApp::spawn(config).await;
    let mut tally = Tally {
        checked: 0,
        edited: 0,
        edited_kept: 0,
        failures: Vec::new(),
    };
    for case in cases() {
        let summary = summarize(&app, &case).await;
        let name = format!("{} extractive={extractive}", case.name);
        report(&name, &summary);
        let must = Must {
            latest: None,
            modified: Vec::new(),
        };
        let mut wrong = violations(&without_the_quote(&summary), &must);
        wrong.extend(more_violations(&summary, &case));
        tally.edited += case.edited.len();
        for file in &case.edited {
            if summary.contains(file.as_str()) {
                tally.edited_kept += 1;
            } else {
                wrong.push(format!("the edited file {file} is missing"));
            }
        }
        if !wrong.is_empty() {
            tally.failures.push(format!("{name}: {wrong:#?}"));
        }
        tally.checked += 1;
    }
    tally
}

fn judge(tally: Tally) {
    assert!(tally.checked >= 25, "{} cases checked", tally.checked);
    let share = tally.edited_kept as f64 / tally.edited.max(1) as f64;
    println!(
        "{} cases, edited files kept {}/{} ({share:.3}), {} cases with a violation",
        tally.checked,
        tally.edited_kept,
        tally.edited,
        tally.failures.len()
    );
    for failure in &tally.failures {
        println!("{failure}");
    }
    assert!(share >= 0.95, "edited files kept: {share:.3}");
    let failures: Vec<&String> = tally
        .failures
        .iter()
        .filter(|f| !f.contains("the edited file"))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test]
async fn real_transcripts_pass_the_rubric_extractive() {
    judge(corpus_passes(true).await);
}

#[tokio::test]
async fn real_transcripts_pass_the_rubric_behind_a_lossy_model() {
    judge(corpus_passes(false).await);
}
