//! Thread references (issue 57): `read_thread` over a stored session or a kept conversation
//! (a recall id) of the caller's tenant ([`compactd_core::threads`]): the entries of the session's
//! active path, each with its role and text, a tool call marked failed when its result was an
//! error. With a model, a short loop: the model is shown the best hits with their neighbours,
//! and answers or asks to search again or read an entry ([`compactd_core::threads::steps`]), each step
//! through the pipeline (redacted, budgeted, cached) and within the prompt's budget, whatever
//! the thread's length. Without one, the ranked quotes are the answer.

use compactd_core::ids::Id;
use compactd_core::redact::Redacted;
use std::collections::HashSet;

use serde_json::Value;

use crate::access::Identity;
use crate::app::{App, AppError};
use crate::pipeline::{Endpoint, Job, Purpose};
use crate::summarizer::SummaryRequest;
use compactd_core::session::Session;
use compactd_core::threads::steps::{self, Ask, Shown, Step};
use compactd_core::threads::{Entry, Index, Reading};
use std::sync::Arc;

/// Longest question, in characters.
pub(crate) const MAX_QUESTION_CHARS: usize = 2000;
/// The answer's budget, in characters (about a thousand tokens), however long the thread.
pub(crate) const ANSWER_CHARS: usize = 4000;
/// Longest prompt of one step, in characters (about 6k tokens): fits any model's window.
const PROMPT_CHARS: usize = 24_000;
/// Calls to the model for one answer: the last must answer.
const MAX_STEPS: usize = 4;
/// Entries one search adds, each with its neighbours.
const SEARCH_HITS: usize = 6;
/// Turns of a kept conversation read as a thread.
const MAX_RECALL_TURNS: i64 = 20_000;

/// An answer about a thread and who wrote it.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    /// What the answer rests on, quotes of the thread and the model's words alike: redacted.
    pub(crate) reading: Redacted<Reading>,
    /// `provider:model`, or `extractive` (the ranked quotes).
    pub(crate) answered_by: String,
    /// Calls made to the model.
    pub(crate) steps: usize,
}

impl App {
    /// The answer to `question` from `who`'s thread: a session id or a recall id.
    pub(crate) async fn read_thread(
        &self,
        who: &Identity,
        thread: &Id,
        question: &str,
    ) -> Result<Answer, AppError> {
        let question = question.trim().to_owned();
        if question.is_empty() || question.chars().count() > MAX_QUESTION_CHARS {
            return Err(AppError::invalid(
                "question",
                format!("question must be 1 to {MAX_QUESTION_CHARS} characters"),
            ));
        }
        let entries = self.thread_entries(who, thread).await?;
        // The thread is indexed once, off the runtime and within the request's deadline; every
        // search of the read (the first, and each a model asks for) looks words up in it.
        let deadline = self.work_deadline();
        let thread_read = {
            let question = question.clone();
            crate::cpu::off_runtime_until(deadline, move |deadline| {
                let index = Index::new(&entries, deadline)?;
                let reading =
                    compactd_core::threads::read(&entries, &index, &question, ANSWER_CHARS);
                Some((Arc::new(Thread { entries, index }), reading))
            })
            .await?
            .ok_or(AppError::DeadlineExceeded(READING))?
        };
        let (thread_read, reading) = thread_read;
        let extractive = Answer {
            reading: self.pipeline.redactor().seal(reading),
            answered_by: "extractive".to_owned(),
            steps: 0,
        };
        if !self.has_model() {
            return Ok(extractive);
        }
        self.read_with_model(who, thread, &question, thread_read, extractive, deadline)
            .await
    }

    /// The model's loop: shown the extractive hits with their neighbours, it answers or asks
    /// for more, at most [`MAX_STEPS`] times and [`steps::MAX_ASKS`] asks a step. Its answer
    /// cites entries; when it cites none of the thread's, the extractive citations stand. What
    /// each step costs in CPU (its searches, the prompt) runs off the runtime, within `deadline`.
    async fn read_with_model(
        &self,
        who: &Identity,
        thread: &Id,
        question: &str,
        read: Arc<Thread>,
        extractive: Answer,
        deadline: compactd_core::deadline::Deadline,
    ) -> Result<Answer, AppError> {
        let mut shown = Shown::default();
        for hit in &extractive.reading.hits {
            if let Some(at) = read.index.position(&hit.id) {
                shown.add(at, 1, read.entries.len());
            }
        }
        let context = self
            .pipeline_context(who, Endpoint::ThreadRead)
            .for_session(thread);
        // What the model asked at each step and what it found: it sees its own searches (and a
        // search that found nothing new is not asked again in the same words).
        let mut asked = String::new();
        for step in 1..=MAX_STEPS {
            let last = step == MAX_STEPS;
            let closing = if last {
                "\n\nYou cannot ask for more now: answer from the entries shown."
            } else {
                ""
            };
            let head = format!("## Question\n{question}\n\n{asked}<entries>\n");
            let room = PROMPT_CHARS.saturating_sub(head.len() + closing.len() + 20);
            let (rendered, back) = {
                let read = read.clone();
                crate::cpu::off_runtime_until(deadline, move |_| {
                    let rendered = shown.render(&read.entries, room);
                    Some((rendered, shown))
                })
                .await?
                .ok_or(AppError::DeadlineExceeded(READING))?
            };
            shown = back;
            let prompt = format!("{head}{rendered}\n</entries>{closing}");
            // Its own system prompt: the summarizer's asks for a summary.
            let request = SummaryRequest::plain(
                self.prompts.read_thread.clone(),
                prompt,
                (ANSWER_CHARS as u64 / 4).min(self.limits.max_output_tokens),
            );
            let summary = self
                .pipeline
                .summarize_job(&context, Job::new(Purpose::ThreadRead, request))
                .await?;
            if summary.model == "extractive" {
                return Ok(extractive);
            }
            match steps::parse(&summary.text) {
                Step::More(asks) if !last => {
                    let read = read.clone();
                    let (lines, back) = crate::cpu::off_runtime_until(deadline, move |_| {
                        let lines = follow(&read, &mut shown, asks);
                        Some((lines, shown))
                    })
                    .await?
                    .ok_or(AppError::DeadlineExceeded(READING))?;
                    shown = back;
                    if asked.is_empty() {
                        asked.push_str("## Asked so far\n");
                    }
                    asked.push_str(&lines);
                    asked.push('\n');
                }
                Step::More(_) => break,
                Step::Answer(text) => {
                    let mut reading = extractive.reading.into_inner();
                    let cited = steps::citations(&text, &read.index);
                    if !cited.is_empty() {
                        reading.cited = cited;
                    }
                    reading.answer = compactd_core::fidelity::facts::clip(&text, ANSWER_CHARS);
                    return Ok(Answer {
                        reading: self.pipeline.redactor().seal(reading),
                        answered_by: summary.model.clone(),
                        steps: step,
                    });
                }
            }
        }
        // Asked for more at its last step: the ranked quotes answer.
        Ok(extractive)
    }

    /// The entries of `who`'s thread `id`: a stored session's active path, or the turns of a
    /// kept conversation (a recall id), each cited as `{recall id}#{turn}`.
    async fn thread_entries(&self, who: &Identity, id: &Id) -> Result<Vec<Entry>, AppError> {
        match self.load(who, id).await {
            Ok(loaded) => crate::cpu::off_runtime(move || session_entries(&loaded.session)).await?,
            Err(AppError::NotFound(_)) => {
                let (_, turns) = self
                    .store
                    .recall_turns(
                        &who.tenant,
                        id,
                        0,
                        MAX_RECALL_TURNS,
                        compactd_store::now_ms(),
                    )
                    .await?
                    .ok_or_else(|| {
                        AppError::NotFound(format!(
                            "no thread {id:?}: neither a session nor a recall id of yours"
                        ))
                    })?;
                Ok(turns
                    .into_iter()
                    .map(|t| Entry {
                        id: format!("{id}#{}", t.seq),
                        role: t.role,
                        text: t.text,
                        failed: false,
                    })
                    .collect())
            }
            Err(other) => Err(other),
        }
    }
}

/// What a read past its deadline says did not finish.
const READING: &str = "reading the thread";

/// A thread's entries and their index, shared by the steps of one read.
struct Thread {
    entries: Vec<Entry>,
    index: Index,
}

/// Follows a step's `asks`: what each search or read adds to `shown`, and the lines that tell
/// the model what it asked and what that found.
fn follow(read: &Thread, shown: &mut Shown, asks: Vec<Ask>) -> String {
    let len = read.entries.len();
    let mut lines = String::new();
    for ask in asks {
        let before = shown.len();
        let line = match ask {
            Ask::Search(words) => {
                for at in read.index.search(&words, SEARCH_HITS) {
                    shown.add(at, 1, len);
                }
                format!(
                    "SEARCH: {}",
                    compactd_core::fidelity::facts::clip(&words, 200)
                )
            }
            Ask::Read(id) => {
                if let Some(at) = read.index.position(&id) {
                    shown.add(at, 2, len);
                }
                format!("READ: {}", compactd_core::fidelity::facts::clip(&id, 200))
            }
        };
        let found = shown.len() - before;
        lines.push_str(&format!("- {line} ({found} more entries)\n"));
    }
    lines
}

/// The entries of `session`'s active path as the reader sees them.
fn session_entries(session: &Session) -> Result<Vec<Entry>, AppError> {
    let path = session
        .active_path(None)
        .map_err(|e| AppError::Internal(anyhow::anyhow!("{e}")))?;
    let mut failed_calls: HashSet<String> = HashSet::new();
    let mut entries = Vec::new();
    let mut calls: Vec<(usize, Vec<String>)> = Vec::new();
    for entry in path {
        let raw: Value = serde_json::from_str(&entry.raw).unwrap_or(Value::Null);
        if let Some(summary) = entry.summary() {
            entries.push(Entry {
                id: entry.id.clone(),
                role: raw["type"].as_str().unwrap_or("summary").to_owned(),
                text: summary.to_owned(),
                failed: false,
            });
            continue;
        }
        let message = &raw["message"];
        let Some(role) = message["role"].as_str() else {
            continue;
        };
        let mut text = Vec::new();
        let mut ids = Vec::new();
        match &message["content"] {
            Value::String(s) => text.push(s.clone()),
            Value::Array(blocks) => {
                for block in blocks {
                    match block["type"].as_str() {
                        Some("text") => text.extend(block["text"].as_str().map(str::to_owned)),
                        Some("toolCall") => {
                            text.push(format!(
                                "{}({})",
                                block["name"].as_str().unwrap_or("tool"),
                                block["arguments"]
                            ));
                            ids.extend(block["id"].as_str().map(str::to_owned));
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        let failed = role == "toolResult" && message["isError"].as_bool() == Some(true);
        if failed {
            failed_calls.extend(message["toolCallId"].as_str().map(str::to_owned));
        }
        if !ids.is_empty() {
            calls.push((entries.len(), ids));
        }
        entries.push(Entry {
            id: entry.id.clone(),
            role: role.to_owned(),
            text: text.join("\n"),
            failed,
        });
    }
    // A call is trusted only when its result shows it worked.
    for (at, ids) in calls {
        entries[at].failed = ids.iter().any(|id| failed_calls.contains(id));
    }
    Ok(entries)
}
