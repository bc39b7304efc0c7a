#!/usr/bin/env bash
# Run by tests/client/with_cluster.sh: puts a small agent-session load on the live cluster (the
# replay command), then runs every dashboard and alert expression against a real Prometheus
# scraping the router, the cache shard and all four nodes (prometheus_live.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
o=${DS41_PORT_OFFSET:?run me through tests/client/with_cluster.sh}
"$root/scripts/replay" --endpoint "$DS41_BASE_URL" --turns 3 --sessions 2 --max-tokens 8 --tool-tokens 200
h=127.0.0.1
exec "$root/tests/ops/prometheus_live.sh" "router=$h:$((8000 + o))" "cache=$h:$((9400 + o))" \
  "encoder=$h:$((9500 + o))" "encoder=$h:$((9501 + o))" "decoder=$h:$((9600 + o))" "decoder=$h:$((9601 + o))"
