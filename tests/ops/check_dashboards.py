#!/usr/bin/python3
"""Checks every PromQL expression of the ds41-serve dashboards and alert rules.

For each panel target expr in helm/ds41-serve/dashboards/*.json and each alert expr in
helm/ds41-serve/rules/alerts.yaml:
  1. it parses: all expressions are written as recording rules into one temporary rule file
     and `promtool check rules` must accept it;
  2. every metric name it references exists: the known families are extracted from the C++
     sources (serving/node_metrics.cc for ds41_encoder_* / ds41_decoder_*,
     cache_service/store/store_metrics.cc for ds41_store_*, cache_service/data_metrics.cc for
     ds41_cache_data_*) plus the router's families (fixed
     list below, the router's contract); histogram series may add _bucket/_count/_sum;
  3. the label names used in selector matchers exist on that family (or are target labels).

Usage: check_dashboards.py [--repo DIR] [--promtool PATH] [--list-metrics]
Exit codes: 0 ok, 1 failures, 77 promtool missing (skip).
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The router's exported families (name -> (type, label names)).
ROUTER_METRICS = {
    "ds41_router_requests_total": ("counter", {"endpoint", "code"}),
    "ds41_router_ttft_seconds": ("histogram", {"hit_class"}),
    "ds41_router_inter_token_seconds": ("histogram", {"hit_class"}),
    "ds41_router_e2e_seconds": ("histogram", {"hit_class"}),
    "ds41_router_prompt_tokens_total": ("counter", {"kind"}),
    "ds41_router_completion_tokens_total": ("counter", set()),
    "ds41_router_placement_decisions_total": ("counter", {"policy", "reason"}),
    "ds41_router_rejections_total": ("counter", {"reason"}),
    "ds41_router_ttft_prediction_error_seconds": ("histogram", set()),
    "ds41_router_nodes": ("gauge", {"role", "state"}),
    "ds41_router_running_requests": ("gauge", set()),
    "ds41_router_sessions_bound": ("gauge", set()),
    "ds41_router_sessions_bound_limit": ("gauge", set()),
    "ds41_router_migrations_total": ("counter", {"outcome"}),
    "ds41_router_migration_stall_seconds": ("histogram", set()),
    "ds41_router_reply_splices_total": ("counter", {"outcome"}),
    "ds41_router_reply_spliced_tokens_total": ("counter", set()),
    "ds41_router_reply_records_total": ("counter", {"outcome"}),
}
# Series Prometheus itself produces for every target.
BUILTIN_METRICS = {"up": ("gauge", set()), "scrape_duration_seconds": ("gauge", set())}
# Labels every target carries (Prometheus and the chart's ServiceMonitor relabelings).
TARGET_LABELS = {"job", "instance", "pool", "pod", "namespace", "service", "container", "endpoint"}

PROMQL_WORDS = {
    "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
    "group_right", "inf", "nan", "atan2", "start", "end",
}


def extract_cpp_metrics(repo):
    """Returns name -> (type, labels) from the C++ metric definitions."""
    out = {}
    sources = [("serving/node_metrics.cc", ["encoder", "decoder"]),
               ("cache_service/store/store_metrics.cc", [None]),
               ("cache_service/data_metrics.cc", [None])]
    build_re = re.compile(
        r'(\w+)\(prometheus::Build(Counter|Gauge|Histogram)\(\)\.Name\(("ds41_"\s*\+\s*role\s*\+\s*"(\w+)"|"(\w+)")\)')
    for rel, roles in sources:
        path = os.path.join(repo, rel)
        with open(path) as f:
            text = f.read()
        families = {}  # member -> (suffix or full name, type, labels)
        for m in build_re.finditer(text):
            member, kind = m.group(1), m.group(2).lower()
            templ = m.group(4)
            name = m.group(5)
            labels = set()
            # Labels added inline: .Register(r).Add({{"k", "v"}, ...}) on the same statement.
            stmt = text[m.end():text.find("\n", m.end())]
            labels |= set(re.findall(r'\{"(\w+)",\s*"[^"]*"\}', stmt))
            families[member] = [templ, name, kind, labels]
        # Labels added through the family member: x(member.Add({{"k", "v"}}))
        for member, key in re.findall(r'\w+\((\w+)\.Add\(\{\{"(\w+)",', text):
            if member in families:
                families[member][3].add(key)
        if not families:
            raise SystemExit(f"no metric families found in {path}")
        for templ, name, kind, labels in families.values():
            if templ is not None:
                for role in roles:
                    out[f"ds41_{role}{templ}"] = (kind, labels)
            else:
                out[name] = (kind, labels)
    # Every role's process figures, made when scraped: One("name", "help", MetricType::Kind, ...).
    with open(os.path.join(repo, "util/process_metrics.cc")) as f:
        for name, kind in re.findall(r'One\("(\w+)",\s*"[^"]*",\s*MetricType::(\w+)', f.read()):
            out[name] = (kind.lower(), set())
    return out


def load_alert_exprs(path):
    try:
        import yaml  # Debian python3-yaml
        with open(path) as f:
            doc = yaml.safe_load(f)
        return [(f"alert {r.get('alert') or r.get('record')}", r["expr"])
                for g in doc["groups"] for r in g["rules"]]
    except ImportError:
        pass
    # Fallback for the file's own layout: "expr: <one line>" or "expr: |" + indented block.
    exprs, lines, name = [], open(path).read().splitlines(), "?"
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"\s*- (alert|record): (\S+)", line)
        if m:
            name = m.group(2)
        m = re.match(r"(\s*)expr: (.*)$", line)
        if m:
            if m.group(2).strip() in ("|", "|-", ">", ">-"):
                indent, block = len(m.group(1)), []
                i += 1
                while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                    block.append(lines[i].strip())
                    i += 1
                exprs.append((f"alert {name}", "\n".join(block).strip()))
                continue
            exprs.append((f"alert {name}", m.group(2).strip()))
        i += 1
    return exprs


def load_dashboard_exprs(files):
    out = []

    def walk(panels, fname):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((f"{os.path.basename(fname)}: {p.get('title')}", t["expr"]))
            walk(p.get("panels", []), fname)

    for fname in files:
        with open(fname) as f:
            d = json.load(f)
        walk(d.get("panels", []), fname)
    return out


def strip_strings(expr):
    return re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)


def referenced(expr):
    """Returns (metric names, [(metric name, label names in its matcher)])."""
    e = strip_strings(expr)
    e = re.sub(r"#[^\n]*", " ", e)
    selectors = []
    for m in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}", e):
        labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(2)))
        selectors.append((m.group(1), labels))
    e = re.sub(r"\{[^}]*\}", " ", e)            # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)           # ranges / subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", e):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in PROMQL_WORDS:
            continue
        names.add(word)
    return names, selectors


def resolve(name, known):
    if name in known:
        return name, known[name]
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix):
            base = name[: -len(suffix)]
            if base in known and known[base][0] == "histogram":
                return base, known[base]
    return None, None


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default=os.path.normpath(os.path.join(here, "..", "..")))
    ap.add_argument("--promtool", default=shutil.which("promtool") or "/usr/bin/promtool")
    ap.add_argument("--list-metrics", action="store_true", help="print the known families and exit")
    ap.add_argument("--emit-exprs", metavar="FILE", help="write all expressions as JSON (for prometheus_live.sh)")
    args = ap.parse_args()

    known = dict(BUILTIN_METRICS)
    known.update(ROUTER_METRICS)
    known.update(extract_cpp_metrics(args.repo))
    if args.list_metrics:
        for n in sorted(known):
            print(n, known[n][0], ",".join(sorted(known[n][1])))
        return 0

    chart = os.path.join(args.repo, "helm", "ds41-serve")
    dash_files = sorted(glob.glob(os.path.join(chart, "dashboards", "*.json")))
    if not dash_files:
        print("no dashboards found", file=sys.stderr)
        return 1
    exprs = load_dashboard_exprs(dash_files) + load_alert_exprs(os.path.join(chart, "rules", "alerts.yaml"))
    if args.emit_exprs:
        with open(args.emit_exprs, "w") as f:
            json.dump([{"where": w, "expr": x} for w, x in exprs], f, indent=1)

    failures = []
    # Every family must be used somewhere? No: only that every reference is known.
    for where, expr in exprs:
        names, selectors = referenced(expr)
        if not names:
            failures.append(f"{where}: no metric referenced in {expr!r}")
        for n in sorted(names):
            base, info = resolve(n, known)
            if base is None:
                failures.append(f"{where}: unknown metric {n!r}")
        for n, labels in selectors:
            base, info = resolve(n, known)
            if base is None:
                continue
            allowed = info[1] | TARGET_LABELS | ({"le"} if n.endswith("_bucket") else set())
            for lab in sorted(labels - allowed):
                failures.append(f"{where}: metric {n} has no label {lab!r} (has {sorted(info[1])})")

    # Syntax: every expression as a recording rule, checked by promtool.
    if not os.path.exists(args.promtool):
        print("SKIP: promtool not found (apt-get install prometheus)", file=sys.stderr)
        for f in failures:
            print("FAIL:", f)
        return 1 if failures else 77
    with tempfile.TemporaryDirectory() as tmp:
        bad = []
        for i, (where, expr) in enumerate(exprs):
            rule_file = os.path.join(tmp, f"r{i}.json")  # JSON is valid YAML
            with open(rule_file, "w") as f:
                json.dump({"groups": [{"name": "g", "rules": [{"record": f"ds41:check_{i}", "expr": expr}]}]}, f)
            r = subprocess.run([args.promtool, "check", "rules", rule_file], capture_output=True, text=True)
            if r.returncode != 0:
                bad.append(f"{where}: promtool rejects {expr!r}: {(r.stdout + r.stderr).strip()}")
        failures += bad

    for f in failures:
        print("FAIL:", f)
    print(f"checked {len(exprs)} expressions ({len(dash_files)} dashboards + alerts) against "
          f"{len(known)} metric families: {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
