"""Anthropic's Python SDK with the `compact_20260112` edit through compactd (tests/it/agents/sdks.rs).

Reads a job from stdin: {"base_url", "api_key", "model", "messages", "trigger"}. Sends `messages` with the
edit, whole and streamed, then with `pause_after_compaction`; then the next turn, the answer
appended as the API asks. Prints what the SDK made of each answer, as JSON.
"""

import json
import sys

import anthropic
from anthropic.types.beta import BetaCompactionBlock, BetaMessage

BETAS = ["compact-2026-01-12"]

job = json.load(sys.stdin)
client = anthropic.Anthropic(base_url=job["base_url"], api_key=job["api_key"], max_retries=0)
edit = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": job["trigger"]}}


def create(messages, **extra):
    return client.beta.messages.create(
        model=job["model"], max_tokens=4096, messages=messages, betas=BETAS,
        context_management={"edits": [edit]}, **extra,
    )


message = create(job["messages"])
report = {
    "class": type(message).__name__,
    "message_strict": BetaMessage.model_validate(message.model_dump()).stop_reason,
    "blocks": [type(b).__name__ for b in message.content],
    "block_strict": BetaCompactionBlock.model_validate(message.content[0].model_dump()).type,
    "summary": message.content[0].content,
    "reply": message.content[1].text,
    "iterations": [i.type for i in (message.usage.iterations or [])],
}

with client.beta.messages.stream(
    model=job["model"], max_tokens=4096, messages=job["messages"], betas=BETAS,
    context_management={"edits": [edit]},
) as stream:
    report["stream_events"] = sorted({event.type for event in stream})
    final = stream.get_final_message()
report["streamed_blocks"] = [b.type for b in final.content]
report["streamed_summary"] = final.content[0].content
report["streamed_reply"] = final.content[1].text[:16]

paused = client.beta.messages.create(
    model=job["model"], max_tokens=4096, messages=job["messages"], betas=BETAS,
    context_management={"edits": [{**edit, "pause_after_compaction": True}]},
)
report["paused"] = {"stop_reason": paused.stop_reason, "blocks": [b.type for b in paused.content]}

# The next turn: the answer appended, then the user's next words.
following = [*job["messages"], {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]},
             {"role": "user", "content": "Go on."}]
nxt = create(following)
report["next_blocks"] = [b.type for b in nxt.content]
json.dump(report, sys.stdout)
