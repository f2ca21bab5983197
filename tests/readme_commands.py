#!/usr/bin/env python3
"""Runs the shell commands README.md gives a newcomer, exactly as written.

A ```sh block right after a line `<!-- tested: NAME -->` is run with bash
-e from the root of the checkout, and must exit 0; when the next block is
an ```output block, the block's standard output must end with it. What
each NAME needs around it:

  in the tree             as it is (the `hello` it builds is removed after)
  installed as root       needs root (skipped, saying so, without)
  installed in your home,
  the Python package      with HOME a scratch folder

As root, every block runs in a mount namespace of its own with /usr, /etc,
/root and /opt on overlays: `make install` and its ldconfig, or a pip that
installs outside a venv, write there, and nothing of the machine changes.

The environment is the caller's without LD_LIBRARY_PATH, PKG_CONFIG_PATH and
CLARA_*, so that nothing found works by accident; pip may not reach an
index (the wheel must install offline). GO and the Go caches are passed
on, found before HOME changes.

Usage: readme_commands.py [README.md]   (from the repository root)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = re.compile(r"^<!-- tested: (.+?) -->\s*$")
FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)\s*$")
KNOWN = ("in the tree", "installed as root", "installed in your home", "the Python package")


def tested_blocks(path):
    """Yields (line, name, code, expected output or None)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        i += 1
        if not m:
            continue
        name, start = m.group(1), i
        if i >= len(lines) or FENCE.match(lines[i]) is None or FENCE.match(lines[i]).group(1) != "sh":
            raise SystemExit("%s:%d: <!-- tested: %s --> is not followed by a ```sh block" % (path, i, name))
        code, i = [], i + 1
        while i < len(lines) and lines[i] != "```":
            code.append(lines[i])
            i += 1
        i += 1
        while i < len(lines) and lines[i].strip() == "":
            i += 1
        expected = None
        if i < len(lines) and lines[i] == "```output":
            out, i = [], i + 1
            while i < len(lines) and lines[i] != "```":
                out.append(lines[i])
                i += 1
            expected = "\n".join(out) + "\n"
        yield start, name, "\n".join(code) + "\n", expected


def go_environment():
    """GO and the caches of the Go that builds here, for a changed HOME."""
    env = {}
    go = subprocess.run(["bash", os.path.join(ROOT, "tests", "find-go.sh")], capture_output=True, text=True).stdout.strip()
    if go:
        env["GO"] = go
        for var in ("GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"):
            value = subprocess.run([go, "env", var], capture_output=True, text=True).stdout.strip()
            if value:
                env[var] = value
    return env


def base_environment():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CLARA_") and k not in ("LD_LIBRARY_PATH", "PKG_CONFIG_PATH")}
    env.update(go_environment())
    env["PIP_NO_INDEX"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def can_unshare():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True)
    return p.returncode == 0


# What a block may change is kept in a mount namespace of its own, on
# overlays of these folders (when this runs as root): `make install` and its
# ldconfig, a pip that installs outside the venv, anything written under
# /root. The machine stays as it was.
OVERLAID = ("/usr", "/etc", "/root", "/opt")


def run_block(name, code, scratch, sandbox):
    env = base_environment()
    script = os.path.join(scratch, "block.sh")
    with open(script, "w") as f:
        f.write(code)
    cmd = ["bash", "-e", script]
    if name in ("installed in your home", "the Python package"):
        env["HOME"] = os.path.join(scratch, "home")
        os.makedirs(env["HOME"], exist_ok=True)
    if sandbox:
        mounts = []
        for target in OVERLAID:
            if not os.path.isdir(target):
                continue
            tag = target.strip("/").replace("/", "_")
            upper, work = os.path.join(scratch, tag + "-upper"), os.path.join(scratch, tag + "-work")
            os.makedirs(upper)
            os.makedirs(work)
            mounts.append("mount -t overlay overlay -o lowerdir=%s,upperdir=%s,workdir=%s %s" % (target, upper, work, target))
        inner = " && ".join(mounts + ["exec bash -e " + script])
        cmd = ["unshare", "--mount", "--propagation", "private", "bash", "-c", inner]
    return subprocess.run(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)


def main(path):
    failures = ran = 0
    for line, name, code, expected in tested_blocks(path):
        where = "%s:%d (%s)" % (os.path.relpath(path, ROOT), line, name)
        if name not in KNOWN:
            print("FAIL %s: unknown name; the names are: %s" % (where, ", ".join(KNOWN)))
            failures += 1
            continue
        sandbox = can_unshare()
        if name == "installed as root" and not sandbox:
            print("SKIP %s: needs root and mount namespaces (unshare), to install without changing the machine" % where)
            continue
        scratch = tempfile.mkdtemp(prefix="clara-readme-")
        try:
            p = run_block(name, code, scratch, sandbox)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            if os.path.isfile(os.path.join(ROOT, "hello")):
                os.remove(os.path.join(ROOT, "hello"))
        ran += 1
        if p.returncode != 0:
            print("FAIL %s: exit status %d\n%s%s" % (where, p.returncode, p.stdout, p.stderr))
            failures += 1
        elif expected is not None and not p.stdout.endswith(expected):
            print("FAIL %s: output does not end with\n%s--- got\n%s%s" % (where, expected, p.stdout, p.stderr))
            failures += 1
        else:
            print("ok   %s" % where)
    if failures:
        print("readme commands: %d of %d FAILED" % (failures, ran))
        return 1
    print("readme commands: all %d ran" % ran)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "README.md")))
