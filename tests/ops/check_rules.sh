#!/bin/sh
# Runs `promtool check rules` on the ds41-serve alert file and on the PrometheusRule's embedded
# copy source (they are the same file). Exit 77 (skip) when promtool is not installed
# (Debian: apt-get install --no-install-recommends prometheus).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=${1:-$(cd "$here/../.." && pwd)}
rules="$repo/helm/ds41-serve/rules/alerts.yaml"
promtool=$(command -v promtool || true)
[ -n "$promtool" ] || { [ -x /usr/bin/promtool ] && promtool=/usr/bin/promtool; }
if [ -z "$promtool" ]; then
  echo "SKIP: promtool not found (apt-get install --no-install-recommends prometheus)" >&2
  exit 77
fi
"$promtool" check rules "$rules"
# Every alert must carry a severity label and a summary annotation.
/usr/bin/python3 - "$rules" <<'PY'
import sys
try:
    import yaml
except ImportError:
    print("python3-yaml missing: label/annotation check skipped"); sys.exit(0)
doc = yaml.safe_load(open(sys.argv[1]))
bad, names = [], set()
for g in doc["groups"]:
    for r in g["rules"]:
        if "alert" not in r:
            continue
        if r["alert"] in names:
            bad.append(f"duplicate alert {r['alert']}")
        names.add(r["alert"])
        if r.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
            bad.append(f"{r['alert']}: severity label missing or not critical|warning|info")
        if not r.get("annotations", {}).get("summary"):
            bad.append(f"{r['alert']}: summary annotation missing")
for b in bad:
    print("FAIL:", b)
print(f"{len(names)} alerts: {'FAILED' if bad else 'ok'}")
sys.exit(1 if bad else 0)
PY
