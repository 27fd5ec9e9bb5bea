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
    # the same package.json installed before on this machine: copied from the cache, not fetched again
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/editspec/node/$(sha256sum "$here/package.json" | cut -c1-16)
    if [ -d "$cache/node_modules/openai" ] && [ -d "$cache/node_modules/@continuedev/openai-adapters" ]; then
        rm -rf "$dir/node_modules"
        cp -a "$cache/node_modules" "$dir/"
    else
        (cd "$dir" && npm install --no-audit --no-fund --loglevel=error >/dev/null 2>&1)
        mkdir -p "$cache" && rm -rf "$cache/node_modules" && cp -a "$dir/node_modules" "$cache/" || true
    fi
fi
cp "$here/openai-sdk.mjs" "$here/continue-adapters.mjs" "$dir/"
echo "$dir"
