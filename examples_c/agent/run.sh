#!/usr/bin/env bash
# make demo-agent: starts the scripted model (tests/llmserver with
# tests/llm/demo_agent.toml) on loopback, writes its URL into a copy of
# examples_c/agent/clara.toml, and runs examples_c/agent/agent.clp in
# clara-clips --verbose. No network. Exit status: clara-clips's, or 1 when
# the model's script was not followed to its end.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=build/demo-agent
mkdir -p "$out"
coproc SERVER { exec build/llmserver -complete tests/llm/demo_agent.toml 2> "$out/llmserver.log"; }
server_pid=$SERVER_PID
read -r url <&"${SERVER[0]}" || { echo "demo-agent: the scripted model did not start" >&2; exit 1; }
sed "s|MODEL_URL|$url/demo_agent|" examples_c/agent/clara.toml > "$out/clara.toml"
env -u CLARA_CONFIG -u CLARA_LOG bin/clara-clips --verbose --config "$out/clara.toml" -f2 examples_c/agent/agent.clp < /dev/null
status=$?
eval "exec ${SERVER[1]}>&-"
if ! wait "$server_pid"; then
  echo "demo-agent: the model's script was not followed:" >&2
  cat "$out/llmserver.log" >&2
  status=1
fi
exit $status
