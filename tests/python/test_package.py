"""The package as users install it: what the wheel put where, the README's
example and python/examples/ run outside the tree, and `pip install
./python` from a checkout building the library with Go."""

import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import unittest

import clara
from clara_testcase import INSTALLED, LIB, PACKAGE, REPO

EXAMPLES = os.path.join(REPO, "python", "examples")
EXPECTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "examples")


def readme_python_blocks():
    """[(code, expected output)] of the README's python blocks."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"^```python\n(.*?)^```\n+```output\n(.*?)^```", text, re.S | re.M)


def clean_env(**extra):
    """No CLARA_LIBRARY, no PYTHONPATH: what a user's shell has."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CLARA_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH", "CLARA_CONFIG", "CLARA_LOG")}
    env.update(extra)
    return env


@unittest.skipUnless(INSTALLED, "not the installed package (CLARA_EXPECT_INSTALLED is not 1)")
class TestInstalled(unittest.TestCase):

    def test_imported_from_the_venv_not_the_tree(self):
        site = sysconfig.get_paths()["platlib"]
        self.assertEqual(os.path.dirname(PACKAGE), os.path.realpath(site))
        self.assertNotEqual(os.path.dirname(PACKAGE), os.path.join(REPO, "python"))
        self.assertNotEqual(sys.prefix, sys.base_prefix)          # a venv

    def test_files(self):
        for name in ("__init__.py", "py.typed", "libclara.so.0", "_version.py"):
            self.assertTrue(os.path.isfile(os.path.join(PACKAGE, name)), name)
        self.assertEqual(LIB.path, os.path.join(PACKAGE, "libclara.so.0"))
        (dist_info,) = glob.glob(os.path.join(os.path.dirname(PACKAGE), "clara-*.dist-info"))
        self.assertEqual(os.path.basename(dist_info), "clara-%s.dist-info" % clara.__version__)
        with open(os.path.join(dist_info, "WHEEL")) as f:
            wheel = f.read()
        # manylinux_2_34, which installers of other distributions take
        # (make wheel checks the library's glibc symbol versions first).
        self.assertIn("Tag: py3-none-manylinux_2_34_%s\n" % os.uname().machine, wheel)
        self.assertIn("Root-Is-Purelib: false\n", wheel)
        with open(os.path.join(dist_info, "RECORD")) as f:
            record = f.read()
        self.assertIn("clara/libclara.so.0,", record)
        self.assertIn("clara/py.typed,", record)
        # Standard library only: nothing required.
        with open(os.path.join(dist_info, "METADATA")) as f:
            self.assertNotIn("Requires-Dist", f.read())

    def test_readme_example_outside_the_tree(self):
        # A new user: the wheel installed, no checkout, no CLARA_LIBRARY.
        blocks = readme_python_blocks()
        self.assertTrue(blocks)
        with tempfile.TemporaryDirectory() as tmp:
            for code, expected in blocks:
                p = subprocess.run([sys.executable, "-c", code], cwd=tmp, env=clean_env(),
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual((p.returncode, p.stderr), (0, ""))
                self.assertEqual(p.stdout, expected)


class TestExamples(unittest.TestCase):
    """python/examples/*.py run (against the installed package when
    installed) and print what tests/python/examples/*.out holds."""

    def test_examples(self):
        names = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(EXAMPLES, "*.py")))
        self.assertEqual(names, sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(EXPECTED, "*.out"))))
        for name in names:
            with self.subTest(example=name), tempfile.TemporaryDirectory() as tmp:
                env = clean_env() if INSTALLED else clean_env(PYTHONPATH=os.path.dirname(PACKAGE),
                                                              CLARA_LIBRARY=LIB.path)
                p = subprocess.run([sys.executable, os.path.join(EXAMPLES, name + ".py")], cwd=tmp, env=env,
                                   capture_output=True, text=True, timeout=60)
                with open(os.path.join(EXPECTED, name + ".out"), encoding="utf-8") as f:
                    self.assertEqual((p.returncode, p.stdout + p.stderr), (0, f.read()))


def find_go():
    """A Go new enough for Clara, or None (find-go.sh prints "go" then)."""
    p = subprocess.run(["bash", os.path.join(REPO, "tests", "find-go.sh")], capture_output=True, text=True)
    go = p.stdout.strip()
    return go if go and go != "go" else None


@unittest.skipUnless(INSTALLED, "run by make test-python")
class TestInstallFromCheckout(unittest.TestCase):
    """`pip install ./python` in a checkout with no wheel: setup.py builds
    the library with Go (make lib) and bundles it. The checkout is a copy,
    so the tree under test is not written to."""

    def test_pip_install_from_checkout(self):
        if not find_go() or not shutil.which("make") or not os.path.exists("/usr/bin/python3"):
            self.skipTest("needs Go, make and Debian's /usr/bin/python3")
        tmp = tempfile.mkdtemp(prefix="clara-checkout-")
        self.addCleanup(shutil.rmtree, tmp, True)
        checkout = os.path.join(tmp, "clara")
        shutil.copytree(REPO, checkout, symlinks=True, ignore=shutil.ignore_patterns(
            ".git", "build", "lib", "bin", "__pycache__", ".clara", "*.egg-info"))
        # setuptools and wheel come from Debian (no network): a venv that
        # sees the system's packages, and no build isolation.
        venv = os.path.join(tmp, "venv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], check=True,
                       timeout=300)
        py = os.path.join(venv, "bin", "python")
        env = clean_env()
        for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "CLARA_WHEEL_LIBRARY"):
            env.pop(k, None)
        p = subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation",
                            "--disable-pip-version-check", os.path.join(checkout, "python")],
                           env=env, capture_output=True, text=True, timeout=1800)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # make lib ran in the checkout, and the library went into the package.
        self.assertTrue(os.path.exists(os.path.join(checkout, "lib", "libclara.so")))
        code = "import clara; print(clara.Clara().path); print(clara.call('echo', via='checkout'))"
        p = subprocess.run([py, "-c", code], cwd=tmp, env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        path, result = p.stdout.splitlines()
        self.assertTrue(path.startswith(venv) and path.endswith(os.path.join("clara", "libclara.so.0")), path)
        self.assertEqual(result, "{'via': 'checkout'}")


if __name__ == "__main__":
    unittest.main()


class ImportGraph(unittest.TestCase):
    """_tools is built on _binding: nothing _tools imports, directly or
    through another module, at the top or inside a function, imports
    _tools back (issue 33: _binding imported it inside Clara.tool)."""

    def test_tools_in_no_cycle(self):
        import ast
        src = os.path.join(REPO, "python", "clara")
        graph = {}
        for path in glob.glob(os.path.join(src, "*.py")):
            name = os.path.splitext(os.path.basename(path))[0]
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            deps = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 1:
                    if node.module:
                        deps.add(node.module)
                    else:
                        deps.update(a.name for a in node.names)
            graph[name] = deps
        seen, todo = set(), list(graph["_tools"])
        while todo:
            m = todo.pop()
            if m in seen or m not in graph:
                continue
            seen.add(m)
            self.assertNotIn("_tools", graph[m], f"{m} imports _tools, which imports it")
            todo.extend(graph[m])
