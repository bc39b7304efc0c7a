#!/usr/bin/env python3
"""Chaos under load (issue 28 item 2; docs/chaos.md).

  chaos.py --build BUILD [--scenario short|long] [--out DIR] [--keep]

Starts a cluster of its own: two cache shards, two encoders, two decoders and the router, each under
a small supervisor that starts a role again 1 s after it ends (as scripts/run.sh does). decoder1
runs in a network namespace the script makes (a veth pair on 10.X.Y.0/30, addresses it owns); every
other role listens on the host end of that pair, so decoder1 reaches them and the router reaches
decoder1 only through the link. A real Prometheus scrapes every role every 0.5 s and evaluates the
chart's alert rules (rules/alerts.yaml, with each `for:` cut to 0 s: a fault here lasts seconds).

Concurrent agent sessions drive it: each turn is a streamed or whole /v1/completions request with
the session's context as token ids (greedy, return_token_ids, x-session-id, x-request-timeout),
and the next turn's prompt is that context, the reply's ids and a "tool result" of fresh ids. A turn
that fails is sent again. While they run, the script SIGKILLs each role in turn (the router
included), waits for the cluster to be back in full service (every role ready, the router sees
every node healthy, a probe request answers) and lets it settle; then it slows decoder1's link
(tc tbf: this kernel has no netem) and cuts it (its end of the veth down).

It asserts, and prints as figures (also in DIR/chaos.json):
  * no client waited past its deadline: every request ended in a full reply or a clean error
    (OpenAI JSON, or an SSE stream ending with an error event and [DONE]); a connection refused or
    reset counts as clean only while the router itself was down (nothing stands in front of it);
  * no acknowledged cache unit is lost or changed: every role writes the units the shards
    acknowledged to it (--cache-ack-log) and tools/ds41-cache-audit fetches them all at the end;
    the shards' checksum-failure counters stayed at 0;
  * every completed reply on the exact path equals the one-process engine's (`ds41 session`: the
    same turns with the CED semantics, one state continued). A turn is on the exact path when it
    hit its session's whole previous context with the exact SWA state, and so did every turn of
    the session before it; other turns (a shorter prefix while a shard was dead, an SWA state
    rebuilt by the bounded replay) may differ by design (MODEL.md 10.4) and are counted apart;
  * after each fault the cluster is back in full service and its prefix-hit share over the settle
    period is at least --hit-recovery (0.6) of the share before the first fault;
  * the alerts that should fire for each fault started firing during it (DS41TargetDown for the
    role's pool, DS41NodesNotReady for a node the router lost, DS41RouterUnavailable for the router).
Encoders and decoders are killed while they compute (ds41_<role>_running_sequences > 0), so a
prefill or a stream is cut in the middle.
Exit 0 when all hold, 1 otherwise, 77 (skip) when not root or without ip/tc/prometheus.
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

ROLES = ["cache0", "cache1", "encoder0", "encoder1", "decoder0", "decoder1", "router"]
POOL = {"cache0": "cache", "cache1": "cache", "encoder0": "encoder", "encoder1": "encoder",
        "decoder0": "decoder", "decoder1": "decoder", "router": "router"}
NS_ROLE = "decoder1"  # the role in the network namespace

SCENARIOS = {
    # Under a minute on 2 cores: one role of each kind killed, one cut.
    "short": dict(sessions=3, max_tokens=8, think=0.4, warmup=5.0, settle=3.0, deadline=20.0, max_context=700,
                  faults=[("kill", "decoder0"), ("kill", "cache1"), ("kill", "encoder1"), ("kill", "router"),
                          ("cut", NS_ROLE, 3.0)]),
    # Every role in turn, then a slow link and a cut.
    "long": dict(sessions=6, max_tokens=48, think=0.3, warmup=15.0, settle=12.0, deadline=30.0, max_context=1500,
                 faults=[("kill", "cache0"), ("kill", "encoder0"), ("kill", "decoder0"), ("kill", "router"),
                         ("kill", "cache1"), ("kill", "encoder1"), ("kill", "decoder1"),
                         ("delay", NS_ROLE, 15.0), ("cut", NS_ROLE, 8.0)]),
}
GRACE = 5.0  # a client gives up (and the test fails) this long past its deadline


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(*cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


class Netns:
    """A namespace with one end of a veth pair; the host keeps the other end. Owns 10.X.Y.0/30."""

    def __init__(self):
        pid = os.getpid()
        self.name = f"ds41chaos{pid}"
        self.host_if, self.ns_if = f"dch{pid % 100000}", f"dcn{pid % 100000}"
        net = f"10.{200 + pid % 50}.{(pid // 50) % 250}"
        self.host_ip, self.ns_ip = f"{net}.1", f"{net}.2"
        sh("ip", "netns", "add", self.name)
        sh("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        sh("ip", "link", "set", self.ns_if, "netns", self.name)
        sh("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
        sh("ip", "link", "set", self.host_if, "up")
        self.ns("ip", "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if)
        self.ns("ip", "link", "set", self.ns_if, "up")
        self.ns("ip", "link", "set", "lo", "up")
        self.ns("ip", "route", "add", "default", "via", self.host_ip)

    def ns(self, *cmd):
        return sh("ip", "netns", "exec", self.name, *cmd)

    def wrap(self, cmd):
        return ["ip", "netns", "exec", self.name] + cmd

    def cut(self, down):  # the namespace's end down: packets to and from it are dropped, silently
        self.ns("ip", "link", "set", self.ns_if, "down" if down else "up")

    def slow(self, on, rate="2mbit"):
        """tbf on both ends: every byte to or from the namespace waits for its tokens (no netem here)."""
        for prefix, dev in (([], self.host_if), (["ip", "netns", "exec", self.name], self.ns_if)):
            if on:
                sh(*prefix, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", "16kb",
                   "latency", "2s")
            else:
                sh(*prefix, "tc", "qdisc", "del", "dev", dev, "root", check=False)

    def close(self):
        sh("ip", "link", "del", self.host_if, check=False)
        sh("ip", "netns", "del", self.name, check=False)


def free_port(host):
    s = socket.socket()
    s.bind((host, 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Role:
    """One role under a supervisor thread: started again restart_delay s after it ends."""

    def __init__(self, name, cmd, logdir, restart_delay):
        self.name, self.cmd, self.restart_delay = name, cmd, restart_delay
        self.logpath = os.path.join(logdir, f"{name}.log")
        self.proc = None
        self.restarts = 0
        self.readies = 0
        self.stopping = False
        self.lock = threading.Lock()
        self.thread = None

    def ready_count(self):
        try:
            with open(self.logpath, errors="replace") as f:
                return sum(1 for line in f if " ready " in line)
        except FileNotFoundError:
            return 0

    def _spawn(self):
        out = open(self.logpath, "a")
        self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        out.close()

    def start(self, timeout=120):
        self._spawn()
        self.wait_ready(1, timeout)
        self.thread = threading.Thread(target=self._supervise, daemon=True)
        self.thread.start()

    def wait_ready(self, n, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.ready_count() >= n:
                return True
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} not ready after {timeout} s; see {self.logpath}")

    def _supervise(self):
        while True:
            rc = self.proc.wait()
            if self.stopping:
                return
            with open(self.logpath, "a") as f:
                f.write(f"chaos: {self.name} (pid {self.proc.pid}) ended ({rc}); restart in {self.restart_delay} s\n")
            time.sleep(self.restart_delay)
            if self.stopping:
                return
            with self.lock:
                self.restarts += 1
                self._spawn()

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)

    def stop(self):
        self.stopping = True
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Cluster:
    def __init__(self, build, model, work, netns, restart_delay):
        self.build, self.model, self.work, self.netns = build, model, work, netns
        h, n = netns.host_ip, netns.ns_ip
        self.host = h
        self.probe_failures = []  # full_service's probes that did not answer 200
        self.addr = {}
        for r in ROLES:
            ip = n if r == NS_ROLE else h
            self.addr[r] = dict(grpc=f"{ip}:{free_port(h if ip == h else '127.0.0.1')}",
                                metrics=f"{ip}:{free_port(h if ip == h else '127.0.0.1')}")
        self.addr["cache0"]["data"] = f"{h}:{free_port(h)}"
        self.addr["cache1"]["data"] = f"{h}:{free_port(h)}"
        self.http = f"{h}:{free_port(h)}"
        self.addr["router"]["metrics"] = self.http
        os.makedirs(f"{work}/logs", exist_ok=True)
        os.makedirs(f"{work}/acks", exist_ok=True)
        self.caches = ",".join(self.addr[c]["grpc"] for c in ("cache0", "cache1"))
        b = build
        self.roles = {}
        for c in ("cache0", "cache1"):
            a = self.addr[c]
            cmd = [f"{b}/cache_service/cache_service", "--listen", a["grpc"], "--data-listen", a["data"],
                   "--metrics-listen", a["metrics"], "--path", f"{work}/{c}", "--capacity", "4G", "--read-cache", "64M"]
            self.roles[c] = Role(c, cmd, f"{work}/logs", restart_delay)
        for r in ("encoder0", "encoder1", "decoder0", "decoder1"):
            a = self.addr[r]
            kind = r[:-1]
            cmd = [f"{b}/{kind}_node/{kind}_node", "--model", model, "--listen", a["grpc"], "--metrics-listen",
                   a["metrics"], "--cache", self.caches, "--threads", "1", "--cache-ack-log", f"{work}/acks/{r}.log"]
            if r == NS_ROLE:
                cmd = netns.wrap(cmd)
            self.roles[r] = Role(r, cmd, f"{work}/logs", restart_delay)
        enc = ",".join(self.addr[r]["grpc"] for r in ("encoder0", "encoder1"))
        dec = ",".join(self.addr[r]["grpc"] for r in ("decoder0", "decoder1"))
        self.roles["router"] = Role("router", [
            f"{b}/router/router", "--model", model, "--listen", self.http, "--grpc-listen", self.addr["router"]["grpc"],
            "--encoders", enc, "--decoders", dec, "--cache", self.caches, "--poll-ms", "250",
            "--cache-ack-log", f"{work}/acks/router.log", "--shutdown-grace-seconds", "2"], f"{work}/logs", restart_delay)

    def start(self):
        for r in ROLES:
            self.roles[r].start()
            log(f"  {r} ready ({self.addr[r]['grpc']})")

    def stop(self):
        for r in reversed(ROLES):
            self.roles[r].stop()

    def health(self):
        """The router's /health: {address: state}, or None when it does not answer."""
        try:
            c = http.client.HTTPConnection(*self.http.split(":"), timeout=2)
            c.request("GET", "/health")
            r = c.getresponse()
            body = json.loads(r.read())
            return {n["address"]: n["state"] for n in body.get("nodes", [])}
        except Exception:
            return None

    def full_service(self):
        if any(r.proc.poll() is not None for r in self.roles.values()):
            return False
        h = self.health()
        if not h or len(h) < 4 or any(s != "healthy" for s in h.values()):
            return False
        code, body = post(self.http, {"prompt": [random.randrange(16, 200) for _ in range(8)], "max_tokens": 2,
                                      "temperature": 0}, {"x-request-timeout": "5"}, 8)
        if code != 200:
            self.probe_failures.append(f"{code} {body[:120]!r}")
        return code == 200


def post(addr, body, headers, timeout):
    try:
        c = http.client.HTTPConnection(*addr.split(":"), timeout=timeout)
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json", **headers})
        r = c.getresponse()
        return r.status, r.read()
    except Exception as e:  # noqa: BLE001 - any transport failure is "no answer"
        return 0, str(e).encode()


class Record:
    """One request's outcome."""
    __slots__ = ("session", "turn", "attempt", "stream", "t0", "t1", "outcome", "detail", "prompt", "ids", "usage",
                 "code", "max_tokens_used", "exact_path")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))


class Load:
    """Agent sessions, each on its own thread, until stop()."""

    def __init__(self, cluster, sc, seed):
        self.c, self.sc = cluster, sc
        self.records = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.rng = random.Random(seed)
        self.threads = [threading.Thread(target=self._session_loop, args=(i, seed * 100 + i), daemon=True)
                        for i in range(sc["sessions"])]
        self.vocab = 4000

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(self.sc["deadline"] + GRACE + 5)

    def _session_loop(self, idx, seed):
        rng = random.Random(seed)
        gen = 0
        while not self.stopping.is_set():
            sid = f"chaos-{idx}-{gen}"
            ctx = [rng.randrange(16, self.vocab) for _ in range(rng.randrange(100, 200))]
            turn = 0
            while not self.stopping.is_set() and len(ctx) < self.sc["max_context"]:
                attempt = 0
                while not self.stopping.is_set():
                    stream = (turn + attempt + idx) % 2 == 0
                    rec = self._request(sid, turn, attempt, ctx, stream)
                    with self.lock:
                        self.records.append(rec)
                    if rec.outcome == "ok":
                        break
                    attempt += 1
                    time.sleep(0.3)
                else:
                    break
                ctx = ctx + rec.ids + [rng.randrange(16, self.vocab) for _ in range(rng.randrange(20, 80))]
                turn += 1
                time.sleep(self.sc["think"])  # the agent runs its tool
            gen += 1

    def _request(self, sid, turn, attempt, ctx, stream):
        d = self.sc["deadline"]
        body = {"prompt": ctx, "max_tokens": self.sc["max_tokens"], "temperature": 0, "return_token_ids": True,
                "stream": stream}
        headers = {"Content-Type": "application/json", "x-session-id": sid, "x-request-timeout": str(int(d))}
        rec = Record(session=sid, turn=turn, attempt=attempt, stream=stream, t0=time.time(), prompt=list(ctx))
        try:
            conn = http.client.HTTPConnection(*self.c.http.split(":"), timeout=d + GRACE)
            conn.request("POST", "/v1/completions", json.dumps(body), headers)
            r = conn.getresponse()
            rec.code = r.status
            if r.status != 200 or not stream:
                data = r.read()
                try:
                    j = json.loads(data)
                except ValueError:
                    j = None
                if r.status == 200 and j and "choices" in j:
                    rec.outcome, rec.ids, rec.usage = "ok", j["choices"][0]["token_ids"], j["usage"]
                elif r.status != 200 and isinstance(j, dict) and isinstance(j.get("error"), dict):
                    rec.outcome, rec.detail = "error", f"{r.status} {j['error'].get('type')}"
                else:
                    rec.outcome, rec.detail = "unclean", f"{r.status} {data[:200]!r}"
            else:
                self._read_stream(r, rec)
        except socket.timeout:
            rec.outcome, rec.detail = "hang", f"no byte for {d + GRACE} s"
        except (ConnectionError, http.client.HTTPException, OSError) as e:
            rec.outcome, rec.detail = "transport", f"{type(e).__name__}: {e}"
        rec.t1 = time.time()
        if rec.outcome in ("ok", "error") and rec.t1 - rec.t0 > d + GRACE:
            rec.outcome, rec.detail = "late", f"{rec.t1 - rec.t0:.1f} s"
        return rec

    @staticmethod
    def _read_stream(r, rec):
        final, error, done = None, None, False
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            payload = line[6:]
            if payload == b"[DONE]":
                done = True
                break
            j = json.loads(payload)
            if "error" in j:
                error = j["error"]
            elif j.get("choices") and j["choices"][0].get("finish_reason"):
                final = j
        if done and final is not None and error is None and "token_ids" in final["choices"][0]:
            rec.outcome, rec.ids, rec.usage = "ok", final["choices"][0]["token_ids"], final["usage"]
        elif done and error is not None:
            rec.outcome, rec.detail = "error", f"sse {error.get('type')}: {error.get('message', '')[:80]}"
        else:
            rec.outcome, rec.detail = "unclean", f"stream ended without [DONE] or error (done={done})"


class Prometheus:
    def __init__(self, work, cluster, repo):
        self.work = work
        rules = open(f"{repo}/helm/ds41-serve/rules/alerts.yaml").read()
        import re
        rules = re.sub(r"(\n\s+)for: \S+", r"\1for: 0s", rules)
        open(f"{work}/alerts.yaml", "w").write(rules)
        jobs = {}
        for r in ROLES:
            jobs.setdefault(POOL[r], []).append(cluster.addr[r]["metrics"])
        cfg = {"global": {"scrape_interval": "500ms", "scrape_timeout": "500ms", "evaluation_interval": "500ms"},
               "rule_files": [f"{work}/alerts.yaml"],
               "scrape_configs": [{"job_name": f"ds41-{p}", "static_configs": [{"targets": a, "labels": {"pool": p}}],
                                   "relabel_configs": [{"source_labels": ["__address__"], "target_label": "pod"}]}
                                  for p, a in jobs.items()]}
        json.dump(cfg, open(f"{work}/prometheus.yml", "w"))
        self.port = free_port("127.0.0.1")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={work}/prometheus.yml", f"--storage.tsdb.path={work}/tsdb",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=open(f"{work}/logs/prometheus.log", "w"), stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                self.query("up")
                return
            except Exception:
                time.sleep(0.1)
        raise RuntimeError("prometheus did not start")

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as f:
            return json.load(f)["data"]

    def query(self, q):
        return self.api("query", query=q)["result"]

    def firing(self, start, end):
        """[(alertname, labels, [times firing])] over [start, end]."""
        res = self.api("query_range", query='ALERTS{alertstate="firing"}', start=f"{start:.3f}", end=f"{end:.3f}",
                       step="0.5")["result"]
        return [(s["metric"]["alertname"], s["metric"], [float(t) for t, _ in s["values"]]) for s in res]

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def expected_alerts(kind, role):
    """(alertname, label, value) that must fire for a fault."""
    if kind == "kill" and role == "router":
        return [("DS41RouterUnavailable", None, None), ("DS41TargetDown", "pool", "router")]
    if kind == "kill" and POOL[role] == "cache":
        return [("DS41TargetDown", "pool", "cache")]
    if kind in ("kill", "cut"):
        return [("DS41TargetDown", "pool", POOL[role]), ("DS41NodesNotReady", "role", POOL[role])]
    return []  # a slow link: nothing is down


def wait_running(metrics_addr, pool, timeout):
    """Polls a node's ds41_<pool>_running_sequences until it is above 0; returns the value seen last."""
    end, value = time.time() + timeout, 0.0
    while time.time() < end:
        try:
            with urllib.request.urlopen(f"http://{metrics_addr}/metrics", timeout=1) as f:
                for line in f.read().decode().splitlines():
                    if line.startswith(f"ds41_{pool}_running_sequences"):
                        value = float(line.split()[-1])
        except OSError:
            pass
        if value > 0:
            return value
        time.sleep(0.02)
    return value


def run_faults(cluster, netns, sc, phases):
    """Injects the faults in turn; fills phases with their times."""
    t = time.time()
    time.sleep(sc["warmup"])
    phases.append(dict(name="baseline", t_fault=t, t_recovered=t + sc["warmup"] / 3, t_end=time.time()))
    for kind, role, *hold in sc["faults"]:
        name = f"{kind} {role}"
        ph = dict(name=name, kind=kind, role=role, t_fault=time.time())
        log(f"fault: {name}")
        r = cluster.roles[role]
        if kind == "kill":
            readies = r.ready_count()
            if POOL[role] in ("encoder", "decoder"):
                # Kill it while it computes something (up to 5 s of waiting), so that a prefill or a
                # stream is cut in the middle rather than between requests.
                ph["running_at_kill"] = wait_running(cluster.addr[role]["metrics"], POOL[role], 5.0)
            r.kill()
            r.wait_ready(readies + 1, 120)
            ph["t_role_ready"] = time.time()
        elif kind == "cut":
            netns.cut(True)
            time.sleep(hold[0])
            netns.cut(False)
            ph["t_restored"] = time.time()
        elif kind == "delay":
            netns.slow(True)
            time.sleep(hold[0])
            netns.slow(False)
            ph["t_restored"] = time.time()
        end = time.time() + 120
        cluster.probe_failures.clear()
        while not cluster.full_service():
            if time.time() > end:
                raise RuntimeError(f"no full service 120 s after {name}")
            time.sleep(0.1)
        ph["t_recovered"] = time.time()
        ph["probe_failures"] = list(cluster.probe_failures)
        log(f"  full service {ph['t_recovered'] - ph['t_fault']:.1f} s after the fault")
        time.sleep(sc["settle"])
        ph["t_end"] = time.time()
        phases.append(ph)


def hit_share(records, t_from, t_to):
    hit = tot = n = 0
    for r in records:
        if r.outcome == "ok" and t_from <= r.t0 < t_to:
            hit += r.usage["prompt_cache_hit_tokens"]
            tot += r.usage["prompt_tokens"]
            n += 1
    return (hit / tot if tot else None), n


def references(build, model, work, records, jobs=2):
    """Per completed turn: "same", "differs", or "approx" (bounded replay in it or before it)."""
    by_session = {}
    for r in records:
        if r.outcome == "ok":
            by_session.setdefault(r.session, []).append(r)
    procs, verdict = [], {}
    items = sorted(by_session.items())
    os.makedirs(f"{work}/ref", exist_ok=True)

    def launch(sid, turns):
        path = f"{work}/ref/{sid}.turns"
        with open(path, "w") as f:
            for r in turns:
                f.write(f"{r.max_tokens_used} {','.join(map(str, r.prompt))}\n")
        return subprocess.Popen([f"{build}/tools/ds41", "session", "--model", model, "--turns", path],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    pending = list(items)
    running = []
    while pending or running:
        while pending and len(running) < jobs:
            sid, turns = pending.pop(0)
            turns.sort(key=lambda r: r.turn)
            running.append((sid, turns, launch(sid, turns)))
        sid, turns, p = running.pop(0)
        out, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"ds41 session failed for {sid}: {err[-500:]}")
        refs = [list(map(int, line.split(","))) for line in out.strip().splitlines()]
        with open(f"{work}/ref/{sid}.out", "w") as f:
            f.write(out)
        # A turn is on the exact path when it hit the session's whole previous context (prompt and
        # reply but its last token) with the exact SWA state, and every turn before it was too.
        # Otherwise some positions were computed with another replay start (a shorter prefix after
        # a shard died, a fresh prefill, a rebuilt SWA state), which may change the reply by design.
        exact, expected = True, 0
        for r, ref in zip(turns, refs):
            hit = r.usage["prompt_cache_hit_tokens"]
            exact = exact and hit == expected and r.usage["ds41"].get("encoder_replay_tokens", 0) == 0
            r.exact_path = exact
            verdict[id(r)] = "same" if r.ids == ref else ("differs" if exact else "approx")
            expected = len(r.prompt) + len(r.ids) - 1
    return verdict


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--scenario", choices=sorted(SCENARIOS), default="short")
    ap.add_argument("--out", help="keep logs and chaos.json here (default: a temporary folder)")
    ap.add_argument("--model", help="checkpoint with a tokenizer (default: BUILD/models/chaos, the small preset "
                    "written once by ds41-ckpt as scripts/run.sh writes its own)")
    ap.add_argument("--hit-recovery", type=float, default=0.6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root (network namespaces)")
        return 77
    for tool in ("ip", "tc", "prometheus"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} not found")
            return 77
    sc = SCENARIOS[a.scenario]
    build = os.path.abspath(a.build)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    work = os.path.abspath(a.out) if a.out else tempfile.mkdtemp(prefix="ds41-chaos.")
    if a.out:
        shutil.rmtree(work, ignore_errors=True)
    os.makedirs(f"{work}/logs", exist_ok=True)
    model = a.model
    if not model:
        model = f"{build}/models/chaos"
        if not os.path.exists(f"{model}/tokenizer.json"):
            shutil.rmtree(model, ignore_errors=True)
            sh(f"{build}/tools/ds41-ckpt", "--preset", "small", "--seed", "1", "--out", model, "--tokenizer-corpus",
               f"{repo}/docs", f"{repo}/README.md")
    t_start = time.time()

    def terminated(signum, _frame):  # ctest's timeout, Ctrl-C: clean up (finally below) and fail
        raise SystemExit(f"signal {signum}")
    signal.signal(signal.SIGTERM, terminated)
    signal.signal(signal.SIGINT, terminated)
    netns = Netns()
    cluster = prom = load = None
    ok = True
    report = {"scenario": a.scenario}
    try:
        cluster = Cluster(build, model, work, netns, restart_delay=1.0)
        log(f"cluster ({work}); decoder1 in netns {netns.name} at {netns.ns_ip}")
        cluster.start()
        prom = Prometheus(work, cluster, repo)
        load = Load(cluster, sc, a.seed)
        load.start()
        phases = []
        run_faults(cluster, netns, sc, phases)
        load.stop()
        t_load_end = time.time()
        log("load stopped; auditing")
        recs = load.records
        for r in recs:
            r.max_tokens_used = sc["max_tokens"]

        # 1. Every request ended in a reply or a clean error, within its deadline.
        router_down = []
        for ph in phases:
            if ph.get("kind") == "kill" and ph["role"] == "router":
                router_down.append((ph["t_fault"] - 0.2, ph["t_role_ready"] + 0.5))
        counts = {}
        bad = []
        for r in recs:
            o = r.outcome
            if o == "transport" or (o == "unclean" and r.detail.startswith("stream ended")):
                # Refused, reset, or a stream cut short: clean only when the router itself died.
                o = "router_down" if any(r.t0 <= e and r.t1 >= s for s, e in router_down) else "unclean"
            counts[o] = counts.get(o, 0) + 1
            if o in ("unclean", "hang", "late"):
                bad.append(f"{r.session} turn {r.turn}: {o} {r.detail}")
        lat = sorted(r.t1 - r.t0 for r in recs)
        report["requests"] = dict(total=len(recs), outcomes=counts, max_seconds=round(lat[-1], 2) if lat else None,
                                  deadline_s=sc["deadline"],
                                  errors=sorted({r.detail for r in recs if r.outcome == "error"}))
        if bad:
            ok = False
        # 2. Acknowledged units.
        audit = subprocess.run([f"{build}/tools/ds41-cache-audit", "--cache", cluster.caches] +
                               [f"{work}/acks/{f}" for f in sorted(os.listdir(f"{work}/acks"))],
                               capture_output=True, text=True)
        try:
            report["audit"] = json.loads(audit.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            report["audit"] = {"error": audit.stderr[-500:]}
        if audit.returncode != 0:
            ok = False
            bad.append(f"cache audit: {report['audit']} {audit.stderr[-300:]}")
        time.sleep(1.0)
        csum = prom.query("sum(max_over_time(ds41_store_checksum_failures_total[1h]))")
        evict = prom.query("sum(max_over_time(ds41_store_evictions_total[1h]))")
        report["audit"]["checksum_failures"] = float(csum[0]["value"][1]) if csum else None
        report["audit"]["evictions"] = float(evict[0]["value"][1]) if evict else None
        if report["audit"]["checksum_failures"]:
            ok = False
        # 3. Replies against the one-process engine.
        t_ref = time.time()
        v = references(build, model, work, recs)
        log(f"references: {time.time() - t_ref:.1f} s")
        with open(f"{work}/records.jsonl", "w") as f:
            for r in recs:
                f.write(json.dumps(dict(session=r.session, turn=r.turn, attempt=r.attempt, stream=r.stream,
                                        t0=r.t0, t1=r.t1, outcome=r.outcome, detail=r.detail, code=r.code,
                                        prompt_tokens=len(r.prompt), ids=r.ids, usage=r.usage,
                                        verdict=v.get(id(r)), exact_path=r.exact_path)) + "\n")
        vc = {}
        for r in recs:
            if r.outcome == "ok":
                vc[v[id(r)]] = vc.get(v[id(r)], 0) + 1
        migrated = sum(1 for r in recs if r.outcome == "ok" and r.usage["ds41"].get("migrations", 0) > 0)
        migrated_same = sum(1 for r in recs if r.outcome == "ok" and r.usage["ds41"].get("migrations", 0) > 0
                            and v[id(r)] == "same")
        exact_n = sum(1 for r in recs if r.outcome == "ok" and r.exact_path)
        exact_same = sum(1 for r in recs if r.outcome == "ok" and r.exact_path and v[id(r)] == "same")
        report["replies"] = dict(completed=sum(vc.values()), **vc, exact_path=exact_n, exact_path_same=exact_same,
                                 migrated=migrated, migrated_same=migrated_same)
        if vc.get("differs"):
            ok = False
            for r in recs:
                if r.outcome == "ok" and v[id(r)] == "differs" and len(bad) < 20:
                    bad.append(f"{r.session} turn {r.turn}: reply differs from ds41 session; usage {r.usage['ds41']}")
        # 4. Recovery and the prefix-hit share.
        base, base_n = hit_share(recs, phases[0]["t_recovered"], phases[0]["t_end"])
        report["baseline_hit_share"] = dict(share=round(base, 3) if base else None, requests=base_n)
        faults = []
        for ph in phases[1:]:
            during, n_during = hit_share(recs, ph["t_fault"], ph["t_recovered"])
            after, n_after = hit_share(recs, ph["t_recovered"], ph["t_end"])
            f = dict(fault=ph["name"], full_service_after_s=round(ph["t_recovered"] - ph["t_fault"], 2),
                     hit_share_during=round(during, 3) if during is not None else None, requests_during=n_during,
                     hit_share_after=round(after, 3) if after is not None else None, requests_after=n_after)
            if ph.get("probe_failures"):
                f["probe_failures"] = ph["probe_failures"][:5]
                f["probes_failed"] = len(ph["probe_failures"])
            if "running_at_kill" in ph:
                f["running_at_kill"] = ph["running_at_kill"]
            if ph.get("t_role_ready"):
                f["role_ready_after_s"] = round(ph["t_role_ready"] - ph["t_fault"], 2)
            if base and (after is None or after < a.hit_recovery * base):
                f["hit_share_recovered"] = False
                ok = False
                bad.append(f"{ph['name']}: hit share after {after} < {a.hit_recovery} x baseline {base:.3f}")
            faults.append(f)
        # 5. Alerts.
        fired = prom.firing(t_start, time.time())
        # An alert belongs to a fault when it starts firing during it (or up to 3 s after full
        # service): one that already fired before (since Prometheus started, or since an earlier
        # fault, over its rate window) is not this fault's.
        starts = [(n, m, [t for i, t in enumerate(ts) if i == 0 or t - ts[i - 1] > 1.0]) for n, m, ts in fired]
        for f, ph in zip(faults, phases[1:]):
            lo, hi = ph["t_fault"], ph["t_recovered"] + 3.0
            seen = sorted({n + (f"{{{m.get('pool') or m.get('role') or ''}}}") for n, m, ts in starts
                           if any(lo <= t <= hi for t in ts)})
            f["alerts_fired"] = seen
            missing = []
            for name, label, value in expected_alerts(ph["kind"], ph["role"]):
                if not any(n == name and (label is None or m.get(label) == value) and any(lo <= t <= hi for t in ts)
                           for n, m, ts in starts):
                    missing.append(f"{name}{{{label}={value}}}" if label else name)
            f["alerts_missing"] = missing
            if missing:
                ok = False
                bad.append(f"{ph['name']}: expected alerts did not fire: {missing}")
        report["faults"] = faults
        report["alerts_timeline"] = [dict(alert=n, labels={k: m[k] for k in ("pool", "role", "pod") if k in m},
                                          first_s=round(min(ts) - t_start, 1), last_s=round(max(ts) - t_start, 1),
                                          samples=len(ts), at_s=[round(t - t_start, 1) for t in ts])
                                     for n, m, ts in fired]
        report["fault_times_s"] = [dict(fault=ph["name"], at=round(ph["t_fault"] - t_start, 1),
                                        recovered=round(ph["t_recovered"] - t_start, 1)) for ph in phases[1:]]
        report["restarts"] = {r: cluster.roles[r].restarts for r in ROLES}
        report["seconds"] = round(time.time() - t_start, 1)
        report["load_seconds"] = round(t_load_end - phases[0]["t_fault"], 1)
        report["problems"] = bad
        report["ok"] = ok
    except (Exception, SystemExit) as e:  # noqa: BLE001
        ok = False
        report["ok"] = False
        report["exception"] = repr(e)
        log(f"FAIL: {e!r}")
    finally:
        if load:
            load.stopping.set()
        if cluster:
            cluster.stop()
        if prom:
            prom.stop()
        netns.close()
    with open(f"{work}/chaos.json", "w") as f:
        json.dump(report, f, indent=1)
    print_report(report)
    print(f"details: {work}/chaos.json, logs in {work}/logs")
    if not a.out and not a.keep and ok:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def print_report(rep):
    q = rep.get("requests", {})
    print(f"\nchaos ({rep['scenario']}): {rep.get('seconds')} s, load {rep.get('load_seconds')} s")
    if q:
        print(f"  requests: {q['total']}, outcomes {q['outcomes']}, slowest {q['max_seconds']} s "
              f"(deadline {q['deadline_s']} s + {GRACE} s grace)")
        for e in q["errors"]:
            print(f"    clean error seen: {e}")
    if "audit" in rep:
        print(f"  acknowledged units: {rep['audit']}")
    if "replies" in rep:
        print(f"  replies vs ds41 session: {rep['replies']}")
    if "baseline_hit_share" in rep:
        print(f"  prefix-hit share before faults: {rep['baseline_hit_share']}")
    for f in rep.get("faults", []):
        print(f"  {f['fault']:<14} {'(' + str(int(f['running_at_kill'])) + ' running) ' if 'running_at_kill' in f else ''}"
              f"full service after {f['full_service_after_s']:>5} s"
              f"{' (role ready ' + str(f['role_ready_after_s']) + ' s)' if 'role_ready_after_s' in f else ''}; "
              f"hit share during {f['hit_share_during']} ({f['requests_during']} req), after {f['hit_share_after']} "
              f"({f['requests_after']} req); alerts {f.get('alerts_fired')}"
              f"{'; MISSING ' + str(f['alerts_missing']) if f.get('alerts_missing') else ''}"
              f"{'; probes failed ' + str(f['probes_failed']) + ' ' + str(f['probe_failures'][:2]) if f.get('probes_failed') else ''}")
    if rep.get("restarts"):
        print(f"  restarts: {rep['restarts']}")
    for p in rep.get("problems", []):
        print(f"  PROBLEM: {p}")
    if rep.get("exception"):
        print(f"  exception: {rep['exception']}")


if __name__ == "__main__":
    sys.exit(main())
