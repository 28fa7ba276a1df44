"""Anthropic's Python SDK with the clearing edits through compactd (tests/it/agents/sdks.rs).

Reads a job from stdin: {"base_url", "api_key", "model", "messages"}. Sends `messages` with
`clear_tool_uses_20250919` and `clear_thinking_20251015`, whole and streamed. Prints what the SDK
made of each answer's `context_management.applied_edits`, as JSON.
"""

import json
import sys

import anthropic
from anthropic.types.beta import BetaMessage

BETAS = ["context-management-2025-06-27"]

job = json.load(sys.stdin)
client = anthropic.Anthropic(base_url=job["base_url"], api_key=job["api_key"], max_retries=0)
edits = [
    {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}},
    {"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 2},
     "keep": {"type": "tool_uses", "value": 1}},
]


def applied(management):
    return [e.model_dump() for e in (management.applied_edits if management else [])]


message = client.beta.messages.create(
    model=job["model"], max_tokens=4096, messages=job["messages"], betas=BETAS,
    context_management={"edits": edits},
)
report = {
    "class": type(message).__name__,
    "strict": len(BetaMessage.model_validate(message.model_dump()).context_management.applied_edits),
    "applied": applied(message.context_management),
    "reply": message.content[0].text,
}
with client.beta.messages.stream(
    model=job["model"], max_tokens=4096, messages=job["messages"], betas=BETAS,
    context_management={"edits": edits},
) as stream:
    for _ in stream:
        pass
    final = stream.get_final_message()
report["streamed_applied"] = applied(final.context_management)
json.dump(report, sys.stdout)
