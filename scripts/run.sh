#!/usr/bin/env bash
# The main job: builds everything, writes the small checkpoint (once: release window, top-k and
# candidate pool at toy width, with a BPE tokenizer trained by ds41-ckpt), then runs a local cluster
# on loopback — cache_service, 2 encoder nodes, 2 decoder nodes and the router — serving the
# OpenAI API at http://127.0.0.1:8000/v1 until Ctrl-C (or SIGTERM), which stops everything.
#
# Like the deployment, a role that dies is started again (same flags, same ports) after a back-off
# of 1 s, doubled after each failure that came quickly, up to DS41_RESTART_BACKOFF_MAX seconds
# (default 30), back to 1 s after a run that stayed up: kill a node and the cluster carries on. Each
# restart is printed and appended to the role's log, its count kept in $run/restarts/<role> and the
# role's current pid in $run/pids/<role>. A role that fails DS41_RESTART_FAST_FAILURES times in a row
# (default 5), each time before it was ready or within DS41_RESTART_FAST_SECONDS (default 10) of its
# start, is given up on: the cluster stops with a message and run.sh exits 1. A role that cannot
# start the first time stops everything at once, its log printed, as before.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# DS41_SKIP_BUILD=1: use the existing build. DS41_PORT_OFFSET=K: every port + K (tests run
# beside a live cluster that way). DS41_RUN_DIR: where logs and the cache's RocksDB go.
# DS41_MODEL_PRESET: the checkpoint's preset (default small; tiny-vision: a model that takes images).
# DS41_WRAP_<ROLE>="CMD ARGS": run that role (CACHE, ENCODER0, DECODER1, ROUTER, ...) under a tool,
# e.g. DS41_WRAP_ENCODER0="heaptrack -o /tmp/enc0"; its pid file then holds the tool's pid.
[ "${DS41_SKIP_BUILD:-0}" = 1 ] || "$root/scripts/build.sh"
# glibc's per-thread caches off, as the chart sets them (values.yaml, mallocTunables): each of a node's
# threads (26-56 per role since the pools are built in main) would otherwise keep up to ~240 KB of
# freed small blocks, filled over hours.
export GLIBC_TUNABLES="${GLIBC_TUNABLES-glibc.malloc.tcache_count=0}"
bin="$root/build"
preset="${DS41_MODEL_PRESET:-small}"
model="$bin/models/$preset"
if [ ! -f "$model/tokenizer.json" ]; then
  rm -rf "$model"
  corpus=("$root/docs" "$root/README.md")
  [ -d /usr/share/common-licenses ] && corpus+=(/usr/share/common-licenses)
  "$bin/tools/ds41-ckpt" --preset "$preset" --seed 1 --out "$model" --tokenizer-corpus "${corpus[@]}"
fi
run="${DS41_RUN_DIR:-$bin/cluster}"
mkdir -p "$run/logs" "$run/pids" "$run/restarts"
rm -f "$run/stopping" "$run/pids/"* "$run/restarts/"*
host=127.0.0.1
o="${DS41_PORT_OFFSET:-0}"
http_port=$((8000 + o)) grpc_port=$((50050 + o))
p() { echo "$host:$(($1 + o))"; }
backoff_max=${DS41_RESTART_BACKOFF_MAX:-30}
fast_limit=${DS41_RESTART_FAST_FAILURES:-5}
fast_s=${DS41_RESTART_FAST_SECONDS:-10}
sups=()  # one supervisor per role
stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping the cluster..."
  # Supervisors see this file (or their own SIGTERM) and stop their role instead of restarting it.
  : >"$run/stopping"
  for p in "${sups[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "stopped."
}
trap 'stop; exit 0' INT TERM
trap stop EXIT

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# How a wait status reads: "exited with status 1", "was killed by SIGKILL".
describe() {
  if [ "$1" -gt 128 ]; then echo "was killed by SIG$(kill -l $(($1 - 128)) 2>/dev/null || echo $(($1 - 128)))"
  else echo "exited with status $1"; fi
}

# supervise NAME CMD...: runs CMD with its output appended to logs/NAME.log and its pid in
# pids/NAME, and starts it again whenever it ends while the cluster runs (see the top). Exits 0 when
# the cluster stops, 2 when the first start ended before "ready", 3 when it gave up on the role.
# Runs in a subshell of its own: a TERM stops the role (the child drains as on Ctrl-C) and the loop.
supervise() {
  local name=$1; shift
  local log="$run/logs/$name.log" child="" sleeper="" rc restarts=0 backoff=1 fast=0 started readies lived_ms lived ready
  stopping=0
  # The back-off's sleep too: nothing of the cluster may outlive run.sh.
  trap 'stopping=1; for q in $child $sleeper; do kill -TERM "$q" 2>/dev/null || true; done' TERM
  echo 0 >"$run/restarts/$name"
  while :; do
    started=$(now_ms)
    readies=$(grep -c " ready " "$log" || true)
    wrap_var="DS41_WRAP_${name^^}"
    # shellcheck disable=SC2086
    ${!wrap_var:-} "$@" >>"$log" 2>&1 &
    child=$!
    echo "$child" >"$run/pids/$name"
    if [ "$restarts" -gt 0 ]; then
      while kill -0 "$child" 2>/dev/null && [ "$(grep -c " ready " "$log" || true)" -le "$readies" ]; do sleep 0.2; done
      if [ "$(grep -c " ready " "$log" || true)" -gt "$readies" ]; then
        echo "run.sh: $name is ready again (pid $child, restart $restarts)" | tee -a "$log"
      fi
    fi
    # A trapped signal interrupts wait while the child lives on: wait again until it is gone.
    rc=0
    while :; do
      wait "$child" 2>/dev/null && rc=0 || rc=$?  # 2>/dev/null: not bash's own "Killed" line
      kill -0 "$child" 2>/dev/null || break
    done
    local ended=$child
    child=""  # reaped: its pid may be reused, the trap must not signal it
    if [ "$stopping" = 1 ] || [ -e "$run/stopping" ]; then exit 0; fi
    lived_ms=$(($(now_ms) - started))
    lived=$((lived_ms / 1000)).$((lived_ms % 1000 / 100))
    ready=0
    [ "$(grep -c " ready " "$log" || true)" -le "$readies" ] || ready=1
    [ "$ready" = 1 ] || [ "$restarts" -gt 0 ] || exit 2
    if [ "$ready" = 0 ] || [ "$lived_ms" -lt $((fast_s * 1000)) ]; then
      fast=$((fast + 1))
    else
      fast=0 backoff=1
    fi
    if [ "$fast" -ge "$fast_limit" ]; then
      echo "run.sh: $name $(describe "$rc") after ${lived} s: $fast failures in a row, each before it was ready or within ${fast_s} s of starting; giving up on it (log: $log)" | tee -a "$log" >&2
      exit 3
    fi
    restarts=$((restarts + 1))
    echo "$restarts" >"$run/restarts/$name"
    echo "run.sh: $name (pid $ended) $(describe "$rc") after ${lived} s; restart $restarts in ${backoff} s" | tee -a "$log"
    sleep "$backoff" &
    sleeper=$!
    wait "$sleeper" || true
    sleeper=""
    if [ "$stopping" = 1 ] || [ -e "$run/stopping" ]; then exit 0; fi
    backoff=$((backoff * 2 > backoff_max ? backoff_max : backoff * 2))
  done
}

# start NAME CMD...: runs CMD under a supervisor and waits for its first "ready" line.
start() {
  local name=$1; shift
  : >"$run/logs/$name.log"
  supervise "$name" "$@" &
  sups+=($!)
  for _ in $(seq 1 600); do
    if grep -q " ready " "$run/logs/$name.log"; then
      echo "  $(grep -m1 ' ready ' "$run/logs/$name.log")"
      return
    fi
    if ! kill -0 "${sups[-1]}" 2>/dev/null; then
      echo "$name exited; its log:" >&2
      cat "$run/logs/$name.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "$name did not become ready; see $run/logs/$name.log" >&2
  exit 1
}

echo "starting the local cluster (logs in $run/logs):"
start cache "$bin/cache_service/cache_service" --listen "$(p 7400)" --data-listen "$(p 7401)" \
  --metrics-listen "$(p 9400)" --path "$run/cache"
cache=$(p 7400)
for i in 0 1; do
  start encoder$i "$bin/encoder_node/encoder_node" --model "$model" --listen "$(p $((7500 + i)))" \
    --metrics-listen "$(p $((9500 + i)))" --cache "$cache" --threads 1
  start decoder$i "$bin/decoder_node/decoder_node" --model "$model" --listen "$(p $((7600 + i)))" \
    --metrics-listen "$(p $((9600 + i)))" --cache "$cache" --threads 1
done
start router "$bin/router/router" --model "$model" --listen "$host:$http_port" --grpc-listen "$host:$grpc_port" \
  --encoders "$(p 7500),$(p 7501)" --decoders "$(p 7600),$(p 7601)" --cache "$cache"

cat <<MSG

ds41-serve is up: OpenAI API at http://$host:$http_port/v1 (model "deepseek-v4.1-flash"), gRPC at $host:$grpc_port.
  curl http://$host:$http_port/v1/models
  curl http://$host:$http_port/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model":"deepseek-v4.1-flash","messages":[{"role":"user","content":"Hello"}],"max_tokens":16}'
  $root/scripts/replay --endpoint http://$host:$http_port/v1 --turns 4     # an agent-session workload
Metrics: http://$host:$http_port/metrics (router), $(p 9400) cache, $(p 9500) $(p 9501) encoders, $(p 9600) $(p 9601) decoders.
The weights are synthetic (seeded), so the text is noise; the serving path is the real one.
A role that dies is restarted (back-off, counted in $run/restarts); Ctrl-C stops everything.
MSG
# A supervisor ends on its own only when it gave up on its role.
wait -n "${sups[@]}" || true
echo "run.sh: a role could not be kept running; stopping the cluster (logs in $run/logs)" >&2
exit 1
