#!/usr/bin/env bash
# Installs the clients the server tests run (package.json beside this script: the OpenAI Node SDK and
# Continue's @continuedev/openai-adapters) from the npm registry into DIR (default build/node), once;
# prints DIR. Run by scripts/test.sh before the tests (which never reach the network).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/../../build/node}
mkdir -p "$dir"
if ! cmp -s "$here/package.json" "$dir/package.json" || [ ! -d "$dir/node_modules/openai" ] ||
   [ ! -d "$dir/node_modules/@continuedev/openai-adapters" ]; then
    cp "$here/package.json" "$dir/package.json"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error >/dev/null 2>&1)
fi
cp "$here/openai-sdk.mjs" "$here/continue-adapters.mjs" "$dir/"
echo "$dir"
