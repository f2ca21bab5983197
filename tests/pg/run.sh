#!/usr/bin/env bash
# make test-pg: a throwaway PostgreSQL (tests/pg.sh) under build/pg-test,
# then tests/pg/test_shared.py: several Clara host processes (Python, the
# built lib/libclara.so) sharing it. The server is stopped however the
# tests end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir="$root/build/pg-test"
rm -rf "$dir"
stop() { bash "$root/tests/pg.sh" stop "$dir" || true; rm -rf "$dir"; }
trap stop EXIT
url=$(bash "$root/tests/pg.sh" start "$dir")
PG_DIR="$dir" PG_URL="$url" CLARA_LIBRARY="$root/lib/libclara.so" LLMSERVER="$root/build/llmserver" \
  env -u CLARA_CONFIG -u CLARA_LOG -u CLARA_TEST_MODE "${PYTHON:-python3}" "$here/test_shared.py" -v
