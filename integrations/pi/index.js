// compactd for pi (verified with @earendil-works/pi-coding-agent 1.5.2 and 1.6.0): on every compaction,
// manual or automatic, the session goes to compactd's session API — uploaded the first time,
// its new entries appended after that — and compactd plans, summarizes (with its fidelity gate,
// redaction, cache and budgets) and writes the compaction entry; pi saves that entry's summary,
// first kept entry and file lists as its own. When compactd cannot answer, pi compacts as it
// always does: the agent is never worse off.
//
// `/handoff <goal>` (Amp's way, instead of compacting): compactd drafts the first prompt of a new
// thread for the goal from this session (the files that matter, the rules in force, open
// errors, the commands that verify the work); the draft opens in an editor, and pi starts a new
// session whose header names this one as its parent, the edited prompt in its editor to send.
//
// Settings (environment): COMPACTD_URL (default http://127.0.0.1:8080), COMPACTD_KEY (a compactd
// API key, when compactd asks for one), COMPACTD_TIMEOUT_MS (default 300000).

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";

const base = (process.env.COMPACTD_URL || "http://127.0.0.1:8080").replace(/\/+$/, "");
const key = process.env.COMPACTD_KEY || "";
const timeoutMs = Number(process.env.COMPACTD_TIMEOUT_MS || 300000);

// Which compactd session holds which pi session (by the header's id), across pi's runs.
const mapFile = join(
  process.env.PI_CODING_AGENT_DIR || join(homedir(), ".pi", "agent"),
  "compactd-sessions.json",
);

function readMap() {
  try {
    return JSON.parse(readFileSync(mapFile, "utf8"));
  } catch {
    return {};
  }
}

function remember(headerId, sessionId) {
  const map = readMap();
  map[headerId] = sessionId;
  mkdirSync(dirname(mapFile), { recursive: true });
  writeFileSync(mapFile, JSON.stringify(map, null, 2));
}

async function call(path, init, signal) {
  const headers = { ...(init.headers || {}) };
  if (key) headers.authorization = `Bearer ${key}`;
  const timeout = AbortSignal.timeout(timeoutMs);
  const response = await fetch(`${base}${path}`, {
    ...init,
    headers,
    redirect: "error",
    signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
  });
  const text = await response.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: { message: text.slice(0, 200) } };
  }
  return { status: response.status, body };
}

const NDJSON = { "content-type": "application/x-ndjson" };

// The session as pi holds it now: its header and entries, each line as pi writes it.
function sessionLines(sessionManager) {
  const header = sessionManager.getHeader();
  const lines = [header, ...sessionManager.getEntries()].map((entry) => JSON.stringify(entry));
  return { header, text: `${lines.join("\n")}\n` };
}

// compactd's id of this session, with every entry pi has stored there: appended (compactd skips
// the ones it already holds) or, the first time or when compactd lost it, uploaded.
async function synced(sessionManager, signal) {
  const { header, text } = sessionLines(sessionManager);
  const known = readMap()[header.id];
  if (known) {
    const entries = text.slice(text.indexOf("\n") + 1);
    const appended = await call(
      `/v1/sessions/${encodeURIComponent(known)}/entries`,
      { method: "POST", headers: NDJSON, body: entries },
      signal,
    );
    if (appended.status < 300) return known;
    if (appended.status !== 404 && appended.status !== 409) throw failure("append", appended);
  }
  const uploaded = await call("/v1/sessions", { method: "POST", headers: NDJSON, body: text }, signal);
  if (uploaded.status >= 300) throw failure("upload", uploaded);
  remember(header.id, uploaded.body.id);
  return uploaded.body.id;
}

function failure(what, answer) {
  const message = answer.body?.error?.message || `status ${answer.status}`;
  return new Error(`compactd ${what}: ${message}`);
}

export default function compactd(pi) {
  pi.registerCommand("handoff", {
    description: "Start a new session focused on a goal; compactd drafts its first prompt from this one",
    handler: async (args, ctx) => {
      const goal = (args || "").trim();
      if (!goal) {
        ctx.ui?.notify?.("Usage: /handoff <goal for the new session>", "error");
        return;
      }
      await ctx.waitForIdle();
      let draft;
      try {
        const id = await synced(ctx.sessionManager);
        const answer = await call(`/v1/sessions/${encodeURIComponent(id)}/handoff`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ goal, leafId: ctx.sessionManager.getLeafId() || undefined }),
        });
        if (answer.status >= 300) throw failure("handoff", answer);
        draft = answer.body;
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        ctx.ui?.notify?.(`compactd could not draft the handoff (${message})`, "error");
        return;
      }
      // The user edits the draft before it starts anything (without a UI it goes as written).
      let prompt = draft.prompt;
      if (ctx.hasUI) {
        prompt = await ctx.ui.editor("Edit the handoff prompt (drafted by compactd)", draft.prompt);
        if (prompt === undefined) {
          ctx.ui.notify("Handoff cancelled", "info");
          return;
        }
      }
      const parentSession = ctx.sessionManager.getSessionFile();
      const hasUI = ctx.hasUI;
      const result = await ctx.newSession({
        parentSession,
        // Only plain data crosses into the new session's context (the old ctx is stale there).
        withSession: async (next) => {
          if (hasUI) {
            next.ui.setEditorText(prompt);
            next.ui.notify("Handoff ready: send the prompt to start", "info");
          } else {
            await next.sendUserMessage(prompt);
          }
        },
      });
      if (result?.cancelled) ctx.ui?.notify?.("New session cancelled", "info");
    },
  });

  pi.on("session_before_compact", async (event, ctx) => {
    const { preparation, customInstructions, signal } = event;
    try {
      const id = await synced(ctx.sessionManager, signal);
      const answer = await call(
        `/v1/sessions/${encodeURIComponent(id)}/compactions`,
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            leafId: ctx.sessionManager.getLeafId() || undefined,
            keepRecentTokens: preparation.settings?.keepRecentTokens,
            reserveTokens: preparation.settings?.reserveTokens,
            customInstructions: customInstructions || undefined,
          }),
        },
        signal,
      );
      if (answer.status >= 300) throw failure("compaction", answer);
      const entry = answer.body.entry;
      const usage = answer.body.usage;
      return {
        compaction: {
          summary: entry.summary,
          firstKeptEntryId: entry.firstKeptEntryId,
          tokensBefore: entry.tokensBefore,
          details: { ...(entry.details || {}), compactd: { session: id, entry: entry.id, model: answer.body.model } },
          ...(usage ? { usage: piUsage(usage) } : {}),
        },
      };
    } catch (error) {
      if (signal?.aborted) return;
      const message = error instanceof Error ? error.message : String(error);
      ctx.ui?.notify?.(`compactd could not compact (${message}); pi compacts itself`, "warning");
      return;
    }
  });
}

// compactd's usage in pi's shape (no cost: compactd's models are compactd's to pay for).
function piUsage(usage) {
  const input = usage.inputTokens || 0;
  const output = usage.outputTokens || 0;
  const cacheRead = usage.cachedInputTokens || 0;
  return {
    input,
    output,
    cacheRead,
    cacheWrite: 0,
    totalTokens: input + output,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
  };
}
