//! compactd at an agent's model base URL (Claude Code's `ANTHROPIC_BASE_URL`, a Codex model
//! provider's `base_url`, an OpenCode provider's `baseURL`), and the chat-completions wire it
//! shares with compactd's own summarization API. [`handle`] is the one place that decides: a
//! request that is a compaction ([`recognize`]'s table) is summarized by the pipeline and answered
//! in the agent's own wire; every other request goes to the configured upstream of its wire
//! untouched ([`proxy`]); a compaction compactd cannot answer (its models down, the tenant's
//! budget spent) goes upstream too, so that the agent is never worse off than without compactd.
//! Codex's remote compaction items are compactd's own, sealed, and expanded when they come back
//! ([`codex`]); the summary an agent carries from its previous compaction is read out of its
//! history ([`carried`]).
//!
//! One module a wire, each with its agents' recognizers and its answer: [`chat_completions`]
//! (OpenCode, pi forks' rendered prompts, any OpenAI client), [`anthropic_messages`] (Claude
//! Code), [`responses`] (Codex); [`answer`] the streaming they share.
//!
//! The gateway is off unless `COMPACTD_GATEWAY=on`. Never an open proxy: the upstreams are
//! settings, never taken from a request.

mod answer;
mod anthropic_compaction;
mod anthropic_messages;
mod carried;
mod chat_completions;
mod codex;
mod context_edits;
mod gateway;
mod inline;
mod prepare;
mod proxy;
mod recognize;
mod rendered;
mod responses;
pub(crate) mod responses_compact;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use serde_json::Value;

pub(crate) use chat_completions::ChatRequest;
pub(crate) use gateway::Gateway;
pub(crate) use prepare::{Preparer, after_append, answered_remote, before_compaction, compacted};
pub(crate) use proxy::PassedThrough;

use crate::access::Identity;
use crate::app::{App, AppError};
use crate::pipeline::{Agent, Endpoint};
use crate::summarizer::Summary;
use answer::Answer;
use proxy::Credentials;
use recognize::{Compaction, Form};

pub(crate) use compactd_core::wire::Wire;

/// What an agent sent, as it came.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) headers: HeaderMap,
    /// The body as it came: what is forwarded.
    pub(crate) bytes: Bytes,
    /// The body with its `Content-Encoding` undone; `None` in a coding compactd does not read
    /// (such a body is only ever forwarded).
    pub(crate) plain: Option<Bytes>,
    /// Whether the body says it is JSON (`Content-Type`): what a web page cannot send to another
    /// site without the browser asking first.
    pub(crate) declares_json: bool,
    /// What reads the context size the provider reports in its answer, for a turn of a session
    /// being watched for zero-wait compaction.
    pub(crate) usage: Option<prepare::UsageTap>,
}

impl Request {
    /// What compactd answers on the chat wire it reads as its own API does: a body that does not
    /// say it is JSON (what a web page may send to another site unasked) is refused.
    fn must_declare_json(&self) -> Result<(), AgentError> {
        if self.declares_json {
            return Ok(());
        }
        let declared = self.headers.get(axum::http::header::CONTENT_TYPE).cloned();
        Err(AgentError::NotJson { declared })
    }

    /// Forwards `body` instead of the body as it came (written plain, its coding undone).
    pub(crate) fn rewrite(&mut self, body: &Value) {
        self.rewrite_bytes(body.to_string().into());
    }

    /// Takes out of an ordinary turn (`plain`, its body) the clearing edits that would clear
    /// nothing (Claude Code's, on every turn) by a splice of its bytes, so that it is not parsed
    /// for them: whether that settled its edits.
    fn spliced_edits(&mut self, plain: &[u8]) -> bool {
        match context_edits::without_inert(plain) {
            Some(context_edits::Spliced::Unchanged) => true,
            Some(context_edits::Spliced::Rewritten(bytes)) => {
                self.rewrite_bytes(bytes.into());
                true
            }
            None => false,
        }
    }

    /// Forwards `plain` (a JSON body, not coded) instead of the body as it came.
    fn rewrite_bytes(&mut self, plain: Bytes) {
        self.bytes = plain;
        self.headers.remove(axum::http::header::CONTENT_ENCODING);
    }
}

/// How a request was handled.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The answer: compactd's, in the agent's wire, or the upstream's, passed through.
    Response(Response),
    /// A summary for the chat wire, whose answer (a documented API type) the HTTP layer writes.
    Chat {
        summary: compactd_core::redact::Redacted<Summary>,
        stream: bool,
    },
}

/// What stops a request from being handled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AgentError {
    #[error(transparent)]
    App(#[from] AppError),
    /// compactd's key came in the only header the provider reads its credential from.
    #[error("the {} header carries a compactd key", .0.header)]
    Ambiguous(#[from] proxy::AmbiguousCredentials),
    /// A summarization request whose body does not say it is JSON: what its `Content-Type`
    /// said.
    #[error("the body must be JSON")]
    NotJson {
        declared: Option<axum::http::HeaderValue>,
    },
}

/// Handles an agent's request on `wire` at the gateway: recognizes it, summarizes it or
/// forwards it, once.
pub(crate) async fn handle(
    app: &App,
    gateway: &Gateway,
    who: &Identity,
    wire: Wire,
    mut request: Request,
) -> Result<Outcome, AgentError> {
    let plain = request.plain.clone().unwrap_or_default();
    // compactd's sealed items (Responses) and blocks (Messages) come back on later turns.
    let holds_item = wire != Wire::ChatCompletions && codex::may_hold_item(&plain);
    // What the agent's MCP `handoff` of "this thread" reads: the body as the model gets it.
    let mut seen_body = plain.clone();
    // The one parse of the body, and only of one that may be a compaction: the ordinary turns
    // that are most of the traffic (and tens of kilobytes each) pass through unparsed.
    // A tenant that chose the providers' own compaction APIs: those pass through untouched.
    let native = gateway.native_for(who);
    let may_be_compaction = recognize::may_be_compaction(wire, &plain);
    // Clearing edits compactd applies: an ordinary turn's that would clear nothing are spliced
    // out of its bytes here; the others are applied to the parsed body below.
    let clears = wire == Wire::AnthropicMessages
        && !native
        && gateway.applies_context_edits
        && context_edits::may_ask(&plain)
        && (may_be_compaction || holds_item || !request.spliced_edits(&plain));
    let mut body: Option<Value> = (may_be_compaction || holds_item || clears)
        .then(|| compactd_core::js_json::from_slice(&plain).ok())
        .flatten();
    // compactd's items from an earlier compaction, the caller's own: their summaries, before
    // anything reads them. The rewritten body goes upstream plain.
    if holds_item && let Some(value) = body.as_mut() {
        match expand_items(app, gateway, who, wire, value).await? {
            Err(refused) => return Ok(refused),
            Ok(0) => {}
            Ok(_) => {
                request.rewrite(value);
                seen_body = request.bytes.clone();
            }
        }
    }
    // What the model reads of this turn (compactd's items opened): what is prepared ahead.
    let turn_body = seen_body.clone();
    note_session(app, who, wire, &request.headers, seen_body);
    // Clearing edits an upstream without them would not apply: compactd's, before anything
    // reads the conversation (the model sees it cleared, and so does a compaction of it).
    let mut applied = None;
    if clears && let Some(value) = body.as_mut() {
        applied = context_edits::apply(value);
        if applied.is_some() {
            request.rewrite(value);
        }
    }
    let report = Report {
        applied: applied.unwrap_or_default(),
        limit: gateway.proxy.max_response_bytes,
    };
    let Some(body) = body else {
        request.usage = prepare::after_turn(app, gateway, who, wire, &request.headers, &turn_body);
        return forward(gateway, wire, request).await.map(Outcome::Response);
    };
    let compaction = recognize::compaction(wire, &request.headers, &body);
    let rendered = compaction.is_none()
        && wire == Wire::ChatCompletions
        && chat_completions::is_rendered_summarization(&body);
    if wire == Wire::ChatCompletions && (compaction.is_some() || rendered) {
        request.must_declare_json()?;
    }
    if let Some(compaction) = compaction {
        if native && recognize::is_provider_api(compaction.agent) {
            return forward(gateway, wire, request).await.map(Outcome::Response);
        }
        if compaction.answer == Form::CompactionBlock
            && let Err(refused) = anthropic_compaction::check(&body)
        {
            return Ok(Outcome::Response(refused.response()));
        }
        let turn = inline::Turn {
            wire,
            request: &request,
            body: &body,
        };
        let inline = compaction.answer == Form::Inline;
        let answered = answer_compaction(app, gateway, who, turn, compaction).await?;
        return match answered {
            Some(Outcome::Response(response)) if inline => {
                Ok(Outcome::Response(report.into(response).await))
            }
            Some(outcome) => Ok(outcome),
            None => report.forward(gateway, wire, request).await,
        };
    }
    if rendered {
        return summarize_chat(app, who, &body).await;
    }
    // A provider's compaction setting under its threshold: compaction is compactd's to do.
    let mut body = body;
    if !native && inline::without_setting(wire, &mut body) {
        request.rewrite(&body);
    }
    request.usage = prepare::after_turn(app, gateway, who, wire, &request.headers, &turn_body);
    report.forward(gateway, wire, request).await
}

/// Opens compactd's sealed items (Responses) or blocks (Messages) in `body` into their
/// summaries, for its caller only: how many were opened, or the refusal of one not the caller's.
async fn expand_items(
    app: &App,
    gateway: &Gateway,
    who: &Identity,
    wire: Wire,
    body: &mut Value,
) -> Result<Result<usize, Outcome>, AgentError> {
    let seal = gateway.seal(app).await.map_err(AppError::from)?;
    Ok(match wire {
        Wire::AnthropicMessages => anthropic_compaction::expand(seal, body, who)
            .map_err(|refused| Outcome::Response(refused.response())),
        _ => Ok(seal.expand(body, who)),
    })
}

/// The clearing edits compactd applied to a request, reported in the answer to it.
struct Report {
    applied: Vec<Value>,
    limit: u64,
}

impl Report {
    /// The request forwarded, the answer reporting the edits.
    async fn forward(
        self,
        gateway: &Gateway,
        wire: Wire,
        request: Request,
    ) -> Result<Outcome, AgentError> {
        let response = forward(gateway, wire, request).await?;
        Ok(Outcome::Response(self.into(response).await))
    }

    /// `response` with the edits in its `context_management.applied_edits` (whole, or in the
    /// stream's `message_delta`); as it came when compactd cleared nothing.
    async fn into(self, response: Response) -> Response {
        if self.applied.is_empty() {
            return response;
        }
        let whole = {
            let applied = self.applied.clone();
            move |mut answer: Value| {
                context_edits::reported(&mut answer, &applied);
                answer
            }
        };
        inline::rewritten(
            response,
            whole,
            context_edits::rewrite(self.applied),
            self.limit,
        )
        .await
    }
}

/// Remembers `body` as the latest request of the agent session the headers name, if any (the
/// body is shared, not copied).
fn note_session(app: &App, who: &Identity, wire: Wire, headers: &HeaderMap, body: Bytes) {
    use crate::app::threads::seen::agent_session;
    let Some(session) = agent_session(headers) else {
        return;
    };
    // A body compactd could not read (a coding it does not know) leaves nothing to remember:
    // the session's older request is forgotten, never left to stand for this one.
    app.note_agent_request(who, session, wire, body);
}

/// A chat request summarized as compactd's own API (the endpoint is the chat wire's): what the
/// chat wire is with the gateway off, and a rendered summarization prompt with it on.
pub(crate) async fn summarize_chat(
    app: &App,
    who: &Identity,
    body: &Value,
) -> Result<Outcome, AgentError> {
    let read = chat_completions::read(body)?;
    let summary = app
        .summarize_prompt_with(
            who,
            Endpoint::ChatCompletions,
            read.request,
            Default::default(),
        )
        .await?;
    Ok(Outcome::Chat {
        summary,
        stream: read.stream,
    })
}

/// An agent's compaction summarized and answered in its wire, or `None` when compactd cannot
/// answer it and the agent's own request should go upstream.
async fn answer_compaction(
    app: &App,
    gateway: &Gateway,
    who: &Identity,
    turn: inline::Turn<'_>,
    compaction: Compaction,
) -> Result<Option<Outcome>, AgentError> {
    let (wire, request) = (turn.wire, turn.request);
    let chain = gateway.agent_chain(
        wire,
        &compaction.model,
        &request.headers,
        app.configured_chain(),
    );
    let endpoint = Endpoint::Gateway(compaction.agent);
    // Decided before any work: past the tenant's budget the agent's own provider compacts.
    let policy = crate::app::wire::Policy {
        chain,
        when_spent: crate::pipeline::WhenSpent::Refuse,
    };
    // A summary prepared while the agent worked answers at once (issue 67).
    let prepared = prepare::answered(app, gateway, who, &request.headers, &compaction).await;
    let summary = match prepared {
        Some(summary) => summary,
        None => match app
            .summarize_prompt_with(who, endpoint, compaction.request.clone(), policy)
            .await
        {
            Ok(summary) => summary,
            Err(error) => {
                log_fallback(compaction.agent, &error);
                return Ok(None);
            }
        },
    };
    if compaction.answer == Form::Inline {
        let response = inline::answer(app, gateway, who, turn, &summary, &compaction).await?;
        return Ok(Some(Outcome::Response(response)));
    }
    let response = match wire {
        Wire::ChatCompletions => {
            return Ok(Some(Outcome::Chat {
                summary,
                stream: compaction.stream,
            }));
        }
        Wire::AnthropicMessages if compaction.answer == Form::CompactionBlock => {
            let seal = gateway.seal(app).await.map_err(AppError::from)?;
            let signature = seal.seal(&summary.text, who);
            let reply = Answer {
                text: &summary.text,
                model: &compaction.model,
                usage: summary.usage,
            };
            anthropic_compaction::answer(&reply, &signature, compaction.stream)
        }
        Wire::AnthropicMessages => {
            let text = match compaction.answer {
                Form::SummaryTags => anthropic_messages::with_summary_tags(&summary.text),
                _ => summary.text.clone(),
            };
            let reply = Answer {
                text: &text,
                model: &compaction.model,
                usage: summary.usage,
            };
            anthropic_messages::answer(&reply, compaction.stream)
        }
        Wire::Responses => {
            let item = match compaction.answer {
                Form::SealedItem => {
                    let seal = gateway.seal(app).await.map_err(AppError::from)?;
                    Some(seal.item(&summary.text, who))
                }
                _ => None,
            };
            let reply = Answer {
                text: &summary.text,
                model: &compaction.model,
                usage: summary.usage,
            };
            responses::answer(&reply, compaction.stream, item)
        }
    };
    Ok(Some(Outcome::Response(response)))
}

/// Why an agent's own compaction went to its provider: the tenant's budget, or compactd's error.
pub(super) fn log_fallback(agent: Agent, error: &AppError) {
    let agent = agent.name;
    match error {
        AppError::Summarize(crate::pipeline::SummarizeError::BudgetSpent) => tracing::info!(
            agent,
            "gateway: the tenant's budget is spent; the agent's own compaction goes upstream"
        ),
        error => {
            tracing::warn!(agent, error = %error, "gateway: compactd could not summarize; the agent's own compaction goes upstream")
        }
    }
}

/// Where the ChatGPT backend's Responses paths start, as its clients write them.
pub(crate) const CODEX_PREFIX: &str = "/codex/";

/// A request passed to the upstream of its wire as it came (the OpenAI upstream includes `/v1`).
pub(crate) async fn forward(
    gateway: &Gateway,
    wire: Wire,
    request: Request,
) -> Result<Response, AgentError> {
    let uri = &request.uri;
    let (target, credentials) = match wire {
        Wire::AnthropicMessages => (
            proxy::target(&gateway.anthropic_upstream, uri.path(), "", uri.query()),
            Credentials::Anthropic,
        ),
        // The ChatGPT backend's Codex paths keep theirs: `<backend>/codex/responses`.
        Wire::Responses if uri.path().starts_with(CODEX_PREFIX) => (
            proxy::target(&gateway.codex_upstream, uri.path(), "", uri.query()),
            Credentials::OpenAi,
        ),
        Wire::ChatCompletions | Wire::Responses => (
            proxy::target(&gateway.openai_upstream, uri.path(), "/v1", uri.query()),
            Credentials::OpenAi,
        ),
    };
    let response = gateway
        .proxy
        .forward(
            target,
            credentials,
            request.method,
            &request.headers,
            request.bytes,
            request.usage,
        )
        .await?;
    Ok(response)
}
