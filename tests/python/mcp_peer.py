"""A small MCP server over stdio (newline-delimited JSON-RPC) that the
tests configure as an [[mcp_servers]] command, to play a remote peer that
lists what it likes and answers as it likes (not a test module itself).

    python3 mcp_peer.py [--names a,b] [--tools N] [--desc-bytes N]
                        [--schema-bytes N] [--reply-bytes N] [--exit-on-call]
                        [--flood-list-changed N]

--names         tools listed by these names (default: one, "ping")
--tools N       N more tools, t00000 ... (in pages of 1000, as a real server would)
--desc-bytes    each tool's description is this long
--schema-bytes  each tool's input schema is about this long
--reply-bytes   a call of "big" answers with a text of this many bytes on one line
--exit-on-call  the process exits when a tool is called (a crash)
--flood-list-changed N
                after answering its first tools/list, the peer sends N
                notifications/tools/list_changed at once and never answers
                a tools/list again

Every call of another tool answers "pong from NAME".
"""

import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--names", default="ping")
    ap.add_argument("--tools", type=int, default=0)
    ap.add_argument("--desc-bytes", type=int, default=0)
    ap.add_argument("--schema-bytes", type=int, default=0)
    ap.add_argument("--reply-bytes", type=int, default=0)
    ap.add_argument("--exit-on-call", action="store_true")
    ap.add_argument("--flood-list-changed", type=int, default=0)
    opts = ap.parse_args()

    names = [n for n in opts.names.split(",") if n] + ["t%05d" % i for i in range(opts.tools)]
    if opts.reply_bytes:
        names.append("big")
    schema = {"type": "object"}
    if opts.schema_bytes:
        schema["description"] = "s" * opts.schema_bytes
    description = "d" * opts.desc_bytes if opts.desc_bytes else "a tool of the peer"

    def tool(name):
        return {"name": name, "description": description, "inputSchema": schema}

    def send(msg):
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()

    page = 1000
    lists = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            continue  # a notification
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "peer", "version": "1"}}})
        elif method == "tools/list" and opts.flood_list_changed and lists > 0:
            continue  # never answered: each listing Clara starts waits its whole deadline
        elif method == "tools/list":
            lists += 1
            start = int((msg.get("params") or {}).get("cursor") or 0)
            result = {"tools": [tool(n) for n in names[start:start + page]]}
            if start + page < len(names):
                result["nextCursor"] = str(start + page)
            send({"jsonrpc": "2.0", "id": mid, "result": result})
            if opts.flood_list_changed:
                note = json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}) + "\n"
                for _ in range(opts.flood_list_changed // 1000):
                    sys.stdout.write(note * 1000)
                sys.stdout.flush()
        elif method == "tools/call":
            if opts.exit_on_call:
                sys.exit(3)
            name = msg["params"]["name"]
            text = "x" * opts.reply_bytes if name == "big" else "pong from " + name
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no " + str(method)}})


if __name__ == "__main__":
    main()
