//! The provider behind the gateway ([`Reply::Wire`]): each wire answered as the real provider
//! writes it, streamed or whole as the request asks, with fixed bytes so that a test can check
//! that the agent got exactly what the provider wrote.

use super::{Incoming, Reply};

/// What the provider writes, per wire: the agent must get these bytes back exactly.
pub fn provider_answer(path: &str) -> String {
    if path.starts_with("/v1/messages") {
        concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_p\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-opus-5-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"PROVIDER SAYS OK \\ud83d\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        ).to_owned()
    } else if path.starts_with("/v1/responses") {
        concat!(
            "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_p\",\"status\":\"in_progress\",\"output\":[]}}\n\n",
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"msg_p\",\"output_index\":0,\"content_index\":0,\"delta\":\"PROVIDER SAYS OK\"}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_p\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":10,\"output_tokens\":3,\"total_tokens\":13}}}\n\n",
        ).to_owned()
    } else {
        concat!(
            "data: {\"id\":\"chatcmpl-p\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"PROVIDER SAYS OK\"},\"finish_reason\":null}]}\n\n",
            "data: {\"id\":\"chatcmpl-p\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3,\"total_tokens\":13}}\n\n",
            "data: [DONE]\n\n",
        ).to_owned()
    }
}

/// What the provider answers a request that does not ask for a stream, per wire.
fn provider_whole_answer(path: &str) -> Option<&'static str> {
    if path.starts_with("/v1/messages") {
        Some(
            r#"{"id":"msg_p","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"text","text":"PROVIDER SAYS OK"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":3}}"#,
        )
    } else if path == "/v1/responses" {
        Some(
            r#"{"id":"resp_p","object":"response","created_at":1,"status":"completed","model":"gpt-5.2","output":[{"id":"msg_p","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"PROVIDER SAYS OK","annotations":[]}]}],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":13}}"#,
        )
    } else {
        None
    }
}

/// The provider's own answer to `POST /v1/responses/compact`.
pub const PROVIDER_COMPACTION: &str = r#"{"id":"resp_p","object":"response.compaction","created_at":1,"output":[{"id":"cmp_p","type":"compaction","encrypted_content":"gAAAAB-provider"}],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":13}}"#;

/// The provider's answer to `request`.
pub(super) fn answer(request: &Incoming) -> Reply {
    if request.method == "GET" {
        return Reply::raw("text/plain", "provider: no sockets here").with_status(404);
    }
    if request.path.ends_with("/count_tokens") {
        return Reply::raw("application/json", r#"{"input_tokens":2048}"#);
    }
    if request.path.ends_with("/responses/compact") {
        return Reply::raw("application/json", PROVIDER_COMPACTION);
    }
    // Read from the bytes as they came: a compressed body (Codex's) is answered as a stream.
    let streams = serde_json::from_slice::<serde_json::Value>(&request.bytes)
        .is_ok_and(|body| body["stream"] == true);
    if !streams && let Some(whole) = provider_whole_answer(&request.path) {
        return Reply::raw("application/json", whole);
    }
    Reply::raw("text/event-stream", &provider_answer(&request.path))
        .with_header("x-provider-request-id", "req_provider_1")
}
