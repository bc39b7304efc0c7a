#!/usr/bin/env bash
# replay_live.sh <ds41-trace-replay>: run by tests/client/with_cluster.sh against a fresh local
# cluster. Replays a tiny Mooncake-format trace (20 requests, 3 sessions sharing block 0) at token
# scale 1/8 and checks the records and the summary: every request ok with exactly its output
# length (ignore_eos), every record parses, later turns of a session reuse their session's prefix,
# and the hit share is above 0 and at most the ceiling.
#
# The small checkpoint's greedy replies never reach EOS, so a test of ignore_eos needs a request
# that does: sampled at temperature 2 with seed 7, the first request (blocks [0, 1352]) ends with
# EOS at its 25th token when EOS may stop it. The last step checks that this still holds, so the
# test keeps its power to catch ignore_eos being dropped (the run then gets 25 tokens, not 32).
set -euo pipefail
bin=${1:?usage: replay_live.sh <ds41-trace-replay>}
url=${DS41_BASE_URL:?run me through tests/client/with_cluster.sh}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ds41-trace-replay.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

/usr/bin/python3 - "$tmp/tiny.jsonl" <<'PY'
import json, sys
# Sessions: base block id and turns. Turn i has blocks [0, base, ..., base + i]; odd turns end in
# a partial block. Requests 1 s apart, sessions interleaved.
sessions = {"a": (1352, 7), "b": (2000, 7), "c": (3000, 6)}
order = [(s, i) for i in range(7) for s in "abc" if i < sessions[s][1]]
with open(sys.argv[1], "w") as f:
    for n, (s, i) in enumerate(order):
        base = sessions[s][0]
        blocks = [0] + [base + j for j in range(i + 1)]
        f.write(json.dumps({"timestamp": n * 1000,
                            "input_length": len(blocks) * 512 - (100 if i % 2 else 0),
                            "output_length": 256 if n == 0 else 64 + 8 * n,
                            "hash_ids": blocks}) + "\n")
PY

common=(--endpoint "$url" --trace "$tmp/tiny.jsonl" --token-scale 0.125 --temperature 2 --seed 7 --no-progress)
"$bin" run "${common[@]}" --time-scale 0.5 --concurrency 8 --deadline 30 --unit-tokens 64 --label live@1 \
  --out "$tmp/run.jsonl"
"$bin" summarize --json "$tmp/run.jsonl" >"$tmp/resummarized.json"
# The EOS probe: the first request alone, with EOS allowed to stop it.
"$bin" run "${common[@]}" --max-requests 1 --no-ignore-eos --out "$tmp/eos.jsonl" >/dev/null

/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
failures = []
def check(cond, what):
    if not cond:
        failures.append(what)

lines = [json.loads(l) for l in open(f"{tmp}/run.jsonl") if l.strip()]
header, records = lines[0], lines[1:]
check("run" in header and header["run"]["label"] == "live@1", f"header line: {header}")
keys = {"index", "session", "arrival_s", "start_s", "prompt_tokens", "output_tokens", "completion_tokens",
        "cached_tokens", "computed_tokens", "encoder_replay_tokens", "decoder_replay_tokens", "kv_bytes_read",
        "prefix_source", "ttft_s", "e2e_s", "itl_s", "decoder", "encoder", "placement_reason", "outcome",
        "http_status", "error"}
check(len(records) == 20, f"{len(records)} records, want 20")
check(sorted(r["index"] for r in records) == list(range(20)), "indexes are not 0..19")
for r in records:
    i = r["index"]
    check(keys <= set(r), f"request {i}: missing fields {keys - set(r)}")
    check(r["outcome"] == "ok" and r["http_status"] == 200, f"request {i}: {r['outcome']} {r['http_status']} {r['error']}")
    check(r["completion_tokens"] == r["output_tokens"],
          f"request {i}: {r['completion_tokens']} tokens, want exactly {r['output_tokens']} (ignore_eos)")
    check(len(r["itl_s"]) == r["completion_tokens"] - 1, f"request {i}: {len(r['itl_s'])} gaps")
    check(0 < r["ttft_s"] <= r["e2e_s"], f"request {i}: ttft {r['ttft_s']} e2e {r['e2e_s']}")
    check(r["start_s"] >= r["arrival_s"] - 1e-6, f"request {i}: sent before its arrival")
    check(r["cached_tokens"] + r["computed_tokens"] <= r["prompt_tokens"] + r["encoder_replay_tokens"],
          f"request {i}: cached {r['cached_tokens']} + computed {r['computed_tokens']} > prompt {r['prompt_tokens']}")
    check(r["kv_bytes_read"] == (0 if r["prefix_source"] == "warm" else 890 * r["cached_tokens"]),
          f"request {i}: kv_bytes_read {r['kv_bytes_read']}")
    check(r["decoder"] != "" and r["encoder"] != "", f"request {i}: no placement")
by_session = {}
for r in sorted(records, key=lambda r: r["index"]):
    by_session.setdefault(r["session"], []).append(r)
check(sorted(len(v) for v in by_session.values()) == [6, 7, 7], f"sessions: {[len(v) for v in by_session.values()]}")
for s, turns in by_session.items():
    for t in turns[1:]:
        # More than the shared block 0 (64 tokens): the session's own earlier turn.
        check(t["cached_tokens"] >= 128, f"session {s} request {t['index']}: cached {t['cached_tokens']}")

summary = json.load(open(f"{tmp}/run.summary.json"))
again = json.loads(open(f"{tmp}/resummarized.json").read())
check(summary["ok"] == 20, f"summary ok {summary['ok']}")
check(0 < summary["hit_share"] <= summary["ceiling_share"] + 1e-9,
      f"hit share {summary['hit_share']} vs ceiling {summary['ceiling_share']}")
cached = sum(r["cached_tokens"] for r in records)
prompt = sum(r["prompt_tokens"] for r in records)
check(abs(summary["hit_share"] - cached / prompt) < 1e-12, "summary hit share is not cached / prompt tokens")
check(summary == again, "summarize does not reproduce the run's summary")

eos = [json.loads(l) for l in open(f"{tmp}/eos.jsonl") if l.strip()][1:]
check(len(eos) == 1 and eos[0]["outcome"] == "ok" and eos[0]["completion_tokens"] < eos[0]["output_tokens"],
      "precondition lost: the EOS probe request no longer ends early without ignore_eos "
      f"({eos[0]['completion_tokens'] if eos else '-'} tokens): find another block id or seed (see the header)")

print(f"trace replay: {len(records)} requests, hit share {summary['hit_share']:.3f} "
      f"(ceiling {summary['ceiling_share']:.3f}), TTFT p99 {summary['ttft_s']['p99']:.3f} s; "
      f"EOS probe stops at {eos[0]['completion_tokens'] if eos else '-'} tokens without ignore_eos")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
PY
