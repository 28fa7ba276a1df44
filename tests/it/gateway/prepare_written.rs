//! Zero-wait for a pi-family agent's written summarization at its base URL (the conversation in
//! its model's dialect inside the prompt, as oh-my-pi writes it): answered from the summary
//! prepared from the session's typed turns; the agent's other summarizations of the session (a
//! split turn's prefix, asking for sections of their own) neither take it nor spend it.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::prepare::{claude_turn, config, messages, post_as, prepared_outcome, settled};

use crate::support::{FakeProvider, Reply, TestApp};
use compactd_core::transcript::{Dialect, write};
use compactd_core::wire::Wire;

/// What compactd's model writes: the sections pi's template asks for.
const WRITTEN: &str = "## Goal\nPREPARED: fix the unary minus.\n\n## Next Steps\n1. Add the test.";

/// A pi-family summarization request on the Messages wire: one user message, the conversation
/// in the Anthropic dialect, then `instructions`.
fn written_request(conversation: &[Value], instructions: &str) -> Value {
    let typed = Wire::AnthropicMessages.messages(conversation).messages;
    let prompt = format!(
        "<conversation>\n{}\n</conversation>\n\n{instructions}",
        write(Dialect::Anthropic, &typed)
    );
    json!({"model": "claude-sonnet-4-6", "max_tokens": 4000,
        "system": "You summarize coding sessions for the next model.",
        "messages": [{"role": "user", "content": prompt}]})
}

const HISTORY: &str = "Summarize the conversation above.\n\n## Goal\n[goals]\n\n\
    ## Constraints & Preferences\n- [constraints]\n\n## Progress\n### Done\n- [x] [done]\n\n\
    ## Next Steps\n1. [next]\n\n## Critical Context\n- [context]";

const TURN_PREFIX: &str = "Summarize this turn's prefix.\n\n## Original Request\n[request]\n\n\
    ## Early Progress\n- [progress]\n\n## Context for Suffix\n- [context]";

#[tokio::test]
async fn a_written_compaction_is_answered_from_the_prepared_summary_and_a_turn_prefix_leaves_it() {
    let model = FakeProvider::start(vec![], Reply::openai(WRITTEN)).await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(config(&model, &provider)).await;
    let conversation = messages("Now add a regression test for unary minus.");
    post_as(&app, "omp-1", &claude_turn(&conversation)).await;
    settled(&app).await;
    assert_eq!(prepared_outcome(&app, "prepared").await, 1.0);

    // The split turn's prefix (its latest request onwards), asking for sections of its own: the
    // model writes it, and the prepared summary stays.
    let calls = model.received().len();
    let prefix = written_request(&conversation[3..], TURN_PREFIX);
    let (status, _) = post_as(&app, "omp-1", &prefix).await;
    assert_eq!(status, StatusCode::OK);
    assert!(model.received().len() > calls, "the model wrote the prefix");
    assert_eq!(prepared_outcome(&app, "wasted").await, 0.0);

    // The history: answered from the prepared summary, no model call while the agent waits.
    let calls = model.received().len();
    let history = written_request(&conversation, HISTORY);
    let (status, body) = post_as(&app, "omp-1", &history).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(model.received().len(), calls, "no model call: {body}");
    assert_eq!(prepared_outcome(&app, "used").await, 1.0);
    assert!(body.contains("PREPARED: fix the unary minus."), "{body}");
}
