#!/usr/bin/env bash
# Runs the C harness under valgrind memcheck with the Go runtime's own
# noise suppressed (go-runtime.supp says what and why). Fails on any
# unsuppressed memory error and on any byte definitely lost. A canary that
# leaks and overreads on purpose must be caught, so the check cannot pass
# vacuously.
# Usage: valgrind.sh HARNESS
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
harness=$1
vg=(valgrind --quiet --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite
    --error-exitcode=99 --suppressions="$here/go-runtime.supp" --fair-sched=yes)
log=$(mktemp)
trap 'rm -f "$log" "$root/build/leak_canary" "$root/build/stress_workers_vg"' EXIT

echo "valgrind: the harness (CLARA_HARNESS_SCALE=0.05)"
if ! env -u CLARA_CONFIG -u CLARA_LOG CLARA_HARNESS_SCALE=0.05 "${vg[@]}" "$harness" >"$log" 2>&1; then
  cat "$log"
  echo "valgrind: FAILED: memory errors or leaks from Clara (log above)" >&2
  exit 1
fi
grep -v -e '^--' -e '^==.*Warning' -e 'get_Form' "$log" || true

echo "valgrind: C tools called back to back from 1 then 4 threads (stress_workers)"
${CC:-cc} -O2 -g -Wall -Wextra -Werror -I"$root/include" -pthread "$here/stress_workers.c" -o "$root/build/stress_workers_vg" \
  -L"$root/lib" -lclara -Wl,-rpath,"$root/lib"
if ! "${vg[@]}" "$root/build/stress_workers_vg" 1500 4 >"$log" 2>&1; then
  cat "$log"
  echo "valgrind: FAILED: the worker pool touched memory it does not own (log above)" >&2
  exit 1
fi

echo "valgrind: the canary's leak and its C tool's overread must be caught"
${CC:-cc} -Wall -Wextra -Werror -I"$root/include" "$here/leak_canary.c" -o "$root/build/leak_canary" \
  -L"$root/lib" -lclara -Wl,-rpath,"$root/lib"
set +e
"${vg[@]}" "$root/build/leak_canary" >"$log" 2>&1
rc=$?
set -e
if [[ $rc -ne 99 ]] || ! grep -q "definitely lost" "$log" ||
   ! grep -A2 "Invalid read of size 1" "$log" | grep -q overread_tool; then
  cat "$log"
  echo "valgrind: FAILED: a deliberate mistake of the canary was not reported (exit $rc)" >&2
  exit 1
fi
echo "valgrind: ok (harness clean; the canary's leak and overread were reported)"
