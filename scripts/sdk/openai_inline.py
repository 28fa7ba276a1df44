"""OpenAI's Python SDK with `context_management` compaction through compactd
(tests/it/agents/sdks.rs).

Reads a job from stdin: {"base_url", "api_key", "model", "input", "threshold"}. Sends `input` with the
compaction setting, whole and streamed; then the next turn, the output appended to the input as a
stateless client does. Prints what the SDK made of each answer, as JSON.
"""

import json
import sys

import openai
from openai.types.responses import ResponseCompactionItem

job = json.load(sys.stdin)
client = openai.OpenAI(base_url=job["base_url"], api_key=job["api_key"], max_retries=0)
setting = [{"type": "compaction", "compact_threshold": job["threshold"]}]

response = client.responses.create(model=job["model"], input=job["input"], context_management=setting)
first = response.output[0]
report = {
    "class": type(response).__name__,
    "items": [type(i).__name__ for i in response.output],
    "item_strict": ResponseCompactionItem.model_validate(first.model_dump()).type,
    "reply": response.output_text,
}

stream = client.responses.create(
    model=job["model"], input=job["input"], context_management=setting, stream=True
)
events = list(stream)
report["stream_events"] = [e.type for e in events]
done = [e for e in events if e.type == "response.output_item.done"]
report["streamed_first_item"] = type(done[0].item).__name__
completed = [e for e in events if e.type == "response.completed"][0]
report["completed_items"] = [i.type for i in completed.response.output]
numbers = [e.sequence_number for e in events]
report["sequence_in_order"] = numbers == sorted(numbers) and len(set(numbers)) == len(numbers)

following = [*job["input"], *[i.model_dump(exclude_none=True) for i in response.output],
             {"role": "user", "content": "Go on."}]
nxt = client.responses.create(model=job["model"], input=following, context_management=setting)
report["next_items"] = [i.type for i in nxt.output]
json.dump(report, sys.stdout)
