//! Handoff of a stored session (issue 57): the draft of a new thread's first prompt for a goal
//! ([`compactd_core::handoff`]), and the new session that starts with it, its header naming the old one
//! as its parent (as pi's own forks do), ready to download or to open in pi.

use compactd_core::fidelity::facts::Facts;
use compactd_core::fidelity::standing;
use compactd_core::ids::Id;
use compactd_core::redact::{Placeholders, Redacted};
use compactd_core::transcript::Conversation;
use compactd_core::wire::Wire;
use serde_json::Value;
use serde_json::json;

use crate::access::Identity;
use crate::app::sessions::Uploaded;
use crate::app::{App, AppError};
use crate::pipeline::{Context, Endpoint, Job, Purpose};
use crate::summarizer::SummaryRequest;
use compactd_core::fidelity::{Anchor, AnchorKind};
use compactd_core::handoff::Draft;
use compactd_core::session::{Header, Session};

/// Longest goal, in characters: a goal is a sentence or a paragraph, not a document.
pub(crate) const MAX_GOAL_CHARS: usize = 4000;
/// Longest first prompt of a new thread, in characters (a draft as edited).
pub(crate) const MAX_PROMPT_CHARS: usize = 64_000;

impl App {
    /// The draft for `goal` from `who`'s session `id` along its path to `leaf_id` (its leaf by
    /// default), and the new session that starts with the draft's prompt.
    pub(crate) async fn handoff(
        &self,
        who: &Identity,
        id: &Id,
        goal: &str,
        leaf_id: Option<&str>,
    ) -> Result<(Drafted, Uploaded), AppError> {
        let drafted = self.handoff_draft(who, id, goal, leaf_id).await?;
        let uploaded = self.start_thread(who, id, &drafted.draft.prompt).await?;
        Ok((drafted, uploaded))
    }

    /// The draft for `goal` from `who`'s session `id` along its path to `leaf_id`; nothing is
    /// stored (the console shows it for editing first).
    pub(crate) async fn handoff_draft(
        &self,
        who: &Identity,
        id: &Id,
        goal: &str,
        leaf_id: Option<&str>,
    ) -> Result<Drafted, AppError> {
        let goal = checked_goal(goal)?;
        let loaded = self.load(who, id).await?;
        let (leaf_id, parent) = (leaf_id.map(str::to_owned), id.to_owned());
        let draft = {
            let goal = goal.clone();
            crate::cpu::off_runtime_until(self.work_deadline(), move |deadline| {
                handoff_of(
                    &loaded.session,
                    &parent,
                    &goal,
                    leaf_id.as_deref(),
                    deadline,
                )
                .transpose()
            })
            .await?
            .ok_or(AppError::DeadlineExceeded(DRAFTING))??
        };
        let context = self
            .pipeline_context(who, Endpoint::Handoff)
            .for_session(id);
        self.drafted(&context, &goal, draft).await
    }

    /// A new session of `who`'s, handed off from their session `id`: its header names `id` as
    /// its parent and its one entry is the user's message `prompt` (a draft as the user edited
    /// it).
    pub(crate) async fn start_thread(
        &self,
        who: &Identity,
        id: &Id,
        prompt: &str,
    ) -> Result<Uploaded, AppError> {
        if prompt.trim().is_empty() || prompt.chars().count() > MAX_PROMPT_CHARS {
            return Err(AppError::invalid(
                "prompt",
                format!("prompt must be 1 to {MAX_PROMPT_CHARS} characters"),
            ));
        }
        let loaded = self.load(who, id).await?;
        // The prompt as the user edited it: it may hold what the draft had not.
        let prompt = self.pipeline.redactor().seal(prompt.to_owned());
        let file = handoff_file(&loaded.session.header, id, &prompt);
        self.upload(who, file, false).await
    }

    /// `draft` with its prompt written by the configured model, through the pipeline like every
    /// summary (redacted, budgeted, cached, its rules, changed files and open errors checked by
    /// the gate and repaired), then completed with whatever of the extractive draft's findings
    /// it still lacks. Without a model (or past the tenant's budget), the extractive draft.
    pub(crate) async fn drafted(
        &self,
        context: &Context,
        goal: &str,
        draft: Draft,
    ) -> Result<Drafted, AppError> {
        let redactor = self.pipeline.redactor();
        let mut placeholders = Placeholders::default();
        // What leaves — the answer, the new session, the console's page, a model's prompt — is
        // the draft redacted, every text of it (the prompt, each file's reason, the rules).
        let draft = redactor.seal_with(draft, &mut placeholders);
        let extractive = |draft| Drafted {
            draft,
            drafted_by: "extractive".to_owned(),
        };
        if !self.has_model() {
            return Ok(extractive(draft));
        }
        let prompt = compactd_core::handoff::model_prompt(goal, &draft, PROMPT_CHARS);
        let max_tokens = self.max_tokens(None, &prompt);
        // Its own system prompt: the summarizer's asks for a summary.
        let request = SummaryRequest::plain(self.prompts.handoff.clone(), prompt, max_tokens);
        let mut job = Job::new(Purpose::Handoff, request);
        job.gate.extra = goal_anchors(&draft);
        let summary = self.pipeline.summarize_job(context, job).await?;
        // The extractive link of the chain summarizes; it does not draft a handoff: its own
        // draft is the one.
        if summary.model == "extractive" {
            return Ok(extractive(draft));
        }
        let mut draft = draft.into_inner();
        draft.prompt = compactd_core::handoff::completed(&summary.text, goal, &draft);
        Ok(Drafted {
            draft: redactor.seal_with(draft, &mut placeholders),
            drafted_by: summary.model.clone(),
        })
    }
}

/// A conversation as an agent holds it, for `POST /v1/handoff`: read here, off the runtime, by
/// the one reader of its wire or dialect.
#[derive(Debug)]
pub(crate) enum Held {
    /// Text in any dialect compactd reads (pi's, oh-my-pi's chat markups).
    Prompt(String),
    /// Chat completions' or Anthropic's messages (told apart by their blocks).
    Messages(Vec<Value>),
    /// Responses input items.
    Input(Value),
    /// A request body of a wire, as the gateway saw it.
    Body(Wire, axum::body::Bytes),
}

impl Held {
    /// The request field it came in.
    fn field(&self) -> &'static str {
        match self {
            Held::Prompt(_) => "prompt",
            Held::Messages(_) => "messages",
            Held::Input(_) => "input",
            Held::Body(..) => "thread",
        }
    }

    fn read(self) -> Conversation {
        match self {
            Held::Prompt(text) => compactd_core::transcript::read(&text),
            Held::Messages(messages) => Wire::of_messages(&messages).messages(&messages),
            Held::Input(input) => {
                Wire::Responses.conversation(&serde_json::json!({"input": input}))
            }
            Held::Body(wire, body) => {
                let body: Value = compactd_core::js_json::from_slice(&body).unwrap_or_default();
                wire.conversation(&body)
            }
        }
    }
}

/// What else a held conversation comes with: the agent's system prompt (the project's rules it
/// pastes there hold for the new thread too) and the summary it continues.
#[derive(Debug, Default)]
pub(crate) struct Around {
    pub(crate) system: Option<Value>,
    pub(crate) previous_summary: Option<String>,
}

impl App {
    /// The draft for `goal` from a conversation an agent holds, for `who`: nothing is stored,
    /// no session is created.
    pub(crate) async fn handoff_conversation(
        &self,
        who: &Identity,
        goal: &str,
        held: Held,
        around: Around,
    ) -> Result<Drafted, AppError> {
        let goal = checked_goal(goal)?;
        let field = held.field();
        let draft = {
            let goal = goal.clone();
            crate::cpu::off_runtime_until(self.work_deadline(), move |deadline| {
                let conversation = held.read();
                if conversation
                    .messages
                    .iter()
                    .all(|m| m.text.trim().is_empty())
                {
                    return Some(Err(AppError::invalid(
                        field,
                        format!("{field}: there is no conversation to hand off"),
                    )));
                }
                let facts = Facts::extract(&conversation.messages);
                let mut rules = carried_rules(&facts, around.previous_summary.as_deref());
                for rule in system_rules(around.system.as_ref()) {
                    if !rules.contains(&rule) {
                        rules.push(rule);
                    }
                }
                compactd_core::handoff::draft(&goal, &conversation.messages, &rules, "", deadline)
                    .map(Ok)
            })
            .await?
            .ok_or(AppError::DeadlineExceeded(DRAFTING))??
        };
        let context = self.pipeline_context(who, Endpoint::Handoff);
        self.drafted(&context, &goal, draft).await
    }
}

/// The rules of a project rules file an agent pasted into its system prompt (OpenCode's
/// "Instructions from: …/AGENTS.md"), given as a string or as text blocks.
fn system_rules(system: Option<&Value>) -> Vec<String> {
    let text = match system {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str().or(b.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return Vec::new(),
    };
    standing::of_pasted_file(&text)
        .into_iter()
        .filter(|(statement, _)| *statement == standing::Statement::Rule)
        .map(|(_, rule)| rule.to_owned())
        .collect()
}

impl App {
    /// The draft for `goal` from the thread compactd last saw through its gateway for `who`'s
    /// `agent` (any agent when `None`; see [`crate::app::threads::seen`]): the conversation of its latest
    /// request. Nothing is stored.
    pub(crate) async fn handoff_current(
        &self,
        who: &Identity,
        agent: Option<&str>,
        goal: &str,
    ) -> Result<(Drafted, crate::app::threads::seen::Seen), AppError> {
        let seen = self.seen.latest(who, agent).ok_or_else(|| {
            AppError::NotFound(format!(
                "no thread of {} seen through compactd's gateway: give a session id, or point \
                 the agent's model base URL at compactd",
                agent.unwrap_or("any agent")
            ))
        })?;
        let held = Held::Body(seen.wire, seen.body.clone());
        let drafted = self
            .handoff_conversation(who, goal, held, Around::default())
            .await?;
        Ok((drafted, seen))
    }
}

/// The rules an earlier summary carried and the ones `facts` found.
fn carried_rules(facts: &Facts, previous: Option<&str>) -> Vec<String> {
    compactd_core::fidelity::anchors::of_facts(facts, previous, 16_384)
        .into_iter()
        .filter(|a| a.kind == AnchorKind::Constraint)
        .map(|a| a.text)
        .collect()
}

/// Longest prompt a model drafting a handoff is sent, in characters (about 12k tokens): the
/// goal's turns beyond it are the oldest, and their findings are in the draft already.
const PROMPT_CHARS: usize = 48_000;

/// A handoff's draft and who wrote its prompt.
#[derive(Debug, Clone)]
pub(crate) struct Drafted {
    pub(crate) draft: Redacted<Draft>,
    /// `provider:model`, or `extractive`.
    pub(crate) drafted_by: String,
}

/// What the gate checks a model's draft against: the rules still in force, the files the goal's
/// work changed, its open errors.
fn goal_anchors(draft: &Draft) -> Vec<Anchor> {
    let rules = draft
        .rules
        .iter()
        .map(|r| Anchor::new(AnchorKind::Constraint, r.as_str()));
    let files = draft
        .files
        .iter()
        .filter(|f| f.changed)
        .map(|f| Anchor::new(AnchorKind::ModifiedFile, f.path.as_str()));
    let errors = draft
        .errors
        .iter()
        .map(|e| Anchor::new(AnchorKind::UnresolvedError, e.as_str()));
    rules.chain(files).chain(errors).collect()
}

/// `goal`, trimmed, when it is one: not empty, at most [`MAX_GOAL_CHARS`].
pub(crate) fn checked_goal(goal: &str) -> Result<String, AppError> {
    let goal = goal.trim();
    if goal.is_empty() {
        return Err(AppError::invalid(
            "goal",
            "goal is required: what the new thread is for",
        ));
    }
    if goal.chars().count() > MAX_GOAL_CHARS {
        return Err(AppError::invalid(
            "goal",
            format!("goal is longer than {MAX_GOAL_CHARS} characters"),
        ));
    }
    Ok(goal.to_owned())
}

/// What a handoff past its deadline says did not finish.
const DRAFTING: &str = "drafting the handoff";

/// The extractive draft for `goal` from `session` along its path to `leaf_id`, handed off from
/// `parent` (a stored session's id, or the file's path as pi writes it); `Ok(None)` when
/// `deadline` passes first.
pub(crate) fn handoff_of(
    session: &Session,
    parent: &str,
    goal: &str,
    leaf_id: Option<&str>,
    deadline: compactd_core::deadline::Deadline,
) -> Result<Option<Draft>, AppError> {
    let path = session
        .active_path(leaf_id)
        .map_err(|e| AppError::invalid("leafId", e.to_string()))?;
    // The rules the thread's compactions carried (its latest summary holds them all) and the
    // messages of the whole path: compactd keeps what compaction dropped.
    let previous = path
        .iter()
        .rev()
        .find_map(|e| e.is_compaction().then(|| e.summary()).flatten());
    let messages = compactd_core::compaction::typed_conversation(
        path.iter()
            .filter(|e| !e.is_compaction())
            .filter_map(|e| e.as_message()),
    )
    .messages;
    let facts = Facts::extract(&messages);
    let rules = carried_rules(&facts, previous);
    Ok(compactd_core::handoff::draft(
        goal, &messages, &rules, parent, deadline,
    ))
}

/// A pi v3 session whose header names `parent` and whose one entry is the user's first message,
/// `prompt`.
pub(crate) fn handoff_file(header: &Header, parent: &str, prompt: &Redacted<String>) -> String {
    let prompt: &str = prompt;
    let message = json!({
        "type": "message",
        "id": compactd_core::session::new_entry_id(&std::collections::HashSet::new()),
        "parentId": null,
        "timestamp": compactd_core::session::time::now_iso(),
        "message": {
            "role": "user",
            "content": [{"type": "text", "text": prompt}],
            "timestamp": compactd_store::now_ms(),
        },
    });
    format!(
        "{}\n{message}\n",
        crate::app::threads::fork::child_header(header, parent)
    )
}
