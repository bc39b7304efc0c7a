#!/usr/bin/python3
"""Validates the ds41-serve values the way `helm install` does, without helm: values.yaml merged
with each ci/*.yaml file must satisfy values.schema.json, and typical typos must be rejected.
Needs python3-yaml and python3-jsonschema (Debian); exits 77 (skip) without them."""
import copy
import glob
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonschema
    import yaml
except ImportError as e:
    print(f"SKIP: {e} (apt-get install python3-yaml python3-jsonschema)", file=sys.stderr)
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
chart = os.path.join(os.path.dirname(os.path.dirname(here)), "helm", "ds41-serve")
if len(sys.argv) > 1:
    chart = sys.argv[1]


def merge(base, over):
    """Helm's coalescing: maps merge recursively, everything else (lists too) replaces."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        elif v is None:
            out.pop(k, None)
        else:
            out[k] = copy.deepcopy(v)
    return out


# The committed schema is the generator's output (edits go to hack/gen_schema.py, not the JSON).
with tempfile.TemporaryDirectory() as tmp:
    generated = os.path.join(tmp, "values.schema.json")
    subprocess.run([sys.executable, os.path.join(chart, "hack", "gen_schema.py"), generated], check=True,
                   stdout=subprocess.DEVNULL)
    if open(generated).read() != open(os.path.join(chart, "values.schema.json")).read():
        print("FAIL: values.schema.json differs from what hack/gen_schema.py writes; run it", file=sys.stderr)
        sys.exit(1)

schema = json.load(open(os.path.join(chart, "values.schema.json")))
validator = jsonschema.Draft7Validator(schema)
defaults = yaml.safe_load(open(os.path.join(chart, "values.yaml")))
failures = []


def errors(values):
    return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(values)]


# Fails closed: the defaults alone (auth on, no key) must be refused, for that reason only.
default_errors = [e for e in validator.iter_errors(defaults)]
if [list(e.absolute_path) for e in default_errors] != [["auth", "apiKeys"]]:
    failures.append(f"values.yaml alone: want only the missing API key refused, got {errors(defaults)}")
# The defaults with one key: the base every typo below is checked against (else each would be
# refused for the missing key, and the check could not fail).
keyed = merge(defaults, {"auth": {"apiKeys": [{"tenant": "t", "key": "sk-0123456789", "salt": "0123456789ab"}]}})
for err in errors(keyed):
    failures.append(f"values.yaml with one key: {err}")
ci_files = sorted(glob.glob(os.path.join(chart, "ci", "*.yaml")))
if not ci_files:
    failures.append("no ci/*.yaml files")
for f in ci_files:
    for err in errors(merge(defaults, yaml.safe_load(open(f)) or {})):
        failures.append(f"{os.path.basename(f)}: {err}")

# Each of these must be rejected.
typos = {
    "misspelt top-level key": {"cacheservice": {"replicas": 2}},
    "misspelt router key": {"router": {"replica": 3}},
    "misspelt autoscaling key": {"encoder": {"autoscalling": {"enabled": False}}},
    "misspelt HPA target": {"decoder": {"autoscaling": {"targetRunningSequence": "10"}}},
    "misspelt storage class key": {"cacheService": {"persistence": {"storageclassName": "ssd"}}},
    "misspelt tls key": {"tls": {"enable": True}},
    "misspelt dashboards key": {"monitoring": {"dashboards": {"lable": "x"}}},
    "bad byte size": {"cacheService": {"capacity": "lots"}},
    "bad port": {"router": {"httpPort": 70000}},
    "bad fingerprint": {"model": {"fingerprint": "abc"}},
    "unknown FP4 numerics": {"model": {"fp4Numerics": "fast"}},
    "zero shards": {"cacheService": {"replicas": 0}},
    "string replicas": {"decoder": {"replicas": "2"}},
    "api key without salt": {"auth": {"apiKeys": [{"tenant": "a", "key": "sk-0123456789"}]}},
    "bad pull policy": {"image": {"pullPolicy": "Sometimes"}},
    "auth on without keys or a secret": {"auth": {"enabled": True, "existingSecret": "", "apiKeys": []}},
    "misspelt network policy key": {"networkPolicy": {"metricFrom": []}},
    "misspelt quota": {"auth": {"quotas": {"t": {"maxRuning": 4}}}},
    "zero quota": {"auth": {"quotas": {"t": {"tokensPerMinute": 0}}}},
}
for what, over in typos.items():
    if not errors(merge(keyed, over)):
        failures.append(f"schema accepts {what}: {over}")

for f in failures:
    print("FAIL:", f)
print(f"values.yaml + {len(ci_files)} ci files valid, {len(typos)} typo cases rejected: "
      f"{'FAILED' if failures else 'ok'}")
sys.exit(1 if failures else 0)
