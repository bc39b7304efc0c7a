#!/usr/bin/env bash
# Writes a checkpoint with a vision tower and checks the engine's tower against the PyTorch oracle.
#   run_vision_check.sh BUILD_DIR WORK_DIR (--preset NAME | --config FILE) [check_vision.py args...]
set -euo pipefail
build=$1 work=$2
shift 2
ckpt_args=("$1" "$2")
shift 2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
"$build/tools/ds41-ckpt" "${ckpt_args[@]}" --seed 1 --out "$work" --quiet
exec /usr/bin/python3 "$here/check_vision.py" --engine "$build/tools/ds41" --ckpt "$work" "$@"
