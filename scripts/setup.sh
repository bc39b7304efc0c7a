#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the main job need, and those named as
# arguments (scripts/thread_safety_check.sh: clang). Non-interactive and idempotent: when everything
# is already installed it touches nothing (and needs no network).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libhwy-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libasio-dev prometheus-cpp-dev libhttp-parser-dev python3-regex
  libpng-dev libjpeg62-turbo-dev  # image inputs (image/)
  python3-pil  # image/pil_oracle.py
  prometheus python3-yaml python3-jsonschema
  python3 python3-numpy python3-torch
  curl openssl
  gnuplot-nox  # ds41-trace-replay plot
)

# Node (for the official openai client in tests and the replay command): Debian's unless a Node
# with npm is already there (e.g. from another source, whose npm is bundled).
command -v npm >/dev/null 2>&1 || PACKAGES+=(nodejs npm)
PACKAGES+=("$@")

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}" >&2
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
