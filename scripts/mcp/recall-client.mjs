// Recall through the reference TypeScript MCP SDK (@modelcontextprotocol/sdk, from npm; installed
// by scripts/agents.sh into MCP_SDK_MODULES): initialize against compactd's /mcp over Streamable
// HTTP with a compactd key, list the tools, search NEEDLE, read the first hit's turn back.
// Prints {"tools": [...], "text": "..."}; tests/it/recall/endpoint.rs runs it.
//   MCP_SDK_MODULES=target/agents/bin/mcp-node-modules COMPACTD_URL=http://127.0.0.1:8080 \
//     COMPACTD_KEY=cpd_… NEEDLE=word node scripts/mcp/recall-client.mjs
import { realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

// ES modules ignore NODE_PATH: the SDK is resolved from its own node_modules.
const require = createRequire(join(dirname(realpathSync(process.env.MCP_SDK_MODULES)), "resolve.js"));
const load = (path) => import(pathToFileURL(require.resolve(`@modelcontextprotocol/sdk/${path}`)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");

const url = new URL("/mcp", process.env.COMPACTD_URL);
const transport = new StreamableHTTPClientTransport(url, {
  requestInit: { headers: { Authorization: `Bearer ${process.env.COMPACTD_KEY}` } },
});
const client = new Client({ name: "compactd-recall-test", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const json = (result) => {
  if (result.isError) throw new Error(JSON.stringify(result.content));
  return JSON.parse(result.content[0].text);
};
const found = json(await client.callTool({ name: "recall_search", arguments: { query: process.env.NEEDLE } }));
const hit = found.hits[0];
const read = json(await client.callTool({ name: "recall_read", arguments: { recall_id: hit.recallId, from: hit.seq } }));
process.stdout.write(JSON.stringify({ tools: tools.map((t) => t.name).sort(), text: read.turns[0].text }));
await client.close();
