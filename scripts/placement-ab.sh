#!/usr/bin/env bash
# placement-ab.sh: the placement A/B on this machine's local cluster (issue 25 item 3). For each
# policy and load it starts a fresh cluster (scripts/run.sh, empty store, --placement POLICY),
# replays the same slice of the Mooncake trace through the OpenAI API with ds41-trace-replay, and
# stops the cluster. Loads are fractions of the capacity measured first: the slice sent at once
# (arrivals compressed 1000x) to the cost policy, completed requests per second of wall time.
#
#   scripts/placement-ab.sh --out DIR [--session-sample K] [--token-scale X] [--unit-tokens U]
#                           [--start S] [--duration S] [--loads 50,90,120]
#                           [--policies cost,round_robin,...] [--capacity REQ_PER_S]
#
# The default slice: 1 session in 32 of the whole 30 minutes (each with all its turns, so the
# reuse between turns is the trace's own), lengths x 1/32 (16-token blocks, one cache unit each).
#
# Writes DIR/<policy>@<load>.jsonl (+ .summary.json) per run, DIR/capacity.jsonl, DIR/runs.txt (the
# exact replay commands) and the figures (ds41-trace-replay plot). Needs a built tree (scripts/build.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build"
replay="$build/trace/ds41-trace-replay"
trace="${DS41_TRACE:-$root/../shared/data/mooncake/conversation_trace_first_30min.jsonl}"
out="" start=0 duration="" session_sample=32 token_scale=0.03125 unit_tokens=16 loads=50,90,120 capacity=""
concurrency=64 deadline=120
policies=cost,round_robin,random,least_loaded,sticky,prefix_affinity
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --start) start=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --token-scale) token_scale=$2; shift 2 ;;
    --unit-tokens) unit_tokens=$2; shift 2 ;;
    --session-sample) session_sample=$2; shift 2 ;;
    --loads) loads=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    --capacity) capacity=$2; shift 2 ;;
    --concurrency) concurrency=$2; shift 2 ;;
    --deadline) deadline=$2; shift 2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "--out DIR is required" >&2; exit 2; }
[ -x "$replay" ] || { echo "$replay not built (scripts/build.sh)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
offset=${DS41_PORT_OFFSET:-700}
endpoint="http://127.0.0.1:$((8000 + offset))"
decoders="127.0.0.1:$((7600 + offset)),127.0.0.1:$((7601 + offset))"
encoders="127.0.0.1:$((7500 + offset)),127.0.0.1:$((7501 + offset))"

cluster_pid=
stop_cluster() {
  [ -n "$cluster_pid" ] || return 0
  kill -TERM -- "-$cluster_pid" 2>/dev/null || true
  for _ in $(seq 1 300); do kill -0 "$cluster_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$cluster_pid" 2>/dev/null || true
  wait "$cluster_pid" 2>/dev/null || true
  cluster_pid=
}
trap stop_cluster EXIT

# start_cluster POLICY NAME: a fresh cluster (its own run directory, so an empty store).
start_cluster() {
  local run="$out/cluster-$2"
  rm -rf "$run"
  mkdir -p "$run"
  # Overload shedding is off unless asked for (DS41_MAX_QUEUE_SECONDS): the A/B compares placement
  # under the whole offered load; the overload runs (README) turn it on.
  DS41_SKIP_BUILD=1 DS41_PORT_OFFSET=$offset DS41_RUN_DIR="$run" DS41_PLACEMENT="$1" DS41_UNIT_TOKENS=$unit_tokens \
    DS41_SHUTDOWN_GRACE_SECONDS=2 DS41_MAX_QUEUE_SECONDS="${DS41_MAX_QUEUE_SECONDS:-0}" \
    setsid "$root/scripts/run.sh" >"$run/cluster.log" 2>&1 </dev/null &
  cluster_pid=$!
  for _ in $(seq 1 600); do
    grep -q "is up" "$run/cluster.log" 2>/dev/null && return 0
    kill -0 "$cluster_pid" 2>/dev/null || break
    sleep 0.2
  done
  echo "the cluster did not start; see $run/cluster.log" >&2
  exit 1
}

# replay NAME TIME_SCALE: one run of the slice; its command goes to runs.txt.
replay_run() {
  local window=(--start "$start")
  [ -z "$duration" ] || window+=(--duration "$duration")
  local cmd=("$replay" run --endpoint "$endpoint" --trace "$trace" "${window[@]}" --session-sample "$session_sample"
             --token-scale "$token_scale" --unit-tokens "$unit_tokens" --time-scale "$2"
             --concurrency "$concurrency" --deadline "$deadline"
             --expect-decoders "$decoders" --expect-encoders "$encoders" --no-progress
             --label "$1" --out "$out/$1.jsonl")
  echo "${cmd[*]}" >>"$out/runs.txt"
  local cpu0
  cpu0=$(head -1 /proc/stat)
  "${cmd[@]}"
  # The host over the run: how busy its CPUs were and how much time the hypervisor took (steal), so
  # a slow run can be told from a slow host.
  /usr/bin/python3 - "$cpu0" "$(head -1 /proc/stat)" >"$out/$1.host.txt" <<'PY'
import sys
a, b = ([int(x) for x in s.split()[1:9]] for s in sys.argv[1:3])
d = [y - x for x, y in zip(a, b)]
total = sum(d) or 1
print(f"busy {100 * (total - d[3] - d[4] - d[7]) / total:.1f} % steal {100 * d[7] / total:.1f} % of {total / 100:.0f} CPU-s")
PY
  # Peak resident memory of each role over the run (its pid from run.sh's run directory).
  local run="$out/cluster-$1" role
  for role in "$run"/pids/*; do
    [ -f "$role" ] || continue
    echo "$(basename "$role") $(awk '/VmHWM/ {print $2, $3}' "/proc/$(cat "$role")/status" 2>/dev/null)"
  done >"$out/$1.rss.txt"
}

# Capacity: the slice sent at once (arrivals x 1/1000) to the cost policy; completed requests per
# second of wall time. The same run gives the slice's own rate (its last arrival x 1000).
: >"$out/runs.txt"
start_cluster cost capacity
replay_run capacity 0.001
stop_cluster
read -r measured slice_rate < <(/usr/bin/python3 - "$out/capacity.jsonl" "$out/capacity.summary.json" <<'PY'
import json, sys
arrivals = [json.loads(l).get("arrival_s") for l in open(sys.argv[1]) if l.strip()]
arrivals = [a for a in arrivals if a is not None]
s = json.load(open(sys.argv[2]))
print(s["ok"] / s["wall_s"], len(arrivals) / (max(arrivals) * 1000))
PY
)
capacity=${capacity:-$measured}
echo "slice: $slice_rate req/s at its own pace; capacity: $capacity req/s (measured $measured)" | tee "$out/capacity.txt"

IFS=, read -r -a load_list <<<"$loads"
IFS=, read -r -a policy_list <<<"$policies"
for load in "${load_list[@]}"; do
  # Offered rate = load% of capacity: inter-arrival times x slice_rate / offered.
  time_scale=$(/usr/bin/python3 -c "print($slice_rate / ($capacity * $load / 100))")
  for policy in "${policy_list[@]}"; do
    echo "== $policy at $load % (time scale $time_scale)"
    start_cluster "$policy" "$policy@$load"
    replay_run "$policy@$load" "$time_scale"
    stop_cluster
  done
done
"$replay" plot --out "$out" "$out"/*@*.jsonl
echo "records, summaries and figures in $out"
