"""The OpenAI Agents SDK's compaction session through compactd (tests/it/agents/sdks.rs).

Reads a job from stdin: {"base_url", "api_key", "model"}. Two turns of an agent whose session is an
`OpenAIResponsesCompactionSession` (input mode, compacting after every turn) over an in-memory
`SQLiteSession`: the SDK calls `responses.compact` itself and keeps what it answers as the
session's history, which the second turn sends back. Prints what the session held after the
first turn and what the agent answered, as JSON.
"""

import asyncio
import json
import sys

from openai import AsyncOpenAI
from agents import Agent, OpenAIResponsesModel, Runner, SQLiteSession, set_tracing_disabled
from agents.memory import OpenAIResponsesCompactionSession

job = json.load(sys.stdin)
set_tracing_disabled(True)
client = AsyncOpenAI(base_url=job["base_url"] + "/v1", api_key=job["api_key"], max_retries=0)
agent = Agent(
    name="coder",
    instructions="You help with code.",
    model=OpenAIResponsesModel(model=job["model"], openai_client=client),
)


async def main():
    session = OpenAIResponsesCompactionSession(
        "s1",
        SQLiteSession("s1"),
        client=client,
        model=job["model"],
        compaction_mode="input",
        should_trigger_compaction=lambda context: True,
    )
    first = await Runner.run(
        agent, "Always run cargo fmt. Fix the unary minus in src/parser.rs.", session=session
    )
    kept = await session.get_items()
    second = await Runner.run(agent, "Now add a regression test for it.", session=session)
    report = {
        "first": first.final_output,
        "kept": [item.get("type") or item.get("role") for item in kept],
        "sealed": [item.get("encrypted_content", "")[:12] for item in kept if item.get("type") == "compaction"],
        "second": second.final_output,
    }
    json.dump(report, sys.stdout)


asyncio.run(main())
