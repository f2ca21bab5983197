"""The binding itself: loading, prototypes against clara.h, constants,
version, strerror, input checks, module-level functions."""

import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest
import warnings

import clara
from clara_testcase import HEADER, INSTALLED, LIB, PACKAGE, ClaraTestCase, header_version

BUNDLED = os.path.join(PACKAGE, "libclara.so.0")
HEADER_VERSION = header_version() if os.path.exists(HEADER) else None


def header_text():
    with open(HEADER, encoding="utf-8") as f:
        return f.read()


def header_functions():
    """{name: return type} of every function declared in clara.h."""
    text = re.sub(r"/\*.*?\*/", "", header_text(), flags=re.S)
    out = {}
    for m in re.finditer(r"^\s*((?:const\s+)?[a-z0-9_ ]+?\s*\*?)\s*(clara_\w+)\s*\(", text, re.M):
        ret, name = m.group(1).strip(), m.group(2)
        if ret.startswith("typedef"):
            continue
        out[name] = ret.replace(" ", "")
    return out


def library_version(path):
    """clara_version() of the library at path, in a fresh interpreter."""
    code = "import ctypes, sys; f = ctypes.CDLL(sys.argv[1]).clara_version; " \
           "f.restype = ctypes.c_char_p; print(f().decode())"
    return subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


class TestLoading(unittest.TestCase):

    def test_bundled_library_is_used(self):
        if not INSTALLED:
            self.skipTest("not the installed package (CLARA_EXPECT_INSTALLED is not 1)")
        self.assertTrue(os.path.isfile(BUNDLED), BUNDLED)
        self.assertEqual(LIB.path, BUNDLED)
        self.assertEqual(clara.Clara().path, BUNDLED)

    def test_explicit_bad_path(self):
        with self.assertRaises(OSError) as cm:
            clara.Clara("/nonexistent/libclara.so")
        self.assertIn("/nonexistent/libclara.so", str(cm.exception))
        self.assertIn("no such file", str(cm.exception))

    def test_explicit_path_not_a_library(self):
        with self.assertRaises(OSError) as cm:
            clara.Clara(clara.__file__)
        self.assertIn(clara.__file__, str(cm.exception))

    def run_copy(self, layout, env_extra, code="import clara; c = clara.Clara(); print(c.path); print(c.version())"):
        """Copy the clara package (without a bundled library) into
        tmp/site/clara, apply layout {relpath: symlink target}, run code in
        a fresh interpreter that imports that copy; return (returncode,
        stdout, stderr, tmp)."""
        tmp = tempfile.mkdtemp(prefix="clara-load-")
        self.addCleanup(shutil.rmtree, tmp, True)
        site = os.path.join(tmp, "site")
        shutil.copytree(PACKAGE, os.path.join(site, "clara"),
                        ignore=shutil.ignore_patterns("libclara.so*", "__pycache__"))
        for rel, target in layout.items():
            p = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            os.symlink(target, p)
        env = {k: v for k, v in os.environ.items()
               if k not in ("CLARA_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
        env.update(env_extra)
        p = subprocess.run([sys.executable, "-c", code], cwd=site, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
        return p.returncode, p.stdout, p.stderr, tmp

    def test_bundled_comes_first(self):
        version = library_version(LIB.path)
        for env in ({}, {"CLARA_LIBRARY": "/nonexistent/libclara.so"}, {"CLARA_LIBRARY": LIB.path}):
            with self.subTest(env=env):
                rc, out, err, tmp = self.run_copy({"site/clara/libclara.so.0": LIB.path}, env)
                self.assertEqual(rc, 0, err)
                self.assertEqual(out.split(), [os.path.join(tmp, "site", "clara", "libclara.so.0"), version])

    def test_clara_library_without_bundled(self):
        rc, out, err, tmp = self.run_copy({"other/libclara.so": LIB.path},
                                          {"CLARA_LIBRARY": os.path.join("..", "other", "libclara.so")})
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.split(), [os.path.join(tmp, "other", "libclara.so"), library_version(LIB.path)])

    def test_search_soname_through_loader(self):
        libdir = os.path.dirname(os.path.realpath(LIB.path))
        if not os.path.exists(os.path.join(libdir, "libclara.so.0")):
            self.skipTest("no libclara.so.0 beside %s" % LIB.path)
        rc, out, err, _ = self.run_copy({}, {"LD_LIBRARY_PATH": libdir})
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.split(), ["libclara.so.0", library_version(LIB.path)])

    def test_search_nothing_found(self):
        # (The check for a system-wide libclara.so.0 must run in the child:
        # in this process the soname is already loaded, so dlopen finds it.)
        code = textwrap.dedent("""\
            import clara
            try:
                clara.Clara()
            except OSError as e:
                print(e)
            else:
                print("LOADED")
            """)
        rc, out, err, tmp = self.run_copy({}, {"CLARA_LIBRARY": "/nonexistent/x.so"}, code)
        self.assertEqual(rc, 0, err)
        if out.startswith("LOADED"):
            self.skipTest("libclara.so.0 is installed system-wide")
        self.assertTrue(out.startswith("cannot load libclara; tried:"), out)
        lines = out.splitlines()[1:]
        self.assertEqual([line.strip() for line in lines[:2]], [
            os.path.join(tmp, "site", "clara", "libclara.so.0") + " (bundled): no such file",
            "/nonexistent/x.so (CLARA_LIBRARY): no such file"])
        self.assertTrue(lines[2].strip().startswith("libclara.so.0 (dynamic loader): "), lines)
        self.assertEqual(len(lines), 3, lines)

    def test_import_does_not_load(self):
        # Importing the package loads nothing: a missing library is an
        # OSError at the first call, not at import.
        code = textwrap.dedent("""\
            import clara
            print(clara.__version__)
            try:
                clara.version()
            except OSError:
                print("OSError")
            else:
                print("LOADED")
            """)
        rc, out, err, _ = self.run_copy({}, {"CLARA_LIBRARY": "/nonexistent/x.so"}, code)
        self.assertEqual(rc, 0, err)
        if out.split()[1:] == ["LOADED"]:
            self.skipTest("libclara.so.0 is installed system-wide")
        self.assertEqual(out.split(), [clara.__version__, "OSError"])

    def test_spawned_child_can_use_clara(self):
        # The documented way to use Clara from multiprocessing: "spawn".
        import multiprocessing
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(1) as pool:
            out = pool.apply(_child_evaluate, ('{"question":"from child"}',))
            # An exception raised in the child arrives whole.
            with self.assertRaises(clara.UnknownTool) as cm:
                pool.apply(_child_call, ("nope",))
        self.assertEqual(out, '{"status":"success","tool":"echo","result":{"question":"from child"}}')
        self.assertEqual((cm.exception.code, cm.exception.message, cm.exception.envelope),
                         ("unknown_tool", "Tool not found: nope",
                          {"status": "error", "error": "unknown_tool", "message": "Tool not found: nope"}))

    @unittest.skipUnless(hasattr(os, "fork"), "no fork()")
    def test_forked_child_is_refused(self):
        # The child of fork() must not enter the Go runtime its parent loaded:
        # every call raises RuntimeError there, and its exit calls nothing.
        read, write = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12+ warns that this process has threads (Clara's): the
            # very case under test.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:   # pragma: no cover - the child
            signal.alarm(30)   # a call that did enter Go may hang: die instead
            os.close(read)
            report = []
            for what in (lambda: clara.evaluate({}), lambda: clara.call("echo"), lambda: LIB.version(),
                         lambda: clara.Clara()):
                try:
                    what()
                    report.append("called")
                except RuntimeError as e:
                    report.append("refused" if "fork()" in str(e) and "spawn" in str(e) else repr(e))
                except BaseException as e:
                    report.append(repr(e))
            os.write(write, ",".join(report).encode())
            os.close(write)
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as f:
            got = f.read()
        _, status = os.waitpid(pid, 0)
        self.assertEqual(status, 0)
        self.assertEqual(got, "refused,refused,refused,refused")
        # The parent is untouched.
        self.assertEqual(clara.call("echo", x=1), {"x": 1})


def _child_evaluate(request):
    import clara as c
    return c.evaluate_raw(request)


def _child_call(tool):
    import clara as c
    return c.call(tool)


@unittest.skipUnless(os.path.exists(HEADER), "include/clara.h not found")
class TestPrototypes(unittest.TestCase):
    """Every function of clara.h is declared, and no char * leaks."""

    def test_header_parsed(self):
        funcs = header_functions()
        self.assertIn("clara_evaluate", funcs)
        self.assertIn("clara_free_string", funcs)
        self.assertIn("clara_register_tool", funcs)
        self.assertIn("clara_call_error", funcs)
        self.assertGreaterEqual(len(funcs), 13)

    def test_every_function_declared(self):
        lib = LIB._lib
        for name, ret in header_functions().items():
            with self.subTest(function=name):
                f = getattr(lib, name)
                self.assertIsNotNone(f.argtypes, "%s has no argtypes" % name)
                if ret == "char*":
                    # Caller-owned: must stay a pointer so it can be freed.
                    self.assertIs(f.restype, ctypes.c_void_p)
                elif ret == "constchar*":
                    self.assertIs(f.restype, ctypes.c_char_p)
                elif ret == "int":
                    self.assertIs(f.restype, ctypes.c_int)
                elif ret == "int64_t":
                    self.assertIs(f.restype, ctypes.c_int64)
                elif ret == "void":
                    self.assertIsNone(f.restype)
                else:
                    self.fail("unexpected return type %r of %s" % (ret, name))

    def test_argument_counts(self):
        text = re.sub(r"/\*.*?\*/", "", header_text(), flags=re.S)
        for name in header_functions():
            m = re.search(r"\b%s\s*\(([^)]*)\)" % name, text)
            params = [p for p in m.group(1).split(",") if p.strip() not in ("", "void")]
            with self.subTest(function=name):
                self.assertEqual(len(getattr(LIB._lib, name).argtypes), len(params))

    def test_constants_match_header(self):
        defines = dict(re.findall(r"^#define[ \t]+(CLARA_\w+)[ \t]+(\S+)", header_text(), re.M))
        self.assertIn("CLARA_JSON_OBJECT", defines)
        for name, value in defines.items():
            if name.startswith("CLARA_VERSION"):
                continue    # test_version_constants_match_header
            with self.subTest(constant=name):
                expected = value.strip('"') if value.startswith('"') else int(value)
                self.assertEqual(getattr(clara, name), expected)


    def test_version_constants_match_header(self):
        # The package's version (clara/_version.py) is the C side's too.
        if HEADER_VERSION != clara.__version__:
            self.skipTest("include/clara.h says %s, the package %s: the C side's bump to %s makes them agree"
                          % (HEADER_VERSION, clara.__version__, clara.__version__))
        defines = dict(re.findall(r"^#define[ \t]+(CLARA_VERSION\w*)[ \t]+(\S+)", header_text(), re.M))
        self.assertEqual(len(defines), 5, defines)
        for name, value in defines.items():
            with self.subTest(constant=name):
                expected = value.strip('"') if value.startswith('"') else int(value)
                self.assertEqual(getattr(clara, name), expected)


class TestVersion(ClaraTestCase):

    def test_package_version(self):
        # One version, written once (clara/_version.py), read everywhere.
        self.assertRegex(clara.__version__, r"^\d+\.\d+\.\d+$")
        self.assertEqual(clara.CLARA_VERSION, clara.__version__)
        self.assertEqual((clara.CLARA_VERSION_MAJOR, clara.CLARA_VERSION_MINOR, clara.CLARA_VERSION_PATCH),
                         tuple(int(p) for p in clara.__version__.split(".")))
        self.assertEqual(clara.CLARA_VERSION_NUMBER, clara.CLARA_VERSION_MAJOR * 1000000
                         + clara.CLARA_VERSION_MINOR * 1000 + clara.CLARA_VERSION_PATCH)
        if INSTALLED:
            from importlib import metadata
            self.assertEqual(metadata.version("clara"), clara.__version__)

    @unittest.skipUnless(HEADER_VERSION, "include/clara.h not found")
    def test_version(self):
        # The library built from this tree says what its header says.
        self.assertEqual(self.lib.version(), HEADER_VERSION)
        self.assertEqual(clara.version(), HEADER_VERSION)

    def test_version_number(self):
        n = self.lib.version_number()
        self.assertEqual("%d.%d.%d" % (n // 1000000, n // 1000 % 1000, n % 1000), self.lib.version())

    def test_strerror_known(self):
        self.assertEqual(self.lib.strerror(clara.CLARA_OK), "success")
        self.assertEqual(self.lib.strerror(clara.CLARA_EINVAL), "invalid argument")
        self.assertEqual(self.lib.strerror(clara.CLARA_ENOMEM), "out of memory")
        self.assertEqual(self.lib.strerror(clara.CLARA_EINTERNAL), "internal error (see the log)")
        self.assertEqual(self.lib.strerror(clara.CLARA_ENOENT), "no such tool or asynchronous call")
        self.assertEqual(self.lib.strerror(clara.CLARA_EPERM), "not allowed on a built-in tool")
        self.assertEqual(self.lib.strerror(clara.CLARA_EBUSY), "too many asynchronous calls running")

    def test_strerror_negative(self):
        for code in (clara.CLARA_EINVAL, clara.CLARA_ENOMEM, clara.CLARA_EINTERNAL,
                     clara.CLARA_ENOENT, clara.CLARA_EPERM, clara.CLARA_EBUSY):
            self.assertEqual(self.lib.strerror(-code), self.lib.strerror(code))

    def test_strerror_unknown(self):
        for code in (7, -7, 99, -99, 2**31 - 1, -2**31):
            with self.subTest(code=code):
                self.assertEqual(self.lib.strerror(code), "unknown status code")


class TestInputs(ClaraTestCase):

    def test_str_and_bytes_and_dict(self):
        expected = '{"status":"success","tool":"echo","result":{"q":"é"}}'
        self.assertEqual(self.lib.evaluate_raw('{"q":"é"}'), expected)
        self.assertEqual(self.lib.evaluate_raw('{"q":"é"}'.encode()), expected)
        self.assertEqual(self.lib.evaluate_raw(bytearray('{"q":"é"}'.encode())), expected)
        self.assertEqual(self.lib.evaluate({"q": "é"}),
                         {"status": "success", "tool": "echo", "result": {"q": "é"}})

    def test_null_pointer(self):
        self.assertEnvelope(None, '{"status":"error","error":"invalid_json","message":"Invalid JSON: NULL input"}')

    def test_embedded_nul_refused(self):
        with self.assertRaises(ValueError):
            self.lib.evaluate_raw('{"q":"a\0b"}')
        with self.assertRaises(ValueError):
            self.lib.evaluate(b'{"q":"a\0b"}')
        with self.assertRaises(ValueError):
            self.lib.configure("default_evaluator = \"echo\"\0")
        with self.assertRaises(ValueError):
            self.lib.json_get('{"a":1}', "a\0b")

    def test_wrong_types(self):
        with self.assertRaises(TypeError):
            self.lib.evaluate_raw(42)
        with self.assertRaises(TypeError):
            self.lib.evaluate(3.5)
        with self.assertRaises(TypeError):
            self.lib.set_log_handler("not callable", clara.CLARA_LOG_DEBUG)

    def test_module_level_functions(self):
        self.assertEqual(clara.version(), self.lib.version())
        self.assertEqual(clara.version_number(), self.lib.version_number())
        self.assertEqual(clara.strerror(-1), "invalid argument")
        self.assertEqual(clara.evaluate({"question": "hi"}),
                         {"status": "success", "tool": "echo", "result": {"question": "hi"}})
        self.assertEqual(clara.evaluate_raw('{"a":1}'), '{"status":"success","tool":"echo","result":{"a":1}}')
        self.assertEqual(clara.configure({})["status"], "success")
        self.assertEqual(clara.reset()["status"], "success")
        self.assertEqual(clara.json_get('{"a":[1,2]}', "a.#"), 2)
        self.assertIs(clara.json_get('{"a":1}', "b"), clara.MISSING)
        self.assertEqual(clara.json_get_raw('{"a":1}', "a"), (clara.CLARA_JSON_INTEGER, b"1"))
        clara.set_log_handler(None, clara.CLARA_LOG_OFF)

    def test_missing_sentinel(self):
        self.assertIs(clara.MISSING, type(clara.MISSING)())
        self.assertFalse(clara.MISSING)
        self.assertIsNot(clara.MISSING, None)
        self.assertEqual(repr(clara.MISSING), "clara.MISSING")


if __name__ == "__main__":
    unittest.main()
