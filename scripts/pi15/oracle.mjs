// The pinned pi's (scripts/agents.sh; 1.6.0) own plan for a session file, from its unbundled modules (scripts/agents.sh installs
// them under target/agents): the file opened by its SessionManager, the last entry the leaf, the
// branch to it, prepareCompaction with the given settings. Prints one JSON line with the fields
// of ../shared/fixtures/pi15/expected.jsonl.
//
//   node22 scripts/pi15/oracle.mjs SESSION.jsonl KEEP_RECENT_TOKENS[,KEEP...] [RESERVE_TOKENS]
// (one line per keepRecentTokens)
import { createHash } from "node:crypto";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const pi = process.env.PI_PACKAGE || join(root, "target/agents/pi/package");
const { SessionManager } = await import(join(pi, "dist/core/session-manager.js"));
const { prepareCompaction, estimateTokens } = await import(join(pi, "dist/core/compaction/compaction.js"));
const { serializeConversation } = await import(join(pi, "dist/core/compaction/utils.js"));
const { convertToLlm } = await import(join(pi, "dist/core/messages.js"));
const { buildSessionContext } = await import(join(pi, "dist/core/session-manager.js"));

const [file, keeps, reserve = "16384"] = process.argv.slice(2);
const manager = SessionManager.open(resolve(file));
const path = manager.getBranch();
const sha = (text) => createHash("sha256").update(text).digest("hex");
for (const keep of keeps.split(",")) {
const settings = { enabled: true, keepRecentTokens: Number(keep), reserveTokens: Number(reserve) };
const prep = prepareCompaction(path, settings);
const plan = prep ? {
  firstKeptEntryId: prep.firstKeptEntryId,
  isSplitTurn: prep.isSplitTurn,
  tokensBefore: prep.tokensBefore,
  hasPreviousSummary: prep.previousSummary !== undefined,
  messagesToSummarize: prep.messagesToSummarize.length,
  turnPrefixMessages: prep.turnPrefixMessages.length,
  readFiles: [...(prep.fileOps?.read ?? [])].filter((f) => !prep.fileOps.edited?.has(f) && !prep.fileOps.written?.has(f)).sort(),
  modifiedFiles: [...new Set([...(prep.fileOps?.edited ?? []), ...(prep.fileOps?.written ?? [])])].sort(),
  firstKeptPathIndex: path.findIndex((e) => e.id === prep.firstKeptEntryId),
  conversationSha256: sha(serializeConversation(convertToLlm(prep.messagesToSummarize))),
  turnPrefixConversationSha256: sha(serializeConversation(convertToLlm(prep.turnPrefixMessages))),
  conversation: serializeConversation(convertToLlm(prep.messagesToSummarize)),
  turnPrefixConversation: serializeConversation(convertToLlm(prep.turnPrefixMessages)),
} : null;
const entryTokens = {};
for (const entry of path) {
  if (entry.type === "message") entryTokens[entry.id] = estimateTokens(entry.message);
}
const built = buildSessionContext(manager.getEntries(), manager.getLeafEntry()?.id);
const context = { messages: convertToLlm(built.messages), thinkingLevel: built.thinkingLevel, model: built.model };
console.log(JSON.stringify({ session: file.split("/").pop(), keepRecentTokens: settings.keepRecentTokens, reserveTokens: settings.reserveTokens, plan, entryTokens, context }));
}
