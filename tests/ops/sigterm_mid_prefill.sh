#!/usr/bin/env bash
# Run through tests/client/with_cluster.sh (issue 30 item 3): SIGTERM to scripts/run.sh's process
# group — what Ctrl-C sends — while an encoder is in the middle of a prefill of minutes stops every
# process of the cluster within the shutdown grace (DS41_SHUTDOWN_GRACE_SECONDS, which run.sh's
# processes read) plus a few seconds. Before nodes cancelled work at shutdown the busy encoder
# computed on to the end and run.sh waited for it.
set -euo pipefail
: "${DS41_CLUSTER_PID:?run me through tests/client/with_cluster.sh}"
grace=${DS41_SHUTDOWN_GRACE_SECONDS:?set DS41_SHUTDOWN_GRACE_SECONDS}
bound=$((grace + 6))
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ds41-sigterm.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# 30,000 token ids: minutes of prefill for the small model on a small machine.
/usr/bin/python3 -c 'import json, random
r = random.Random(1)
print(json.dumps({"prompt": [r.randrange(16, 3000) for _ in range(30000)], "max_tokens": 1}))' >"$tmp/body.json"
curl -s -o /dev/null -m 600 "$DS41_BASE_URL/completions" -H 'Content-Type: application/json' \
  --data-binary @"$tmp/body.json" &
# Until an encoder reports the prefill running (its metrics on 9500/9501 + offset).
busy=0
for _ in $(seq 1 300); do
  for port in $((9500 + DS41_PORT_OFFSET)) $((9501 + DS41_PORT_OFFSET)); do
    if curl -s "http://127.0.0.1:$port/metrics" | grep -q '^ds41_encoder_running_sequences 1'; then busy=1; fi
  done
  [ "$busy" = 1 ] && break
  sleep 0.1
done
[ "$busy" = 1 ] || { echo "FAIL: no encoder started the prefill" >&2; exit 1; }
sleep 1
start=$(date +%s%N)
kill -TERM -- "-$DS41_CLUSTER_PID"
for _ in $(seq 1 $((bound * 10 + 100))); do
  kill -0 "$DS41_CLUSTER_PID" 2>/dev/null || break
  sleep 0.1
done
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
left=$(/usr/bin/python3 "$(dirname "$0")/processes_in_group.py" "$DS41_CLUSTER_PID")
echo "run.sh exited $elapsed_ms ms after SIGTERM (grace $grace s, bound $bound s); processes left in its group: $left"
if kill -0 "$DS41_CLUSTER_PID" 2>/dev/null || [ "$left" -ne 0 ]; then
  echo "FAIL: the cluster did not stop" >&2
  exit 1
fi
if [ "$elapsed_ms" -gt $((bound * 1000)) ]; then
  echo "FAIL: took longer than $bound s" >&2
  exit 1
fi
