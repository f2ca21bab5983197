"""What seed 004 (the Oracle plugin system) promises, from Python (issue
32): its Lua idiom context.state.get / set, the message of a condition
that uses the names its Python flattens, notices batched, de-duplicated
and deferred, rules whose condition and action are Python callables
(its "Tier 1" registerRule), and workflows."""

import os

import clara
from clara_testcase import REPO, ClaraTestCase

SEED_LUA = os.path.join(REPO, "rulelua", "testdata", "seed")


class TestSeed004(ClaraTestCase):

    def load(self, name, toml):
        env = self.lib.evaluate({"tool": "rules_load", "arguments": {"name": name, "toml": toml}})
        self.assertEqual(env["status"], "success", env)

    # context = RuleContext(..., state=PluginState(get=getter, set=setter)):
    # the seed's scripts call context.state.get('k') and context.state.set('k', v).

    def test_lua_context_state_get_and_set(self):
        self.lib.configure({"project_root": SEED_LUA})
        self.load("tokens.toml", """
[rule]
id = "token-warnings"
trigger = "on_turn_start"
[condition]
script = "004_state_idiom.lua"
[action]
type = "log"
message = "warned"
""")
        turn = {"turn": {"number": 5, "token_usage": 0.85}}
        notices = []
        for _ in range(2):
            out = self.lib.emit("on_turn_start", turn, session="oracle")
            self.assertEqual(out["status"], "success", out)
            notices += [n["message"] for n in out["result"]["notices"]]
        self.assertEqual(notices, ["Token budget at 85% (warning 1)", "Token budget at 85% (warning 2)"])
        got = self.lib.evaluate({"tool": "state_get", "session": "oracle", "arguments": {"key": "warnings"}})
        self.assertEqual(got["result"]["value"], 2, got)
