#!/usr/bin/env python3
"""Runs the code blocks of Markdown files, so the docs cannot drift from the build.

Each fenced block whose info string is `c`, `python` or `clips` is run:
  c       compiled with -Wall -Wextra -Werror against include/ and lib/, then run
          (a block that includes "clips.h" is also built with the CLIPS bridge
          and Debian's CLIPS 6.30);
  python  run with the clara package of python/ on PYTHONPATH and
          CLARA_LIBRARY=lib/libclara.so;
  clips   written to a file and run with `bin/clara-clips -f2`.
A block must exit 0. When it is followed directly by a block whose info
string is `output`, its standard output must equal that block exactly.
Blocks meant only to be read use another info string (`text`, `sh`, `toml`).

Usage: run_doc_blocks.py FILE.md...   (from the repository root)
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)\s*$")


def blocks(path):
    """Yields (line, lang, code) of each fenced block in the file."""
    lang, start, code = None, 0, []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line.rstrip("\n"))
            if m and lang is None:
                lang, start, code = m.group(1), n, []
            elif line.rstrip("\n") == "```" and lang is not None:
                yield start, lang, "".join(code)
                lang = None
            elif lang is not None:
                code.append(line)


def run(lang, code, tmp):
    env = dict(os.environ)
    env.pop("CLARA_CONFIG", None)
    env.pop("CLARA_LOG", None)
    if lang == "c":
        src, exe = os.path.join(tmp, "block.c"), os.path.join(tmp, "block")
        with open(src, "w") as f:
            f.write(code)
        cc = ["cc", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "include"), src]
        libs = ["-L" + os.path.join(ROOT, "lib"), "-lclara", "-Wl,-rpath," + os.path.join(ROOT, "lib")]
        if '"clips.h"' in code:
            cc += ["-isystem", "/usr/include/clips", "-I" + os.path.join(ROOT, "clips_bridge"),
                   os.path.join(ROOT, "clips_bridge", "clara_clips.c")]
            libs += ["-l:libclips.so.6", "-lm"]
        subprocess.run(cc + ["-o", exe] + libs, check=True, capture_output=True, text=True)
        cmd = [exe]
    elif lang == "python":
        env["PYTHONPATH"] = os.path.join(ROOT, "python")
        env["CLARA_LIBRARY"] = os.path.join(ROOT, "lib", "libclara.so")
        cmd = [sys.executable, "-c", code]
    elif lang == "clips":
        clp = os.path.join(tmp, "block.clp")
        with open(clp, "w") as f:
            f.write(code + "\n(exit)\n")
        cmd = [os.path.join(ROOT, "bin", "clara-clips"), "-f2", clp]
    else:
        return None
    p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError("exit status %d\n%s%s" % (p.returncode, p.stdout, p.stderr))
    return p.stdout


def main(paths):
    failures = ran = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            items = list(blocks(path))
            for i, (line, lang, code) in enumerate(items):
                if lang not in ("c", "python", "clips"):
                    continue
                where = "%s:%d (%s)" % (os.path.relpath(path, ROOT), line, lang)
                ran += 1
                try:
                    out = run(lang, code, tmp)
                except (RuntimeError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
                    detail = getattr(e, "stderr", "") or str(e)
                    print("FAIL %s: %s" % (where, detail))
                    failures += 1
                    continue
                nxt = items[i + 1] if i + 1 < len(items) else None
                if nxt and nxt[1] == "output" and out != nxt[2]:
                    print("FAIL %s: output differs\n--- want\n%s--- got\n%s" % (where, nxt[2], out))
                    failures += 1
                    continue
                print("ok   %s" % where)
    if failures:
        print("doc blocks: %d of %d FAILED" % (failures, ran))
        return 1
    print("doc blocks: all %d ran" % ran)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
