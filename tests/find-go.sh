#!/usr/bin/env bash
# Prints the path of a Go toolchain new enough to build Clara with, looking at
# PATH, /usr/local/go, then the copy tests/setup-debian.sh downloads from the
# Go module proxy. When none is, it says so on stderr and prints "go" (the
# one on PATH, if any, then builds: the code compiles with Go 1.26).
#
# The code compiles with Go 1.26 (go.mod's go line), but make asks for 1.27:
# Go 1.26's runtime takes a lock shared by all threads on every call that a
# thread C started makes into Go (a receive from main_init_done in
# cgocallbackg1), and two C threads calling Clara lost about a tenth of the
# second processor to it; 1.27 reads an atomic flag instead.
min_minor=27
here=$(cd "$(dirname "$0")" && pwd)
for g in "$(command -v go 2>/dev/null)" /usr/local/go/bin/go "${CLARA_GO_CACHE:-$HOME/.cache/clara}/go/bin/go"; do
  [[ -n "$g" && -x "$g" ]] || continue
  # The binary's own version: not one GOTOOLCHAIN would switch to, nor
  # refused for a GOEXPERIMENT the caller set for another Go.
  v=$(env -u GOEXPERIMENT GOTOOLCHAIN=local "$g" env GOVERSION 2>/dev/null) || continue # go1.27.3
  minor=$(echo "$v" | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
  if [[ -n "$minor" && "$minor" -ge $min_minor ]]; then
    echo "$g"
    exit 0
  fi
done
echo "find-go.sh: no Go >= 1.$min_minor found (make setup fetches one); using the go on PATH, if any" >&2
echo go
