//! A turn compacted in line: the providers' automatic compaction inside an ordinary request
//! (Anthropic's `compact_20260112` edit, OpenAI's `context_management` compaction). compactd
//! summarizes the conversation through its pipeline, sends the compacted request to the upstream
//! of the wire, and answers with its own block or item first and the upstream's reply after it,
//! whole or streamed as the upstream streams it ([`sse`]). A request under its threshold goes on
//! without the setting: compaction is compactd's to do.

pub(crate) mod anthropic;
pub(crate) mod responses;
pub(super) mod sse;

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::Response;
use compactd_core::js_json::preserving;
use serde_json::{Value, json};

use super::answer::Answer;
use super::recognize::Compaction;
use super::{AgentError, Gateway, Request, Wire, forward};
use crate::access::Identity;
use crate::app::{App, AppError};
use crate::summarizer::Summary;

/// Takes the compaction setting out of a body compactd serves and did not compact; whether the
/// body changed.
pub(super) fn without_setting(wire: Wire, body: &mut Value) -> bool {
    match wire {
        Wire::AnthropicMessages => anthropic::without_edit(body),
        Wire::Responses => responses::without_setting(body),
        Wire::ChatCompletions => false,
    }
}

/// The turn compactd compacts in line: its wire, the request as it came and its body.
pub(super) struct Turn<'a> {
    pub(super) wire: Wire,
    pub(super) request: &'a Request,
    pub(super) body: &'a Value,
}

/// compactd's answer to a turn it compacted in line.
pub(super) async fn answer(
    app: &App,
    gateway: &Gateway,
    who: &Identity,
    turn: Turn<'_>,
    summary: &Summary,
    compaction: &Compaction,
) -> Result<Response, AgentError> {
    let Turn {
        wire,
        request,
        body,
    } = turn;
    let (model, stream) = (compaction.model.as_str(), compaction.stream);
    let seal = gateway.seal(app).await.map_err(AppError::from)?;
    let usage = &summary.usage;
    let (forwarded, first, rewrite): (Value, Value, sse::Rewrite) = match wire {
        Wire::AnthropicMessages => {
            let signature = seal.seal(&summary.text, who);
            if anthropic::edit_of(body).is_some_and(|e| e.pause) {
                let reply = Answer {
                    text: &summary.text,
                    model,
                    usage: summary.usage,
                };
                return Ok(super::anthropic_compaction::answer(
                    &reply, &signature, stream,
                ));
            }
            let block =
                json!({"type": "compaction", "content": summary.text, "signature": signature});
            let iteration = json!({"type": "compaction", "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": usage.cached_input_tokens});
            let rewrite = anthropic::rewrite(block.clone(), iteration.clone());
            let first = json!({"block": block, "iteration": iteration});
            (
                anthropic::compacted_request(body, &summary.text),
                first,
                rewrite,
            )
        }
        Wire::Responses | Wire::ChatCompletions => {
            let item = seal.item_replacing(&summary.text, who);
            (
                responses::compacted_request(body, &summary.text),
                item.clone(),
                responses::rewrite(item),
            )
        }
    };
    let mut headers = request.headers.clone();
    headers.remove(header::CONTENT_ENCODING);
    let compacted = Request {
        method: request.method.clone(),
        uri: request.uri.clone(),
        headers,
        bytes: forwarded.to_string().into(),
        plain: None,
        declares_json: request.declares_json,
        usage: None,
    };
    let response = forward(gateway, wire, compacted).await?;
    Ok(merged(
        response,
        wire,
        &first,
        rewrite,
        gateway.proxy.max_response_bytes,
    )
    .await)
}

/// The upstream's answer with compactd's block or item first.
async fn merged(
    response: Response,
    wire: Wire,
    first: &Value,
    rewrite: sse::Rewrite,
    limit: u64,
) -> Response {
    let whole = |answer: Value| match wire {
        Wire::AnthropicMessages => anthropic::merged(answer, &first["block"], &first["iteration"]),
        _ => responses::merged(answer, first),
    };
    rewritten(response, whole, rewrite, limit).await
}

/// An upstream's answer rewritten: streamed events by `events` as they pass, a whole JSON answer
/// by `whole` at once; an error or an answer compactd cannot read goes to the client as the
/// upstream wrote it.
pub(super) async fn rewritten(
    response: Response,
    whole: impl FnOnce(Value) -> Value,
    events: sse::Rewrite,
    limit: u64,
) -> Response {
    if response.status() != StatusCode::OK {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let streamed = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if streamed {
        let events = sse::Rewritten::new(body.into_data_stream(), events);
        return Response::from_parts(parts, Body::from_stream(events));
    }
    let bytes = match axum::body::to_bytes(body, usize::try_from(limit).unwrap_or(usize::MAX)).await
    {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::warn!(error = %error, "gateway: an upstream's answer compactd rewrites did not arrive whole");
            return Response::from_parts(parts, Body::empty());
        }
    };
    // Lone surrogates (a model's text cut mid-pair) are kept as the upstream wrote them.
    let parsed = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| preserving::parse(text).ok());
    let Some(answer) = parsed else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    Response::from_parts(parts, Body::from(preserving::stringify(&whole(answer))))
}
