#!/usr/bin/env bash
# Install the given Debian packages where missing (apt-get, as root or through sudo).
#
#   scripts/deb-install.sh PACKAGE...
set -euo pipefail
missing=()
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm may come from a non-Debian Node.js install; accept a working npm on PATH
if command -v npm >/dev/null 2>&1; then
    tmp=(); for p in "${missing[@]+"${missing[@]}"}"; do [[ "$p" == npm || "$p" == nodejs ]] || tmp+=("$p"); done
    missing=("${tmp[@]+"${tmp[@]}"}")
fi
[ ${#missing[@]} -gt 0 ] || exit 0
echo "install: Debian packages ${missing[*]}" >&2
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
