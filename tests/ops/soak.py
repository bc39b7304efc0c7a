#!/usr/bin/env python3
"""Soak (issue 28 item 6): mixed agent traffic at a steady fraction of capacity for a long time, and
whether every role's resources stay flat once warm.

  soak.py --build BUILD --out DIR [--minutes 30] [--load 0.8] [--capacity REQ_PER_S]
          [--warmup-fraction 0.33] [--cache-capacity 128M] [--cache-segment 8M]
          [--cache-read-cache 16M] [--cache-index-memory 16M] [--cache-index-cache 2M] [--cache-data-held 64M]
          [--session-bytes 192M] [--swa-pool 64M] [--router-sessions 1024]

Starts the local cluster of scripts/run.sh (its own run directory and ports). Every bounded cache is
given a budget the warm-up fills (the store's capacity, segment size, read cache, RocksDB memtables and block
cache, the data path's buffers, the decoders' warm sessions, every node's SWA pool, the sessions the router remembers), so that
eviction runs during the soak as it would in production and what grows past a budget is a leak, not a
cache still filling. Capacity is
measured first, as scripts/placement-ab.sh does (the Mooncake slice sent at once, completed requests
per second), unless given. Then, for --minutes, two kinds of traffic at once:
  * the Mooncake slice (1 session in 32, lengths x 1/32) replayed with ds41-trace-replay, in copies
    with disjoint prefixes whose sessions start spread over the window (--replica-stagger), paced so
    that it offers --load of the capacity: multi-turn sessions that reuse their prefixes, streamed
    /v1/completions;
  * agent sessions over /v1/chat/completions with the official openai client (scripts/replay:
    thinking on, a tool result appended every turn), one after another.
Every 10 s it samples each role's resident memory, open files, sockets and threads (/proc; threads by name too), its
byte gauges (pools, caches, buffers, the heap in use and freed but kept: what a growth is made of) and
the store's size on disk; a role
that restarted is an error. At the end it fits a line to each series over the
warm part (after --warmup-fraction of the run) and reports the growth per hour.

Passes (exit 0) when: no request failed or timed out (a 429 is counted, not a failure; there should
be none at 80 %), no role restarted, and once warm no role grew by more than --max-rss-growth
(default 10 %) of its warm resident memory per hour, nor by more than 4 open files, 20 sockets or
2 threads per hour (gRPC's own pools aside, each held to two per core: they keep the threads of
their busiest moment) (and, for those counts, the last third of the warm window never came back down to the
first third's highest), and the store on disk stayed within its capacity plus 4 segments, twice the memtable budget
(the write-ahead logs) and 32 MiB for the RocksDB index's tables (a segment is reclaimed once mostly dead, so the live segments hold dead bytes too),
and its segment files' own high-water mark (ds41_store_segment_peak_bytes, peaks between samples included) within
the capacity plus 6 segments (4 before the sweep is woken, one victim copied, puts meanwhile). Writes DIR/samples.jsonl,
DIR/soak.json (the figures) and DIR/soak.png (gnuplot).
"""
import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACE = os.environ.get("DS41_TRACE", os.path.join(ROOT, "..", "shared", "data", "mooncake",
                                                 "conversation_trace_first_30min.jsonl"))
SLICE = ["--session-sample", "32", "--token-scale", "0.03125", "--unit-tokens", "16"]
OFFSET = int(os.environ.get("DS41_PORT_OFFSET", "900"))
SAMPLE_S = 10.0


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


class Cluster:
    """scripts/run.sh in a process group of its own."""

    def __init__(self, run_dir, budgets):
        self.run_dir = run_dir
        shutil.rmtree(run_dir, ignore_errors=True)
        os.makedirs(run_dir)
        env = dict(os.environ, DS41_SKIP_BUILD="1", DS41_PORT_OFFSET=str(OFFSET), DS41_RUN_DIR=run_dir,
                   DS41_UNIT_TOKENS="16", DS41_SHUTDOWN_GRACE_SECONDS="2", **budgets)
        self.log = open(os.path.join(run_dir, "cluster.log"), "w")
        self.proc = subprocess.Popen([os.path.join(ROOT, "scripts", "run.sh")], env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        end = time.monotonic() + 180
        while time.monotonic() < end:
            with open(os.path.join(run_dir, "cluster.log"), errors="replace") as f:
                if "is up" in f.read():
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"the cluster did not start; see {run_dir}/cluster.log")

    def endpoint(self):
        return f"http://127.0.0.1:{8000 + OFFSET}"

    def pids(self):
        out = {}
        pid_dir = os.path.join(self.run_dir, "pids")
        for name in sorted(os.listdir(pid_dir)):
            with open(os.path.join(pid_dir, name)) as f:
                out[name] = int(f.read().strip() or 0)
        return out

    def restarts(self):
        d = os.path.join(self.run_dir, "restarts")
        return {n: int(open(os.path.join(d, n)).read().strip() or 0) for n in sorted(os.listdir(d))}

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def proc_sample(pid):
    """Resident bytes, open files (sockets apart: they follow the clients) and threads, or None."""
    try:
        rss = rss_anon = rss_file = threads = None
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("RssAnon:"):  # the heap, stacks and anonymous mappings
                    rss_anon = int(line.split()[1]) * 1024
                elif line.startswith("RssFile:"):  # mapped files: the weights, the binary
                    rss_file = int(line.split()[1]) * 1024
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
        fds = sockets = 0
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except FileNotFoundError:
                continue  # closed meanwhile
            sockets += target.startswith("socket:")
            fds += not target.startswith("socket:")
        names = thread_names(pid)
        return {"rss": rss, "rss_anon": rss_anon, "rss_file": rss_file, "fds": fds, "sockets": sockets,
                "threads": threads, "thread_names": names,
                "threads_own": threads - sum(names.get(n, 0) for n in GRPC_POOLS), **anon_breakdown(pid)}
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


# gRPC's own thread pools keep what they grew to until exit: its executors start with one thread each
# and add one whenever their queue backs up, up to two per core (src/core/lib/iomgr/executor.cc);
# its timer manager adds a thread whenever every timer thread is running callbacks
# (iomgr/timer_manager.cc). Their threads are a high-water mark, not a leak: they are left out of the
# thread count the soak judges, and each pool is held to two per core.
GRPC_POOLS = ("default-executo", "resolver-execut", "grpc_global_tim")  # (names cut at 15 characters)
GRPC_POOL_CAP = 2 * (os.cpu_count() or 1)


def thread_names(pid):
    """Threads by name, digits dropped ("encoder-req12" counts as "encoder-req"): which pool a
    growth of the thread count is made of."""
    out = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    name = f.read().strip().rstrip("0123456789") or "?"
            except (FileNotFoundError, ProcessLookupError):
                continue  # ended meanwhile
            out[name] = out.get(name, 0) + 1
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return out


STACK_BYTES = 8 << 20      # glibc's default thread stack (ulimit -s), beside its guard page
ARENA_BYTES = 64 << 20     # glibc's heap of a thread arena (HEAP_MAX_SIZE on 64-bit)


def anon_breakdown(pid):
    """Resident anonymous memory by what holds it, from /proc/PID/smaps: the main heap ([heap]),
    glibc's thread arenas (mappings aligned to their 64 MiB reservation), thread stacks (8 MiB
    mappings less a guard page) and the rest (large allocations mapped on their own, library data)."""
    out = {"anon_heap": 0, "anon_arenas": 0, "anon_stacks": 0, "anon_other": 0}
    try:
        with open(f"/proc/{pid}/smaps") as f:
            size = name = None
            for line in f:
                head = line.split()
                if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                    lo, hi = (int(x, 16) for x in head[0].split("-"))
                    size, name = hi - lo, (head[5] if len(head) > 5 else "")
                elif head[0] == "Anonymous:":
                    b = int(head[1]) * 1024
                    if name == "[heap]":
                        out["anon_heap"] += b
                    elif name == "" and STACK_BYTES - (64 << 10) <= size <= STACK_BYTES:  # less its guard
                        out["anon_stacks"] += b
                    elif name == "" and lo % ARENA_BYTES == 0 and size <= ARENA_BYTES:  # arenas are aligned
                        out["anon_arenas"] += b
                    else:
                        out["anon_other"] += b
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return out


# Where each role of scripts/run.sh serves its metrics (ports + the offset).
METRICS_PORT = {"cache": 9400, "encoder0": 9500, "encoder1": 9501, "decoder0": 9600, "decoder1": 9601, "router": 8000}


# Beside the byte gauges: the router's bounded table of small entries.
OTHER_GAUGES = ("ds41_router_sessions_bound",)


def byte_gauges(role):
    """The role's byte gauges (pools, caches, buffers) from its metrics page: what a growth is made of."""
    out = {}
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT[role] + OFFSET}/metrics", timeout=5).read().decode()
    except OSError:
        return out
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        base = name.split("{", 1)[0]
        if (base.endswith("_bytes") and not base.startswith("exposer_")) or base in OTHER_GAUGES:
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def dir_bytes(path):
    """Bytes on disk under `path`, and of them those in payload segment files (the rest is RocksDB's:
    the index's tables, write-ahead logs and manifests), so that a peak can be told apart."""
    total = segments = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                size = os.path.getsize(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue  # a compaction removed it
            total += size
            segments += size if os.path.basename(dirpath) == "segments" else 0
    return total, segments


def replay_cmd(build, endpoint, out, label, time_scale, replicas, deadline):
    return [os.path.join(build, "trace", "ds41-trace-replay"), "run", "--endpoint", endpoint, "--trace", TRACE,
            *SLICE, "--time-scale", repr(time_scale), "--replicas", str(replicas), "--concurrency", "64",
            "--deadline", str(deadline), "--no-progress", "--label", label, "--out", out]


def measure_capacity(build, endpoint, out_dir):
    """The slice sent at once: completed requests per second; and the slice's own rate."""
    out = os.path.join(out_dir, "capacity.jsonl")
    subprocess.run(replay_cmd(build, endpoint, out, "capacity", 0.001, 1, 120), check=True)
    summary = json.load(open(out.replace(".jsonl", ".summary.json")))
    arrivals = [r["arrival_s"] for r in map(json.loads, open(out)) if r.get("arrival_s") is not None]
    return summary["ok"] / summary["wall_s"], len(arrivals) / (max(arrivals) * 1000)


def slope_per_hour(points):
    """Least-squares slope of (t seconds, value) points, per hour."""
    n = len(points)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    return 0.0 if den == 0 else 3600 * sum((t - mt) * (v - mv) for t, v in points) / den


def agent_sessions(endpoint, stop, stats, out_path):
    """Chat agent sessions with the official client, one after another, until `stop`."""
    seed = 1
    with open(out_path, "w") as out:
        while not stop.is_set():
            cmd = [os.path.join(ROOT, "scripts", "replay"), "--endpoint", endpoint + "/v1", "--turns", "6",
                   "--thinking", "on", "--max-tokens", "48", "--tool-tokens", "600", "--seed", str(seed)]
            r = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
            stats["sessions"] += 1
            stats["failed_sessions"] += r.returncode != 0
            seed += 1


def plot(out_dir, samples, roles):
    gp = shutil.which("gnuplot")
    if not gp or not samples:
        return None
    dat = os.path.join(out_dir, "soak.dat")
    with open(dat, "w") as f:
        for s in samples:
            cols = [s["t"] / 60] + [s["roles"].get(r, {}).get("rss", 0) / 2**20 for r in roles] + [s["store"] / 2**20]
            f.write(" ".join(f"{c:.3f}" for c in cols) + "\n")
    png = os.path.join(out_dir, "soak.png")
    series = ", ".join(f"'{dat}' using 1:{i + 2} with lines title '{r}'" for i, r in enumerate(roles))
    script = (f"set terminal pngcairo size 900,480; set output '{png}'; set xlabel 'minutes';"
              f"set ylabel 'MiB'; set key outside right; set title 'Soak: resident memory per role and store size';"
              f"plot {series}, '{dat}' using 1:{len(roles) + 2} with lines dashtype 2 title 'store on disk'")
    subprocess.run([gp, "-e", script], check=False)
    return png


def interrupted(*_):
    raise KeyboardInterrupt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--capacity", type=float, help="requests/s; measured first when not given")
    ap.add_argument("--warmup-fraction", type=float, default=0.33)
    ap.add_argument("--cache-capacity", default="128M")
    ap.add_argument("--cache-segment", default="8M")
    ap.add_argument("--cache-read-cache", default="16M", help="a soak's reuse keeps ~20 MiB read twice")
    ap.add_argument("--cache-index-memory", default="16M", help="the store's RocksDB memtables")
    ap.add_argument("--cache-index-cache", default="2M", help="the store's RocksDB block cache (its tables: ~7 MiB)")
    ap.add_argument("--cache-data-held", default="64M",
                    help="the cache data path's read chunks and answers (~48 MiB held, 68 at a burst)")
    ap.add_argument("--session-bytes", default="192M", help="each decoder's warm sessions")
    ap.add_argument("--swa-pool", default="64M", help="each encoder's and decoder's SWA states")
    ap.add_argument("--router-sessions", default="1024", help="sessions the router remembers (--max-sessions)")
    ap.add_argument("--max-rss-growth", type=float, default=0.10, help="per hour, of the warm resident memory")
    ap.add_argument("--no-agents", action="store_true", help="only the trace replay")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    out_dir = os.path.abspath(a.out)
    budgets = {"DS41_CACHE_CAPACITY": a.cache_capacity, "DS41_CACHE_SEGMENT_SIZE": a.cache_segment,
               "DS41_CACHE_READ_CACHE": a.cache_read_cache, "DS41_CACHE_INDEX_MEMORY": a.cache_index_memory,
               "DS41_CACHE_INDEX_CACHE": a.cache_index_cache, "DS41_CACHE_DATA_HELD": a.cache_data_held,
               "DS41_SESSION_BYTES": a.session_bytes, "DS41_SWA_POOL_BYTES": a.swa_pool,
               "DS41_ROUTER_MAX_SESSIONS": a.router_sessions}
    # A TERM (ctest's timeout, kill) stops the cluster and the clients as Ctrl-C does.
    signal.signal(signal.SIGTERM, interrupted)
    cluster = Cluster(os.path.join(out_dir, "cluster"), budgets)
    errors = []
    replay = None
    stop = threading.Event()
    try:
        endpoint = cluster.endpoint()
        measured, slice_rate = measure_capacity(a.build, endpoint, out_dir)
        capacity = a.capacity or measured
        offered = a.load * capacity
        # Enough disjoint copies of the slice to last the soak at the offered rate.
        replicas = max(1, math.ceil(a.minutes * 60 * offered / (slice_rate * 1800)))
        time_scale = replicas * slice_rate / offered
        log(f"capacity {measured:.3f} req/s measured, {capacity:.3f} used; offering {offered:.3f} req/s "
            f"({replicas} copies of the slice, time scale {time_scale:.3f}) for {a.minutes} min")
        restarts0 = cluster.restarts()
        agents = {"sessions": 0, "failed_sessions": 0}
        agent_thread = None
        if not a.no_agents:
            agent_thread = threading.Thread(target=agent_sessions, daemon=True,
                                            args=(endpoint, stop, agents, os.path.join(out_dir, "agents.log")))
            agent_thread.start()
        records = os.path.join(out_dir, "soak.jsonl")
        # Staggered copies: the copies' sessions start spread over the window, not all at each arrival.
        replay = subprocess.Popen(replay_cmd(a.build, endpoint, records, f"soak@{round(100 * a.load)}", time_scale,
                                             replicas, 120) +
                                  ["--replica-stagger", "--duration", str(a.minutes * 60 / time_scale)])
        samples = []
        t0 = time.monotonic()
        with open(os.path.join(out_dir, "samples.jsonl"), "w") as sf:
            while replay.poll() is None:
                store, segments = dir_bytes(os.path.join(cluster.run_dir, "cache"))
                s = {"t": time.monotonic() - t0, "roles": {}, "store": store, "store_segments": segments}
                for role, pid in cluster.pids().items():
                    v = proc_sample(pid)
                    if v:
                        s["roles"][role] = dict(v, pid=pid, gauges=byte_gauges(role))
                samples.append(s)
                sf.write(json.dumps(s) + "\n")
                sf.flush()
                try:
                    replay.wait(SAMPLE_S)
                except subprocess.TimeoutExpired:
                    pass
        stop.set()
        if agent_thread:
            agent_thread.join(300)
        if replay.returncode != 0:
            errors.append(f"ds41-trace-replay exited with {replay.returncode}")
        summary = json.load(open(records.replace(".jsonl", ".summary.json")))
        restarts = {r: n - restarts0.get(r, 0) for r, n in cluster.restarts().items()}
    finally:
        stop.set()
        if replay and replay.poll() is None:
            replay.terminate()
            replay.wait()
        cluster.stop()

    roles = sorted({r for s in samples for r in s["roles"]})
    warm_from = a.warmup_fraction * (samples[-1]["t"] if samples else 0)
    warm = [s for s in samples if s["t"] >= warm_from]
    report = {"minutes": a.minutes, "load": a.load, "capacity_req_s": capacity, "offered_req_s": offered,
              "budgets": budgets,
              "replay": {k: summary.get(k) for k in ("requests", "ok", "rejected", "failed", "timeout", "wall_s", "ttft_s", "hit_share")},
              "agent_sessions": agents, "restarts": restarts, "roles": {}}
    for r in roles:
        row = {}
        for key in ("rss", "rss_anon", "rss_file", "anon_heap", "anon_arenas", "anon_stacks", "anon_other", "fds",
                    "sockets", "threads", "threads_own"):
            pts = [(s["t"], s["roles"][r][key]) for s in warm if s["roles"].get(r, {}).get(key) is not None]
            if not pts:
                continue
            mean = sum(v for _, v in pts) / len(pts)
            row[key] = {"warm_mean": mean, "min": min(v for _, v in pts), "max": max(v for _, v in pts),
                        "growth_per_hour": slope_per_hour(pts),
                        # over the warm window's second half alone: a fill toward a bound slows
                        # down there, a leak keeps its pace (reported; the check uses the whole window)
                        "late_growth_per_hour": slope_per_hour(pts[len(pts) // 2:])}
        # The byte gauges that moved most once warm: what the resident memory is made of.
        gauges = {}
        for name in {n for s in warm if r in s["roles"] for n in s["roles"][r].get("gauges", {})}:
            pts = [(s["t"], s["roles"][r]["gauges"][name]) for s in warm if name in s["roles"].get(r, {}).get("gauges", {})]
            if pts:
                gauges[name] = {"warm_mean": sum(v for _, v in pts) / len(pts), "growth_per_hour": slope_per_hour(pts)}
        row["gauges"] = dict(sorted(gauges.items(), key=lambda kv: -abs(kv[1]["growth_per_hour"]))[:6])
        # Threads by name, first and last warm sample, where they differ: the pool that grew or shrank.
        first, last = (next((s["roles"][r].get("thread_names") for s in seq if r in s["roles"]), None)
                       for seq in (warm, reversed(warm)))
        if first is not None and last is not None:
            row["thread_names_changed"] = {n: [first.get(n, 0), last.get(n, 0)] for n in sorted(set(first) | set(last))
                                           if first.get(n, 0) != last.get(n, 0)}
        report["roles"][r] = row
        rss = row.get("rss")
        if rss and rss["growth_per_hour"] > a.max_rss_growth * rss["warm_mean"]:
            errors.append(f"{r}: resident memory grows {rss['growth_per_hour'] / 2**20:.1f} MiB/h once warm "
                          f"(warm mean {rss['warm_mean'] / 2**20:.1f} MiB)")
        row["grpc_pool_threads"] = {n: max((s["roles"][r].get("thread_names", {}).get(n, 0) for s in warm if r in s["roles"]),
                                           default=0) for n in GRPC_POOLS}
        for n, most in row["grpc_pool_threads"].items():
            if most > GRPC_POOL_CAP:
                errors.append(f"{r}: {most} threads in gRPC's {n} pool, over two per core ({GRPC_POOL_CAP})")
        for key, limit in (("fds", 4), ("sockets", 20), ("threads_own" if "threads_own" in row else "threads", 2)):
            # Counts step up and down (a channel's three descriptors, a pool's thread for a while), so
            # a slope over a short window is no proof: they have grown when the last third of the warm
            # window never comes back down to what the first third reached.
            pts = [s["roles"][r][key] for s in warm if s["roles"].get(r, {}).get(key) is not None]
            third = len(pts) // 3
            if key not in row or third == 0:
                continue
            row[key]["climbed"] = min(pts[-third:]) > max(pts[:third])
            if row[key]["growth_per_hour"] > limit and row[key]["climbed"]:
                errors.append(f"{r}: {key} grow {row[key]['growth_per_hour']:.1f}/h once warm "
                              f"(from at most {max(pts[:third])} to at least {min(pts[-third:])})")
    store_pts = [(s["t"], s["store"]) for s in warm]
    if store_pts:
        report["store"] = {"warm_mean": sum(v for _, v in store_pts) / len(store_pts),
                           "max": max(v for _, v in store_pts), "growth_per_hour": slope_per_hour(store_pts),
                           # at the peak: how much was payload segments, how much RocksDB's files
                           "segments_at_max": max(warm, key=lambda s: s["store"]).get("store_segments"),
                           "capacity": parse_bytes(a.cache_capacity)}
        bound = (parse_bytes(a.cache_capacity) + 4 * parse_bytes(a.cache_segment) +
                 2 * parse_bytes(a.cache_index_memory) + (32 << 20))
        report["store"]["bound"] = bound
        if report["store"]["max"] > bound:
            errors.append(f"store reached {report['store']['max'] / 2**20:.1f} MiB on disk, over "
                          f"{bound / 2**20:.1f} MiB (capacity {a.cache_capacity}, segments {a.cache_segment})")
        # The samples are 10 s apart; the shard's own high-water mark of its segment files catches a
        # peak between them. Its bound: puts wake the compacting sweep once the files pass the
        # capacity by 4 segments; compaction holds one victim's live bytes twice while it copies
        # them; and puts go on meanwhile (a segment's worth allowed).
        peak = samples[-1]["roles"].get("cache", {}).get("gauges", {}).get("ds41_store_segment_peak_bytes")
        if peak is not None:
            segments_bound = parse_bytes(a.cache_capacity) + 6 * parse_bytes(a.cache_segment)
            report["store"].update(segments_peak=peak, segments_bound=segments_bound)
            if peak > segments_bound:
                errors.append(f"the store's segment files reached {peak / 2**20:.1f} MiB, over "
                              f"{segments_bound / 2**20:.1f} MiB (capacity {a.cache_capacity} + 6 segments)")
    for k in ("failed", "timeout"):
        if summary.get(k):
            errors.append(f"{summary[k]} requests {k}")
    if agents["failed_sessions"]:
        errors.append(f"{agents['failed_sessions']} of {agents['sessions']} agent sessions failed (agents.log)")
    if any(restarts.values()):
        errors.append(f"roles restarted: {restarts}")
    report["plot"] = plot(out_dir, samples, roles)
    report["errors"] = errors
    json.dump(report, open(os.path.join(out_dir, "soak.json"), "w"), indent=2)
    print(json.dumps(report, indent=2))
    log("PASS" if not errors else "FAIL: " + "; ".join(errors))
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
