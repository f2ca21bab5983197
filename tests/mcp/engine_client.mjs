// An MCP client on the official TypeScript SDK that checks Clara's engine
// serving its tools: bin/clara mcp (stdio) or a C host's clara_mcp_listen
// (Streamable HTTP), both with tests/mcp/engine/clara.toml.
//
//   node engine_client.mjs --stdio COMMAND [ARGS...]
//   node engine_client.mjs --url URL          (the C host: its C tools too)
//
// Prints "ok NAME" for each check; exits 1 at the first failure.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import path from "node:path";

const require = createRequire(path.resolve(process.env.NODE_PATH ?? ".", "x.js"));
const load = async (name) => import(pathToFileURL(require.resolve(name)).href);
const { Client } = await load("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = await load("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = await load("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ToolListChangedNotificationSchema, LoggingMessageNotificationSchema, ElicitRequestSchema } = await load("@modelcontextprotocol/sdk/types.js");

const args = process.argv.slice(2);
const cHost = args[0] === "--url";
const transport = cHost
  ? new StreamableHTTPClientTransport(new URL(args[1]))
  : new StdioClientTransport({ command: args[1], args: args.slice(2), stderr: "inherit" });
const ok = (name) => console.log(`ok ${name}`);
const text = (res) => res.content.filter((c) => c.type === "text").map((c) => c.text).join("|");

const client = new Client({ name: "ts-engine-client", version: "1" });
let notifyListChanged;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => notifyListChanged?.());
await client.connect(transport);
assert.equal(client.getServerVersion().name, "clara");
ok("initialize");

const listed = (await client.listTools()).tools;
const names = listed.map((t) => t.name);
// What each tool says of itself (issue 26 §3): a built-in declares its
// hints; a Lua tool that declares none gets MCP's defaults (not read-only,
// destructive), never read-only for want of a capability; ask_user is not
// offered while nobody can answer it.
const hints = Object.fromEntries(listed.map((t) => [t.name, t.annotations]));
assert.deepEqual(hints.echo, { readOnlyHint: true, idempotentHint: false, openWorldHint: false });
assert.deepEqual(hints.word_count, { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true });
if (names.includes("kv_set")) assert.equal(hints.kv_set.readOnlyHint, false);
if (names.includes("notifications_drain")) assert.equal(hints.notifications_drain.readOnlyHint, false);
if (!cHost) assert.ok(!names.includes("ask_user"), "ask_user is not listed without an input handler");
ok("tools/list: annotations as the tools declare them");
for (const n of ["echo", "math_eval", "get_time", "word_count"]) assert.ok(names.includes(n), `${n} is listed`);
for (const n of ["kv_delete", "rules_load", "session_policy", "state_set", "chat"]) assert.ok(!names.includes(n), `${n} is not listed`);
for (const n of ["lua_steps", "lua_slow", "audit_peek"]) assert.ok(names.includes(n), `${n} is listed`);
if (cHost) for (const n of ["c_add", "report_steps", "log_steps", "c_wait", "release_steps", "register_more"]) assert.ok(names.includes(n), `${n} is listed`);
ok("tools/list: the policy's tools, no administrative ones");

let res = await client.callTool({ name: "math_eval", arguments: { expression: "6*7" } });
assert.deepEqual(res.structuredContent, { expression: "6*7", value: 42 });
ok("a built-in tool");

res = await client.callTool({ name: "word_count", arguments: { text: "three little words" } });
assert.deepEqual(res.structuredContent, { words: 3 });
ok("a Lua tool");

res = await client.callTool({ name: "math_eval", arguments: { expression: 7 } });
assert.equal(res.isError, true);
assert.equal(res._meta["clara/error"], "invalid_args");
ok("bad arguments: isError");

res = await client.callTool({ name: "get_time", arguments: {} });
assert.equal(res.isError, true);
assert.match(text(res), /no clocks here/);
assert.equal(res._meta["clara/error"], "denied");
ok("a call a rule denies: isError with the reason");

await assert.rejects(client.callTool({ name: "kv_delete", arguments: { key: "k" } }), /unknown tool/);
ok("a tool the policy denies cannot be called");

await client.callTool({ name: "kv_set", arguments: { key: "k", value: 1 } });
res = await client.callTool({ name: "kv_get", arguments: { key: "k" } });
assert.deepEqual(res.structuredContent, { key: "k", found: true, value: 1 });
ok("the MCP session keeps its Clara session");

// Cancellation: abort lua_slow once it reported that it started (its
// progress arrives, the answer never would). Its script stops at once (its
// timeout is ten minutes): the audit shows the cancelled call, in this MCP
// session's Clara session, which kv_set's record shares.
const controller = new AbortController();
await assert.rejects(
  client.callTool({ name: "lua_slow", arguments: {} }, undefined, {
    signal: controller.signal,
    onprogress: (p) => {
      assert.equal(p.message, "started");
      controller.abort("enough");
    },
  }),
  (err) => /enough|abort/i.test(String(err)),
);
let slow;
while (!slow) {
  const { records } = (await client.callTool({ name: "audit_peek", arguments: {} })).structuredContent;
  slow = records.find((r) => r.tool === "lua_slow");
  if (!slow) await new Promise((resolve) => setTimeout(resolve, 20));
  else {
    assert.equal(slow.error, "tool_failed");
    assert.match(slow.session, /^mcp-/);
    assert.equal(records.find((r) => r.tool === "kv_set").session, slow.session);
  }
}
ok("notifications/cancelled stops a Lua tool; the audit has the call, in the MCP session");

// Cancelling a call while its deny rule is still deciding (slow_guard.toml:
// its check of kv_set "guarded" takes seconds) does not let the call
// through: the rule denies (the audit says why) and nothing is stored.
const guarded = new AbortController();
setTimeout(() => guarded.abort("enough"), 100);
await assert.rejects(
  client.callTool({ name: "kv_set", arguments: { key: "guarded", value: 1 } }, undefined, { signal: guarded.signal }),
  (err) => /enough|abort/i.test(String(err)),
);
let refused; // the record of the second kv_set, once the call ended (its rule gives up within 5 s)
for (const until = Date.now() + 30000; !refused && Date.now() < until; ) {
  const { records } = (await client.callTool({ name: "audit_peek", arguments: {} })).structuredContent;
  refused = records.filter((r) => r.tool === "kv_set")[1];
  if (!refused) await new Promise((resolve) => setTimeout(resolve, 20));
}
assert.ok(refused, "the cancelled kv_set is in the audit");
assert.equal(refused.error, "denied");
assert.match(refused.reason, /denied by rule "slow_guard": its condition could not be evaluated/);
res = await client.callTool({ name: "kv_get", arguments: { key: "guarded" } });
assert.deepEqual(res.structuredContent, { key: "guarded", found: false });
ok("notifications/cancelled while a deny rule decides: denied, nothing stored");

// Progress the client sees before the answer: the tools wait for
// release_steps once they reported it (the SDK drops progress that arrives
// together with the answer).
async function progressOf(name, args, count) {
  const seen = [];
  let allSeen;
  const all = new Promise((resolve) => (allSeen = resolve));
  const call = client.callTool({ name, arguments: args }, undefined, {
    onprogress: (p) => {
      seen.push(p);
      if (seen.length === count) allSeen();
    },
  });
  await all;
  assert.equal(text(await client.callTool({ name: "release_steps", arguments: {} })), "released");
  return { res: await call, seen };
}

if (cHost) {
  res = await client.callTool({ name: "c_add", arguments: { a: 2, b: 3.5 } });
  assert.deepEqual(res.structuredContent, { sum: 5.5 });
  ok("a C tool");

  let { res: stepped, seen } = await progressOf("report_steps", {}, 2);
  assert.equal(text(stepped), "stepped");
  assert.deepEqual(seen, [
    { progress: 1, total: 2, message: "half way" },
    { progress: 2, total: 2, message: "done" },
  ]);
  ok("a C tool's clara_call_progress: notifications/progress");

  // clara_call_log: what reaches the client's level, before the answer
  // (the tool waits for release_steps once it logged).
  const logged = [];
  let twoLogged;
  const both = new Promise((resolve) => (twoLogged = resolve));
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    logged.push(n.params);
    if (logged.length === 2) twoLogged();
  });
  await client.setLoggingLevel("info");
  const logCall = client.callTool({ name: "log_steps", arguments: {} });
  await both;
  assert.equal(text(await client.callTool({ name: "release_steps", arguments: {} })), "released");
  res = await logCall;
  assert.deepEqual(logged, [
    { level: "info", logger: "log_steps", data: "starting" },
    { level: "warning", logger: "log_steps", data: "half way" },
  ]);
  assert.match(res.structuredContent.session, /^mcp-/);
  assert.equal(res.structuredContent.cancelled, 0);
  ok("a C tool's clara_call_log: notifications/message at the client's level; clara_call_session");

  ({ res: stepped, seen } = await progressOf("lua_steps", { wait: "c_wait" }, 3));
  assert.deepEqual(stepped.structuredContent, { steps: 3 });
  assert.deepEqual(seen, [
    { progress: 1, total: 3, message: "step 1" },
    { progress: 2, total: 3, message: "step 2" },
    { progress: 3, total: 3, message: "step 3" },
  ]);
  ok("a Lua tool's progress(): notifications/progress");

  const changed = new Promise((resolve) => (notifyListChanged = resolve));
  res = await client.callTool({ name: "register_more", arguments: {} });
  assert.equal(text(res), "registered c_fresh");
  await changed;
  assert.ok((await client.listTools()).tools.map((t) => t.name).includes("c_fresh"));
  ok("notifications/tools/list_changed after a registration");
}

await client.close();
ok("close");

// A client that can ask its user (elicitation) is served ask_user even
// where the host has no input handler, and its user answers it (issue 26
// §3: ask_user is listed only where it can answer).
const asking = new Client({ name: "ts-eliciting-client", version: "1" }, { capabilities: { elicitation: { form: {} } } });
const asked = [];
asking.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params.message);
  return { action: "accept", content: { answer: "Boston" } };
});
await asking.connect(cHost
  ? new StreamableHTTPClientTransport(new URL(args[1]))
  : new StdioClientTransport({ command: args[1], args: args.slice(2), stderr: "inherit" }));
assert.ok((await asking.listTools()).tools.map((t) => t.name).includes("ask_user"), "ask_user is listed to a client that can elicit");
res = await asking.callTool({ name: "ask_user", arguments: { prompt: "Which city?" } });
assert.deepEqual(asked, ["Which city?"]);
assert.deepEqual(res.structuredContent ?? JSON.parse(text(res)), { answer: "Boston" });
await asking.close();
ok("ask_user listed to a client that can elicit, and answered by its user");
