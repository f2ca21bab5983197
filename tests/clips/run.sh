#!/usr/bin/env bash
# Runs each tests/clips/NAME.clp with `clara-clips -f` (standard input at
# EOF, the embedded default configuration) and compares its output, minus
# CLIPS's version banner, with NAME.out. Usage: run.sh CLARA_CLIPS DIR
# Set UPDATE=1 to rewrite the .out files (then read the diff before committing).
set -uo pipefail
clips=$1 dir=$2
fail=0 n=0
for clp in "$dir"/*.clp; do
  name=$(basename "$clp" .clp)
  want="$dir/$name.out"
  got=$(cd "$dir" && env -u CLARA_CONFIG -u CLARA_LOG timeout 60 "$OLDPWD/$clips" -f "$name.clp" < /dev/null 2>&1 \
        | grep -v '^ *CLIPS ([0-9.]* ' )
  n=$((n + 1))
  if [[ "${UPDATE:-}" == 1 ]]; then
    printf '%s\n' "$got" > "$want"
    echo "updated $want"
    continue
  fi
  if ! diff -u "$want" <(printf '%s\n' "$got") > /tmp/clara-clips-diff.$$; then
    echo "FAIL tests/clips/$name.clp: output differs from $name.out:"
    cat /tmp/clara-clips-diff.$$
    fail=$((fail + 1))
  else
    echo "ok   tests/clips/$name.clp"
  fi
  rm -f /tmp/clara-clips-diff.$$
done
if [[ $fail -gt 0 ]]; then
  echo "clips: $fail of $n programs FAILED"
  exit 1
fi
echo "clips: all $n programs passed"
