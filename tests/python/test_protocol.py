"""Envelopes of clara_evaluate (SPEC §2), compared as whole texts."""

import datetime
import json
import re
import unittest

from clara_testcase import ClaraTestCase

KNOWN = "tool, arguments, session, id, policy, async, trace, _meta"


def err(code, message, id_json=None):
    """The exact text of an error envelope."""
    idpart = ',"id":%s' % id_json if id_json is not None else ""
    return '{"status":"error"%s,"error":%s,"message":%s}' % (
        idpart, json.dumps(code), json.dumps(message, ensure_ascii=False))


class TestSuccess(ClaraTestCase):

    def test_simple_form(self):
        self.assertEnvelope('{"question":"hi"}',
                            '{"status":"success","tool":"echo","result":{"question":"hi"}}')

    def test_simple_form_parsed(self):
        self.assertEqual(self.lib.evaluate({"question": "hi"}),
                         {"status": "success", "tool": "echo", "result": {"question": "hi"}})

    def test_simple_form_whitespace_compacted(self):
        self.assertEnvelope('  {"question" : "hi",\n\t"n" : [ 1 , 2 ] }  ',
                            '{"status":"success","tool":"echo","result":{"question":"hi","n":[1,2]}}')

    def test_empty_object(self):
        self.assertEnvelope('{}', '{"status":"success","tool":"echo","result":{}}')

    def test_explicit_echo_with_string_id(self):
        self.assertEnvelope('{"tool":"echo","id":"req-1","arguments":{"x":1}}',
                            '{"status":"success","id":"req-1","tool":"echo","result":{"x":1}}')

    def test_explicit_echo_with_number_id(self):
        self.assertEnvelope('{"tool":"echo","id":3,"arguments":{"x":[1,2]}}',
                            '{"status":"success","id":3,"tool":"echo","result":{"x":[1,2]}}')

    def test_explicit_echo_without_arguments(self):
        self.assertEnvelope('{"tool":"echo"}', '{"status":"success","tool":"echo","result":{}}')

    def test_explicit_echo_with_session(self):
        self.assertEnvelope('{"tool":"echo","session":"s1","arguments":{"k":"v"}}',
                            '{"status":"success","tool":"echo","result":{"k":"v"}}')

    def test_unicode_round_trip(self):
        args = {"text": "héllo ☃ 𝄞 日本語", "nul": "a\x00b", "ctl": "tab\there\nline",
                "quote": 'say "hi" \\ bye', "emoji": "\U0001F600"}
        req = {"tool": "echo", "arguments": args}
        request = json.dumps(req, ensure_ascii=False, separators=(",", ":"))
        self.assertIn("\\u0000", request)   # the NUL travels as an escape
        self.assertEqual(self.lib.evaluate_raw(request),
                         '{"status":"success","tool":"echo","result":%s}'
                         % json.dumps(args, ensure_ascii=False, separators=(",", ":")))
        self.assertEqual(self.lib.evaluate(req)["result"], args)

    def test_unicode_escapes_round_trip(self):
        self.assertEnvelope('{"q":"\\u00e9\\u0000\\ud834\\udd1e"}',
                            '{"status":"success","tool":"echo","result":{"q":"\\u00e9\\u0000\\ud834\\udd1e"}}')
        self.assertEqual(self.lib.evaluate({"q": "\x00"})["result"]["q"], "\x00")


class TestErrors(ClaraTestCase):

    def test_unknown_tool(self):
        self.assertEnvelope('{"tool":"nonexistent"}',
                            '{"status":"error","error":"unknown_tool","message":"Tool not found: nonexistent"}')

    def test_unknown_tool_with_id(self):
        self.assertEnvelope('{"tool":"nonexistent","id":"abc"}',
                            err("unknown_tool", "Tool not found: nonexistent", '"abc"'))

    def test_invalid_json(self):
        cases = {
            '{not json': "Invalid JSON: expected a string key, got character 'n' at byte 1",
            'not json': "Invalid JSON: unexpected character 'n' at byte 0",
            '{"a":}': "Invalid JSON: unexpected character '}' at byte 5",
            '{"a":1': "Invalid JSON: unexpected end of input at byte 6",
            '{"q":1}x': "Invalid JSON: unexpected data after the value at byte 7",
            '   ': "Invalid JSON: no value at byte 3",
        }
        for req, msg in cases.items():
            with self.subTest(request=req):
                self.assertEnvelope(req, err("invalid_json", msg))

    def test_empty_string(self):
        self.assertEnvelope('', err("invalid_json", "Invalid JSON: empty input"))
        self.assertEnvelope(b'', err("invalid_json", "Invalid JSON: empty input"))

    def test_not_an_object(self):
        cases = {
            '[1,2]': "an array", '"s"': "a string", '5': "a number",
            'true': "a boolean", 'null': "null",
        }
        for req, what in cases.items():
            with self.subTest(request=req):
                self.assertEnvelope(req, err("invalid_json",
                                             "Invalid JSON: the request must be an object, got " + what))

    def test_invalid_utf8(self):
        self.assertEnvelope(b'{"q":"\xff"}', err("invalid_json", "Invalid JSON: invalid UTF-8 at byte 6"))
        self.assertEnvelope(b'{"q":"\xc3"}', err("invalid_json", "Invalid JSON: invalid UTF-8 at byte 6"))
        self.assertEnvelope(b'{"\xed\xa0\x80":1}', err("invalid_json", "Invalid JSON: invalid UTF-8 at byte 2"))

    def test_utf8_bom_refused(self):
        self.assertEnvelope(b'\xef\xbb\xbf{"a":1}', err("invalid_json", "Invalid JSON: unexpected byte 0xef at byte 0"))

    def test_tool_not_a_string(self):
        self.assertEnvelope('{"tool":5}', err("invalid_request", '"tool" must be a non-empty string, got a number'))
        self.assertEnvelope('{"tool":""}', err("invalid_request", '"tool" must be a non-empty string, got an empty string'))
        self.assertEnvelope('{"tool":null}', err("invalid_request", '"tool" must be a non-empty string, got null'))

    def test_wrong_field_types(self):
        self.assertEnvelope('{"tool":"echo","arguments":[]}',
                            err("invalid_request", '"arguments" must be an object, got an array'))
        self.assertEnvelope('{"tool":"echo","id":null}',
                            err("invalid_request", '"id" must be a string or a number, got null'))
        self.assertEnvelope('{"tool":"echo","session":3}',
                            err("invalid_request", '"session" must be a non-empty string, got a number'))

    def test_unknown_top_level_field(self):
        self.assertEnvelope('{"tool":"echo","bogus":1}',
                            err("invalid_request", 'unknown field "bogus" in request (known: %s)' % KNOWN))

    # A key twice in one object is refused as invalid JSON, at any depth
    # (readers disagree on which one wins, so the arguments a tool sees
    # could differ from the ones validated); keys compare unescaped.
    def test_duplicate_tool(self):
        self.assertEnvelope('{"tool":"echo","tool":"echo"}',
                            err("invalid_json", 'Invalid JSON: duplicate key "tool" at byte 15'))
        self.assertEnvelope('{"tool":"echo","arguments":{"k":1},"tool":"x"}',
                            err("invalid_json", 'Invalid JSON: duplicate key "tool" at byte 35'))

    def test_duplicate_arguments(self):
        self.assertEnvelope('{"tool":"echo","arguments":{"a":1},"arguments":{}}',
                            err("invalid_json", 'Invalid JSON: duplicate key "arguments" at byte 35'))

    def test_duplicate_keys_nested(self):
        self.assertEnvelope('{"tool":"kv_set","arguments":{"key":"","key":"a","value":1}}',
                            err("invalid_json", 'Invalid JSON: duplicate key "key" at byte 39'))
        self.assertEnvelope('{"q":{"x":1,"x":2}}', err("invalid_json", 'Invalid JSON: duplicate key "x" at byte 12'))
        self.assertEnvelope('{"a":1,"\\u0061":2}', err("invalid_json", 'Invalid JSON: duplicate key "a" at byte 7'))
        # The same key in different objects is fine.
        self.assertEnvelope('{"a":[{"k":1},{"k":2}],"k":{"k":0}}',
                            '{"status":"success","tool":"echo","result":{"a":[{"k":1},{"k":2}],"k":{"k":0}}}')

    def test_async_field(self):
        # "async": true runs the call in the background (docs/async.md).
        env = self.lib.evaluate('{"tool":"echo","async":true,"id":4,"arguments":{"a":1}}')
        self.assertEqual(sorted(env), ["handle", "id", "status"])
        self.assertEqual((env["status"], env["id"]), ("accepted", 4))
        self.assertIsInstance(env["handle"], int)
        self.assertEnvelope('{"tool":"async_result","arguments":{"handle":%d,"wait_ms":60000}}' % env["handle"],
                            '{"status":"success","tool":"async_result","result":'
                            '{"status":"success","id":4,"tool":"echo","result":{"a":1}}}')
        self.assertEnvelope('{"tool":"echo","async":"yes"}',
                            err("invalid_request", '"async" must be a boolean, got a string'))

    def test_policy_field(self):
        # "policy" is supported since the toolbox: it narrows what the call
        # may use (an empty allow list restricts nothing, as in [policy]).
        self.assertEnvelope('{"tool":"echo","policy":{"allow":[]},"arguments":{"a":1}}',
                            '{"status":"success","tool":"echo","result":{"a":1}}')
        self.assertEnvelope('{"tool":"echo","policy":{"allow":["echo"],"deny":["get_time"]}}',
                            '{"status":"success","tool":"echo","result":{}}')
        self.assertEnvelope('{"tool":"echo","id":7,"policy":{"deny":["echo"]}}',
                            err("denied", 'tool "echo" denied by the policy of the request: '
                                          'its deny list names it', "7"))
        # The allow list is what echo may call, not echo (issue 26 §4).
        self.assertEnvelope('{"tool":"echo","policy":{"allow":["get_time"]}}',
                            '{"status":"success","tool":"echo","result":{}}')
        # In the simple form every field is data for the default evaluator,
        # "policy" included (SPEC §2).
        self.assertEnvelope('{"q":1,"policy":{"deny":["echo"]}}',
                            '{"status":"success","tool":"echo","result":{"q":1,"policy":{"deny":["echo"]}}}')

    def test_policy_field_invalid(self):
        self.assertEnvelope('{"tool":"echo","policy":5}',
                            err("invalid_request", '"policy" must be an object, got a number'))
        self.assertEnvelope('{"tool":"echo","policy":{"bogus":1}}',
                            err("invalid_request", '"policy" must be {"allow": [names], "deny": [names]}: '
                                                   'unknown key "bogus"'))

    def test_very_deep_nesting_open(self):
        req = '{"a":' + "[" * 100000 + "}"
        self.assertEnvelope(req, err("invalid_request",
                                     "request nests deeper than limits.max_depth (512) at byte 516"))

    def test_very_deep_nesting_closed(self):
        req = '{"a":' + "[" * 100000 + "]" * 100000 + "}"
        self.assertEnvelope(req, err("invalid_request",
                                     "request nests deeper than limits.max_depth (512) at byte 516"))

    def test_nesting_at_the_limit(self):
        # The object is depth 1: 511 arrays inside it make 512, accepted.
        inner = "[" * 511 + "]" * 511
        self.assertEnvelope('{"a":%s}' % inner,
                            '{"status":"success","tool":"echo","result":{"a":%s}}' % inner)

    def test_too_large(self):
        req = '{"q":"' + "x" * (16 * 1024 * 1024) + '"}'
        self.assertEnvelope(req, err("invalid_request",
                                     "request is %d bytes, more than limits.max_request_bytes (16777216)" % len(req)))


class TestGetTime(ClaraTestCase):

    TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d$")

    def check(self, env, zone):
        self.assertEqual(env["status"], "success", env)
        self.assertEqual(env["tool"], "get_time")
        result = env["result"]
        self.assertEqual(sorted(result), ["time", "timezone", "unix"])
        self.assertEqual(result["timezone"], zone)
        self.assertRegex(result["time"], self.TIME_RE)
        self.assertIsInstance(result["unix"], int)
        # The ISO time and the Unix seconds name the same instant.
        t = datetime.datetime.strptime(result["time"], "%Y-%m-%dT%H:%M:%S.%f%z")
        self.assertEqual(int(t.timestamp()), result["unix"])
        return result["time"][-6:]

    def test_default_utc(self):
        env = self.lib.evaluate({"tool": "get_time"})
        self.assertEqual(self.check(env, "UTC"), "+00:00")
        self.assertEqual(list(env), ["status", "tool", "result"])

    def test_timezone(self):
        env = self.lib.evaluate({"tool": "get_time", "arguments": {"timezone": "Asia/Kolkata"}})
        self.assertEqual(self.check(env, "Asia/Kolkata"), "+05:30")   # no DST there

    def test_timezone_with_dst(self):
        env = self.lib.evaluate({"tool": "get_time", "arguments": {"timezone": "Europe/Paris"}})
        self.assertIn(self.check(env, "Europe/Paris"), ("+01:00", "+02:00"))

    def test_id_echoed(self):
        env = self.lib.evaluate({"tool": "get_time", "id": 9})
        self.assertEqual(list(env), ["status", "id", "tool", "result"])
        self.assertEqual(env["id"], 9)

    def test_bad_timezone(self):
        self.assertEnvelope('{"tool":"get_time","arguments":{"timezone":"Mars/Olympus"}}',
                            err("invalid_args", 'get_time: unknown timezone "Mars/Olympus" '
                                                '(use an IANA name such as "Europe/Paris")'))
        self.assertEnvelope('{"tool":"get_time","arguments":{"timezone":""}}',
                            err("invalid_args", 'get_time: unknown timezone "" '
                                                '(use an IANA name such as "Europe/Paris")'))

    def test_bad_arguments(self):
        # get_time's arguments are checked against its input_schema: every
        # violation is in details with its JSON pointer.
        self.assertEnvelope('{"tool":"get_time","arguments":{"tz":"UTC"}}',
                            '{"status":"error","error":"invalid_args","message":"tool \\"get_time\\": arguments '
                            'do not match input_schema: at the top: additional properties \'tz\' not allowed",'
                            '"details":[{"pointer":"","message":"additional properties \'tz\' not allowed"}]}')
        self.assertEnvelope('{"tool":"get_time","arguments":{"timezone":1}}',
                            '{"status":"error","error":"invalid_args","message":"tool \\"get_time\\": arguments '
                            'do not match input_schema: at /timezone: got number, want string",'
                            '"details":[{"pointer":"/timezone","message":"got number, want string"}]}')
        self.assertEnvelope('{"tool":"get_time","id":"t","arguments":{"timezone":1,"x":2}}',
                            '{"status":"error","id":"t","error":"invalid_args","message":"tool \\"get_time\\": '
                            'arguments do not match input_schema: at the top: additional properties \'x\' not allowed '
                            '(and 1 more)","details":[{"pointer":"",'
                            '"message":"additional properties \'x\' not allowed"},'
                            '{"pointer":"/timezone","message":"got number, want string"}]}')


if __name__ == "__main__":
    unittest.main()
