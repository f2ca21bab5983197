#!/usr/bin/env bash
# Runs each tests/clips/NAME.clp with `clara-clips -f` (standard input at
# EOF, the embedded default configuration, plus the options in NAME.args if
# that file exists) and compares its output, minus CLIPS's version banner,
# with NAME.out; with CLIPS 6.4x (as `clara-clips --version` says), with
# NAME.64.out where that file exists (6.4 words its errors differently).
# clara-clips keeps standard output and standard error in the order CLIPS
# wrote them, so the two are compared as one stream.
# Then checks clara-clips's own option handling, and runs BRIDGE_CHECK
# (bridge_check.c) under valgrind when valgrind is installed.
# Programs named tool_*.clp run instead under TOOL_DRIVER (tool_driver.c: a
# CLIPS program that registers a tool written in C), silently (batch*).
# A program with a NAME.env file (one line of VAR=VALUE words, e.g.
# CLARA_CONFIG=startup/clara.toml) runs with those variables set.
# Each program finds an empty directory at ../../build/clips-scratch/NAME
# (relative to DIR, where it runs: under the build directory of the source
# tree), made afresh before it runs and removed when it passes; programs
# that need files on disk (callbacks.clp's project root) point their
# configuration there.
# A program with a NAME.llm file (one line: the name of a script of
# tests/llm) talks to the scripted model: build/llmserver serves that script,
# and the program runs with --config pointing at an [llm] table for it
# (model "test-model"), after the options of NAME.args. The script must be
# served to its end.
# Usage: run.sh CLARA_CLIPS DIR [TOOL_DRIVER [BRIDGE_CHECK]]
# Set UPDATE=1 to rewrite the .out files (then read the diff before committing).
set -uo pipefail
clips=$1 dir=$2 driver=${3:-} bridge_check=${4:-}
fail=0 n=0
version=$(env -u CLARA_CONFIG -u CLARA_LOG "$clips" --version)
clips_version=${version##*CLIPS }
clips_version=${clips_version%)}
echo "clips: $clips is linked with CLIPS $clips_version"
scratch="$dir/../../build/clips-scratch"
for clp in "$dir"/*.clp; do
  name=$(basename "$clp" .clp)
  want="$dir/$name.out"
  [[ $clips_version == 6.4* && -f "$dir/$name.64.out" ]] && want="$dir/$name.64.out"
  rm -rf "${scratch:?}/$name" && mkdir -p "$scratch/$name"
  args=() vars=()
  [[ -f "$dir/$name.args" ]] && read -r -a args < "$dir/$name.args"
  [[ -f "$dir/$name.env" ]] && read -r -a vars < "$dir/$name.env"
  llm_pid=
  if [[ -f "$dir/$name.llm" ]]; then
    read -r llm_script < "$dir/$name.llm"
    coproc LLM { exec "$dir/../../build/llmserver" -complete "$dir/../llm/$llm_script.toml" 2> "$scratch/$name/llmserver.log"; }
    llm_pid=$LLM_PID
    read -r llm_url <&"${LLM[0]}"
    printf '[llm]\nbase_url = "%s/%s"\nmodel = "test-model"\n' "$llm_url" "$llm_script" > "$scratch/$name/llm.toml"
    args+=(--config "../../build/clips-scratch/$name/llm.toml")
  fi
  if [[ $name == tool_* ]]; then
    [[ -n "$driver" ]] || { echo "FAIL tests/clips/$name.clp: no TOOL_DRIVER given"; fail=$((fail + 1)); continue; }
    got=$(cd "$dir" && env -u CLARA_CONFIG -u CLARA_LOG timeout 60 "$OLDPWD/$driver" "$name.clp" < /dev/null 2>&1)
  else
    got=$(cd "$dir" && env -u CLARA_CONFIG -u CLARA_LOG "${vars[@]}" timeout 60 "$OLDPWD/$clips" "${args[@]}" -f "$name.clp" < /dev/null 2>&1 \
          | grep -a -v '^ *CLIPS ([0-9.]* ' )
  fi
  if [[ -n "$llm_pid" ]]; then
    eval "exec ${LLM[1]}>&-"
    if ! wait "$llm_pid"; then
      got+=$'\n'"llmserver: the script $llm_script was not followed: $(cat "$scratch/$name/llmserver.log")"
    fi
  fi
  n=$((n + 1))
  if [[ "${UPDATE:-}" == 1 ]]; then
    printf '%s\n' "$got" > "$want"
    echo "updated $want"
    rm -rf "${scratch:?}/$name"
    continue
  fi
  if ! diff -u "$want" <(printf '%s\n' "$got") > /tmp/clara-clips-diff.$$; then
    echo "FAIL tests/clips/$name.clp: output differs from $(basename "$want"):"
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
# --config names a file that is no regular file: refused at once (a named
# pipe hung clara-clips for ever, /dev/zero was read until memory ran out).
fifo_dir=$(mktemp -d)
mkfifo "$fifo_dir/pipe.toml"
cases=(
  "0|usage: clara-clips|--help"
  "0|(Clara $(sed -n 's/^#define CLARA_VERSION "\(.*\)"/\1/p' "$(dirname "$0")/../../include/clara.h"), CLIPS 6.|--version"
  "2|--evaluator: bad name is not a tool name|--evaluator bad\ name"
  "2|--config needs a value|--config"
  "2|cannot read /nonexistent.toml|--config /nonexistent.toml"
  "2|cannot read $fifo_dir/pipe.toml: $fifo_dir/pipe.toml is a named pipe, not a regular file|--config $fifo_dir/pipe.toml"
  "2|cannot read /dev/zero: /dev/zero is a device, not a regular file|--config /dev/zero"
  "2|bad.toml: clara_configure: 2 problems: 2:1: default_evaluator must be a string; 3:1: unknown key \"colour\"|--config bad.toml"
  "2|unknown option --frobnicate|--frobnicate"
  "2|-f needs a file|-f"
  "0|{\"deployed\":\"staging\"}|--config test_mode.toml -f2 test_mode.clp"
  "0|{\"test_mode\":true,\"skipped\":\"deploy\"}|--test-mode --config test_mode.toml -f2 test_mode.clp"
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

rm -rf "$fifo_dir"

if [[ -n "$bridge_check" ]]; then
  n=$((n + 1))
  log=$(mktemp)
  if command -v valgrind > /dev/null; then
    echo "clips: $bridge_check under valgrind"
    run=(valgrind --quiet --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite
         --error-exitcode=99 --suppressions="$dir/../c/go-runtime.supp" --fair-sched=yes "$bridge_check")
  else
    echo "clips: $bridge_check (valgrind is not installed: no leak check)"
    run=("$bridge_check")
  fi
  env -u CLARA_CONFIG -u CLARA_LOG timeout 300 "${run[@]}" > "$log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]]; then
    grep -e '^ok' -e '^skip' "$log"
    echo "ok   $bridge_check"
  else
    cat "$log"
    echo "FAIL $bridge_check (exit status $rc)"
    fail=$((fail + 1))
  fi
  rm -f "$log"
fi

if [[ $fail -gt 0 ]]; then
  echo "clips: $fail of $n programs FAILED"
  exit 1
fi
echo "clips: all $n programs passed"
