# Bodies for scripts/bench/service.sh: a remoteEndpoint body whose conversation edits 12 files, the
# same conversation on the chat wire, and a summary that keeps every anchor (the fake upstream answers
# it, so the fidelity gate passes without a repair). "@@N@@" is replaced per request by vary.lua.
import json, sys
out = sys.argv[1]
files = [f"src/{m}/{n}.rs" for m, n in [("http","server"),("http","auth"),("store","sql"),("store","sqlite"),("app","wire"),("pipeline","cache"),("pipeline","gate"),("redact","rules"),("fidelity","anchors"),("config","stages"),("session","parse"),("summarizer","link")]]
parts = []
parts.append("[User]: The cache keys collide when two tenants send the same prompt (ticket @@N@@). Please fix that and keep the tests green.")
for i, f in enumerate(files):
    parts.append(f"[Assistant tool calls]: edit(path=\"{f}\", oldText=\"let key = hash(prompt);\", newText=\"let key = hash((tenant, prompt));\")")
    parts.append(f"[Tool result]: Successfully replaced text in {f}.")
parts.append("[User]: Now make sure the migration runs on both stores before you call it done.")
conv = "\n\n".join(parts)
prompt = f"<conversation>\n{conv}\n</conversation>\n\nSummarize the conversation above using the required format: ## Goal, ## Constraints & Preferences, ## Progress, ## Key Decisions, ## Next Steps, ## Critical Context."
json.dump({"systemPrompt": "You are a context summarization assistant.", "prompt": prompt, "maxTokens": 2000}, open(out + "/body.json", "w"))
# The same conversation on the chat wire (oh-my-pi's remoteEndpoint ending in /chat/completions).
json.dump({"model": "bench", "messages": [{"role": "system", "content": "You are a context summarization assistant."}, {"role": "user", "content": prompt}], "max_tokens": 2000}, open(out + "/chat.json", "w"))
summary = "## Goal\nCache keys must include the tenant.\n\n## Progress\n### Done\n" + "".join(f"- Edited {f}\n" for f in files) + \
  "\n## Next Steps\n1. Now make sure the migration runs on both stores before you call it done.\n\n<read-files>\n</read-files>\n<modified-files>\n" + "\n".join(files) + "\n</modified-files>\n"
open(out + "/summary.md", "w").write(summary)
