"""clara_json_get: every CLARA_JSON_* kind and the errors."""

import unittest

import clara
from clara_testcase import ClaraTestCase

DOC = ('{"n":null,"f":false,"t":true,"i":-42,"max":9223372036854775807,'
       '"over":9223372036854775808,"fl":1.5,"e":1e3,"s":"a\\u0000b\\u00e9\\n",'
       '"es":"","arr":[1,"x",{"y":null}],"obj":{"k":[1,2]},"sp" : [ 1 , 2 ],'
       '"uni":"日本","a.b":7}')


class TestJsonGet(ClaraTestCase):

    def test_every_kind_raw(self):
        cases = {
            "missing": (clara.CLARA_JSON_MISSING, None),
            "n": (clara.CLARA_JSON_NULL, b"null"),
            "f": (clara.CLARA_JSON_FALSE, b"false"),
            "t": (clara.CLARA_JSON_TRUE, b"true"),
            "i": (clara.CLARA_JSON_INTEGER, b"-42"),
            "max": (clara.CLARA_JSON_INTEGER, b"9223372036854775807"),
            "over": (clara.CLARA_JSON_FLOAT, b"9223372036854775808"),
            "fl": (clara.CLARA_JSON_FLOAT, b"1.5"),
            "e": (clara.CLARA_JSON_FLOAT, b"1e3"),
            "s": (clara.CLARA_JSON_STRING, b"a\x00b\xc3\xa9\n"),
            "es": (clara.CLARA_JSON_STRING, b""),
            "arr": (clara.CLARA_JSON_ARRAY, b'[1,"x",{"y":null}]'),
            "obj": (clara.CLARA_JSON_OBJECT, b'{"k":[1,2]}'),
            "sp": (clara.CLARA_JSON_ARRAY, b"[1,2]"),
        }
        for path, want in cases.items():
            with self.subTest(path=path):
                self.assertEqual(self.lib.json_get_raw(DOC, path), want)

    def test_every_kind_python(self):
        cases = {
            "n": None, "f": False, "t": True, "i": -42,
            "max": 9223372036854775807, "over": 9.223372036854776e18,
            "fl": 1.5, "e": 1000.0, "s": "a\x00bé\n", "es": "",
            "arr": [1, "x", {"y": None}], "obj": {"k": [1, 2]}, "sp": [1, 2],
            "uni": "日本",
        }
        for path, want in cases.items():
            with self.subTest(path=path):
                got = self.lib.json_get(DOC, path)
                self.assertEqual(got, want)
                self.assertIs(type(got), type(want))

    def test_missing(self):
        self.assertIs(self.lib.json_get(DOC, "missing"), clara.MISSING)
        self.assertIs(self.lib.json_get(DOC, "arr.5"), clara.MISSING)
        self.assertIs(self.lib.json_get(DOC, ""), clara.MISSING)
        self.assertIsNone(self.lib.json_get(DOC, "missing", None))
        self.assertEqual(self.lib.json_get(DOC, "missing", default=7), 7)
        # null and missing are told apart.
        self.assertIsNone(self.lib.json_get(DOC, "n"))

    def test_gjson_paths(self):
        self.assertEqual(self.lib.json_get(DOC, "arr.#"), 3)
        self.assertEqual(self.lib.json_get(DOC, "arr.1"), "x")
        self.assertIsNone(self.lib.json_get(DOC, "arr.2.y"))
        self.assertEqual(self.lib.json_get(DOC, "obj.k.1"), 2)
        self.assertEqual(self.lib.json_get(DOC, r"a\.b"), 7)

    def test_envelope(self):
        env = self.lib.evaluate_raw('{"tool":"nonexistent"}')
        self.assertEqual(self.lib.json_get(env, "status"), "error")
        self.assertEqual(self.lib.json_get(env, "error"), "unknown_tool")
        env = self.lib.configure({"bogus": 1, "other": 2})
        self.assertEqual(self.lib.json_get(env, "details.#"), 2)
        self.assertEqual(self.lib.json_get(env, "details.0.message"), 'unknown key "bogus"')
        self.assertEqual(self.lib.json_get(env, "details.0.line"), 1)

    def test_doc_as_bytes_and_dict(self):
        self.assertEqual(self.lib.json_get(b'{"a":{"b":"c"}}', "a.b"), "c")
        self.assertEqual(self.lib.json_get({"a": {"b": "é"}}, "a.b"), "é")
        self.assertEqual(self.lib.json_get([10, 20], "1"), 20)

    def test_scalar_documents(self):
        # A path names a member or an element, so a scalar document has
        # nothing to read but is valid; an array has its length.
        self.assertEqual(self.lib.json_get_raw('"str"', "a"), (clara.CLARA_JSON_MISSING, None))
        self.assertEqual(self.lib.json_get_raw("5", "0"), (clara.CLARA_JSON_MISSING, None))
        self.assertEqual(self.lib.json_get_raw("[1,2]", "#"), (clara.CLARA_JSON_INTEGER, b"2"))

    def test_modifiers_refused(self):
        # gjson's @modifiers can transform a document without bound (a deep
        # document with @pretty overflowed the stack): -CLARA_EINVAL.
        for path in ("@this", "@pretty", "@reverse", "a|@ugly", "arr.@flatten"):
            with self.subTest(path=path):
                with self.assertRaises(ValueError) as cm:
                    self.lib.json_get_raw(DOC, path)
                self.assertEqual(str(cm.exception), "clara_json_get(path=%r): invalid argument" % path)
        # A key containing '@' is still reachable, escaped.
        self.assertEqual(self.lib.json_get('{"user@host":1,"@":2}', "user\\@host"), 1)
        self.assertEqual(self.lib.json_get('{"user@host":1,"@":2}', "\\@"), 2)

    def test_invalid_json_is_einval(self):
        for doc in ("{bad", "", "[1", '{"a":1}x', b'{"a":"\xff"}'):
            with self.subTest(doc=doc):
                with self.assertRaises(ValueError) as cm:
                    self.lib.json_get(doc, "a")
                self.assertIn("invalid argument", str(cm.exception))

    def test_reads_deeper_than_request_limit(self):
        # Reading does not depend on limits.max_depth (which bounds requests).
        self.lib.configure({"limits": {"max_depth": 4}})
        doc = '{"a":' + "[" * 600 + "7" + "]" * 600 + "}"
        self.assertEqual(self.lib.json_get(doc, "a" + ".0" * 600), 7)
        self.assertEqual(self.lib.json_get(doc, "a" + ".0" * 598), [[7]])

    def test_reads_envelope_of_deepest_request(self):
        # An envelope is one level deeper than the request it answers: Clara
        # must read its own answer to a request at the depth limit.
        inner = "[" * 511 + "]" * 511
        env = self.lib.evaluate_raw('{"a":%s}' % inner)
        self.assertTrue(env.startswith('{"status":"success"'))
        self.assertEqual(self.lib.json_get(env, "status"), "success")

    def test_null_arguments(self):
        with self.assertRaises(TypeError):
            self.lib.json_get(None, "a")
        with self.assertRaises(TypeError):
            self.lib.json_get('{"a":1}', None)

    def test_c_level_einval(self):
        # The C function itself, with NULL arguments: -CLARA_EINVAL and
        # *text set to NULL.
        import ctypes
        f = self.lib._lib.clara_json_get
        text = ctypes.c_void_p(1)
        length = ctypes.c_size_t(5)
        self.assertEqual(f(None, b"a", ctypes.byref(text), ctypes.byref(length)), -clara.CLARA_EINVAL)
        self.assertIsNone(text.value)
        self.assertEqual(f(b'{"a":1}', None, ctypes.byref(text), None), -clara.CLARA_EINVAL)
        self.assertEqual(f(b'{"a":1}', b"a", None, None), -clara.CLARA_EINVAL)
        # length may be NULL on success.
        self.assertEqual(f(b'{"a":"xy"}', b"a", ctypes.byref(text), None), clara.CLARA_JSON_STRING)
        self.assertEqual(ctypes.string_at(text.value), b"xy")
        self.lib._lib.clara_free_string(text.value)
        # MISSING sets *text to NULL.
        text = ctypes.c_void_p(1)
        self.assertEqual(f(b'{"a":1}', b"b", ctypes.byref(text), ctypes.byref(length)), clara.CLARA_JSON_MISSING)
        self.assertIsNone(text.value)
        self.lib._lib.clara_free_string(None)   # NULL is allowed


if __name__ == "__main__":
    unittest.main()
