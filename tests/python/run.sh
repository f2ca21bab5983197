#!/usr/bin/env bash
# tests/python/run.sh WHEEL - `make test-python`: the Python package as its
# users get it.
#
#   1. mypy --strict over the package's sources;
#   2. a fresh venv (Debian's python3-venv, no network), the wheel installed
#      into it with pip --no-index;
#   3. mypy --strict over python/examples/ against the INSTALLED package
#      (so the wheel's py.typed is what makes them type-check);
#   4. the unittest suite of tests/python run by the venv's interpreter:
#      `import clara` is the installed package with its bundled library
#      (CLARA_LIBRARY unset; CLARA_EXPECT_INSTALLED=1 makes test_package
#      check both).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
wheel=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
python=${SYSTEM_PYTHON:-/usr/bin/python3}
venv=$root/build/venv
cd "$root"

echo "+ mypy --strict python/clara"
mypy --strict --cache-dir build/mypy-cache python/clara

rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --no-index --no-deps --disable-pip-version-check "$wheel"
echo "+ installed $(basename "$wheel") into build/venv"

echo "+ mypy --strict python/examples (against the installed package)"
mypy --strict --cache-dir build/mypy-cache --python-executable "$venv/bin/python" python/examples

echo "+ build/venv/bin/python -m unittest discover -s tests/python"
set +e
env -u CLARA_CONFIG -u CLARA_LOG -u CLARA_LIBRARY -u PYTHONPATH CLARA_EXPECT_INSTALLED=1 \
  "$venv/bin/python" -m unittest discover -s tests/python -t tests/python -v > build/test-python.log 2>&1
rc=$?
set -e
tail -n 60 build/test-python.log
[[ $rc -eq 0 ]] || echo "test-python: FAILED (the whole log: build/test-python.log)"
exit $rc
