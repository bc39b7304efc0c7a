#!/usr/bin/env bash
# The main job: builds everything, writes the small checkpoint (once: release window, top-k and
# candidate pool at toy width, with a BPE tokenizer trained by ds41-ckpt), then runs a local cluster
# on loopback — cache_service, 2 encoder nodes, 2 decoder nodes and the router — serving the
# OpenAI API at http://127.0.0.1:8000/v1 until Ctrl-C, which stops everything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# DS41_SKIP_BUILD=1: use the existing build. DS41_PORT_OFFSET=K: every port + K (tests run
# beside a live cluster that way). DS41_RUN_DIR: where logs and the cache's RocksDB go.
[ "${DS41_SKIP_BUILD:-0}" = 1 ] || "$root/scripts/build.sh"
bin="$root/build"
model="$bin/models/small"
if [ ! -f "$model/tokenizer.json" ]; then
  rm -rf "$model"
  corpus=("$root/docs" "$root/README.md")
  [ -d /usr/share/common-licenses ] && corpus+=(/usr/share/common-licenses)
  "$bin/tools/ds41-ckpt" --preset small --seed 1 --out "$model" --tokenizer-corpus "${corpus[@]}"
fi
run="${DS41_RUN_DIR:-$bin/cluster}"
mkdir -p "$run/logs"
host=127.0.0.1
o="${DS41_PORT_OFFSET:-0}"
http_port=$((8000 + o)) grpc_port=$((50050 + o))
p() { echo "$host:$(($1 + o))"; }
pids=()
stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping the cluster..."
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "stopped."
}
trap stop INT TERM EXIT

# start NAME CMD...: runs CMD with its output in logs/NAME.log and waits for its "ready" line.
start() {
  local name=$1; shift
  "$@" >"$run/logs/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 600); do
    if grep -q " ready " "$run/logs/$name.log"; then
      echo "  $(grep -m1 ' ready ' "$run/logs/$name.log")"
      return
    fi
    if ! kill -0 "${pids[-1]}" 2>/dev/null; then
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
Ctrl-C stops everything.
MSG
wait -n "${pids[@]}" || true
# Ctrl-C reaches every process of the group at once; one process ending alone is a failure.
sleep 0.5
for p in "${pids[@]}"; do
  if kill -0 "$p" 2>/dev/null; then
    echo "a cluster process exited; see $run/logs" >&2
    exit 1
  fi
done
