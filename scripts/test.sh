#!/usr/bin/env bash
# Builds everything and runs every test (unit, integration and the oracle checks).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
cd "$root/build"
ctest --output-on-failure -j "$(nproc)" -LE "chaos|soak" "$@"  # -L chaos, -L soak: the long campaigns (README)
