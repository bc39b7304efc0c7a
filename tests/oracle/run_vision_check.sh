#!/usr/bin/env bash
# Writes a checkpoint with a vision tower and checks the engine's tower against the PyTorch oracle.
#   run_vision_check.sh BUILD_DIR WORK_DIR (--preset NAME | --config FILE) [check_vision.py args...]
DS41_ORACLE_CHECK=check_vision.py exec "$(cd "$(dirname "$0")" && pwd)/run_oracle_check.sh" "$@"
