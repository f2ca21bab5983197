"""Plugins through the library (issue 14): a plugin folder found through
plugins.paths, plugins_list, plugin_enable, each plugin's state kept apart,
on_plugin_load and on_plugin_unload seen by a rule."""
import os
import tempfile

from clara_testcase import ClaraTestCase

MANIFEST = 'name = "{name}"\nversion = "1.0"\ndescription = "counts {name}"\nenabled = {enabled}\n'

COUNT = """
[rule]
id = "{name}-count"
trigger = "visit"
[action]
type = "set_state"
key = "count"
value = "{{{{ (context.state.count ?? 0) + {step} }}}}"
"""

LIFE = """
[[rules]]
id = "life-load"
trigger = "on_plugin_load"
[rules.action]
type = "set_state"
key = "last_event"
value = "loaded {{ context.plugin }}"

[[rules]]
id = "life-unload"
trigger = "on_plugin_unload"
[rules.action]
type = "set_state"
key = "last_event"
value = "unloaded {{ context.plugin }}"
"""


class TestPlugins(ClaraTestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory()
        root = self.tmp.name
        for name, enabled, step in (("alpha", "true", 1), ("beta", "false", 10)):
            os.makedirs(os.path.join(root, "plugins", name, "rules"))
            with open(os.path.join(root, "plugins", name, "plugin.toml"), "w") as f:
                f.write(MANIFEST.format(name=name, enabled=enabled))
            with open(os.path.join(root, "plugins", name, "rules", "count.toml"), "w") as f:
                f.write(COUNT.format(name=name, step=step))
        self.addCleanup(self.tmp.cleanup)

    def call(self, tool, **arguments):
        env = self.lib.evaluate({"tool": tool, "arguments": arguments})
        self.assertEqual(env["status"], "success", env)
        return env["result"]

    def test_list_enable_and_state_apart(self):
        env = self.lib.configure({"project_root": self.tmp.name, "plugins": {"paths": ["plugins/*"]}})
        self.assertEqual(env["status"], "success", env)
        listed = self.call("plugins_list")["plugins"]
        self.assertEqual([(p["name"], p["enabled"], p["rules"]) for p in listed],
                         [("alpha", True, ["alpha-count"]), ("beta", False, [])])
        self.assertEqual(listed[0]["path"], os.path.join(self.tmp.name, "plugins", "alpha"))
        self.assertEqual(listed[0]["description"], "counts alpha")

        self.lib.emit("visit")
        # alpha's count is alpha's: the session's own state has none.
        self.assertEqual(self.call("state_get", key="count")["found"], False)
        self.assertEqual(self.call("state_get", key="count", plugin="alpha")["value"], 1)

        # A rule of the project sees beta come and alpha go.
        self.call("rules_load", name="life.toml", toml=LIFE)
        after = self.call("plugin_enable", name="beta", enabled=True)["plugins"]
        self.assertEqual([(p["name"], p["enabled"], p["enabled_by"]) for p in after],
                         [("alpha", True, "plugin.toml"), ("beta", True, "plugin_enable")])
        self.assertEqual(self.call("state_get", key="last_event")["value"], "loaded beta")
        fired = self.lib.emit("visit")["result"]["fired"]
        self.assertEqual([f["rule"] for f in fired], ["alpha-count", "beta-count"])
        # Each counted in its own namespace: alpha at 2, beta at 10.
        values = [f["actions"][0]["value"] for f in fired]
        self.assertEqual(values, [2, 10])

        self.call("plugin_enable", name="alpha", enabled=False)
        self.assertEqual(self.call("state_get", key="last_event")["value"], "unloaded alpha")
        fired = self.lib.emit("visit")["result"]["fired"]
        self.assertEqual([f["rule"] for f in fired], ["beta-count"])

    def test_plugin_enable_errors(self):
        self.assertEqual(self.lib.configure({"project_root": self.tmp.name})["status"], "success")
        env = self.lib.evaluate({"tool": "plugin_enable", "arguments": {"name": "gamma", "enabled": True}})
        self.assertEqual(env["error"], "invalid_args")
        self.assertIn('no plugin "gamma"', env["message"])
        env = self.lib.evaluate({"tool": "plugin_enable", "arguments": {"name": "alpha"}})
        self.assertEqual(env["error"], "invalid_args")
        # A reset forgets what plugin_enable said, and plugins.paths = []
        # finds none.
        self.assertEqual(self.lib.configure({"plugins": {"paths": []}})["status"], "success")
        self.assertEqual(self.call("plugins_list"), {"plugins": []})
