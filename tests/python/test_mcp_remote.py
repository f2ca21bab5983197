"""Remote MCP servers' tools ([[mcp_servers]]) against the host's own:
whose name a tool may take, what leaves with a server, how many tools a
server may bring, what a failing server's calls say. The peer is
mcp_peer.py, a small stdio MCP server run by this interpreter."""

import os
import sys
import tempfile
import time

import clara
from clara_testcase import ClaraTestCase, HERE

PEER = os.path.join(HERE, "mcp_peer.py")


def rss_mb():
    """The process's resident memory now, in MB."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS: line in /proc/self/status")


def server(*args, name="peer", **entry):
    """An [[mcp_servers]] entry running mcp_peer.py with args."""
    return dict({"name": name, "command": sys.executable, "args": [PEER, *args]}, **entry)


class RemoteTestCase(ClaraTestCase):

    def setUp(self):
        super().setUp()
        self.log = []
        self.lib.set_log_handler(lambda level, message: self.log.append(message), clara.CLARA_LOG_DEBUG)

    def tearDown(self):
        self.lib.configure({"mcp_servers": []})
        super().tearDown()

    def until(self, cond, what):
        for _ in range(1000):
            if cond():
                return
            time.sleep(0.01)
        self.fail("no %s within 10 s; the log:\n%s" % (what, "\n".join(self.log)))

    def answers(self, tool, args=None):
        """The tool's result, or the error code of its envelope."""
        env = self.lib.evaluate({"tool": tool, "arguments": args or {}})
        return env["result"] if env["status"] == "success" else env["error"]


class TestNames(RemoteTestCase):
    """Issue 25, finding 15: a remote tool (prefix "") or a plugin's tool
    replaced a tool the host registered, silently."""

    def register_ping(self):
        @clara.tool
        def ping() -> str:
            """The host's own ping."""
            return "the host's"

    def test_an_eager_server_may_not_take_a_host_tools_name(self):
        self.register_ping()
        env = self.lib.configure({"mcp_servers": [server("--names", "ping,other", prefix="", eager=True)]})
        self.assertEqual(env["status"], "error", env)
        self.assertEqual(env["error"], "invalid_request")
        self.assertEqual(env["message"],
                         'clara_configure: mcp_servers[0] (peer): its tool "ping" would replace the tool "ping" of '
                         'the host (clara_register_tool); say replace = true (or replace = ["ping"]) in this entry '
                         'to let it')
        self.assertEqual(self.answers("ping"), "the host's")
        self.assertEqual(self.answers("other"), "unknown_tool")

    def test_a_lazy_server_s_tool_is_left_out(self):
        self.register_ping()
        env = self.lib.configure({"mcp_servers": [server("--names", "ping,other", prefix="")]})
        self.assertEqual(env["status"], "success", env)
        self.until(lambda: self.answers("other") == "pong from other", "the server's other tool")
        self.assertEqual(self.answers("ping"), "the host's")
        self.assertIn('mcp server peer: tool "ping" of mcp server "peer" is left out: it would replace the tool of '
                      'the host (clara_register_tool) with that name; replace = true in its configuration lets it',
                      self.log)

    def test_replace_lets_it(self):
        self.register_ping()
        env = self.lib.configure({"mcp_servers": [server("--names", "ping,other", prefix="", eager=True,
                                                         replace=["ping"])]})
        self.assertEqual(env["status"], "success", env)
        self.assertEqual(self.answers("ping"), "pong from ping")

    def test_a_built_in_name_is_never_taken(self):
        env = self.lib.configure({"mcp_servers": [server("--names", "echo", prefix="", eager=True, replace=True)]})
        self.assertEqual(env["status"], "error", env)
        self.assertIn('its tool "echo" would take the name of the built-in tool "echo"', env["message"])

    def plugin(self, root, tool_toml):
        os.makedirs(os.path.join(root, "plugins", "p", "tools"))
        with open(os.path.join(root, "plugins", "p", "plugin.toml"), "w") as f:
            f.write('name = "p"\n')
        path = os.path.join(root, "plugins", "p", "tools", "t.toml")
        with open(path, "w") as f:
            f.write(tool_toml)
        return path

    def test_a_plugin_s_tool_may_not_take_a_host_tools_name(self):
        self.register_ping()
        with tempfile.TemporaryDirectory() as root:
            path = self.plugin(root, '# the plugin\'s tools\n\n[[tools]]\nname = "ping"\n'
                                     'lua = \'return function(args) return "the plugin" end\'\nreturns = "string"\n')
            env = self.lib.configure({"project_root": root})
            self.assertEqual(env["status"], "error", env)
            self.assertEqual(env["details"], [{"file": path, "line": 3, "message":
                                               'tool "ping" of plugin "p" would replace the tool "ping" the host '
                                               'registered; say replace = true in its entry to let it'}])
            self.assertEqual(self.answers("ping"), "the host's")
            with open(path, "a") as f:
                f.write("replace = true\n")
            env = self.lib.configure({"project_root": root})
            self.assertEqual(env["status"], "success", env)
            self.assertEqual(self.answers("ping"), "the plugin")

    def test_the_configuration_s_tools_too(self):
        self.register_ping()
        entry = {"name": "ping", "returns": "string", "lua": "return function(args) return 'configured' end"}
        env = self.lib.configure({"tools": [entry]})
        self.assertEqual(env["status"], "error", env)
        self.assertEqual(env["message"], 'clara_configure: tools[0] (ping): tool "ping" of the configuration\'s '
                                         '[[tools]] would replace the tool "ping" the host registered; say '
                                         'replace = true in its entry to let it')
        self.assertEqual(self.answers("ping"), "the host's")
        env = self.lib.configure({"tools": [dict(entry, replace=True)]})
        self.assertEqual(env["status"], "success", env)
        self.assertEqual(self.answers("ping"), "configured")


class TestListBounds(RemoteTestCase):
    """Issue 25, finding 5: a server listing 100,000 tools held 370 MB,
    filled every catalog and made clara.tools() raise OutputTooLarge."""

    def peer_tools(self):
        return sorted(t["name"] for t in clara.tools() if t["name"].startswith("peer__"))

    def test_a_server_s_list_is_bounded_by_default(self):
        env = self.lib.configure({"mcp_servers": [server("--tools", "3000", "--desc-bytes", "10000", eager=True)]})
        self.assertEqual(env["status"], "success", env)
        names = self.peer_tools()
        self.assertEqual(len(names), 256)
        self.assertEqual(names[0], "peer__ping")
        self.assertEqual(names[-1], "peer__t00254")
        described = [t for t in clara.tools() if t["name"] == "peer__t00000"][0]
        self.assertEqual(described["description"], "d" * 8192)
        self.assertIn('mcp: mcp server "peer" lists more than 256 tools (its max_tools): the first 256 are kept, the rest '
                      'left out; tools = { allow = [...] } chooses them', self.log)

    def test_the_limits_are_the_entry_s(self):
        env = self.lib.configure({"mcp_servers": [server("--tools", "30", "--schema-bytes", "1000", eager=True,
                                                         max_tools=10, max_schema_bytes=2048)]})
        self.assertEqual(env["status"], "success", env)
        self.assertEqual(len(self.peer_tools()), 10)
        env = self.lib.configure({"mcp_servers": [server("--tools", "30", "--schema-bytes", "1000", eager=True,
                                                         max_schema_bytes=512)]})
        self.assertEqual(env["status"], "success", env)
        self.assertEqual(self.peer_tools(), [])
        self.assertIn('mcp: mcp server "peer": tool "t00029" left out: its schema is 1034 bytes, over the 512 of '
                      'max_schema_bytes', self.log)
        env = self.lib.configure({"mcp_servers": [server(max_tools=0)]})
        self.assertEqual(env["message"], "clara_configure: mcp_servers[0]: max_tools must be an integer from 1 to 100000")

    def test_a_flood_of_list_changed_holds_one_listing(self):
        # Review of finding 5: each notifications/tools/list_changed started
        # a listing of its own, all waiting for the one before; a server
        # that sends them without end (and answers no listing) made the
        # host hold a goroutine for each: 100,000 took 400 to 800 MB, and the
        # server's calls timed out behind them. Now one listing runs and
        # one waits, whatever comes.
        before = rss_mb()
        env = self.lib.configure({"mcp_servers": [server("--flood-list-changed", "50000", eager=True, timeout_ms=30000)]})
        self.assertEqual(env["status"], "success", env)
        # The peer answers calls in order: this one comes after the flood.
        self.assertEqual(self.answers("peer__ping"), "pong from ping")
        grown = rss_mb() - before
        self.assertLess(grown, 100, "50,000 list_changed: +%d MB" % grown)


class TestFailingServers(RemoteTestCase):
    """Issue 25, finding 23: what a failing server's calls say."""

    def test_a_message_over_16_mib_and_the_call_after_it(self):
        env = self.lib.configure({"mcp_servers": [server("--reply-bytes", str(17 << 20), eager=True, timeout_ms=20000)]})
        self.assertEqual(env["status"], "success", env)
        big = self.lib.evaluate({"tool": "peer__big"})
        self.assertEqual(big["error"], "tool_failed")
        self.assertEqual(big["message"], 'mcp server "peer" sent a message of more than 16 MiB, the most Clara reads, '
                                         'and its connection was closed; it starts again')
        # The next call waits for the new connection; it once failed with
        # "client is closing".
        self.assertEqual(self.answers("peer__ping"), "pong from ping")

    def test_a_server_in_its_restart_backoff_says_so(self):
        env = self.lib.configure({"mcp_servers": [server("--exit-on-call", eager=True, timeout_ms=300)]})
        self.assertEqual(env["status"], "success", env)
        messages = [self.lib.evaluate({"tool": "peer__ping"})["message"] for _ in range(8)]
        for m in messages:
            self.assertNotIn("ran past its deadline", m, messages)
            self.assertTrue(m.startswith('mcp server "peer" '), messages)
        self.assertRegex(messages[-1], r'^mcp server "peer" (stopped: exit status 3|closed the connection during the call); '
                                       r"it restarts in [\d.]+m?s, after this call's deadline$")


class TestServerRemoval(RemoteTestCase):

    def test_every_tool_leaves_with_its_server(self):
        # Issue 25, finding 20: a server whose "echo" collided with the
        # built-in left its other tools registered once it was removed.
        env = self.lib.configure({"mcp_servers": [server("--names", "echo,one,two", prefix="")]})
        self.assertEqual(env["status"], "success", env)
        self.until(lambda: self.answers("two") == "pong from two", "the server's tools")
        self.assertEqual(self.answers("echo", {"x": 1}), {"x": 1})
        self.assertEqual(self.lib.configure({"mcp_servers": []})["status"], "success")
        self.assertEqual(self.answers("one"), "unknown_tool")
        self.assertEqual(self.answers("two"), "unknown_tool")
        self.assertEqual(self.answers("echo", {"x": 1}), {"x": 1})


if __name__ == "__main__":
    import unittest
    unittest.main()
