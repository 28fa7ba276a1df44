//! OpenAI's `POST /v1/responses/compact` (issue 66), served by compactd at the gateway: what
//! `client.responses.compact(...)` of the official SDKs calls, and what oh-my-pi, Codex's older
//! path, the Agents SDK and Zed call before anything else when their model is OpenAI's. The
//! conversation is summarized through the same pipeline as every compaction (redaction, cache,
//! budget, models, gate, standing rules, recall, call log) and answered as the API answers: a
//! `response.compaction` whose output is the conversation's user messages followed by one
//! `compaction` item — compactd's, sealed for the caller, which compactd opens into its summary
//! when a later turn sends it back, whichever upstream that turn goes to.
//!
//! A compaction compactd does not answer (its models down, the tenant's budget spent) goes to the
//! configured OpenAI upstream as it came.

use axum::response::Response;
use serde_json::{Value, json};

use super::answer::{id, json_response};
use super::recognize::{Form, of_history};
use super::{AgentError, Gateway, Request, Wire, forward, log_fallback};
use crate::access::Identity;
use crate::app::{App, AppError};
use crate::pipeline::{Agent, Endpoint};

/// Any client of OpenAI's compaction endpoint (the official SDKs, oh-my-pi, the Agents SDK).
pub(crate) const RESPONSES_COMPACT: Agent = Agent {
    name: "responses-compact",
    endpoint: "gateway:responses-compact",
    wire: Wire::Responses,
};

/// `POST /v1/responses/compact`: the compacted conversation, or the upstream's answer.
pub(crate) async fn compact(
    app: &App,
    gateway: &Gateway,
    who: &Identity,
    mut request: Request,
) -> Result<Response, AgentError> {
    // A tenant that chose the provider's own compaction: its request goes as it came.
    if gateway.native_for(who) {
        return forward(gateway, Wire::Responses, request).await;
    }
    let plain = request.plain.clone().unwrap_or_default();
    let mut body: Value = compactd_core::js_json::from_slice(&plain).map_err(|e| {
        AgentError::App(AppError::Malformed {
            param: "body".into(),
            message: format!("the body is not JSON: {e}"),
        })
    })?;
    if !body.is_object() {
        return Err(AgentError::App(AppError::Malformed {
            param: "body".into(),
            message: "the body must be a JSON object".into(),
        }));
    }
    // A string input is one user message.
    if let Some(text) = body.get("input").and_then(Value::as_str) {
        body["input"] = json!([{"type": "message", "role": "user", "content": text}]);
    }
    let Some(input) = body.get("input").and_then(Value::as_array).cloned() else {
        // The conversation is the upstream's to read (compactd keeps no responses).
        if body
            .get("previous_response_id")
            .is_some_and(Value::is_string)
        {
            return forward(gateway, Wire::Responses, request).await;
        }
        return Err(AgentError::App(AppError::invalid(
            "input",
            "input is required (a string or a list of Responses input items)",
        )));
    };
    // compactd's own items from an earlier compaction open into their summaries first.
    let seal = gateway.seal(app).await.map_err(AppError::from)?;
    if seal.expand(&mut body, who) > 0 {
        request.rewrite(&body);
    }
    // A compaction item compactd cannot open (the provider's own, encrypted for it) or an earlier
    // response it stands on holds history only the upstream can read: summarizing without it
    // would drop that history, so the upstream compacts.
    if upstream_only(&body) {
        return forward(gateway, Wire::Responses, request).await;
    }
    let history = body["input"].as_array().cloned().unwrap_or_default();
    let conversation = Wire::Responses.messages(&history);
    let compaction = of_history(
        RESPONSES_COMPACT,
        Form::SealedItem,
        &body,
        conversation,
        String::new(),
        None,
    );
    let policy = crate::app::wire::Policy {
        chain: None,
        when_spent: crate::pipeline::WhenSpent::Refuse,
    };
    // A summary prepared while the agent worked answers at once (issue 67).
    let prepared = super::prepare::answered(app, gateway, who, &request.headers, &compaction).await;
    let summary = match prepared {
        Some(summary) => Ok(summary),
        None => {
            app.summarize_prompt_with(
                who,
                Endpoint::Gateway(RESPONSES_COMPACT),
                compaction.request,
                policy,
            )
            .await
        }
    };
    let summary = match summary {
        Ok(summary) => summary,
        Err(AppError::Invalid { param, message }) => {
            return Err(AgentError::App(AppError::Invalid { param, message }));
        }
        Err(error) => {
            log_fallback(RESPONSES_COMPACT, &error);
            return forward(gateway, Wire::Responses, request).await;
        }
    };
    let item = seal.item(&summary.text, who);
    let mut output: Vec<Value> = input.iter().filter_map(user_message).collect();
    output.push(item);
    Ok(json_response(json!({
        "id": id("resp"),
        "object": "response.compaction",
        "created_at": compactd_store::now_ms() / 1000,
        "output": output,
        "usage": super::responses::usage_of(&summary.usage),
    })))
}

/// Whether part of the conversation is readable only by the upstream: a compaction item left
/// sealed (not compactd's), or an earlier response the input continues.
fn upstream_only(body: &Value) -> bool {
    let foreign_item = body["input"]
        .as_array()
        .is_some_and(|items| items.iter().any(|i| i["type"] == "compaction"));
    foreign_item
        || body
            .get("previous_response_id")
            .is_some_and(Value::is_string)
}

/// A user message of the input as the compacted output lists it (the API keeps every user
/// message, in order, before the compaction item); anything else is summarized away.
fn user_message(item: &Value) -> Option<Value> {
    let is_message = item.get("type").is_none_or(|t| t == "message");
    if !is_message || item.get("role").and_then(Value::as_str) != Some("user") {
        return None;
    }
    let content = match item.get("content")? {
        Value::String(text) => json!([{"type": "input_text", "text": text}]),
        Value::Array(parts) => Value::Array(parts.clone()),
        _ => return None,
    };
    Some(json!({
        "id": item.get("id").cloned().unwrap_or_else(|| json!(id("msg"))),
        "type": "message",
        "status": "completed",
        "role": "user",
        "content": content,
    }))
}
