"""Anthropic's Python SDK as the caller of compactd's on-demand compaction (tests/it/agents/sdks.rs).

Reads a job from stdin: {"base_url", "api_key", "model", "system", "messages"}. Compacts `messages` with
`client.beta.messages.create(compaction={"type": "summarize"})`, whole and streamed; sends the
block back first in the next turn's `messages`, as the API asks; then sends requests the API
refuses. Prints what the SDK made of each answer, as JSON: the classes it parsed them into, the
block as it holds it, the stream's events, the typed errors it raised.
"""

import json
import sys

import anthropic
from anthropic.types.beta import BetaCompactionBlock, BetaMessage

BETAS = ["compact-2026-09-04"]

job = json.load(sys.stdin)
client = anthropic.Anthropic(base_url=job["base_url"], api_key=job["api_key"], max_retries=0)


def compact(messages, **extra):
    return client.beta.messages.create(
        model=job["model"], max_tokens=4096, system=job["system"], messages=messages,
        compaction={"type": "summarize"}, betas=BETAS, **extra,
    )


message = compact(job["messages"])
block = message.content[0]
report = {
    "class": type(message).__name__,
    "block_class": type(block).__name__,
    # The SDK's models, validated strictly (its parse above is lenient by design).
    "message_strict": BetaMessage.model_validate(message.model_dump()).stop_reason,
    "block_strict": BetaCompactionBlock.model_validate(block.model_dump()).type,
    "blocks": len(message.content),
    "stop_reason": message.stop_reason,
    "iterations": [i.type for i in (message.usage.iterations or [])],
    "block": block.model_dump(exclude_none=True),
}

with client.beta.messages.stream(
    model=job["model"], max_tokens=4096, system=job["system"], messages=job["messages"],
    compaction={"type": "summarize"}, betas=BETAS,
) as stream:
    report["stream_events"] = [event.type for event in stream]
    final = stream.get_final_message()
report["streamed_block"] = final.content[0].model_dump(exclude_none=True)
report["streamed_stop_reason"] = final.stop_reason

# The next turn: the block first, in place of the messages it summarizes.
following = [
    {"role": "assistant", "content": [report["block"]]},
    {"role": "user", "content": "Go on."},
]
with client.beta.messages.stream(
    model=job["model"], max_tokens=4096, system=job["system"], messages=following, betas=BETAS,
) as stream:
    # (The fake provider's text ends in a lone surrogate, as JavaScript writes them: left out.)
    report["next_text"] = stream.get_final_text()[:16]

refusals = {
    "nothing": lambda: compact([]),
    "incomplete": lambda: compact([
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
    ]),
    "edited": lambda: compact([
        {"role": "assistant", "content": [{**report["block"], "content": "a summary I wrote"}]},
        {"role": "user", "content": "Go on."},
    ]),
    "with_context_management": lambda: compact(
        job["messages"], context_management={"edits": [{"type": "clear_thinking_20251015"}]}
    ),
}
report["refusals"] = {}
for name, call in refusals.items():
    try:
        call()
        report["refusals"][name] = "accepted"
    except anthropic.APIStatusError as error:
        report["refusals"][name] = {
            "class": type(error).__name__,
            "status": error.status_code,
            "error_code": error.error_code,
        }

json.dump(report, sys.stdout)
