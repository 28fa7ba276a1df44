"""OpenAI's Python SDK as the caller of compactd's `responses.compact` (tests/it/agents/sdks.rs).

Reads a job from stdin: {"base_url", "api_key", "model", "input", "instructions"}. Compacts `input` with
`client.responses.compact`, then sends the compacted output back as the next turn's input (streamed
`responses.create`), as a client continuing the conversation does; then asks for a compaction
without input. Prints what the SDK made of each answer, as JSON: the classes it parsed them into,
the items as it holds them, the next turn's event types, the error it raised.
"""

import json
import sys

import openai
from openai.types.responses import ResponseCompactionItem, ResponseUsage

job = json.load(sys.stdin)
client = openai.OpenAI(base_url=job["base_url"], api_key=job["api_key"], max_retries=0)

compacted = client.responses.compact(
    model=job["model"], input=job["input"], instructions=job["instructions"]
)
item = compacted.output[-1]
report = {
    "class": type(compacted).__name__,
    "object": compacted.object,
    "item_class": type(item).__name__,
    # The SDK's models, validated strictly (its parse above is lenient by design).
    "item_strict": ResponseCompactionItem.model_validate(item.model_dump()).type,
    "usage_strict": ResponseUsage.model_validate(compacted.usage.model_dump()).total_tokens,
    "output": [i.model_dump(exclude_none=True) for i in compacted.output],
}

following = [*report["output"], {"role": "user", "content": "Go on."}]
stream = client.responses.create(model=job["model"], input=following, stream=True)
report["next_events"] = [event.type for event in stream]

try:
    client.responses.compact(model=job["model"])
    report["without_input"] = "accepted"
except openai.APIStatusError as error:
    report["without_input"] = {
        "class": type(error).__name__,
        "status": error.status_code,
        "param": (error.body or {}).get("param"),
    }

json.dump(report, sys.stdout)
