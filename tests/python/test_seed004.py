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

    # The seed's simpleeval context is a dict: its conditions call dict methods.

    def test_expression_calls_dict_get(self):
        self.load("visits.toml", """
[rule]
id = "frequent"
trigger = "on_turn_start"
[condition]
expression = "context.state.get('visits', 0) >= 2"
[action]
type = "notify_self"
message = "a frequent visitor"
""")
        self.assertEqual(self.lib.emit("on_turn_start", session="v")["result"]["notices"], [])
        self.lib.evaluate({"tool": "state_set", "session": "v", "arguments": {"key": "visits", "value": 2}})
        self.assertEqual([n["message"] for n in self.lib.emit("on_turn_start", session="v")["result"]["notices"]],
                         ["a frequent visitor"])

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

    # Tier 1: plugin.registerRule({ condition: () => true, action: () => console.log('Hello!') })

    def test_register_rule_hello(self):
        said = []
        self.assertEqual(clara.register_rule({"id": "hello", "trigger": "on_turn_start"},
                                             condition=lambda: True, action=lambda: said.append("Hello!")),
                         "hello")
        out = self.lib.emit("on_turn_start", {"turn": {"number": 1}})
        self.assertEqual(out["result"]["fired"], [{"rule": "hello", "actions": []}])
        self.assertEqual(said, ["Hello!"])
        clara.unregister_rule("hello")
        self.lib.emit("on_turn_start")
        self.assertEqual(said, ["Hello!"])
        with self.assertRaises(clara.RegistrationError) as cm:
            clara.unregister_rule("hello")
        self.assertEqual(cm.exception.errno, clara.CLARA_ENOENT)

    # Tier 2 of the seed in Python callables: a condition on the context, an
    # action that asks for Clara's actions, under the same hooks, priorities,
    # trace and rule tests as a TOML rule.

    def test_register_rule_beside_toml_rules(self):
        clara.register_tool({"name": "pay", "input_schema": {"type": "object"}}, lambda args: args)
        self.load("audit.toml", """
[rule]
id = "note-payments"
trigger = "on_tool_call"
priority = 1
[condition]
expression = "context.tool.name == 'pay'"
[action]
type = "notify_self"
message = "paying {{ context.tool.arguments.amount }}"
""")
        seen = []

        def over_limit(event):
            seen.append(event)
            return event["context"]["tool"]["arguments"].get("amount", 0) > 100

        def refuse(event):
            return [{"type": "deny", "reason": "over the limit"},
                    {"type": "set_state", "key": "refused", "value": event["context"]["tool"]["arguments"]["amount"]}]

        clara.register_rule('{id: "big-payments", trigger: "on_tool_call", priority: 10}', over_limit, refuse)
        self.assertEqual(clara.call("pay", amount=5), {"amount": 5})
        with self.assertRaises(clara.Denied) as cm:
            clara.call("pay", amount=500)
        self.assertIn('denied by rule "big-payments": over the limit', str(cm.exception))
        self.assertEqual(seen[-1]["rule"], "big-payments")
        self.assertEqual(seen[-1]["event"], "on_tool_call")
        got = self.lib.evaluate({"tool": "state_get", "arguments": {"key": "refused"}})
        self.assertEqual(got["result"]["value"], 500)
        traced = self.lib.evaluate({"tool": "pay", "arguments": {"amount": 500}, "trace": True})
        self.assertEqual([(t["rule"], t["matched"]) for t in traced["trace"]],
                         [("big-payments", True), ("note-payments", True)])
        listed = {r["id"]: r for r in self.lib.call("rules_list")["rules"]}
        self.assertEqual(listed["big-payments"]["condition"], "(a function of the host)")
        report = self.lib.evaluate({"tool": "rules_test", "arguments": {"toml": """
[[cases]]
name = "a big one"
event = "on_tool_call"
tool = { name = "pay", arguments = { amount = 1000 } }
fired = ["big-payments", "note-payments"]
denied = "over the limit"
"""}})["result"]
        self.assertEqual((report["passed"], report["failed"]), (1, 0), report)

    def test_register_rule_failures(self):
        def broken(event):
            raise KeyError("amount")

        clara.register_rule({"id": "broken", "trigger": "on_tool_call",
                             "actions": [{"type": "log", "message": "m"}]}, condition=broken)
        with self.assertRaises(clara.Denied) as cm:
            clara.call("echo")
        self.assertIn("the host's condition could not tell", str(cm.exception))
        clara.register_rule({"id": "broken", "trigger": "on_tool_call"}, action=broken)
        with self.assertRaises(clara.Denied) as cm:
            clara.call("echo")
        self.assertIn("the host's action failed: KeyError: 'amount'", str(cm.exception))
        clara.register_rule({"id": "broken", "trigger": "on_tool_call"}, action=lambda: 42)
        with self.assertRaises(clara.Denied) as cm:
            clara.call("echo")
        self.assertIn("TypeError: a rule's action returns None, an action (a dict) or a list of actions, not int",
                      str(cm.exception))
        clara.unregister_rule("broken")
        self.assertEqual(clara.call("echo", a=1), {"a": 1})
        with self.assertRaises(clara.RegistrationError) as cm:
            clara.register_rule({"id": "nothing", "trigger": "x"}, condition=lambda: True)
        self.assertEqual(cm.exception.errno, clara.CLARA_EINVAL)
        self.lib.configure({"rules": {"builtin": True}})
        with self.assertRaises(clara.RegistrationError) as cm:
            clara.register_rule({"id": "token_budget", "trigger": "x"}, action=lambda: None)
        self.assertEqual(cm.exception.errno, clara.CLARA_EPERM)

    def test_register_rule_released(self):
        import gc
        import weakref

        class Condition:
            def __call__(self, event):
                return True

        cond = Condition()
        ref = weakref.ref(cond)
        clara.register_rule({"id": "r", "trigger": "x", "action": {"type": "log", "message": "m"}}, condition=cond)
        del cond
        gc.collect()
        self.assertIsNotNone(ref())   # Clara holds it while the rule is in force
        self.lib.reset()
        gc.collect()
        self.assertIsNone(ref())      # clara_reset let go of it
