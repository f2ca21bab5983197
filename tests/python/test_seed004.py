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

    # The seed's evaluator flattens names: names={'turn_number': ..., 'token_usage': ...}.

    def test_flattened_names_are_python(self):
        rule = """
[rule]
id = "token-budget-warning"
trigger = "on_turn_start"
[condition]
%sexpression = "token_usage > 0.8"
[action]
type = "notify_self"
message = "Token budget at {{ context.turn.token_usage | percent }}. Consider wrapping up."
priority = "high"
"""
        env = self.lib.evaluate({"tool": "rules_load", "arguments": {"name": "flat.toml", "toml": rule % ""}})
        self.assertEqual(env["status"], "error")
        self.assertIn("unknown name token_usage", env["message"])
        self.assertIn("token_usage is one of the names the seed's Python conditions flatten: write "
                      "context.turn.token_usage, or have the condition read as Python with "
                      'syntax = "python"', env["message"])
        self.load("flat.toml", rule % 'syntax = "python"\n')
        out = self.lib.emit("on_turn_start", {"turn": {"token_usage": 0.85}})
        self.assertEqual([n["message"] for n in out["result"]["notices"]],
                         ["Token budget at 85%. Consider wrapping up."])

    # The seed's ANS accumulator: notices batched, de-duplicated and deferred.

    SEED_RULE = """
# rules/token_warning.toml
[rule]
id = "token-budget-warning"
trigger = "on_turn_start"

[condition]
expression = "context.turn.token_usage > 0.8"

[action]
type = "notify_self"
message = "Token budget at {{ context.turn.token_usage | percent }}. Consider wrapping up."
priority = "high"
"""

    def drain(self, session):
        return self.lib.evaluate({"tool": "notifications_drain", "session": session})["result"]["notices"]

    def test_three_identical_notices_are_one_with_a_count(self):
        self.load("token_warning.toml", self.SEED_RULE)
        for _ in range(3):
            out = self.lib.emit("on_turn_start", {"turn": {"token_usage": 0.85}}, session="oracle")
            self.assertEqual(len(out["result"]["notices"]), 1)   # each call still has its own
        self.assertEqual(self.drain("oracle"), [{
            "rule": "token-budget-warning", "message": "Token budget at 85%. Consider wrapping up.",
            "priority": "high", "event": "on_turn_start", "count": 3}])
        self.lib.configure({"notices": {"dedupe_window_ms": 0}})
        for _ in range(2):
            self.lib.emit("on_turn_start", {"turn": {"token_usage": 0.85}}, session="oracle")
        self.assertEqual([n.get("count") for n in self.drain("oracle")], [None, None])

    def test_deferred_delivery(self):
        self.load("later.toml", self.SEED_RULE.replace('priority = "high"',
                                                       'priority = "high"\ndeliver_on = "on_session_end"'))
        out = self.lib.emit("on_turn_start", {"turn": {"token_usage": 0.85}}, session="oracle")
        self.assertEqual(out["result"]["notices"], [])
        self.assertEqual(out["result"]["fired"][0]["actions"][0]["deliver_on"], "on_session_end")
        self.assertEqual(self.drain("oracle"), [])
        self.lib.emit("on_session_end", session="oracle")
        self.assertEqual([n["message"] for n in self.drain("oracle")],
                         ["Token budget at 85%. Consider wrapping up."])
