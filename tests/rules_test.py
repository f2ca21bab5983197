"""Runs rule test files through libclara's rules_test tool, the way `make
rules-test` does: every file given, or the built-in rules' tests and the
project's rules/*.test.toml. Each case is reported; the exit status is 1 if
any failed.

usage: rules_test.py [TEST_FILE ...]"""
import glob
import os
import sys

# The clara package of this checkout (python/clara); the Makefile points
# CLARA_LIBRARY at lib/libclara.so.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import clara  # noqa: E402


def main(files):
    if not files:
        files = (sorted(glob.glob("core/rules/builtin/*.test.toml")) + sorted(glob.glob("core/rules/builtin/optional/*.test.toml"))
                 + sorted(glob.glob("rules/*.test.toml")))
    env = clara.configure({"state_dir": ""})  # rule tests never write state to disk
    if env["status"] != "success":
        print("rules-test: %s" % env["message"])
        return 2
    failed = cases = 0
    for path in files:
        env = clara.evaluate({"tool": "rules_test", "arguments": {"path": os.path.abspath(path)}})
        if env["status"] != "success":
            print("FAIL %s: %s" % (path, env["message"]))
            failed += 1
            continue
        report = env["result"]
        cases += report["passed"] + report["failed"]
        failed += report["failed"]
        print("%s %s: %d passed, %d failed" % ("ok  " if report["failed"] == 0 else "FAIL", path,
                                              report["passed"], report["failed"]))
        for case in report["cases"]:
            if not case["passed"]:
                print("  case %r:" % case["name"])
                for problem in case["problems"]:
                    print("    " + problem)
    print("rules-test: %d files, %d cases, %s" % (len(files), cases, "all passed" if failed == 0 else
                                                   "%d FAILED" % failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
