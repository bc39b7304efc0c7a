#!/bin/sh
# Runs every dashboard and alert expression of the ds41-serve chart against a real Prometheus.
#
#   prometheus_live.sh [--local BUILD_DIR] [POOL=HOST:PORT ...]
#
# POOL is router|encoder|decoder|cache (the `pool` label the chart's ServiceMonitor sets).
# --local BUILD_DIR starts cache_service, encoder_node and decoder_node from BUILD_DIR (with a tiny
# checkpoint written by ds41-ckpt) on free ports and scrapes them too; then it also checks that
# every ds41_store_* / ds41_encoder_* / ds41_decoder_* family the chart's checks know of is really
# exported by those binaries.
#
# A generated prometheus.yml scrapes the targets every second and loads rules/alerts.yaml; after
# the first scrape each expression is sent to /api/v1/query and must answer status "success", and
# every alert rule must evaluate with health "ok". Against a whole cluster (no --local) every panel
# expression must also return data, and so must every series an alert watches (an alert expression
# itself returns data only while it fires: its operands are checked with the threshold cut off).
# Exit 77 (skip) without /usr/bin/prometheus.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
chart="$repo/helm/ds41-serve"
prom=$(command -v prometheus || true)
[ -n "$prom" ] || { [ -x /usr/bin/prometheus ] && prom=/usr/bin/prometheus; } || true
if [ -z "$prom" ]; then
  echo "SKIP: prometheus not found (apt-get install --no-install-recommends prometheus)" >&2
  exit 77
fi

build=""
if [ "${1:-}" = "--local" ]; then
  build=$(cd "$2" && pwd)
  shift 2
fi

tmp=$(mktemp -d)
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for p in $pids; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits for "<name> ready ... metrics=HOST:PORT" on a log file and prints HOST:PORT.
wait_ready() {
  i=0
  while [ $i -lt 600 ]; do
    line=$(grep -m1 " ready " "$1" 2>/dev/null || true)
    if [ -n "$line" ]; then
      echo "$line" | sed -n 's/.*metrics=\([^ ]*\).*/\1/p'
      return 0
    fi
    i=$((i + 1))
    sleep 0.1
  done
  echo "timed out waiting for $1:" >&2
  cat "$1" >&2
  return 1
}

targets="$*"
if [ -n "$build" ]; then
  "$build/cache_service/cache_service" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
    --path "$tmp/cache" --capacity 64M >"$tmp/cache.log" 2>&1 &
  pids="$pids $!"
  m=$(wait_ready "$tmp/cache.log")
  targets="$targets cache=$m"
  cache_grpc=$(sed -n 's/.* ready grpc=\([^ ]*\).*/\1/p' "$tmp/cache.log" | head -1)
  "$build/tools/ds41-ckpt" --preset tiny --quiet --out "$tmp/model" >"$tmp/ckpt.log" 2>&1 ||
    { cat "$tmp/ckpt.log" >&2; exit 1; }
  for role in encoder decoder; do
    "$build/${role}_node/${role}_node" --model "$tmp/model" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
      --cache "$cache_grpc" --threads 1 >"$tmp/$role.log" 2>&1 &
    pids="$pids $!"
    m=$(wait_ready "$tmp/$role.log")
    targets="$targets $role=$m"
  done
fi
if [ -z "$targets" ]; then
  echo "usage: $0 [--local BUILD_DIR] [POOL=HOST:PORT ...]" >&2
  exit 2
fi
echo "targets:$targets"

/usr/bin/python3 "$here/check_dashboards.py" --emit-exprs "$tmp/exprs.json" >/dev/null || true
[ -s "$tmp/exprs.json" ] || { echo "FAIL: could not collect expressions" >&2; exit 1; }

port=$(free_port)
cp "$chart/rules/alerts.yaml" "$tmp/alerts.yaml"
/usr/bin/python3 - "$tmp" $targets <<'PY'
import json, sys
tmp, targets = sys.argv[1], sys.argv[2:]
jobs = {}
for t in targets:
    pool, _, addr = t.partition("=")
    if pool not in ("router", "encoder", "decoder", "cache") or not addr:
        sys.exit(f"bad target {t!r}: expected POOL=HOST:PORT with POOL router|encoder|decoder|cache")
    jobs.setdefault(pool, []).append(addr)
cfg = {
    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
    "rule_files": [f"{tmp}/alerts.yaml"],
    "scrape_configs": [{"job_name": f"ds41-{pool}",
                        "static_configs": [{"targets": addrs, "labels": {"pool": pool}}],
                        "relabel_configs": [{"source_labels": ["__address__"], "target_label": "pod"}]}
                       for pool, addrs in jobs.items()],
}
json.dump(cfg, open(f"{tmp}/prometheus.yml", "w"), indent=1)  # JSON is valid YAML
PY

"$prom" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$port" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids="$pids $!"

/usr/bin/python3 - "$port" "$tmp/exprs.json" "$repo" "$([ -n "$build" ] && echo local || echo remote)" $targets <<'PY'
import json, subprocess, sys, time, urllib.parse, urllib.request
port, exprs_file, repo, mode, targets = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
base = f"http://127.0.0.1:{port}"

def get(path, **params):
    url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)

def query(expr):
    data = urllib.parse.urlencode({"query": expr}).encode()
    try:
        with urllib.request.urlopen(base + "/api/v1/query", data=data, timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        return json.load(e)

deadline = time.time() + 60
while True:
    try:
        up = get("/api/v1/query", query="up")["data"]["result"]
        if len(up) >= len(targets) and all(s["value"][1] == "1" for s in up):
            break
    except Exception:
        up = []
    if time.time() > deadline:
        sys.exit(f"FAIL: targets not up after 60 s: {up}")
    time.sleep(0.5)
time.sleep(3)  # a few more scrapes (rate() needs two samples) and rule evaluations

def signals(expr):
    """The series an alert watches: each operand of a top-level and/or/unless, cut before its
    top-level comparison, absent(X) read as X. An alert expression itself has data only while it
    fires; its signals must have data whenever the cluster runs."""
    def split_top(text, words):
        parts, depth, quote, start, i = [], 0, None, 0, 0
        while i < len(text):
            ch = text[i]
            if quote:
                quote = None if ch == quote else quote
            elif ch in "\"'`":
                quote = ch
            elif ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif depth == 0:
                for w in words:
                    if text.startswith(w, i) and (not w.isalpha() or (
                            (i == 0 or not text[i - 1].isalnum()) and not text[i + len(w):i + len(w) + 1].isalnum())):
                        parts.append(text[start:i])
                        i += len(w)
                        start = i
                        break
                else:
                    i += 1
                    continue
                continue
            i += 1
        parts.append(text[start:])
        return [p.strip() for p in parts]
    out = []
    for operand in split_top(expr, ["unless", "and", "or"]):
        lhs = split_top(operand, ["==", "!=", ">=", "<=", ">", "<"])[0]
        while lhs.startswith("absent(") and lhs.endswith(")"):
            lhs = split_top(lhs[len("absent("):-1], ["==", "!=", ">=", "<=", ">", "<"])[0]
        out.append(lhs)
    return out

failures = []
exprs = json.load(open(exprs_file))
nonempty = 0
strict = mode == "remote"  # the whole cluster, router included: everything must have data
for e in exprs:
    r = query(e["expr"])
    if r.get("status") != "success":
        failures.append(f"{e['where']}: {r.get('errorType')}: {r.get('error')} in {e['expr']!r}")
        continue
    watched = signals(e["expr"]) if e["where"].startswith("alert ") else [e["expr"]]
    empty = [w for w in watched if not query(w).get("data", {}).get("result")]
    if empty:
        (failures.append if strict else print)(f"no data: {e['where']}: {empty}")
    else:
        nonempty += 1
for g in get("/api/v1/rules")["data"]["groups"]:
    for rule in g["rules"]:
        if rule.get("health") not in ("ok", "unknown"):
            failures.append(f"rule {rule['name']}: health {rule.get('health')}: {rule.get('lastError')}")

if mode == "local":
    # Every family the static checks extract from the C++ sources must be exported for real.
    out = subprocess.run(["/usr/bin/python3", f"{repo}/tests/ops/check_dashboards.py", "--list-metrics"],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    names = get("/api/v1/label/__name__/values")["data"]
    for line in out:
        if not line:
            continue
        name, kind = line.split()[:2]
        if not name.startswith(("ds41_store_", "ds41_encoder_", "ds41_decoder_")):
            continue
        want = name + ("_count" if kind == "histogram" else "")
        if want not in names:
            failures.append(f"family {name} extracted from the sources is not exported by the binaries")

for f in failures:
    print("FAIL:", f)
print(f"{len(exprs)} expressions queried ({nonempty} with data; alerts: their watched series) against {len(targets)} targets: "
      f"{'FAILED' if failures else 'ok'}")
sys.exit(1 if failures else 0)
PY
