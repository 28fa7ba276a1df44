//! Standing rules as others wrote them (issue 56): `tests/fixtures/real-rules/` holds 167 rules
//! quoted from 27 public projects' AGENTS.md/CLAUDE.md files and 187 look-alike lines that are not
//! rules (descriptions of a project, one-off tasks, tools' messages). None of it was written here.
//!
//! Measured: the detector's precision and recall on the lines as written; then the rules stated in
//! chained sessions the way people state them (a list in one message, one per message, a pasted
//! conventions block, "oh and …" in the middle of a task, "rule N: …"), with tasks, descriptions
//! and multi-line tool output pasted into the user's turns around them, compacted six times through
//! `/v1/compact` with each request carrying the previous summary — extractive and behind a model
//! that drops every rule. `REAL_RULES_REPORT=1` prints what is missed and what is promoted.

use compactd_core::fidelity::standing;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::summaries::standing_chain::LOSSY;
use crate::support::{FakeProvider, Reply, TestApp, chain_config};

#[derive(Deserialize)]
struct Rule {
    text: String,
    key: String,
}

#[derive(Deserialize)]
struct Negative {
    text: String,
    kind: String,
}

fn lines<T: for<'de> Deserialize<'de>>(file: &str) -> Vec<T> {
    let path = format!(
        "{}/tests/fixtures/real-rules/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn report() -> bool {
    std::env::var_os("REAL_RULES_REPORT").is_some()
}

#[test]
fn the_detector_finds_real_rules_and_promotes_few_look_alikes() {
    let rules: Vec<Rule> = lines("rules.jsonl");
    let negatives: Vec<Negative> = lines("negatives.jsonl");
    assert_eq!((rules.len(), negatives.len()), (167, 187));
    let found = |text: &str| !standing::of_turn(text).is_empty();
    let missed: Vec<&str> = rules
        .iter()
        .map(|r| r.text.as_str())
        .filter(|t| !found(t))
        .collect();
    let promoted: Vec<&Negative> = negatives.iter().filter(|n| found(&n.text)).collect();
    let recall = 1.0 - missed.len() as f64 / rules.len() as f64;
    let right = rules.len() - missed.len();
    let precision = right as f64 / (right + promoted.len()) as f64;
    let of_kind = |kind: &str| promoted.iter().filter(|n| n.kind == kind).count();
    println!(
        "real rules: recall {recall:.3} ({right}/{}), precision {precision:.3}; promoted: \
         description {}, task {}, tool-output {}",
        rules.len(),
        of_kind("description"),
        of_kind("task"),
        of_kind("tool-output")
    );
    if report() {
        missed.iter().for_each(|m| println!("missed   {m}"));
        promoted
            .iter()
            .for_each(|n| println!("promoted {} {}", n.kind, n.text));
    }
    assert!(recall >= 0.8, "recall {recall:.3}");
    assert!(precision >= 0.9, "precision {precision:.3}");
    assert!(of_kind("description") + of_kind("task") <= 3);
}

/// How the `i`th rule of a session is stated, as a user turn or part of one.
#[derive(Clone, Copy, Debug)]
enum Style {
    /// Each rule its own message.
    OnePerMessage,
    /// "rule N: …", one message each.
    Numbered,
    /// "…, oh and …" at the end of a request to do something else.
    OhAnd,
    /// Several rules as a bulleted list in one message.
    List,
    /// A conventions file pasted under a line saying what it is.
    PastedBlock,
}

const STYLES: [Style; 5] = [
    Style::OnePerMessage,
    Style::Numbered,
    Style::OhAnd,
    Style::List,
    Style::PastedBlock,
];

/// Multi-line tool output users paste into a turn, from the look-alikes' tools and from the
/// real sessions' kind (a build, a test run, a linter).
fn pasted_output(negatives: &[&Negative], n: usize) -> String {
    let lines: Vec<&str> = negatives
        .iter()
        .cycle()
        .skip(n)
        .take(3)
        .map(|n| n.text.as_str())
        .collect();
    match n % 3 {
        0 => format!(
            "the build fails now:\n```\n$ cargo build\n{}\n```\nwhat does it mean?",
            lines.join("\n")
        ),
        1 => format!(
            "I ran the tests and got\n\n> {}\n> {}\n\ncan you look?",
            lines[0], lines[1]
        ),
        _ => format!(
            "look at this output\n\n    {}\n    {}\n    {}\n",
            lines[0], lines[1], lines[2]
        ),
    }
}

/// The user turns of the first stretch of a session stating `rules`, with look-alikes around them.
fn stating(rules: &[&Rule], session: usize, looks: &Looks<'_>) -> Vec<String> {
    let mut turns = vec![format!(
        "We're working on the importer of project {session} today. {}",
        looks.description(session)
    )];
    let mut listed: Vec<&str> = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        let text = rule.text.as_str();
        match STYLES[(i + session) % STYLES.len()] {
            Style::OnePerMessage => turns.push(text.to_owned()),
            Style::Numbered => turns.push(format!("rule {}: {text}", i + 1)),
            Style::OhAnd => turns.push(format!(
                "{} Oh and {}{}",
                looks.task(session * 7 + i),
                text[..1].to_lowercase(),
                &text[1..]
            )),
            Style::List => listed.push(text),
            Style::PastedBlock => block.push(text),
        }
        if i % 4 == 3 {
            turns.push(looks.task(session * 5 + i));
            turns.push(pasted_output(&looks.output, session + i));
        }
    }
    if !listed.is_empty() {
        turns.push(format!(
            "Some rules for the whole job:\n{}",
            listed
                .iter()
                .map(|r| format!("- {r}"))
                .collect::<Vec<_>>()
                .join("\n")
        ));
    }
    if !block.is_empty() {
        turns.push(format!(
            "These are the conventions from our CONTRIBUTING.md, follow them:\n\n## Conventions\n\n{}",
            block
                .iter()
                .map(|r| format!("* {r}"))
                .collect::<Vec<_>>()
                .join("\n")
        ));
    }
    turns.push(looks.task(session * 3 + 1));
    turns
}

/// The look-alike lines by kind.
struct Looks<'n> {
    description: Vec<&'n Negative>,
    task: Vec<&'n Negative>,
    output: Vec<&'n Negative>,
}

impl<'n> Looks<'n> {
    fn of(negatives: &'n [Negative]) -> Looks<'n> {
        let kind = |k: &str| negatives.iter().filter(|n| n.kind == k).collect();
        Looks {
            description: kind("description"),
            task: kind("task"),
            output: kind("tool-output"),
        }
    }
    fn description(&self, n: usize) -> &str {
        &self.description[n % self.description.len()].text
    }
    fn task(&self, n: usize) -> String {
        self.task[n % self.task.len()].text.clone()
    }
}

/// The user turns of work stretch `round`: tasks of the look-alike set and pasted output.
fn working(round: usize, session: usize, looks: &Looks<'_>) -> Vec<String> {
    (0..4)
        .map(|i| match i {
            3 => pasted_output(&looks.output, round * 4 + session),
            _ => format!(
                "{} Then report what changed in round {round}.",
                looks.task(round * 11 + session * 3 + i)
            ),
        })
        .collect()
}

/// A stretch as pi serializes it for its summary prompt.
fn serialized(turns: &[String]) -> String {
    turns
        .iter()
        .enumerate()
        .map(|(i, text)| {
            format!(
                "[User]: {text}\n\n[Assistant]: Done with step {i}. {}",
                "I changed the code and ran the tests. ".repeat(5)
            )
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Six compactions of one session through `/v1/compact`, each carrying the previous summary.
async fn six_compactions(
    app: &TestApp,
    rules: &[&Rule],
    session: usize,
    looks: &Looks<'_>,
) -> String {
    let prompts = compactd_core::prompts::Prompts::builtin();
    let mut previous: Option<String> = None;
    for round in 0..6 {
        let turns = match round {
            0 => stating(rules, session, looks),
            _ => working(round, session, looks),
        };
        let prompt = compactd_core::transcript::prompt::history_prompt(
            &prompts,
            &serialized(&turns),
            previous.as_deref(),
            None,
        );
        let response = app
            .compact(&json!({"systemPrompt": prompts.system, "prompt": prompt}))
            .await;
        assert_eq!(response.status(), StatusCode::OK, "round {round}");
        let body: Value = response.json().await.unwrap();
        previous = Some(body["summary"].as_str().unwrap().to_owned());
    }
    previous.unwrap()
}

fn section<'s>(summary: &'s str, heading: &str) -> &'s str {
    let Some(start) = summary.find(&format!("## {heading}\n")) else {
        return "";
    };
    let body = &summary[start + heading.len() + 4..];
    &body[..body.find("\n## ").unwrap_or(body.len())]
}

/// Every rule of the corpus, twelve a session, survives six chained compactions; no look-alike
/// line reaches Constraints. Returns (rules in Constraints, rules stated).
async fn rules_survive_six_compactions(models: &str) -> (usize, usize) {
    let rules: Vec<Rule> = lines("rules.jsonl");
    let negatives: Vec<Negative> = lines("negatives.jsonl");
    let looks = Looks::of(&negatives);
    let (mut lost, mut in_constraints, mut promoted) = (Vec::new(), 0, Vec::new());
    for (session, group) in rules.chunks(12).enumerate() {
        let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
        let app = TestApp::handlers(chain_config(&fake, models, false)).await;
        let group: Vec<&Rule> = group.iter().collect();
        let summary = six_compactions(&app, &group, session, &looks).await;
        let (lower, constraints) = (
            summary.to_lowercase(),
            section(&summary, "Constraints & Preferences").to_lowercase(),
        );
        for rule in &group {
            let key = rule.key.to_lowercase();
            if !lower.contains(&key) {
                let i = group.iter().position(|r| std::ptr::eq(*r, *rule)).unwrap();
                let style = STYLES[(i + session) % STYLES.len()];
                lost.push(format!("{style:?}: {}", rule.text));
            } else if constraints.contains(&key) {
                in_constraints += 1;
            }
        }
        for negative in &negatives {
            let text = negative.text.to_lowercase();
            if text.len() >= 12 && constraints.contains(&text) {
                promoted.push(format!("{} {}", negative.kind, negative.text));
            }
        }
        if report() && session == 0 {
            println!("{models}, session 0 after six compactions:\n{summary}\n");
        }
    }
    if report() {
        lost.iter().for_each(|l| println!("lost     {l}"));
    }
    println!(
        "{models}: {} of {} rules survive six compactions, {in_constraints} of them in Constraints",
        rules.len() - lost.len(),
        rules.len()
    );
    assert!(lost.is_empty(), "{models}: lost {lost:#?}");
    assert!(promoted.is_empty(), "{models}: promoted {promoted:#?}");
    (in_constraints, rules.len())
}

#[tokio::test]
async fn real_rules_survive_six_compactions_with_the_extractive_summarizer() {
    let (in_constraints, stated) = rules_survive_six_compactions("extractive").await;
    assert!(in_constraints * 10 >= stated * 7, "{in_constraints}");
}

#[tokio::test]
async fn real_rules_survive_six_compactions_behind_a_lossy_model() {
    let (in_constraints, stated) = rules_survive_six_compactions("openai:gpt-test").await;
    assert!(in_constraints * 10 >= stated * 7, "{in_constraints}");
}

/// How a user may wrap a rule in a message of their own: `{r}` the rule, `{t}` a one-off task.
const FRAMES: [&str; 9] = [
    "{r}",
    "Please remember: {r}",
    "From now on: {r}",
    "{t}. Oh and {r}",
    "{t}, btw {r}",
    "Rules for this repo:\n- {r}\n- Keep the changelog current.",
    "two things:\n1) {r}\n2) {t}",
    "Here's what our CLAUDE.md says:\n\n```markdown\n* {r}\n```\n\nthanks",
    "{t}\n\nAlso, one standing thing. {r}",
];
/// Quotes around the rule and the mark that ends it, as people of other locales write them.
const QUOTES: [(&str, &str); 5] = [
    ("", ""),
    ("“", "”"),
    ("«\u{a0}", "\u{a0}»"),
    ("\"", "\""),
    ("'", "'"),
];
const ENDS: [&str; 6] = ["", ".", "!", "。", " !", ";"];

/// A real rule in a generated message, with tasks and pasted output around it, compacted once by
/// the extractive summarizer: its key is in the summary, and no tool output is in Constraints.
fn wrapped_rule_survives(
    rule: &Rule,
    frame: &str,
    quote: (&str, &str),
    end: &str,
    task: &str,
    output: &str,
) {
    let text = rule.text.trim_end_matches(['.', '!', ';']);
    let lowered = match frame.find("{r}") {
        Some(at) if at > 0 && !frame[..at].ends_with('\n') && !frame[..at].ends_with(": ") => {
            let mut chars = text.chars();
            chars
                .next()
                .map_or(String::new(), |c| c.to_lowercase().chain(chars).collect())
        }
        _ => text.to_owned(),
    };
    let stated = format!("{}{lowered}{}{end}", quote.0, quote.1);
    let message = frame.replace("{r}", &stated).replace("{t}", task);
    let turns = [
        task.to_owned(),
        message,
        format!("the tests fail now:\n```\n{output}\n```\nwhat now?"),
        "Update the docs for the new flag.".to_owned(),
    ];
    let prompts = compactd_core::prompts::Prompts::builtin();
    let prompt = compactd_core::transcript::prompt::history_prompt(
        &prompts,
        &serialized(&turns),
        None,
        None,
    );
    let summary = compactd_core::extractive::summarize(
        &compactd::summarizer::SummaryRequest::from_prompt(prompts.system.clone(), prompt, 13_107),
    )
    .text;
    assert!(
        summary.to_lowercase().contains(&rule.key.to_lowercase()),
        "lost {:?} stated as {:?}:\n{summary}",
        rule.key,
        turns[1]
    );
    let constraints = section(&summary, "Constraints & Preferences");
    assert!(
        !constraints.contains(output.lines().next().unwrap()),
        "{summary}"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]
    #[test]
    fn a_real_rule_however_it_is_wrapped_survives_a_compaction(
        rule in 0..167usize,
        frame in 0..FRAMES.len(),
        quote in 0..QUOTES.len(),
        end in 0..ENDS.len(),
        task in 0..70usize,
        output in 0..50usize,
    ) {
        let rules: Vec<Rule> = lines("rules.jsonl");
        let negatives: Vec<Negative> = lines("negatives.jsonl");
        let looks = Looks::of(&negatives);
        let output: Vec<&str> = looks.output.iter().cycle().skip(output).take(3).map(|n| n.text.as_str()).collect();
        wrapped_rule_survives(&rules[rule], FRAMES[frame], QUOTES[quote], ENDS[end], &looks.task(task), &output.join("\n"));
    }
}
