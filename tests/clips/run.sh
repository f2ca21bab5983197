#!/usr/bin/env bash
# Runs each tests/clips/NAME.clp with `clara-clips -f` (standard input at
# EOF, the embedded default configuration, plus the options in NAME.args if
# that file exists) and compares its output, minus CLIPS's version banner,
# with NAME.out. Then checks clara-clips's own option handling.
# Programs named tool_*.clp run instead under TOOL_DRIVER (tool_driver.c: a
# CLIPS program that registers a tool written in C), silently (batch*).
# Each program finds an empty directory at ../../build/clips-scratch/NAME
# (relative to DIR, where it runs: under the build directory of the source
# tree), made afresh before it runs and removed when it passes; programs
# that need files on disk (callbacks.clp's project root) point their
# configuration there.
# Usage: run.sh CLARA_CLIPS DIR [TOOL_DRIVER]
# Set UPDATE=1 to rewrite the .out files (then read the diff before committing).
set -uo pipefail
clips=$1 dir=$2 driver=${3:-}
fail=0 n=0
scratch="$dir/../../build/clips-scratch"
for clp in "$dir"/*.clp; do
  name=$(basename "$clp" .clp)
  want="$dir/$name.out"
  rm -rf "${scratch:?}/$name" && mkdir -p "$scratch/$name"
  args=()
  [[ -f "$dir/$name.args" ]] && read -r -a args < "$dir/$name.args"
  if [[ $name == tool_* ]]; then
    [[ -n "$driver" ]] || { echo "FAIL tests/clips/$name.clp: no TOOL_DRIVER given"; fail=$((fail + 1)); continue; }
    got=$(cd "$dir" && env -u CLARA_CONFIG -u CLARA_LOG timeout 60 "$OLDPWD/$driver" "$name.clp" < /dev/null 2>&1)
  else
    got=$(cd "$dir" && env -u CLARA_CONFIG -u CLARA_LOG timeout 60 "$OLDPWD/$clips" "${args[@]}" -f "$name.clp" < /dev/null 2>&1 \
          | grep -v '^ *CLIPS ([0-9.]* ' )
  fi
  n=$((n + 1))
  if [[ "${UPDATE:-}" == 1 ]]; then
    printf '%s\n' "$got" > "$want"
    echo "updated $want"
    rm -rf "${scratch:?}/$name"
    continue
  fi
  if ! diff -u "$want" <(printf '%s\n' "$got") > /tmp/clara-clips-diff.$$; then
    echo "FAIL tests/clips/$name.clp: output differs from $name.out:"
    cat /tmp/clara-clips-diff.$$
    fail=$((fail + 1))
  else
    echo "ok   tests/clips/$name.clp"
    rm -rf "${scratch:?}/$name"
  fi
  rm -f /tmp/clara-clips-diff.$$
done
rmdir "$scratch" 2>/dev/null
# Option handling: each case is "expected exit status|expected text in the
# output|arguments".
cases=(
  "0|usage: clara-clips|--help"
  "0|(Clara 0.1.0)|--version"
  "2|--evaluator: bad name is not a tool name|--evaluator bad\ name"
  "2|--config needs a value|--config"
  "2|cannot read /nonexistent.toml|--config /nonexistent.toml"
  "2|bad.toml: clara_configure: 2 problems: default_evaluator must be a string; unknown key \"colour\"|--config bad.toml"
  "2|unknown option --frobnicate|--frobnicate"
  "2|-f needs a file|-f"
)
for c in "${cases[@]}"; do
  IFS='|' read -r want_rc want_text argstr <<< "$c"
  eval "set -- $argstr"
  n=$((n + 1))
  out=$(cd "$dir" && env -u CLARA_CONFIG -u CLARA_LOG timeout 20 "$OLDPWD/$clips" "$@" < /dev/null 2>&1)
  rc=$?
  if [[ $rc -ne $want_rc || "$out" != *"$want_text"* ]]; then
    echo "FAIL clara-clips $argstr: exit $rc (want $want_rc), output:"
    echo "$out"
    fail=$((fail + 1))
  else
    echo "ok   clara-clips $argstr"
  fi
done

if [[ $fail -gt 0 ]]; then
  echo "clips: $fail of $n programs FAILED"
  exit 1
fi
echo "clips: all $n programs passed"
