"""The resident set stays flat over many calls: every returned string is
freed. A memory check, never a timing check."""

import sys
import unittest

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


if __name__ == "__main__":
    unittest.main()
