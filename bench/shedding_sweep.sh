#!/usr/bin/env bash
# Goodput under overload with the router's queue shedding (--max-queue-seconds), in the simulator,
# which places and refuses with the router's own DecideAttempt (router/attempt.h). Three slices of
# the trace (--session-sample 31, 32, 33), each offered at 120 % and 200 % of its own capacity
# (the slice sent at once, served by the cost policy: requests over the makespan), every policy,
# shedding off and at several limits. Prints goodput (TTFT <= 2 s, mean ITL <= 200 ms, as a share of
# offered requests) as the median over the slices with its range, and the share refused (429).
#
#   bench/shedding_sweep.sh [build dir] [trace] [profile]
set -euo pipefail
build=${1:-build}
trace=${2:-../shared/data/mooncake/conversation_trace_first_30min.jsonl}
profile=${3:-sim/profiles/local_2vcpu_example.json}
sim="$build/sim/ds41-sim"
policies="cost least_loaded round_robin sticky random prefix_affinity"
limits="0 60 10 4 2 1"
common=(--trace "$trace" --profile "$profile" --token-scale 0.03125 --unit-tokens 16 --encoders 2 --decoders 2
        --deadline 120)
run() { "$sim" run "${common[@]}" "$@" 2>&1 || { echo "ds41-sim run $*: failed" >&2; exit 1; }; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ss in 31 32 33; do
  # The slice's span at its own pace, and its makespan sent at once (64 clients, as the replay).
  span=$(run --session-sample "$ss" --time-scale 1 --concurrency 64 --policy cost | sed -nE 's/^simulating .* over ([0-9.]+) s .*/\1/p')
  out=$(run --session-sample "$ss" --time-scale 0.00001 --concurrency 64 --router-max-queue-seconds 0 --policy cost)
  makespan=$(printf '%s\n' "$out" | sed -nE 's/^run .* requests in ([0-9.]+) s:.*/\1/p')
  printf '%s\n' "$out" | grep -q 'rejected 0, failed 0, timeout 0' || { echo "slice $ss: the capacity run refused requests" >&2; exit 1; }
  echo "slice $ss: span ${span} s, all at once in ${makespan} s" >&2
  for load in 120 200; do
    scale=$(awk -v m="$makespan" -v s="$span" -v l="$load" 'BEGIN { printf "%.6f", m / (s * l / 100) }')
    for mq in $limits; do
      for pol in $policies; do
        r=$(run --session-sample "$ss" --time-scale "$scale" --concurrency 64 --policy "$pol" --router-max-queue-seconds "$mq")
        n=$(printf '%s\n' "$r" | sed -nE 's/^run .*: ([0-9]+) requests in .*/\1/p')
        rej=$(printf '%s\n' "$r" | sed -nE 's/^run .* rejected ([0-9]+),.*/\1/p')
        good=$(printf '%s\n' "$r" | sed -nE 's/.*goodput .*, ([0-9.]+) % of requests.*/\1/p')
        echo "$load $mq $pol $ss $good $(awk -v a="$rej" -v n="$n" 'BEGIN { printf "%.1f", 100 * a / n }')" >>"$tmp/rows"
      done
    done
  done
done
# Median and range over the three slices, one row per load and limit, one column per policy.
echo "| load | --max-queue-seconds | $(echo $policies | sed 's/ / | /g') |"
echo "|---|---|$(for p in $policies; do printf -- '---|'; done)"
for load in 120 200; do
  for mq in $limits; do
    row="| $load % | $([ "$mq" = 0 ] && echo off || echo "$mq s") |"
    for pol in $policies; do
      # (Three slices: the median is what is neither the least nor the most.)
      cell=$(awk -v l="$load" -v q="$mq" -v p="$pol" '
        function mid(a, b, c) { return a + b + c - lo(a, b, c) - hi(a, b, c) }
        function lo(a, b, c) { return a < b ? (a < c ? a : c) : (b < c ? b : c) }
        function hi(a, b, c) { return a > b ? (a > c ? a : c) : (b > c ? b : c) }
        $1 == l && $2 == q && $3 == p { g[++n] = $5; r[n] = $6 }
        END { printf "%.1f [%.1f, %.1f] (%.0f %% refused)", mid(g[1], g[2], g[3]), lo(g[1], g[2], g[3]), hi(g[1], g[2], g[3]),
              mid(r[1], r[2], r[3]) }' "$tmp/rows")
      row="$row $cell |"
    done
    echo "$row"
  done
done
