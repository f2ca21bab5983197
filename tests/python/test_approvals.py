"""Approvals from Python (issue 28): clara.set_approval_handler with a
plain and an async def handler that approve, reject, edit the arguments,
decide later from another thread, let the timeout pass, and a call
cancelled while its approval waits; no handler at all."""

import asyncio
import threading
import time
import unittest

import clara
from clara_testcase import ClaraTestCase

RULES = """
[rule]
id = "big"
trigger = "on_tool_call"
[condition]
expression = "context.tool.name == 'pay' and context.tool.arguments.amount > 100"
[action]
type = "ask"
reason = "{{ context.tool.arguments.amount }} is a lot"
"""


class TestApprovals(ClaraTestCase):

    def setUp(self):
        super().setUp()
        self.runs = []

        @clara.tool
        def pay(to: str, amount: int) -> dict:
            """Pays someone."""
            self.runs.append((to, amount))
            return {"paid": amount, "to": to}

        loaded = clara.evaluate({"tool": "rules_load", "arguments": {"name": "ask.toml", "toml": RULES}})
        self.assertEqual(loaded["status"], "success", loaded)
        self.events = []
        clara.set_event_handler(self.events.append)

    def tearDown(self):
        clara.set_approval_handler(None)
        clara.set_event_handler(None)
        clara.unregister_tool("pay")
        super().tearDown()

    def test_without_a_handler_nothing_runs(self):
        with self.assertRaises(clara.Denied) as cm:
            clara.call("pay", to="bob", amount=500)
        self.assertIn("asks for a person's approval (500 is a lot), and no approval handler is installed", cm.exception.message)
        self.assertEqual(self.runs, [])

    def test_approve_reject_edit(self):
        seen = []
        answers = [True, {"decision": "reject", "reason": "not today"},
                   {"decision": "approve", "arguments": {"to": "bob", "amount": 50}}, False]

        def handler(request):
            seen.append(request)
            return answers[len(seen) - 1]

        clara.set_approval_handler(handler)
        self.assertEqual(clara.call("pay", to="bob", amount=500), {"paid": 500, "to": "bob"})
        with self.assertRaises(clara.Denied) as cm:
            clara.call("pay", to="bob", amount=500)
        self.assertEqual(cm.exception.message, 'tool "pay" was not run: the approval was rejected: not today')
        self.assertEqual(clara.call("pay", to="bob", amount=500), {"paid": 50, "to": "bob"})
        with self.assertRaises(clara.Denied) as cm:
            clara.call("pay", to="bob", amount=500)
        self.assertEqual(cm.exception.message, 'tool "pay" was not run: the approval was rejected: no reason given')
        self.assertEqual(self.runs, [("bob", 500), ("bob", 50)])
        req = seen[0]
        self.assertEqual((req["tool"], req["session"], req["arguments"], req["reason"], req["rule"], req["timeout_ms"]),
                         ("pay", "default", {"to": "bob", "amount": 500}, "500 is a lot", "big", 120000))
        self.assertTrue(any(e["event"] == "approval_required" and e["id"] == req["id"] for e in self.events))
        # Small payments are never asked about.
        self.assertEqual(clara.call("pay", to="bob", amount=5), {"paid": 5, "to": "bob"})
        self.assertEqual(len(seen), 4)

    def test_a_handler_that_fails_or_answers_nonsense_rejects(self):
        clara.set_approval_handler(lambda request: 1 / 0)
        with self.assertRaises(clara.Denied) as cm, self.assertLogs("clara", "WARNING"):
            clara.call("pay", to="bob", amount=500)
        self.assertIn("the approval handler raised ZeroDivisionError", cm.exception.message)
        clara.set_approval_handler(lambda request: {"decision": "maybe"})
        with self.assertRaises(clara.Denied) as cm, self.assertLogs("clara", "WARNING"):
            clara.call("pay", to="bob", amount=500)
        self.assertIn("the approval handler raised ValueError", cm.exception.message)
        clara.set_approval_handler(lambda request: {"decision": "approve", "arguments": {"to": "bob"}})
        with self.assertRaises(clara.Denied) as cm:
            clara.call("pay", to="bob", amount=500)
        self.assertIn("the edited arguments do not match", cm.exception.message)
        self.assertEqual(self.runs, [])

    def test_decided_later_from_another_thread(self):
        clara.set_approval_handler(lambda request: None)

        def person():
            for _ in range(5000):
                waiting = clara.approvals()
                if waiting:
                    break
                time.sleep(0.002)
            (approval,) = waiting
            self.assertEqual(approval["reason"], "500 is a lot")
            with self.assertRaises(clara.InvalidArgs):
                clara.decide_approval(approval["id"], True, arguments={"to": "bob", "amount": "lots"})
            clara.decide_approval(approval["id"], True, arguments={"to": "bob", "amount": 70})

        t = threading.Thread(target=person)
        t.start()
        self.assertEqual(clara.call("pay", to="bob", amount=500), {"paid": 70, "to": "bob"})
        t.join()
        self.assertTrue(any(e["event"] == "approval_cancelled" and e["reason"] == "decided" for e in self.events))
        with self.assertRaises(clara.InvalidArgs):
            clara.decide_approval(1 << 40, False)

    def test_timeout_rejects(self):
        clara.configure({"policy": {"approval_timeout_ms": 100}})
        clara.set_approval_handler(lambda request: None)
        with self.assertRaises(clara.Denied) as cm:
            clara.call("pay", to="bob", amount=500)
        self.assertEqual(cm.exception.message, 'tool "pay" was not run: rule "big" asks for a person\'s approval (500 is a lot), '
                         "and none came within 100ms (policy.approval_timeout_ms)")
        self.assertEqual(self.runs, [])

    def test_async_handler(self):
        seen = []

        async def handler(request):
            seen.append(asyncio.get_running_loop())
            await asyncio.sleep(0.01)
            return {"decision": "approve", "arguments": dict(request["arguments"], amount=99)}

        clara.set_approval_handler(handler)
        self.assertEqual(clara.call("pay", to="bob", amount=500), {"paid": 99, "to": "bob"})
        self.assertEqual(len(seen), 1)

        async def rejects(request):
            return False

        clara.set_approval_handler(rejects)
        with self.assertRaises(clara.Denied):
            clara.call("pay", to="bob", amount=500)
        self.assertEqual(self.runs, [("bob", 99)])

    def test_cancelled_while_waiting(self):
        # An async handler that waits for its person: the call is cancelled,
        # the coroutine is cancelled too, and the tool never runs.
        started, cancelled = threading.Event(), threading.Event()

        async def patient(request):
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return True

        clara.set_approval_handler(patient)

        async def main():
            task = asyncio.ensure_future(clara.call_async("pay", to="bob", amount=500))
            while not clara.approvals():
                await asyncio.sleep(0.005)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        self.assertTrue(started.wait(10))
        self.assertTrue(cancelled.wait(10), "the handler's coroutine was not cancelled")
        self.assertEqual(clara.approvals(), [])
        self.assertEqual(self.runs, [])
        self.assertTrue(any(e["event"] == "approval_cancelled" and e["reason"] == "cancelled" for e in self.events))

    def test_the_decorator_declares_needs_approval(self):
        @clara.tool(needs_approval=True)
        def wipe(disk: str) -> str:
            """Wipes a disk."""
            return "wiped " + disk

        try:
            (desc,) = [t for t in clara.tools() if t["name"] == "wipe"]
            self.assertIs(desc["needs_approval"], True)
            asked = []
            clara.set_approval_handler(lambda request: asked.append(request["reason"]) or False)
            with self.assertRaises(clara.Denied):
                clara.call("wipe", disk="sda")
            self.assertEqual(asked, ['tool "wipe" needs approval (needs_approval)'])
            with self.assertRaises(TypeError):
                clara.tool(needs_approval=3)(lambda: None)
        finally:
            clara.unregister_tool("wipe")

    def test_budget_exhausted(self):
        clara.configure({"limits": {"max_calls_per_session": 1}})
        self.assertEqual(clara.call("pay", to="bob", amount=5), {"paid": 5, "to": "bob"})
        with self.assertRaises(clara.BudgetExhausted) as cm:
            clara.call("pay", to="bob", amount=5)
        self.assertEqual(cm.exception.details, {"tool": "pay", "budget": "session", "limit": 1})


if __name__ == "__main__":
    unittest.main()
