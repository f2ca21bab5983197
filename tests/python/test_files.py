"""Issue 25 through the library: the files Clara is told to read
(findings 2, 14) and hot reload of rule folders (finding 17).

2: a rule condition's script naming a named pipe hung the load for ever,
and /dev/zero grew without bound: rules_load, clara_configure, a plugin's
rule file and hot reload. 14: a plugin ran code from outside its folder (an
absolute lua_file, a lua_file that is a symbolic link, a rule's script
going up with ..). 17: hot reload stopped for good once rules/ or plugins/
was deleted and made again, and never started in a project whose rule
folders were empty or missing."""
import os
import pathlib
import shutil
import tempfile
import threading
import time

import clara
from clara_testcase import ClaraTestCase


def script_rule(script, rule_id="scripted"):
    return (f'[rule]\nid = "{rule_id}"\ntrigger = "visit"\n[condition]\nscript = "{script}"\n'
            '[action]\ntype = "notify_self"\nmessage = "m"\n')


def greet_rule(message, rule_id="greet"):
    return f'[rule]\nid = "{rule_id}"\ntrigger = "visit"\n[action]\ntype = "notify_self"\nmessage = "{message}"\n'


DENY_ECHO = ('[rule]\nid = "no-echo"\ntrigger = "on_tool_call"\n[condition]\n'
             'expression = "context.tool.name == \'echo\'"\n[action]\ntype = "deny"\nreason = "no echo here"\n')


def write(root, files):
    for name, text in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def wait_for(what, cond, seconds=30.0):
    """Polls cond until it holds; the deadline only bounds a failure."""
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds:.0f} s for {what}")
        time.sleep(0.01)


class FilesCase(ClaraTestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = os.path.realpath(self.tmp.name)
        self.fifos = []
        self.logged = []
        self.log_lock = threading.Lock()

    def tearDown(self):
        self.unblock()
        super().tearDown()

    def mkfifo(self, name):
        path = os.path.join(self.root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkfifo(path)
        self.fifos.append(path)
        return path

    def unblock(self):
        """Opens each named pipe's writing end for a moment: a read stuck
        waiting for a writer (the bug) then ends."""
        for path in self.fifos:
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass

    def quickly(self, what, fn, seconds=10.0):
        """fn() from another thread; fails when it takes more than seconds."""
        box = []
        t = threading.Thread(target=lambda: box.append(fn()), daemon=True)
        t.start()
        t.join(seconds)
        if t.is_alive():
            self.unblock()
            t.join(5)
            self.fail(f"{what} hangs")
        return box[0]

    def log_to_list(self):
        def handler(level, message):
            with self.log_lock:
                self.logged.append(message)
        self.lib.set_log_handler(handler, clara.CLARA_LOG_DEBUG)

    def log_text(self):
        with self.log_lock:
            return "\n".join(self.logged)

    def visit(self):
        env = self.lib.emit("visit")
        self.assertEqual(env["status"], "success", env)
        return " | ".join(n["message"] for n in env["result"]["notices"])

    def echo_denied(self):
        env = self.lib.evaluate({"tool": "echo", "arguments": {"x": 1}})
        return "no echo here" in env.get("message", "")


class TestScriptsAreRegularFiles(FilesCase):
    """Finding 2."""

    def test_rules_load_and_configure(self):
        pipe = self.mkfifo("rules/pipe.lua")
        write(self.root, {"fifo.toml": script_rule("rules/pipe.lua"), "zero.toml": script_rule("/dev/zero")})
        self.assertEqual(self.lib.configure({"project_root": self.root})["status"], "success")
        cases = [
            ({"name": "x.toml", "toml": script_rule("rules/pipe.lua")}, f"{pipe} is a named pipe, not a regular file"),
            ({"paths": ["fifo.toml"]}, f"{pipe} is a named pipe, not a regular file"),
            ({"name": "x.toml", "toml": script_rule("/dev/zero")}, f"/dev/zero is outside {self.root}"),
            ({"paths": ["zero.toml"]}, f"/dev/zero is outside {self.root}"),
        ]
        for arguments, want in cases:
            env = self.quickly(f"rules_load {arguments}",
                               lambda: self.lib.evaluate({"tool": "rules_load", "arguments": arguments}))
            self.assertEqual(env["error"], "invalid_args", env)
            self.assertIn("script: " + want, env["message"])
        for path, want in (("fifo.toml", f"{pipe} is a named pipe"), ("zero.toml", "/dev/zero is outside")):
            env = self.quickly(f"configure rules.paths {path}",
                               lambda: self.lib.configure({"rules": {"paths": [path]}}))
            self.assertEqual(env["error"], "invalid_request", env)
            self.assertIn(want, env["message"])

    def test_a_plugins_rule_file(self):
        self.mkfifo(".clara/plugins/p/scripts/pipe.lua")
        write(self.root, {".clara/plugins/p/plugin.toml": 'name = "p"\n'})
        plugin = os.path.join(self.root, ".clara", "plugins", "p")
        for script, want in (("scripts/pipe.lua", "pipe.lua is a named pipe, not a regular file"),
                             ("/dev/zero", f"/dev/zero is outside {plugin}")):
            write(plugin, {"rules/bad.toml": script_rule(script)})
            env = self.quickly(f"a plugin's rule naming {script}",
                               lambda: self.lib.configure({"project_root": self.root}))
            self.assertEqual(env["error"], "invalid_request", env)
            self.assertIn(want, env["message"])

    def test_hot_reload(self):
        write(self.root, {".clara/rules/greet.toml": greet_rule("v1")})
        self.log_to_list()
        env = self.lib.configure({"project_root": self.root, "state_dir": os.path.join(self.root, ".clara")})
        self.assertEqual(env["status"], "success", env)
        pipe = self.mkfifo(".clara/rules/pipe.lua")
        self.assertEqual(self.visit(), "v1")
        for script, want in (("pipe.lua", f"{pipe} is a named pipe, not a regular file"),
                             ("/dev/zero", f"/dev/zero is outside {self.root}")):
            write(self.root, {".clara/rules/greet.toml": script_rule(script)})
            try:
                wait_for(f"the reload's error about {script}", lambda: want in self.log_text(), 10)
            finally:
                self.unblock()
            self.assertEqual(self.visit(), "v1")  # the rules in force stay
        write(self.root, {".clara/rules/greet.toml": greet_rule("v2")})
        wait_for("the next good edit", lambda: self.visit() == "v2")

    def test_configure_from_a_path(self):
        pipe = pathlib.Path(self.mkfifo("config.toml"))
        for path, what in ((pipe, "a named pipe"), (pathlib.Path("/dev/zero"), "a device")):
            def configure(p=path):
                try:
                    clara.configure(p)
                except ValueError as e:
                    return str(e)
                return "no error"
            self.assertEqual(self.quickly(f"clara.configure({path})", configure),
                             f"{path} is {what}, not a regular file")


class TestPluginsStayInside(FilesCase):
    """Finding 14."""

    def setUp(self):
        super().setUp()
        self.outside = os.path.join(self.root, "outside", "x.lua")
        self.project = os.path.join(self.root, "project")
        self.plugin = os.path.join(self.project, ".clara", "plugins", "p")
        write(self.root, {
            "outside/x.lua": "return function() return 'outside' end\n",
            "project/.clara/plugins/p/plugin.toml": 'name = "p"\n',
            "project/.clara/plugins/p/scripts/t.lua": "return function() return 'inside' end\n",
        })
        os.symlink(self.outside, os.path.join(self.plugin, "scripts", "link.lua"))

    def refused(self, file, text, want):
        write(self.plugin, {file: text})
        env = self.lib.configure({"project_root": self.project})
        os.remove(os.path.join(self.plugin, file))
        self.assertEqual(env.get("error"), "invalid_request", env)
        self.assertIn(want, env["message"])

    def test_escapes_are_refused(self):
        tool = '[[tools]]\nname = "t"\nlua_file = "{}"\n'
        link = os.path.join(self.plugin, "scripts", "link.lua")
        self.refused("tools/t.toml", tool.format(self.outside),
                     f'lua_file "{self.outside}" leaves the plugin\'s folder ({self.outside} is outside {self.plugin})')
        self.refused("tools/t.toml", tool.format("scripts/link.lua"),
                     f"{link} leads outside {self.plugin} through a symbolic link")
        self.refused("tools/t.toml", tool.format("../../../outside/x.lua"), "leaves the plugin's folder")
        self.refused("rules/bad.toml", script_rule("../../../../outside/x.lua"),
                     f"script: {self.outside} is outside {self.plugin}")
        self.refused("rules/bad.toml", script_rule(self.outside), f"script: {self.outside} is outside {self.plugin}")
        self.refused("rules/bad.toml", script_rule("scripts/link.lua"),
                     f"script: {link} leads outside {self.plugin} through a symbolic link")

    def test_inside_loads_and_the_host_may_name_any_file(self):
        write(self.plugin, {"tools/t.toml": '[[tools]]\nname = "t"\nlua_file = "scripts/t.lua"\n'})
        self.assertEqual(self.lib.configure({"project_root": self.project})["status"], "success")
        self.assertEqual(self.lib.evaluate({"tool": "t"})["result"], "inside")
        env = self.lib.configure({"plugins": {"paths": []}, "tools": [{"name": "t", "lua_file": self.outside}]})
        self.assertEqual(env["status"], "success", env)
        self.assertEqual(self.lib.evaluate({"tool": "t"})["result"], "outside")


class TestHotReloadOfFolders(FilesCase):
    """Finding 17."""

    def watch(self, **more):
        config = {"project_root": self.root, "state_dir": os.path.join(self.root, ".clara")}
        config.update(more)
        env = self.lib.configure(config)
        self.assertEqual(env["status"], "success", env)

    def test_folders_deleted_and_made_again(self):
        write(self.root, {".clara/rules/deny.toml": DENY_ECHO, ".clara/plugins/p/plugin.toml": 'name = "p"\n',
                          ".clara/plugins/p/rules/r.toml": greet_rule("plugin v1")})
        self.watch()
        self.assertTrue(self.echo_denied())
        self.assertEqual(self.visit(), "plugin v1")
        rules, plugins = os.path.join(self.root, ".clara", "rules"), os.path.join(self.root, ".clara", "plugins")
        for n in (2, 3):
            shutil.rmtree(rules)
            wait_for("the deny rule to go with its folder", lambda: not self.echo_denied())
            write(self.root, {".clara/rules/deny.toml": DENY_ECHO})
            wait_for("the deny rule in rules/ made again", self.echo_denied)
            # rsync --delete: the new folder beside, renamed in, the old one gone.
            write(self.root, {".clara/plugins.new/p/plugin.toml": 'name = "p"\n',
                              ".clara/plugins.new/p/rules/r.toml": greet_rule(f"plugin v{n}")})
            os.rename(plugins, plugins + ".old")
            os.rename(plugins + ".new", plugins)
            shutil.rmtree(plugins + ".old")
            wait_for("the plugin in plugins/ made again", lambda: self.visit() == f"plugin v{n}")
            write(self.root, {".clara/plugins/p/rules/r.toml": greet_rule(f"plugin v{n} edited")})
            wait_for("an edit inside it", lambda: self.visit() == f"plugin v{n} edited")

    def test_empty_and_missing_folders_at_start(self):
        for name, tree, later in (
                ("empty", {".clara/rules/.keep": "", ".clara/plugins/.keep": ""}, {".clara/rules/deny.toml": DENY_ECHO}),
                ("missing", {"README": ""}, {".clara/rules/deny.toml": DENY_ECHO}),
                ("missing plugins", {"README": ""},
                 {".clara/plugins/guard/plugin.toml": 'name = "guard"\n', ".clara/plugins/guard/rules/deny.toml": DENY_ECHO})):
            with self.subTest(name):
                shutil.rmtree(self.root)
                os.makedirs(self.root)
                write(self.root, tree)
                self.watch()
                self.assertFalse(self.echo_denied())
                write(self.root, later)
                wait_for(f"the rule written after the start ({name})", self.echo_denied)
                self.lib.reset()
