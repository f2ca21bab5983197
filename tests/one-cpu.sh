#!/usr/bin/env bash
# Runs a command with all its threads on one processor: the first one this
# shell may use (in a container, processor 0 may not be among them). Used
# to test and measure the worker pool when a caller and its worker share a
# processor (capi/workers.c, "Sharing a processor").
# Usage: one-cpu.sh COMMAND [ARGS...]
set -euo pipefail
if ! command -v taskset >/dev/null; then
  echo "one-cpu.sh: taskset (util-linux) is missing" >&2
  exit 1
fi
# "pid N's current affinity list: 0-3,6": the first number after the colon.
list=$(taskset -pc $$)
cpu=${list##*: }
cpu=${cpu%%[-,]*}
exec taskset -c "$cpu" "$@"
