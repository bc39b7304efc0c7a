#!/usr/bin/env bash
# with_cluster.sh <build_dir> [CMD...]: runs CMD (default: the official-openai-client tests,
# `node --test tests/client/`) against a fresh local cluster (of DS41_MODEL_PRESET's model, as run.sh), with DS41_BASE_URL, DS41_PORT_OFFSET
# and DS41_CLUSTER_PID exported, and DS41_BASE_URL_2: a second router replica over the same nodes
# and cache (what a deployment with several router replicas has). For the default command it
# installs the openai npm package into <build_dir>/npm (once; offline-safe after). Starts
# scripts/run.sh with DS41_SKIP_BUILD=1 on a port offset of its own and a temporary run directory,
# waits for "is up", runs CMD (with DS41_CLUSTER_RUN_DIR and DS41_CLUSTER_LOG exported too), stops
# the cluster and exits with CMD's status. Works from any cwd.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [ $# -lt 1 ]; then
  echo "usage: $0 <build_dir> [CMD...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
shift
cmd=("$@")
if [ ${#cmd[@]} -eq 0 ]; then
  cmd=(node --test tests/client/)
fi
if [ "${cmd[0]}" = node ] && [ "${cmd[1]:-}" = --test ]; then
  # Only client tests need the npm client (a command that wants it, like scripts/replay, ensures it
  # itself), so other commands run without npm or network.
  export DS41_OPENAI_MODULES
  DS41_OPENAI_MODULES=$("$root/tools/replay/ensure_openai.sh" "$build/npm")
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ds41-client-tests.XXXXXX")
# A port offset whose every port (scripts/run.sh: 7400-7401, 7500-7501, 7600-7601, 8000, 9400-9601,
# 50050; the second router: 8001, 50051) is free now: the router's gRPC port lands in the ephemeral range, where other tests'
# connections may hold it.
free_offset() {
  /usr/bin/python3 - "$$" <<'PY'
import random, socket, sys
bases = [7400, 7401, 7500, 7501, 7600, 7601, 8000, 8001, 9400, 9500, 9501, 9600, 9601, 50050, 50051]
rng = random.Random(int(sys.argv[1]))
for _ in range(200):
    o = rng.randrange(100, 1000)
    socks = []
    try:
        for b in bases:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", b + o))
            socks.append(s)
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(o)
    break
else:
    sys.exit("no free port offset")
PY
}
offset=${DS41_PORT_OFFSET:-$(free_offset)}
cluster_pid=
router2_pid=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$router2_pid" ]; then
    kill -TERM "$router2_pid" 2>/dev/null || true
    wait "$router2_pid" 2>/dev/null || true
  fi
  if [ -n "$cluster_pid" ] && kill -0 "$cluster_pid" 2>/dev/null; then
    kill -TERM "$cluster_pid" 2>/dev/null || true
    # run.sh stops its children on SIGTERM; give it 20 s, then kill whatever is left of its group.
    for _ in $(seq 1 200); do kill -0 "$cluster_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$cluster_pid" 2>/dev/null || true
  fi
  if [ -n "$cluster_pid" ]; then
    # Anything of the cluster's process group still alive (it is its own group: setsid below).
    kill -KILL -- "-$cluster_pid" 2>/dev/null || true
    wait "$cluster_pid" 2>/dev/null || true
  fi
  if [ "$rc" -ne 0 ] && [ -f "$tmp/cluster.log" ]; then
    echo "--- cluster output ($tmp/cluster.log, logs in $tmp/run/logs) ---" >&2
    tail -n 40 "$tmp/cluster.log" >&2
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "starting the cluster (port offset $offset, run dir $tmp/run)..."
# setsid: the cluster gets a process group of its own, so cleanup can reach every child.
DS41_SKIP_BUILD=1 DS41_PORT_OFFSET=$offset DS41_RUN_DIR="$tmp/run" \
  setsid "$root/scripts/run.sh" >"$tmp/cluster.log" 2>&1 </dev/null &
cluster_pid=$!
deadline=$((SECONDS + ${DS41_UP_TIMEOUT:-120}))
until grep -q "is up" "$tmp/cluster.log" 2>/dev/null; do
  if ! kill -0 "$cluster_pid" 2>/dev/null; then
    echo "the cluster exited before it was up" >&2
    exit 1
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "the cluster was not up within ${DS41_UP_TIMEOUT:-120} s" >&2
    exit 1
  fi
  sleep 0.2
done
# The second router replica: run.sh's router flags on ports of its own.
h=127.0.0.1
"$build/router/router" --model "$build/models/${DS41_MODEL_PRESET:-small}" --listen "$h:$((8001 + offset))" \
  --grpc-listen "$h:$((50051 + offset))" --encoders "$h:$((7500 + offset)),$h:$((7501 + offset))" \
  --decoders "$h:$((7600 + offset)),$h:$((7601 + offset))" --cache "$h:$((7400 + offset))" \
  >"$tmp/run/logs/router2.log" 2>&1 </dev/null &
router2_pid=$!
until grep -q " ready " "$tmp/run/logs/router2.log" 2>/dev/null; do
  if ! kill -0 "$router2_pid" 2>/dev/null; then
    echo "the second router exited; its log:" >&2
    cat "$tmp/run/logs/router2.log" >&2
    exit 1
  fi
  sleep 0.1
done
# DS41_CLUSTER_PID: run.sh, leader of the cluster's process group (a CMD may stop the cluster itself);
# DS41_CLUSTER_RUN_DIR: its run directory (logs, pids, restart counts); DS41_CLUSTER_LOG: its output;
# DS41_MODEL_DIR: the checkpoint it serves (as run.sh places it), for tests that read its tokenizer.
export DS41_BASE_URL="http://127.0.0.1:$((8000 + offset))/v1" DS41_BASE_URL_2="http://127.0.0.1:$((8001 + offset))/v1"
export DS41_PORT_OFFSET=$offset DS41_CLUSTER_PID=$cluster_pid DS41_CLUSTER_RUN_DIR="$tmp/run" \
  DS41_CLUSTER_LOG="$tmp/cluster.log" DS41_MODEL_DIR="$build/models/${DS41_MODEL_PRESET:-small}"
echo "cluster up at $DS41_BASE_URL; running ${cmd[*]}"
status=0
(cd "$root" && "${cmd[@]}") || status=$?
echo "${cmd[*]}: $([ "$status" -eq 0 ] && echo passed || echo "FAILED (status $status)")"
exit "$status"
