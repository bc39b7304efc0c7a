#!/usr/bin/python3
"""Generates the Grafana dashboards in ../dashboards/*.json.

The JSON files are committed; rerun this after editing a panel:
    /usr/bin/python3 helm/ds41-serve/hack/gen_dashboards.py
tests/ops/check_dashboards.py checks every expression (syntax and metric names).
"""
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dashboards")
DS = {"type": "prometheus", "uid": "${datasource}"}


def q(p, metric, by="hit_class", rng="5m"):
    return f'histogram_quantile({p}, sum by (le, {by}) (rate({metric}_bucket[{rng}])))' if by else \
        f'histogram_quantile({p}, sum by (le) (rate({metric}_bucket[{rng}])))'


def panel(title, targets, unit="short", kind="timeseries", desc=""):
    return {"title": title, "type": kind, "description": desc, "datasource": DS,
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "bottom"}} if kind == "timeseries" else {},
            "targets": [{"datasource": DS, "expr": e, "legendFormat": l, "refId": chr(65 + i)}
                        for i, (e, l) in enumerate(targets)]}


def dashboard(uid, title, rows):
    panels, y, pid = [], 0, 1
    for row_title, row in rows:
        panels.append({"type": "row", "title": row_title, "id": pid, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid += 1
        y += 1
        w = 24 // min(len(row), 3)
        for i, p in enumerate(row):
            p["id"] = pid
            pid += 1
            h = 4 if p["type"] == "stat" else 8
            p["gridPos"] = {"h": h, "w": w, "x": (i % 3) * w, "y": y + (i // 3) * 8}
        y += 8 * ((len(row) + 2) // 3)
        panels.extend(row)
    return {
        "uid": uid, "title": title, "tags": ["ds41-serve"], "editable": True, "schemaVersion": 39,
        "time": {"from": "now-3h", "to": "now"}, "refresh": "30s", "timezone": "browser",
        "templating": {"list": [{"name": "datasource", "label": "Data source", "type": "datasource",
                                 "query": "prometheus", "current": {}, "hide": 0}]},
        "annotations": {"list": []}, "links": [], "panels": panels,
    }


PCTS = [("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99")]

overview = dashboard("ds41-overview", "ds41-serve / Overview", [
    ("Traffic", [
        panel("Requests/s by endpoint and code",
              [("sum by (endpoint, code) (rate(ds41_router_requests_total[5m]))", "{{endpoint}} {{code}}")], "reqps"),
        panel("Running requests", [("sum(ds41_router_running_requests)", "running")]),
        panel("Sessions the routers remember",
              [("sum by (pod) (ds41_router_sessions_bound)", "{{pod}}"),
               ("max(ds41_router_sessions_bound_limit)", "limit")],
              desc="placement keeps each session's last nodes; at the limit the least recently bound go"),
        panel("Tokens/s", [
            ("sum by (kind) (rate(ds41_router_prompt_tokens_total[5m]))", "prompt {{kind}}"),
            ("sum(rate(ds41_router_completion_tokens_total[5m]))", "completion")]),
    ]),
    ("Latency by hit class", [
        panel("TTFT percentiles", [(q(p, "ds41_router_ttft_seconds"), f"{n} {{{{hit_class}}}}") for p, n in PCTS], "s"),
        panel("Inter-token latency percentiles",
              [(q(p, "ds41_router_inter_token_seconds"), f"{n} {{{{hit_class}}}}") for p, n in PCTS], "s"),
        panel("End-to-end latency percentiles",
              [(q(p, "ds41_router_e2e_seconds"), f"{n} {{{{hit_class}}}}") for p, n in PCTS], "s"),
        panel("Requests/s by hit class",
              [("sum by (hit_class) (rate(ds41_router_ttft_seconds_count[5m]))", "{{hit_class}}")], "reqps"),
        panel("Queue wait estimate (TTFT p50 minus encoder prefill p50)",
              [("histogram_quantile(0.5, sum by (le) (rate(ds41_router_ttft_seconds_bucket[5m]))) - "
                "histogram_quantile(0.5, sum by (le) (rate(ds41_encoder_prefill_seconds_bucket[5m])))", "wait p50")],
              "s"),
    ]),
    ("Errors and rejections", [
        panel("Error ratio (5xx)",
              [("(sum(rate(ds41_router_requests_total{code=~\"5..\"}[5m])) or vector(0))"
                " / sum(rate(ds41_router_requests_total[5m]))",
                "5xx")], "percentunit"),
        panel("Rejections/s by reason",
              [("sum by (reason) (rate(ds41_router_rejections_total[5m]))", "{{reason}}")], "reqps"),
        panel("Node outcomes/s",
              [("sum by (status) (rate(ds41_encoder_requests_total[5m]))", "encoder {{status}}"),
               ("sum by (status) (rate(ds41_decoder_requests_total[5m]))", "decoder {{status}}")], "reqps"),
        panel("Nodes by role and state", [("sum by (role, state) (ds41_router_nodes)", "{{role}} {{state}}")]),
        panel("Requests migrated off a decoder that died mid-stream, by outcome",
              [("sum by (outcome) (rate(ds41_router_migrations_total[5m]))", "{{outcome}}")], "reqps"),
        panel("Client stream stall during a migration",
              [(q(p, "ds41_router_migration_stall_seconds", by=None), n) for p, n in [("0.5", "p50"), ("0.99", "p99")]],
              "s"),
        panel("Targets up", [("sum by (pool) (up{pool=~\"router|encoder|decoder|cache\"})", "{{pool}}")]),
    ]),
    ("Placement", [
        panel("Placement decisions/s by policy and reason",
              [("sum by (policy, reason) (rate(ds41_router_placement_decisions_total[5m]))", "{{policy}} {{reason}}")], "ops"),
        panel("TTFT prediction error (observed - predicted)",
              [(q(p, "ds41_router_ttft_prediction_error_seconds", by=None), n) for p, n in
               [("0.1", "p10"), ("0.5", "p50"), ("0.9", "p90")]], "s"),
    ]),
])

prefix = dashboard("ds41-prefix-cache", "ds41-serve / Prefix cache", [
    ("Hit ratio", [
        panel("Prompt token hit ratio (router)",
              [("sum(rate(ds41_router_prompt_tokens_total{kind=\"hit\"}[5m])) / "
                "sum(rate(ds41_router_prompt_tokens_total[5m]))", "hit ratio")], "percentunit"),
        panel("Store token hit ratio",
              [("sum(rate(ds41_store_hit_tokens_total[5m])) / sum(rate(ds41_store_queried_tokens_total[5m]))",
                "store hit ratio")], "percentunit"),
        panel("Hit / miss tokens/s",
              [("sum by (kind) (rate(ds41_router_prompt_tokens_total[5m]))", "{{kind}}"),
               ("sum(rate(ds41_encoder_cached_tokens_total[5m]))", "encoder reused"),
               ("sum(rate(ds41_decoder_cached_tokens_total[5m]))", "decoder reused")]),
        panel("Store lookups/s by result",
              [("sum by (result) (rate(ds41_store_lookups_total[5m]))", "{{result}}")], "ops"),
        panel("Chat replies sent back: spliced from their record or rendered as sent (docs/session_reuse.md)",
              [("sum by (outcome) (rate(ds41_router_reply_splices_total[5m]))", "{{outcome}}"),
               ("sum by (outcome) (rate(ds41_router_reply_records_total[5m]))", "recorded {{outcome}}")], "ops"),
    ]),
    ("Store contents", [
        panel("Store bytes per shard",
              [("sum by (pod) (ds41_store_bytes)", "{{pod}}"),
               ("sum by (pod) (ds41_store_capacity_bytes)", "{{pod}} capacity")], "bytes"),
        panel("Store fill ratio",
              [("sum by (pod) (ds41_store_bytes) / sum by (pod) (ds41_store_capacity_bytes)", "{{pod}}")],
              "percentunit"),
        panel("Units per shard", [("sum by (pod) (ds41_store_units)", "{{pod}}")]),
        panel("Segment files on disk vs live unit bytes (the gap is what segment compaction reclaims)",
              [("sum by (pod) (ds41_store_segment_bytes)", "{{pod}} on disk"),
               ("sum by (pod) (ds41_store_segment_peak_bytes)", "{{pod}} peak since start"),
               ("sum by (pod) (ds41_store_bytes)", "{{pod}} live")], "bytes"),
        panel("Segment compaction: live bytes copied per second",
              [("sum by (pod) (rate(ds41_store_compacted_bytes_total[5m]))", "{{pod}}")], "Bps"),
        panel("Payload writes: mean bytes per write (concurrent puts grouped into one)",
              [("sum by (pod) (rate(ds41_store_segment_write_bytes_sum[5m])) / "
                "sum by (pod) (rate(ds41_store_segment_write_bytes_count[5m]))", "{{pod}}")], "bytes"),
        panel("Payload write time p50 / p99",
              [("histogram_quantile(0.5, sum by (le) (rate(ds41_store_segment_write_seconds_bucket[5m])))", "p50"),
               ("histogram_quantile(0.99, sum by (le) (rate(ds41_store_segment_write_seconds_bucket[5m])))", "p99")], "s"),
        panel("Units written / read per second",
              [("sum(rate(ds41_store_units_written_total[5m]))", "written"),
               ("sum(rate(ds41_store_units_read_total[5m]))", "read")], "ops"),
        panel("Reads served from the RAM read cache (units read again)",
              [("sum by (pod) (rate(ds41_store_read_cache_lookups_total{result=\"hit\"}[5m])) / "
                "sum by (pod) (rate(ds41_store_read_cache_lookups_total[5m]))", "{{pod}}")], "percentunit"),
        panel("Store memory: RAM read cache held vs budget, O_DIRECT buffers",
              [("sum by (pod) (ds41_store_read_cache_bytes)", "{{pod}} read cache"),
               ("sum by (pod) (ds41_store_read_cache_budget_bytes)", "{{pod}} read cache budget"),
               ("sum by (pod) (ds41_store_io_buffer_bytes)", "{{pod}} I/O buffers")], "bytes"),
    ]),
    ("Evictions and integrity", [
        panel("Evictions/s by reason",
              [("sum by (reason) (rate(ds41_store_evictions_total[5m]))", "{{reason}}")], "ops"),
        panel("Evicted bytes/s", [("sum(rate(ds41_store_evicted_bytes_total[5m]))", "evicted")], "Bps"),
        panel("Checksum failures (1h)",
              [("sum by (pod) (increase(ds41_store_checksum_failures_total[1h]))", "{{pod}}")]),
        panel("Recovery at last start",
              [("max by (pod) (ds41_store_recovery_seconds)", "{{pod}} seconds"),
               ("max by (pod) (ds41_store_recovered_units)", "{{pod}} units")]),
    ]),
    ("SWA state source", [
        panel("SWA state at the cached prefix, by source",
              [("sum by (source) (rate(ds41_encoder_swa_state_total[5m]))", "encoder {{source}}"),
               ("sum by (source) (rate(ds41_decoder_swa_state_total[5m]))", "decoder {{source}}")], "ops"),
    ]),
])

pools = dashboard("ds41-pools", "ds41-serve / Encoder and decoder pools", [
    ("Encoder pool", [
        panel("Queued prompt tokens", [("sum by (pod) (ds41_encoder_queued_tokens)", "{{pod}}")]),
        panel("Computed tokens/s (new = uncached, replay)",
              [("sum by (kind) (rate(ds41_encoder_computed_tokens_total[5m]))", "{{kind}}")]),
        panel("Computed tokens/s per pod (autoscaling signal)",
              [("sum by (pod) (rate(ds41_encoder_computed_tokens_total[1m]))", "{{pod}}")]),
        panel("Batch tokens per step",
              [(q(p, "ds41_encoder_batch_tokens", by=None), n) for p, n in PCTS]),
        panel("Prefill seconds", [(q(p, "ds41_encoder_prefill_seconds", by=None), n) for p, n in PCTS], "s"),
        panel("Waiting requests / running sequences",
              [("sum(ds41_encoder_waiting_requests)", "waiting"), ("sum(ds41_encoder_running_sequences)", "running")]),
    ]),
    ("Decoder pool", [
        panel("Running sequences", [("sum by (pod) (ds41_decoder_running_sequences)", "{{pod}}")]),
        panel("Waiting requests", [("sum by (pod) (ds41_decoder_waiting_requests)", "{{pod}}")]),
        panel("Resident bytes by kind", [("sum by (kind) (ds41_decoder_resident_bytes)", "{{kind}}")], "bytes"),
        panel("Replay tokens/s",
              [("sum by (kind) (rate(ds41_decoder_computed_tokens_total[5m]))", "{{kind}}")]),
        panel("Decode step seconds",
              [(q(p, "ds41_decoder_decode_step_seconds", by=None), n) for p, n in PCTS], "s"),
        panel("Decode batch tokens", [(q(p, "ds41_decoder_batch_tokens", by=None), n) for p, n in PCTS]),
        panel("Generated tokens/s", [("sum by (pod) (rate(ds41_decoder_generated_tokens_total[5m]))", "{{pod}}")]),
        panel("Expert cache hit ratio",
              [("sum by (pod) (rate(ds41_decoder_expert_cache_hits_total[5m])) / "
                "(sum by (pod) (rate(ds41_decoder_expert_cache_hits_total[5m])) + "
                "sum by (pod) (rate(ds41_decoder_expert_cache_misses_total[5m])))", "{{pod}}")], "percentunit"),
        panel("Decoder TTFT (node side)",
              [(q(p, "ds41_decoder_ttft_seconds", by=None), n) for p, n in PCTS], "s"),
        panel("Speculation: drafted tokens accepted",
              [("sum by (pod) (rate(ds41_decoder_spec_accepted_tokens_total[5m])) / "
                "sum by (pod) (rate(ds41_decoder_spec_drafted_tokens_total[5m]))", "{{pod}}")], "percentunit",
              desc="decoders with --speculative: the share of verified drafts the acceptance rule kept"),
        panel("Speculation: acceptance by draft position",
              [("sum by (position) (rate(ds41_decoder_spec_position_accepted_total[5m])) / "
                "sum by (position) (rate(ds41_decoder_spec_position_verified_total[5m]))", "position {{position}}")],
              "percentunit"),
        panel("Speculation: drafts verified per step (k)",
              [(q(p, "ds41_decoder_spec_verify_length", by=None), n) for p, n in PCTS],
              desc="the scheduler's choice; 0 is a plain decode step"),
        panel("Speculation: steps that drafted",
              [("sum by (pod) (rate(ds41_decoder_spec_steps_total{drafted=\"true\"}[5m])) / "
                "sum by (pod) (rate(ds41_decoder_spec_steps_total[5m]))", "{{pod}}")], "percentunit",
              desc="the rest skipped the draft: the recent acceptance could not pay for it at that batch"),
    ]),
])

transfer = dashboard("ds41-transfer-store", "ds41-serve / Transfer and store health", [
    ("KV transfer", [
        panel("KV bytes moved/s by pool and direction",
              [("sum by (direction) (rate(ds41_encoder_kv_transfer_bytes_total[5m]))", "encoder {{direction}}"),
               ("sum by (direction) (rate(ds41_decoder_kv_transfer_bytes_total[5m]))", "decoder {{direction}}")],
              "Bps"),
        panel("KV fetch seconds (encoder)",
              [(q(p, "ds41_encoder_kv_transfer_seconds", by=None), n) for p, n in PCTS], "s"),
        panel("KV fetch seconds (decoder)",
              [(q(p, "ds41_decoder_kv_transfer_seconds", by=None), n) for p, n in PCTS], "s"),
    ]),
    ("Store I/O", [
        panel("Store read latency", [(q(p, "ds41_store_read_seconds", by=None), n) for p, n in PCTS], "s"),
        panel("Store write latency", [(q(p, "ds41_store_write_seconds", by=None), n) for p, n in PCTS], "s"),
        panel("Store bytes/s",
              [("sum(rate(ds41_store_read_bytes_total[5m]))", "read"),
               ("sum(rate(ds41_store_write_bytes_total[5m]))", "written")], "Bps"),
        panel("Read latency p99 per shard",
              [("histogram_quantile(0.99, sum by (le, pod) (rate(ds41_store_read_seconds_bucket[5m])))", "{{pod}}")],
              "s"),
        panel("Checksum failures/s",
              [("sum by (pod) (rate(ds41_store_checksum_failures_total[5m]))", "{{pod}}")], "ops"),
    ]),
    ("Cache data path (unit payloads beside gRPC)", [
        panel("Data path bytes/s by direction",
              [("sum by (direction) (rate(ds41_cache_data_bytes_total[5m]))", "{{direction}}")], "Bps"),
        panel("Data path frames/s by opcode and result",
              [("sum by (opcode, result) (rate(ds41_cache_data_frames_total[5m]))", "{{opcode}} {{result}}")], "ops"),
        panel("Data path connections and memory held",
              [("sum by (pod) (ds41_cache_data_connections)", "{{pod}} connections"),
               ("sum by (pod) (ds41_cache_data_held_bytes) / 1048576", "{{pod}} MiB held"),
               ("sum by (pod) (ds41_cache_data_chunk_pool_bytes) / 1048576", "{{pod}} MiB chunk pool")]),
        panel("Data path protocol errors/s by reason",
              [("sum by (reason) (rate(ds41_cache_data_protocol_errors_total[5m]))", "{{reason}}")], "ops"),
    ]),
    ("Processes (every role)", [
        panel("Resident memory", [("sum by (pod) (process_resident_memory_bytes)", "{{pod}}")], "bytes"),
        panel("Heap in use and freed but kept",
              [("sum by (pod) (ds41_heap_in_use_bytes)", "{{pod}} in use"),
               ("sum by (pod) (ds41_heap_free_bytes)", "{{pod}} kept free")], "bytes",
              desc="resident memory that grows while in-use stays flat is the allocator keeping freed memory"),
        panel("Store index memory (RocksDB memtables and block cache)",
              [("sum by (pod) (ds41_store_index_memory_bytes)", "{{pod}} memtables"),
               ("max(ds41_store_index_memory_budget_bytes)", "memtable budget"),
               ("sum by (pod) (ds41_store_index_cache_bytes)", "{{pod}} block cache"),
               ("max(ds41_store_index_cache_budget_bytes)", "block cache budget"),
               ("sum by (pod) (ds41_store_table_reader_bytes)", "{{pod}} open tables")], "bytes"),
        panel("Open files and threads",
              [("sum by (pod) (process_open_fds)", "{{pod}} files"), ("sum by (pod) (process_threads)", "{{pod}} threads")]),
    ]),
])

for name, d in [("overview", overview), ("prefix-cache", prefix), ("pools", pools), ("transfer-store", transfer)]:
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(d, f, indent=1, sort_keys=False)
        f.write("\n")
print("wrote", OUT)
