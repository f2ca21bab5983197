"""The resident set stays flat over many calls: every returned string is
freed. A memory check, never a timing check."""

import sys
import unittest

from clara import _binding
from clara_testcase import ClaraTestCase

WARMUP = 20000
CALLS = 100000
LIMIT_KIB = 10 * 1024


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise unittest.SkipTest("no VmRSS in /proc/self/status")


REQUESTS = [
    '{"question":"hi"}',                                        # success, simple
    '{"tool":"echo","id":1,"arguments":{"text":"' + "x" * 500 + '"}}',  # success, larger
    '{"tool":"nonexistent"}',                                   # unknown_tool
    '{not json',                                                # invalid_json
    '{"tool":5}',                                               # invalid_request
    '{"tool":"get_time","arguments":{"timezone":"Nowhere/X"}}',  # invalid_args
    '{"tool":"get_time"}',                                      # success, get_time
]


class TestMemory(ClaraTestCase):

    def loop(self, n):
        ev = self.lib.evaluate_raw
        reqs = [r.encode() for r in REQUESTS]
        k = len(reqs)
        for i in range(n):
            ev(reqs[i % k])

    def test_rss_flat(self):
        try:
            rss_kib()
        except OSError:
            self.skipTest("/proc/self/status not readable")
        self.loop(WARMUP)
        for i in range(200):   # the other functions that return strings
            self.lib.json_get('{"a":{"b":"c"}}', "a")
            self.lib.configure({})
        before = rss_kib()
        self.loop(CALLS)
        for i in range(2000):
            self.lib.json_get('{"a":"%s"}' % ("y" * 200), "a")
            self.lib.configure({"limits": {"max_depth": 512}})
            self.lib.reset()
        after = rss_kib()
        growth = after - before
        sys.stderr.write("\n  RSS: %d KiB after %d warm-up calls, %d KiB after %d more calls "
                         "(+6000 json_get/configure/reset): growth %+d KiB (limit %d KiB) ... "
                         % (before, WARMUP, after, CALLS, growth, LIMIT_KIB))
        self.assertLess(growth, LIMIT_KIB)

    def tool_round(self, n):
        """n calls of Python tools (successes and failures) and n/10
        registrations, replacements and unregistrations."""
        ev = self.lib.evaluate_raw
        for i in range(n):
            ev(b'{"tool":"py_ok","arguments":{"i":%d,"s":"%s"}}' % (i, b"y" * (i % 300)))
            if i % 4 == 0:
                ev(b'{"tool":"py_fail"}')
            if i % 10 == 0:
                name = "py_tmp%d" % (i % 3)
                self.lib.register_tool({"name": name, "returns": "string"}, lambda args, i=i: str(i))
                self.lib.register_tool({"name": name}, lambda args, i=i: [i])   # replaces
                self.lib.unregister_tool(name)

    def test_rss_flat_with_python_tools(self):
        # Tools written in Python: the arguments copied for each call, the
        # results and errors handed back, and the ctypes callbacks of
        # released tools must all be freed.
        try:
            rss_kib()
        except OSError:
            self.skipTest("/proc/self/status not readable")

        def fail(args):
            raise ValueError("no " * 50)

        self.lib.register_tool({"name": "py_ok"}, lambda args: {"echo": args})
        self.lib.register_tool({"name": "py_fail"}, fail)
        self.tool_round(3000)
        before = rss_kib()
        self.tool_round(10000)
        after = rss_kib()
        growth = after - before
        self.assertEqual(len(_binding._tool_keepalive), 2)
        sys.stderr.write("\n  RSS: %d KiB after 3000 Python tool calls, %d KiB after 10000 more "
                         "(+2500 failures, 1000 register/replace/unregister): growth %+d KiB (limit %d KiB) ... "
                         % (before, after, growth, LIMIT_KIB))
        self.assertLess(growth, LIMIT_KIB)
        self.lib.reset()
        self.assertEqual(len(_binding._tool_keepalive), 0)


if __name__ == "__main__":
    unittest.main()
