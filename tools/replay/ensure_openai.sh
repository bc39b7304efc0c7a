#!/usr/bin/env bash
# ensure_openai.sh [DIR]: makes sure the official `openai` npm package (v4), and `ajv` (v8, the JSON
# Schema validator the client tests check structured outputs with), are installed under
# DIR/node_modules (default: <repo>/build/npm) and prints DIR/node_modules on stdout, for NODE_PATH.
# Idempotent; offline-safe once installed (npm is only run when the package is missing).
# Shared by scripts/replay and tests/client/with_cluster.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${1:-${DS41_NPM_DIR:-$root/build/npm}}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if ! command -v node >/dev/null 2>&1; then
  echo "ensure_openai: node is not installed (need Node.js >= 18)" >&2
  exit 1
fi
for pkg in 'openai@^4' 'ajv@^8'; do
  name=${pkg%@*}
  [ -f "$dir/node_modules/$name/package.json" ] && continue
  if ! command -v npm >/dev/null 2>&1; then
    echo "ensure_openai: npm is not installed and $dir/node_modules/$name is missing" >&2
    exit 1
  fi
  echo "ensure_openai: installing $pkg into $dir" >&2
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$pkg" >&2
done
echo "$dir/node_modules"
