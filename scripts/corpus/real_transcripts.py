#!/usr/bin/env python3
"""Builds tests/fixtures/real-transcripts/cases.jsonl.gz from public recorded agent sessions.

Each case is one compaction asked the way the agent asks it, with its truth derived mechanically
from the transcript (never from compactd): the person's latest request, the files the summarized
span edited, and the text the agent injected into user turns. Sources are read from mirrors of
the repositories SOURCES.md names (git directories; pass each with --repo OWNER/NAME=GITDIR).

  python3 scripts/corpus/real_transcripts.py --repo marot/spotter=/path/git \
      --repo SWE-agent/SWE-agent=/path/git --repo SWE-agent/mini-swe-agent=/path/git
"""

import argparse
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/fixtures/real-transcripts/cases.jsonl.gz"
TEMPLATE = ROOT / "tests/fixtures/agent-requests/claude-code-2.1.330.jsonl"

# What Claude Code wraps its own text in, inside a user turn (its documented markup).
AGENT_ELEMENT = re.compile(
    r"<(task-notification|system-reminder|local-command-caveat|local-command-stdout|"
    r"local-command-stderr|command-name|command-message|command-args|bash-input|bash-stdout|"
    r"bash-stderr)>.*?</\1>",
    re.S,
)
EDIT_TOOLS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}


def git_show(gitdir, commit, path):
    return subprocess.run(
        ["git", "--git-dir", gitdir, "show", f"{commit}:{path}"],
        check=True, capture_output=True,
    ).stdout


def head(gitdir):
    return subprocess.run(
        ["git", "--git-dir", gitdir, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def ls(gitdir, commit, under):
    out = subprocess.run(
        ["git", "--git-dir", gitdir, "ls-tree", "-r", "--name-only", commit, under],
        check=True, capture_output=True, text=True,
    ).stdout
    return [p for p in out.splitlines() if p]


def small_images(content):
    """Images stand as a 1-pixel PNG: their bytes are not what a summary is judged on."""
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                if block.get("type") == "image" and isinstance(block.get("source"), dict):
                    block["source"]["data"] = "iVBORw0KGgo="
                small_images(block.get("content"))
    return content


def person_words(entry):
    """What the person typed in a Claude Code user entry ('' when the entry is the agent's)."""
    if entry.get("isMeta") or entry.get("isCompactSummary") or entry.get("toolUseResult") is not None:
        return ""
    content = entry["message"]["content"]
    if isinstance(content, list):
        if any(b.get("type") == "tool_result" for b in content):
            return ""
        content = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
    # A task notification's output file, which the line after it points at.
    files = re.findall(r"<output-file>(.*?)</output-file>", content)
    text = AGENT_ELEMENT.sub("", content)
    lines = [
        l for l in text.splitlines()
        if not l.startswith("[Request interrupted by user") and not any(f and f in l for f in files)
    ]
    return "\n".join(lines).strip()


def injected(entry):
    """The first line of each text the agent wrote into a user entry."""
    out = []
    content = entry["message"]["content"]
    texts = [content] if isinstance(content, str) else [
        b.get("text", "") for b in content if b.get("type") == "text"
    ]
    for text in texts:
        if entry.get("isMeta") and not entry.get("isCompactSummary"):
            first = next((l for l in text.splitlines() if l.strip()), "")
            if len(first) >= 24 and not first.startswith("<"):
                out.append(first.strip())
        for m in re.finditer(r"<task-notification>.*?<summary>(.*?)</summary>", text, re.S):
            out.append(m.group(1).strip())
    return out


def pi_turns(messages):
    """Anthropic messages as pi's serializeConversation writes them."""
    turns = []
    for m in messages:
        texts, calls = [], []
        for b in m["content"]:
            kind = b.get("type")
            if kind == "text" and b.get("text", "").strip():
                texts.append(b["text"])
            elif kind == "tool_use":
                calls.append(pi_call(b.get("name", "tool"), b.get("input") or {}))
            elif kind == "tool_result":
                content = b.get("content")
                if isinstance(content, list):
                    content = "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
                turns.append(("Tool result", (content or "").strip()))
        if m["role"] == "user":
            # The compaction prompt appended to the last user message is not conversation.
            texts = [t for t in texts if not t.startswith("CRITICAL: Respond with TEXT ONLY")]
            if texts:
                turns.append(("User", "\n".join(texts)))
        else:
            if texts:
                turns.append(("Assistant", "\n".join(texts)))
            if calls:
                turns.append(("Assistant tool calls", "; ".join(calls)))
    return turns


def claude_code_cases(gitdir, commit, template, pi_prompts):
    cases = []
    for path in ls(gitdir, commit, "test/fixtures/transcripts"):
        if not path.endswith(".jsonl") or "/subagents/" in path or "team-overlap" in path:
            continue
        try:
            raw = git_show(gitdir, commit, path).decode()
        except subprocess.CalledProcessError:
            continue  # a blob the mirror left out (its largest files)
        if not raw.strip():
            continue
        entries = [json.loads(l) for l in raw.splitlines() if l.strip()]
        segment, start = [], 0
        boundaries = []
        for i, e in enumerate(entries):
            if e.get("type") == "system" and e.get("subtype") == "compact_boundary":
                boundaries.append((segment, start))
                segment, start = [], i
            elif e.get("type") in ("user", "assistant") and not e.get("isSidechain"):
                segment.append(e)
        boundaries.append((segment, start))
        name = Path(path).stem
        for n, (seg, _) in enumerate(boundaries):
            case = claude_code_case(seg, template)
            if case:
                case["name"] = f"claude-code/{name[:8]}#{n}"
                case["source"] = f"marot/spotter@{commit[:12]}:{path}"
                cases.append(case)
                # The same span in pi's serialization on /v1/compact: Claude Code's own text
                # stays inside the user turns it wrote it into.
                cases.append({
                    **case,
                    "name": f"claude-code-as-pi/{name[:8]}#{n}",
                    "wire": "compact",
                    "headers": {},
                    "body": compact_body(
                        pi_turns(case["body"]["messages"][:-1]),
                        pi_prompts["systemPrompt"],
                        pi_prompts["instructions"],
                    ),
                })
    return cases


def claude_code_case(entries, template):
    messages = []
    last_id = None
    latest, edited, agent_texts = None, [], []
    for e in entries:
        m = e["message"]
        role = m["role"]
        content = small_images(json.loads(json.dumps(m["content"])))
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if role == "assistant":
            # One API message per response: its blocks arrive as separate entries.
            if messages and messages[-1]["role"] == "assistant" and m.get("id") == last_id:
                messages[-1]["content"].extend(content)
            else:
                messages.append({"role": "assistant", "content": list(content)})
            last_id = m.get("id")
            for b in content:
                if b.get("type") == "tool_use" and b.get("name") in EDIT_TOOLS:
                    p = b.get("input", {}).get("file_path") or b.get("input", {}).get("notebook_path")
                    if p and p not in edited:
                        edited.append(p)
        else:
            words = person_words(e)
            if words:
                latest = words
            agent_texts.extend(injected(e))
            if messages and messages[-1]["role"] == "user":
                messages[-1]["content"].extend(content)
            else:
                messages.append({"role": "user", "content": list(content)})
    # Drop thinking blocks' signatures' dependence: keep as recorded. Drop a trailing assistant
    # message with tool calls (the compaction is asked between turns) and anything after the
    # last complete exchange.
    while messages and messages[-1]["role"] == "assistant" and any(
        b.get("type") == "tool_use" for b in messages[-1]["content"]
    ):
        messages.pop()
    if len(messages) < 4 or not edited and latest is None:
        return None
    body = json.loads(json.dumps(template["body"]))
    prompt = body["messages"][-1]
    if isinstance(prompt["content"], str):
        prompt["content"] = [{"type": "text", "text": prompt["content"]}]
    body["messages"] = messages + ([prompt] if messages[-1]["role"] == "assistant" else [])
    if messages[-1]["role"] == "user":
        body["messages"][-1]["content"].extend(prompt["content"])
    return {
        "agent": "claude-code",
        "wire": "anthropic",
        "headers": template["headers"],
        "body": body,
        "latest": latest,
        "edited": edited,
        "injected": agent_texts,
    }


def pi_call(name, args):
    return f"{name}(" + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items()) + ")"


def compact_body(turns, system_prompt, instructions):
    """A `/v1/compact` body: the turns in pi's serialization, then pi's instructions."""
    return {
        "systemPrompt": system_prompt,
        "prompt": f"<conversation>\n{pi_prompt(turns)}\n</conversation>\n\n{instructions}",
    }


def as_sent(messages):
    """Messages with the roles a harness gave them: its command output as user turns."""
    return [
        ("User" if m["role"] == "user" else "Assistant", text_of(m.get("content")).strip())
        for m in messages
        if m["role"] in ("user", "assistant")
    ]


def pi_prompt(turns):
    """pi's serialization of a conversation (as pi's serializeConversation writes it)."""
    out = []
    for kind, text in turns:
        out.append(f"[{kind}]: {text}")
    return "\n\n".join(out)


def diff_files(diff):
    files = []
    for m in re.finditer(r"^diff --git a/(\S+) b/(\S+)", diff or "", re.M):
        if m.group(2) not in files:
            files.append(m.group(2))
    return files


def swe_agent_cases(gitdir, commit, system_prompt, instructions):
    cases = []
    for path in ls(gitdir, commit, "trajectories/demonstrations") + ls(gitdir, commit, "tests/test_data/trajectories"):
        if not path.endswith(".traj"):
            continue
        traj = json.loads(git_show(gitdir, commit, path))
        history = [h for h in traj.get("history", []) if h.get("agent", "primary") == "primary"]
        turns, first_user = [], None
        for h in history:
            content = h.get("content")
            if isinstance(content, list):
                content = "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
            content = content or ""
            if h["role"] == "system":
                continue
            if h["role"] == "user" and h.get("is_demo"):
                # The harness's demonstration, sent as a user message before the task.
                turns.append(("User", content))
            elif h["role"] == "user" and first_user is None:
                first_user = content
                turns.append(("User", content))
            elif h["role"] in ("user", "tool"):
                turns.append(("Tool result", content))
            elif h["role"] == "assistant":
                thought = h.get("thought") or content
                turns.append(("Assistant", thought.strip()))
                calls = h.get("tool_calls") or []
                if calls:
                    rendered = []
                    for c in calls:
                        f = c.get("function", {})
                        try:
                            args = json.loads(f.get("arguments") or "{}")
                        except ValueError:
                            args = {"input": f.get("arguments")}
                        rendered.append(pi_call(f.get("name", "tool"), args))
                    turns.append(("Assistant tool calls", "; ".join(rendered)))
                elif h.get("action"):
                    turns.append(("Assistant tool calls", pi_call("bash", {"command": h["action"].rstrip("\n")})))
        edited = diff_files(traj.get("info", {}).get("submission"))
        if first_user is None or len(turns) < 6:
            continue
        # As the harness sent it to its model: observations as user turns, the action in the
        # assistant's text (text-action trajectories only).
        if all(h["role"] != "tool" and not h.get("tool_calls") for h in history):
            raw = as_sent(history)
            cases.append({
                "name": f"swe-agent-as-sent/{Path(path).parent.name.replace('replay__', '')[:90]}/{Path(path).stem}",
                "source": f"SWE-agent/SWE-agent@{commit[:12]}:{path}",
                "agent": "swe-agent",
                "wire": "compact",
                "body": compact_body(raw, system_prompt, instructions),
                "latest": first_user.split("\nINSTRUCTIONS:")[0].strip(),
                "edited": edited,
                "injected": [],
            })
        cases.append({
            "name": f"swe-agent/{Path(path).parent.name.replace('replay__', '')[:90]}/{Path(path).stem}",
            "source": f"SWE-agent/SWE-agent@{commit[:12]}:{path}",
            "agent": "swe-agent",
            "wire": "compact",
            "body": compact_body(turns, system_prompt, instructions),
            # The person's words: the issue, before the harness's instructions.
            "latest": first_user.split("\nINSTRUCTIONS:")[0].strip(),
            "edited": edited,
            "injected": [],
        })
    return cases


def text_of(content):
    if isinstance(content, list):
        return "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
    return content or ""


def pr_description(text):
    m = re.search(r"<pr_description>(.*?)</pr_description>", text, re.S)
    return (m.group(1) if m else text).strip()


def mini_cases(gitdir, commit, system_prompt, instructions):
    cases = []
    for path in ls(gitdir, commit, "tests/test_data"):
        if not path.endswith(".traj.json"):
            continue
        traj = json.loads(git_show(gitdir, commit, path))
        messages = traj if isinstance(traj, list) else traj.get("messages", [])
        info = {} if isinstance(traj, list) else traj.get("info", {})
        turns, first_user = [], None
        for m in messages:
            content = m.get("content") or ""
            if isinstance(content, list):
                content = "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
            if m["role"] == "system":
                continue
            if m["role"] in ("user", "tool"):
                if first_user is None and m["role"] == "user":
                    first_user = content
                    turns.append(("User", content))
                else:
                    turns.append(("Tool result", content))
            elif m["role"] == "assistant":
                # mini-swe-agent 1.x: one bash block in the text is the command it runs.
                block = re.search(r"```bash\n(.*?)```", content, re.S)
                if block and not m.get("tool_calls"):
                    turns.append(("Assistant", content[: block.start()].strip()))
                    turns.append(("Assistant tool calls", pi_call("bash", {"command": block.group(1).strip()})))
                    continue
                turns.append(("Assistant", content.strip()))
                for c in m.get("tool_calls") or []:
                    f = c.get("function", {})
                    turns.append(("Assistant tool calls", pi_call(f.get("name", "bash"), json.loads(f.get("arguments") or "{}"))))
        if first_user is None or len(turns) < 4:
            continue
        raw = as_sent(messages)
        cases.append({
            "name": f"mini-swe-agent-as-sent/{Path(path).stem}",
            "source": f"SWE-agent/mini-swe-agent@{commit[:12]}:{path}",
            "agent": "mini-swe-agent",
            "wire": "compact",
            "body": compact_body(raw, system_prompt, instructions),
            "latest": pr_description(first_user),
            "edited": diff_files(info.get("submission")),
            "injected": [],
        })
        cases.append({
            "name": f"mini-swe-agent/{Path(path).stem}",
            "source": f"SWE-agent/mini-swe-agent@{commit[:12]}:{path}",
            "agent": "mini-swe-agent",
            "wire": "compact",
            "body": compact_body(turns, system_prompt, instructions),
            # The person's words: the PR description the harness wraps.
            "latest": pr_description(first_user),
            "edited": diff_files(info.get("submission")),
            "injected": [],
        })
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", action="append", default=[])
    args = ap.parse_args()
    repos = dict(r.split("=", 1) for r in args.repo)
    template = next(
        r for r in map(json.loads, TEMPLATE.read_text().splitlines())
        if r.get("compaction") and r["path"].endswith("/messages")
    )
    if isinstance(template["body"], str):
        template["body"] = json.loads(template["body"])
    keep = {"anthropic-version", "anthropic-beta", "user-agent", "x-app", "content-type"}
    template["headers"] = {k: v for k, v in template["headers"].items() if k.lower() in keep}
    # pi's own prompts, as oh-my-pi and pi send them to a remote summarizer.
    pi = json.loads((ROOT / "tests/fixtures/real-transcripts/pi-prompts.json").read_text())
    cases = []
    if "marot/spotter" in repos:
        g = repos["marot/spotter"]
        cases += claude_code_cases(g, head(g), template, pi)
    if "SWE-agent/SWE-agent" in repos:
        g = repos["SWE-agent/SWE-agent"]
        cases += swe_agent_cases(g, head(g), pi["systemPrompt"], pi["instructions"])
    if "SWE-agent/mini-swe-agent" in repos:
        g = repos["SWE-agent/mini-swe-agent"]
        cases += mini_cases(g, head(g), pi["systemPrompt"], pi["instructions"])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(OUT, "wt", compresslevel=9) as out:
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    for case in cases:
        print(case["name"], len(json.dumps(case["body"])), "edited", len(case["edited"]), "latest", bool(case["latest"]), file=sys.stderr)


if __name__ == "__main__":
    main()
