#!/usr/bin/env bash
# Prints the path of a Go toolchain new enough for Clara (go.mod's version),
# looking at PATH, /usr/local/go, then the copy tests/setup-debian.sh
# downloads from the Go module proxy. Prints "go" when none is found, so
# that make reports a missing command.
min_minor=26
here=$(cd "$(dirname "$0")" && pwd)
for g in "$(command -v go 2>/dev/null)" /usr/local/go/bin/go "${CLARA_GO_CACHE:-$HOME/.cache/clara}/go/bin/go"; do
  [[ -n "$g" && -x "$g" ]] || continue
  v=$("$g" env GOVERSION 2>/dev/null) || continue # go1.26.8
  minor=$(echo "$v" | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
  if [[ -n "$minor" && "$minor" -ge $min_minor ]]; then
    echo "$g"
    exit 0
  fi
done
echo go
