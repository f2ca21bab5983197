"""clara_set_log_handler through the binding."""

import gc
import re
import threading
import unittest

import clara
from clara_testcase import ClaraTestCase

# A failed call is logged by its code only (a tool's message may quote its
# arguments); the message goes to the caller in the envelope.
NOPE = 'call of "nope" failed: unknown_tool'

# Every call also leaves an audit record at debug level, logged before the
# failure message: "audit {...}" with the SHA-256 of the arguments ({} here),
# never their values.
EMPTY_ARGS_SHA256 = "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


def audit_re(tool):
    return re.compile(r'^audit \{"ts":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z","session":"default",'
                      r'"tool":%s,"args_sha256":"%s","duration_us":\d+,"status":"error",'
                      r'"error":"unknown_tool","decision_id":"[0-9a-f]{8}-\d+-\d+"\}$' % (re.escape('"%s"' % tool), EMPTY_ARGS_SHA256))


NOPE_AUDIT = audit_re("nope")


# The failure line ends with its structured attributes (docs/observability.md):
# tool=nope session=default decision_id=XXXXXXXX-N-N.
ATTRS = re.compile(r' tool=\S+ session=\S+ decision_id=[0-9a-f]{8}-\d+-\d+$')


def plain(message):
    """message without the attributes of a failure line."""
    return ATTRS.sub("", message)


def is_audit(message):
    return message.startswith("audit {")


def without_audit(messages):
    """messages (strings) without the audit records, and without the
    attributes of the failure lines."""
    return [plain(m) for m in messages if not is_audit(m)]


class Recorder:
    """A thread-safe handler that records (level, message, thread id)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.records = []

    def __call__(self, level, message):
        with self.lock:
            self.records.append((level, message, threading.get_ident()))

    def all(self):
        """Every (level, message) received, audit records included."""
        with self.lock:
            return [(lvl, msg) for lvl, msg, _ in self.records]

    def messages(self):
        """(level, message) of everything but the audit records (failure
        lines without their attributes)."""
        return [(lvl, plain(msg)) for lvl, msg in self.all() if not is_audit(msg)]

    def audits(self):
        """(level, message) of the audit records."""
        return [(lvl, msg) for lvl, msg in self.all() if is_audit(msg)]


class TestLogHandler(ClaraTestCase):

    def test_debug_message_arrives_then_stops(self):
        rec = Recorder()
        self.lib.set_log_handler(rec, clara.CLARA_LOG_DEBUG)
        env = self.lib.evaluate({"tool": "nope"})
        self.assertEqual(env["error"], "unknown_tool")
        got = rec.all()
        self.assertEqual(len(got), 2, got)
        self.assertEqual(got[0][0], clara.CLARA_LOG_DEBUG)
        self.assertRegex(got[0][1], NOPE_AUDIT)
        self.assertEqual((got[1][0], plain(got[1][1])), (clara.CLARA_LOG_DEBUG, NOPE))
        self.lib.set_log_handler(None, clara.CLARA_LOG_DEBUG)
        self.lib.evaluate({"tool": "nope"})
        self.lib.configure({})
        self.assertEqual(rec.all(), got)

    def test_min_level_filters(self):
        rec = Recorder()
        self.lib.set_log_handler(rec, clara.CLARA_LOG_INFO)
        self.lib.evaluate({"tool": "nope"})          # debug: filtered out
        self.lib.configure({})                       # info: "configuration changed"
        self.assertEqual(rec.messages(), [(clara.CLARA_LOG_INFO, "configuration changed")])
        self.lib.set_log_handler(rec, clara.CLARA_LOG_WARN)
        self.lib.configure({})
        self.lib.evaluate({"tool": "nope"})
        self.assertEqual(len(rec.messages()), 1)
        self.lib.set_log_handler(rec, clara.CLARA_LOG_OFF)
        self.lib.configure({})
        self.assertEqual(len(rec.messages()), 1)

    def test_out_of_range_levels_clamped(self):
        rec = Recorder()
        self.lib.set_log_handler(rec, -5)            # below debug: everything
        self.lib.evaluate({"tool": "nope"})
        self.assertEqual(rec.messages(), [(clara.CLARA_LOG_DEBUG, NOPE)])
        self.lib.set_log_handler(rec, 99)            # above off: nothing
        self.lib.evaluate({"tool": "nope"})
        self.lib.configure({})
        self.assertEqual(len(rec.messages()), 1)

    def test_replacing_handler(self):
        first, second = Recorder(), Recorder()
        self.lib.set_log_handler(first, clara.CLARA_LOG_DEBUG)
        self.lib.evaluate({"tool": "nope"})
        self.lib.set_log_handler(second, clara.CLARA_LOG_DEBUG)
        self.lib.evaluate({"tool": "nope"})
        for rec in (first, second):
            self.assertEqual(rec.messages(), [(clara.CLARA_LOG_DEBUG, NOPE)])
            self.assertEqual(len(rec.audits()), 1)
            self.assertEqual(len(rec.records), 2)

    def test_exceptions_are_swallowed(self):
        calls = []

        def bad(level, message):
            calls.append(message)
            raise RuntimeError("boom")

        self.lib.set_log_handler(bad, clara.CLARA_LOG_DEBUG)
        env = self.lib.evaluate({"tool": "nope"})
        self.assertEqual(env, {"status": "error", "error": "unknown_tool",
                               "message": "Tool not found: nope"})
        # Raising on the audit record did not stop the next message.
        self.assertEqual(len(calls), 2)
        self.assertRegex(calls[0], NOPE_AUDIT)
        self.assertRegex(calls[1], re.escape(NOPE) + ATTRS.pattern)

        def exits(level, message):
            raise SystemExit(3)

        self.lib.set_log_handler(exits, clara.CLARA_LOG_DEBUG)
        self.assertEqual(self.lib.evaluate({"tool": "nope"})["error"], "unknown_tool")

    def test_callback_kept_alive(self):
        # Only a lambda references the list; the binding must keep the ctypes
        # callback alive after every Python reference is gone.
        box = []
        self.lib.set_log_handler(lambda level, message: box.append(message), clara.CLARA_LOG_DEBUG)
        for _ in range(3):
            gc.collect()
        for _ in range(100):
            self.lib.evaluate({"tool": "nope"})
        self.assertEqual(without_audit(box), [NOPE] * 100)
        self.assertEqual(len(box), 200)

    def test_callback_outlives_instance(self):
        # The handler is process-wide, so its keep-alive must not die with
        # the Clara instance that installed it.
        box = []
        tmp = clara.Clara(self.lib.path)
        tmp.set_log_handler(lambda level, message: box.append(message), clara.CLARA_LOG_DEBUG)
        del tmp
        gc.collect()
        self.lib.evaluate({"tool": "nope"})
        self.assertEqual(without_audit(box), [NOPE])

    def test_non_ascii_message(self):
        rec = Recorder()
        self.lib.set_log_handler(rec, clara.CLARA_LOG_DEBUG)
        self.lib.evaluate({"tool": "ça-va"})
        self.assertEqual(rec.messages(),
                         [(clara.CLARA_LOG_DEBUG, 'call of "ça-va" failed: unknown_tool')])
        audits = rec.audits()
        self.assertEqual(len(audits), 1)
        self.assertRegex(audits[0][1], audit_re("ça-va"))

    def test_concurrent_calls_and_swaps(self):
        # Workers log from several threads while another thread keeps
        # replacing the handler with fresh callables and collecting garbage:
        # no crash, no message lost while a recorder is installed.
        total = Recorder()
        stop = threading.Event()
        errors = []

        def worker():
            try:
                for _ in range(400):
                    env = self.lib.evaluate_raw('{"tool":"nope"}')
                    if '"unknown_tool"' not in env:
                        errors.append(env)
            except BaseException as e:  # pragma: no cover
                errors.append(e)

        def swapper():
            n = 0
            while not stop.is_set():
                rec = Recorder()
                self.lib.set_log_handler(lambda lvl, msg, rec=rec: (rec(lvl, msg), total(lvl, msg)),
                                         clara.CLARA_LOG_DEBUG)
                n += 1
                if n % 10 == 0:
                    gc.collect()

        workers = [threading.Thread(target=worker) for _ in range(4)]
        sw = threading.Thread(target=swapper)
        sw.start()
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        stop.set()
        sw.join()
        self.assertEqual(errors, [])
        self.assertTrue(all(m == (0, NOPE) for m in total.messages()))
        # The handler stays installed through the end: the last round of calls
        # is all recorded.
        rec = Recorder()
        self.lib.set_log_handler(rec, clara.CLARA_LOG_DEBUG)
        threads = [threading.Thread(target=lambda: [self.lib.evaluate_raw('{"tool":"nope"}') for _ in range(250)])
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len(rec.messages()), 1000)
        self.assertEqual(len(rec.audits()), 1000)
        self.assertTrue(all(NOPE_AUDIT.match(m) for _, m in rec.audits()))


if __name__ == "__main__":
    unittest.main()
