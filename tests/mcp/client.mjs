// An MCP client on the official TypeScript SDK that checks a Clara MCP
// server: tests/mcp/testserver, over stdio or Streamable HTTP.
//
//   node client.mjs --stdio COMMAND [ARGS...]
//   node client.mjs --url URL [--token TOKEN] [--max-sessions N]
//
// NODE_PATH must reach the SDK (build/npm/node_modules). Prints "ok NAME"
// for each check; exits 1 at the first failure.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import path from "node:path";

// ESM does not read NODE_PATH: resolve the SDK from it by hand.
const require = createRequire(path.resolve(process.env.NODE_PATH ?? ".", "x.js"));
const load = async (name) => import(pathToFileURL(require.resolve(name)).href);
const { Client } = await load("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = await load("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = await load("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ToolListChangedNotificationSchema, LATEST_PROTOCOL_VERSION } = await load("@modelcontextprotocol/sdk/types.js");

const args = process.argv.slice(2);
let makeTransport;
let overHTTP = false;
let maxSessions = 0;
if (args[0] === "--stdio") {
  makeTransport = () => new StdioClientTransport({ command: args[1], args: args.slice(2), stderr: "inherit" });
} else if (args[0] === "--url") {
  overHTTP = true;
  const url = new URL(args[1]);
  const token = args[2] === "--token" ? args[3] : undefined;
  const at = args.indexOf("--max-sessions");
  if (at > 0) maxSessions = Number(args[at + 1]);
  makeTransport = (withToken = true) =>
    new StreamableHTTPClientTransport(url, {
      requestInit: withToken && token ? { headers: { Authorization: `Bearer ${token}` } } : {},
    });
  if (token) {
    // Without the token the server refuses the connection.
    const c = new Client({ name: "ts-client-no-token", version: "1" });
    await assert.rejects(c.connect(makeTransport(false)), /401|Unauthorized|no bearer token/i);
    console.log("ok refused without the bearer token");
  }
} else {
  console.error("usage: client.mjs --stdio COMMAND [ARGS...] | --url URL [--token TOKEN]");
  process.exit(2);
}

const ok = (name) => console.log(`ok ${name}`);
const text = (res) => res.content.filter((c) => c.type === "text").map((c) => c.text).join("|");

const client = new Client({ name: "ts-client", version: "1" });
let notifyListChanged;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => notifyListChanged?.());
const transport = makeTransport();
await client.connect(transport);

assert.equal(client.getServerVersion().name, "clara-testserver");
assert.deepEqual(client.getServerCapabilities().tools, { listChanged: true });
if (overHTTP) assert.equal(transport.protocolVersion, LATEST_PROTOCOL_VERSION);
assert.equal(LATEST_PROTOCOL_VERSION, "2025-11-25");
ok("initialize");

if (maxSessions) {
  // The server's cap on sessions (issue 25): the client beyond is refused
  // with the reason, and a session that ends makes room.
  const extra = [];
  for (let i = 1; i < maxSessions; i++) {
    const c = new Client({ name: `ts-extra-${i}`, version: "1" });
    const t = makeTransport();
    await c.connect(t);
    extra.push([c, t]);
  }
  const over = new Client({ name: "ts-over", version: "1" });
  const refusal = `too many MCP sessions: ${maxSessions} are open, the most mcp.max_sessions (${maxSessions}) allows`;
  await assert.rejects(over.connect(makeTransport()), (err) => err.code === 503 && String(err).includes(refusal));
  const [c, t] = extra.pop();
  await t.terminateSession(); // DELETE: the session ends
  await c.close();
  for (let tries = 0; ; tries++) {
    try {
      const again = new Client({ name: "ts-again", version: "1" });
      const ta = makeTransport();
      await again.connect(ta);
      extra.push([again, ta]);
      break;
    } catch (err) {
      if (tries > 100) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  for (const [c, t] of extra) {
    await t.terminateSession();
    await c.close();
  }
  ok("sessions capped: the client beyond mcp.max_sessions is refused with the reason");
}

// tools/list
const { tools } = await client.listTools();
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
for (const n of ["echo", "add", "greet", "rm_rf", "fetch_url", "boom", "whoami", "steps", "register_tool", "slow", "last_slow"]) {
  assert.ok(byName[n], `tool ${n} is listed`);
}
assert.equal(byName.hidden_tool, undefined, "a tool the policy denies is not listed");
assert.deepEqual(byName.echo.inputSchema, { type: "object" });
assert.deepEqual(byName.add.inputSchema.required, ["a", "b"]);
assert.equal(byName.add.title, "Add two numbers");
assert.deepEqual(byName.add.outputSchema.required, ["sum"]);
assert.equal(byName.add.annotations.idempotentHint, true);
assert.equal(byName.echo.annotations.readOnlyHint, true);
assert.equal(byName.echo.annotations.openWorldHint, false);
assert.equal(byName.rm_rf.annotations.readOnlyHint, false);
assert.equal(byName.rm_rf.annotations.destructiveHint, true);
assert.equal(byName.fetch_url.annotations.openWorldHint, true);
assert.equal(byName.fetch_url.annotations.readOnlyHint, true);
// A tool that declares nothing gets MCP's defaults, never read-only for
// want of a capability (issue 26 §3).
assert.equal(byName.greet.annotations.readOnlyHint, false);
assert.equal(byName.greet.annotations.destructiveHint, true);
assert.equal(byName.greet.annotations.openWorldHint, true);
ok("tools/list: names, schemas, title, outputSchema, annotations");

// tools/call
let res = await client.callTool({ name: "echo", arguments: { message: "hi" } });
assert.equal(res.isError, undefined);
assert.deepEqual(res.structuredContent, { message: "hi" });
assert.equal(text(res), '{"message":"hi"}');
ok("call echo: structuredContent and text");

res = await client.callTool({ name: "add", arguments: { a: 2, b: 3.5 } }); // the SDK checks it against outputSchema
assert.deepEqual(res.structuredContent, { sum: 5.5 });
ok("call add: structuredContent valid against outputSchema");

res = await client.callTool({ name: "greet", arguments: { name: "Ada" } });
assert.equal(text(res), "Hello, Ada");
assert.equal(res.structuredContent, undefined);
ok("call greet: a text result");

res = await client.callTool({ name: "add", arguments: { a: "two", b: 3 } });
assert.equal(res.isError, true);
assert.match(text(res), /add/);
assert.match(text(res), /\/a/);
assert.equal(res._meta["clara/error"], "invalid_args");
ok("bad arguments: isError with the violations");

res = await client.callTool({ name: "rm_rf", arguments: {} });
assert.equal(res.isError, true);
assert.equal(text(res), "denied by rule no_destruction: rm_rf is never allowed");
assert.equal(res._meta["clara/error"], "denied");
ok("denied call: isError with the reason");

res = await client.callTool({ name: "boom", arguments: {} });
assert.equal(res.isError, true);
assert.equal(text(res), "internal error");
ok("a panicking tool: isError, the server goes on");

await assert.rejects(client.callTool({ name: "hidden_tool", arguments: {} }), /unknown tool/);
ok("a tool that is not listed cannot be called");

const s1 = text(await client.callTool({ name: "whoami", arguments: {} }));
const s2 = text(await client.callTool({ name: "whoami", arguments: {} }));
assert.match(s1, /^mcp-/);
assert.equal(s1, s2);
ok("the MCP session is the Clara session");

// list_changed after a registration
const changed = new Promise((resolve) => (notifyListChanged = resolve));
res = await client.callTool({ name: "register_tool", arguments: { name: "fresh_tool" } });
assert.equal(text(res), "registered fresh_tool");
await changed;
const after = (await client.listTools()).tools.map((t) => t.name);
assert.ok(after.includes("fresh_tool"));
res = await client.callTool({ name: "fresh_tool", arguments: { x: 1 } });
assert.deepEqual(res.structuredContent, { x: 1 });
ok("notifications/tools/list_changed after a registration");

// progress
// (steps waits for release_steps once it reported its progress: the SDK
// drops progress notifications read together with the response.)
const seen = [];
let allSeen;
const three = new Promise((resolve) => (allSeen = resolve));
const stepsCall = client.callTool({ name: "steps", arguments: { n: 3 } }, undefined, {
  onprogress: (p) => {
    seen.push(p);
    if (seen.length === 3) allSeen();
  },
});
await three;
assert.equal(text(await client.callTool({ name: "release_steps", arguments: {} })), "released");
assert.equal(text(await stepsCall), "done 3");
assert.deepEqual(seen, [
  { progress: 1, total: 3, message: "step 1" },
  { progress: 2, total: 3, message: "step 2" },
  { progress: 3, total: 3, message: "step 3" },
]);
ok("notifications/progress with the client's token");

// cancellation: abort the slow tool once it reported that it started
const controller = new AbortController();
await assert.rejects(
  client.callTool({ name: "slow", arguments: {} }, undefined, {
    signal: controller.signal,
    onprogress: () => controller.abort("enough"),
  }),
  (err) => /enough|abort/i.test(String(err)),
);
res = await client.callTool({ name: "last_slow", arguments: {} });
assert.equal(text(res), "ended: context canceled");
ok("notifications/cancelled cancels the tool's context");

await client.close();
ok("close");
