// compactd for pi (verified with @earendil-works/pi-coding-agent 1.5.2 and 1.6.0): on every compaction,
// manual or automatic, the session goes to compactd's session API — uploaded the first time,
// its new entries appended after that — and compactd plans, summarizes (with its fidelity gate,
// redaction, cache and budgets) and writes the compaction entry; pi saves that entry's summary,
// first kept entry and file lists as its own. When compactd cannot answer, pi compacts as it
// always does: the agent is never worse off.
//
// After each turn the new entries go to compactd in the background (the turn never waits for
// it), with the model's window and pi's compaction settings: past a share of the window compactd
// summarizes the session ahead, and the compaction, when it comes, is answered from that summary
// at once, with only what came after it merged in.
//
// `/handoff <goal>` (Amp's way, instead of compacting): compactd drafts the first prompt of a new
// thread for the goal from this session (the files that matter, the rules in force, open
// errors, the commands that verify the work); the draft opens in an editor, and pi starts a new
// session whose header names this one as its parent, the edited prompt in its editor to send.
//
// Settings (environment): COMPACTD_URL (default http://127.0.0.1:8080), COMPACTD_KEY (a compactd
// API key, when compactd asks for one), COMPACTD_TIMEOUT_MS (default 300000), COMPACTD_SYNC
// (`off`: the session goes to compactd only when it compacts, and nothing is prepared ahead).

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";

const base = (process.env.COMPACTD_URL || "http://127.0.0.1:8080").replace(/\/+$/, "");
const key = process.env.COMPACTD_KEY || "";
const timeoutMs = Number(process.env.COMPACTD_TIMEOUT_MS || 300000);
const syncTurns = (process.env.COMPACTD_SYNC || "on") !== "off";
const agentDir = process.env.PI_CODING_AGENT_DIR || join(homedir(), ".pi", "agent");

// Which compactd session holds which pi session (by the header's id), across pi's runs.
const mapFile = join(agentDir, "compactd-sessions.json");

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

// pi's compaction settings, as pi reads them (the project's over the global ones), until a
// compaction tells them exactly.
let compaction = {};

function readSettings(cwd) {
  const read = (file) => {
    try {
      return JSON.parse(readFileSync(file, "utf8")).compaction || {};
    } catch {
      return {};
    }
  };
  return { ...read(join(agentDir, "settings.json")), ...read(join(cwd || ".", ".pi", "settings.json")) };
}

// What compactd prepares the session's summary ahead with: the model's window and the settings
// pi will compact with.
function hints(ctx) {
  const settings = { ...readSettings(ctx?.cwd), ...compaction };
  const query = new URLSearchParams();
  const window = ctx?.model?.contextWindow;
  if (Number.isInteger(window) && window >= 1000) query.set("contextWindow", String(window));
  for (const name of ["keepRecentTokens", "reserveTokens"]) {
    if (Number.isInteger(settings[name])) query.set(name, String(settings[name]));
  }
  const text = query.toString();
  return text ? `?${text}` : "";
}

// How many entries of each pi session (by its header's id) this run sent to compactd, and where.
const sent = new Map();

// compactd's id of this session, with every entry pi has stored there: its new entries appended
// (compactd skips the ones it already holds; all of them when compactd did not take the new
// ones alone) or, the first time or when compactd lost it, uploaded.
async function synced(sessionManager, signal, query = "") {
  const header = sessionManager.getHeader();
  const entries = sessionManager.getEntries();
  const known = readMap()[header.id];
  const done = (id) => {
    sent.set(header.id, { id, count: entries.length });
    return id;
  };
  if (known) {
    const last = sent.get(header.id);
    const from = last?.id === known ? Math.min(last.count, entries.length) : 0;
    if (from === entries.length && from > 0) return known;
    for (const start of from > 0 ? [from, 0] : [0]) {
      const body = entries.slice(start).map((entry) => `${JSON.stringify(entry)}\n`).join("");
      const appended = await call(
        `/v1/sessions/${encodeURIComponent(known)}/entries${query}`,
        { method: "POST", headers: NDJSON, body },
        signal,
      );
      if (appended.status < 300) return done(known);
      // The new entries alone may name a parent compactd does not hold (a session pi rewrote):
      // then all of them; a session compactd lost or holds otherwise is uploaded anew.
      const retried = appended.status === 422 && start > 0;
      if (appended.status !== 404 && appended.status !== 409 && !retried) {
        throw failure("append", appended);
      }
      if (appended.status === 404) break;
    }
  }
  // Written out whole only when it is uploaded (a turn's sync sends the turn's entries alone).
  const { text } = sessionLines(sessionManager);
  const uploaded = await call("/v1/sessions", { method: "POST", headers: NDJSON, body: text }, signal);
  if (uploaded.status >= 300) throw failure("upload", uploaded);
  remember(header.id, uploaded.body.id);
  return done(uploaded.body.id);
}

// Every sync, one after another (two at once would upload the session twice): `work` after the
// ones before it, whether they failed or not.
let syncing = Promise.resolve();

function serialized(work) {
  const run = syncing.then(work, work);
  syncing = run.catch(() => {});
  return run;
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
        const id = await serialized(() => synced(ctx.sessionManager));
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

  if (syncTurns) {
    pi.on("turn_end", (_event, ctx) => {
      const manager = ctx.sessionManager;
      const query = hints(ctx);
      // In the background: the next turn never waits for compactd.
      serialized(() => synced(manager, undefined, query)).catch(() => {});
    });
  }

  pi.on("session_before_compact", async (event, ctx) => {
    const { preparation, customInstructions, signal } = event;
    if (preparation.settings) {
      compaction = {
        keepRecentTokens: preparation.settings.keepRecentTokens,
        reserveTokens: preparation.settings.reserveTokens,
      };
    }
    try {
      const query = hints(ctx);
      const id = await serialized(() => synced(ctx.sessionManager, signal, query));
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
