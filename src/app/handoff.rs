//! Handoff of a stored session (issue 57): the draft of a new thread's first prompt for a goal
//! ([`compactd_core::handoff`]), and the new session that starts with it, its header naming the old one
//! as its parent (as pi's own forks do), ready to download or to open in pi.

use compactd_core::ids::Id;
use compactd_core::redact::{Placeholders, Redacted};
use serde_json::json;

use super::sessions::Uploaded;
use super::{App, AppError};
use crate::access::Identity;
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

impl App {
    /// The draft for `goal` from a conversation an agent holds (any wire or dialect compactd
    /// reads, `field` naming where it came from), for `who`: nothing is stored, no session is
    /// created.
    pub(crate) async fn handoff_conversation(
        &self,
        who: &Identity,
        goal: &str,
        (field, conversation): (&'static str, compactd_core::transcript::Conversation),
        previous_summary: Option<String>,
    ) -> Result<Drafted, AppError> {
        let goal = checked_goal(goal)?;
        if conversation
            .messages
            .iter()
            .all(|m| m.text.trim().is_empty())
        {
            return Err(AppError::invalid(
                field,
                format!("{field}: there is no conversation to hand off"),
            ));
        }
        let draft = {
            let goal = goal.clone();
            crate::cpu::off_runtime_until(self.work_deadline(), move |deadline| {
                let facts = compactd_core::fidelity::facts::Facts::extract(&conversation.messages);
                let rules = carried_rules(&facts, previous_summary.as_deref());
                compactd_core::handoff::draft(&goal, &conversation.messages, &rules, "", deadline)
            })
            .await?
            .ok_or(AppError::DeadlineExceeded(DRAFTING))?
        };
        let context = self.pipeline_context(who, Endpoint::Handoff);
        self.drafted(&context, &goal, draft).await
    }
}

impl App {
    /// The draft for `goal` from the thread compactd last saw through its gateway for `who`'s
    /// `agent` (any agent when `None`; see [`super::seen`]): the conversation of its latest
    /// request. Nothing is stored.
    pub(crate) async fn handoff_current(
        &self,
        who: &Identity,
        agent: Option<&str>,
        goal: &str,
    ) -> Result<(Drafted, super::seen::Seen), AppError> {
        use super::seen::SeenWire;
        use compactd_core::transcript::structured::{from_anthropic, from_chat, from_responses};
        let seen = self.seen.latest(who, agent).ok_or_else(|| {
            AppError::NotFound(format!(
                "no thread of {} seen through compactd's gateway: give a session id, or point \
                 the agent's model base URL at compactd",
                agent.unwrap_or("any agent")
            ))
        })?;
        let (wire, body) = (seen.wire, seen.body.clone());
        let conversation = crate::cpu::off_runtime(move || {
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let none = Vec::new();
            let messages = body["messages"].as_array().unwrap_or(&none);
            match wire {
                SeenWire::AnthropicMessages => from_anthropic(messages),
                SeenWire::ChatCompletions => from_chat(messages),
                SeenWire::Responses => from_responses(&body["input"]),
            }
        })
        .await?;
        let drafted = self
            .handoff_conversation(who, goal, ("thread", conversation), None)
            .await?;
        Ok((drafted, seen))
    }
}

/// The rules an earlier summary carried and the ones `facts` found.
fn carried_rules(
    facts: &compactd_core::fidelity::facts::Facts,
    previous: Option<&str>,
) -> Vec<String> {
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
    let facts = compactd_core::fidelity::facts::Facts::extract(&messages);
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
    format!("{}\n{message}\n", super::fork::child_header(header, parent))
}
