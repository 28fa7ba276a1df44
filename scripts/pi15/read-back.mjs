// The pinned pi (1.6.0) reading a session file back: what it rebuilds for the model, and whether it would
// compact again. Prints one JSON line: the leaf's type and id, the roles of the rebuilt context,
// the compaction summary it carries, and pi's plan at keepRecentTokens 2000 (null: none).
//
//   node22 scripts/pi15/read-back.mjs SESSION.jsonl
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const pi = process.env.PI_PACKAGE || join(root, "target/agents/pi/package");
const { SessionManager, buildSessionContext } = await import(join(pi, "dist/core/session-manager.js"));
const { prepareCompaction } = await import(join(pi, "dist/core/compaction/compaction.js"));
const { convertToLlm } = await import(join(pi, "dist/core/messages.js"));

const manager = SessionManager.open(resolve(process.argv[2]));
const entries = manager.getEntries();
const leaf = manager.getLeafEntry();
const context = buildSessionContext(entries, leaf?.id);
const summary = context.messages.find((m) => m.role === "compactionSummary");
const plan = prepareCompaction(manager.getBranch(), { enabled: true, keepRecentTokens: 2000, reserveTokens: 16384 });
console.log(JSON.stringify({
  leafType: leaf?.type,
  leafId: leaf?.id,
  header: manager.getHeader?.() ?? null,
  roles: context.messages.map((m) => m.role),
  summary: summary?.summary ?? null,
  plan: plan ? { firstKeptEntryId: plan.firstKeptEntryId } : null,
  context: { messages: convertToLlm(context.messages), thinkingLevel: context.thinkingLevel, model: context.model },
}));
