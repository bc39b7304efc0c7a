#!/usr/bin/env bash
# Writes a checkpoint with the project's tool and checks the engine against the PyTorch oracle.
#   run_oracle_check.sh BUILD_DIR WORK_DIR (--preset NAME | --config FILE) [check_engine.py args...]
# DS41_ORACLE_CHECK names another checker beside this script (check_vision.py: the vision tower).
set -euo pipefail
build=$1 work=$2
shift 2
ckpt_args=("$1" "$2")
shift 2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
"$build/tools/ds41-ckpt" "${ckpt_args[@]}" --seed 1 --out "$work" --quiet
exec /usr/bin/python3 "$here/${DS41_ORACLE_CHECK:-check_engine.py}" --engine "$build/tools/ds41" --ckpt "$work" "$@"
