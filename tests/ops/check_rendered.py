#!/usr/bin/python3
"""Assertions on the objects `helm template` rendered from the ds41-serve chart.

Usage: check_rendered.py RENDERED.yaml CI_VALUES.yaml CHART_DIR [REPO_DIR]
Called by check_helm.sh for every ci/*.yaml values file. Needs python3-yaml.
"""
import copy
import json
import os
import re
import sys

import yaml

rendered_path, values_path, chart = sys.argv[1:4]
repo = sys.argv[4] if len(sys.argv) > 4 else os.path.dirname(os.path.dirname(os.path.abspath(chart)))
NS = "serving"  # check_helm.sh renders with --namespace serving, release name ds41


def merge(base, over):
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        elif v is None:
            out.pop(k, None)
        else:
            out[k] = copy.deepcopy(v)
    return out


V = merge(yaml.safe_load(open(os.path.join(chart, "values.yaml"))), yaml.safe_load(open(values_path)))
docs = [d for d in yaml.safe_load_all(open(rendered_path)) if d]
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def objs(kind, component=None):
    return [d for d in docs if d["kind"] == kind and
            (component is None or d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component)]


def one(kind, component):
    found = objs(kind, component)
    check(len(found) == 1, f"expected one {kind} for {component}, found {len(found)}")
    return found[0] if found else None


def binary_options(main_cc):
    """Flags and DS41_ environment names a binary accepts (from its CLI11 definitions)."""
    text = open(os.path.join(repo, main_cc)).read()
    if "AddNodeFlags" in text:  # the flags both node binaries share (TLS included)
        text += open(os.path.join(repo, "serving/node_setup.cc")).read()
    if "AddTlsFlags" in text:  # the TLS flags every binary shares
        text += open(os.path.join(repo, "rpc/transport_security.cc")).read()
    flags = set(re.findall(r'add_(?:option|flag)\("(--[a-z0-9-]+)', text))
    envs = set(re.findall(r'envname\("(DS41_[A-Z0-9_]+)"\)', text))
    return flags, envs


BINARIES = {"router": "router/main.cc", "encoder": "encoder_node/main.cc", "decoder": "decoder_node/main.cc",
            "cache": "cache_service/main.cc"}
TLS_ENV = {"DS41_TLS_CERT", "DS41_TLS_KEY", "DS41_TLS_CA", "DS41_TLS_CLIENT_AUTH", "DS41_TLS_SERVER_NAME"}

# --- workloads
workloads = {}
for comp, kind in [("router", "Deployment"), ("encoder", "Deployment"), ("decoder", "Deployment"),
                   ("cache", "StatefulSet")]:
    w = one(kind, comp)
    if w is None:
        continue
    workloads[comp] = w
    spec = w["spec"]
    pod = spec["template"]
    sel = spec["selector"]["matchLabels"]
    check(all(pod["metadata"]["labels"].get(k) == v for k, v in sel.items()),
          f"{comp}: selector does not match the pod labels")
    for c in pod["spec"]["containers"]:
        check("readinessProbe" in c and "livenessProbe" in c, f"{comp}: container {c['name']} lacks probes")
        check(c.get("resources", {}).get("requests"), f"{comp}: container {c['name']} has no resource requests")
        env_names = {e["name"] for e in (c.get("env") or [])}
        mounts = {m["name"] for m in (c.get("volumeMounts") or [])}
        tunables = {e["name"]: e.get("value") for e in (c.get("env") or [])}.get("GLIBC_TUNABLES")
        check(tunables == (V.get("mallocTunables") or None), f"{comp}: GLIBC_TUNABLES {tunables!r} does not follow mallocTunables")
        if V["tls"]["enabled"]:
            check(TLS_ENV <= env_names, f"{comp}: TLS env missing")
            check("tls" in mounts, f"{comp}: TLS volume not mounted")
        else:
            check(not (TLS_ENV & env_names), f"{comp}: TLS env set although tls.enabled is false")
            check("tls" not in mounts, f"{comp}: TLS mounted although tls.enabled is false")
        if comp in BINARIES:
            flags, envs = binary_options(BINARIES[comp])
            for e in env_names:
                if e.startswith("DS41_"):
                    check(e in envs, f"{comp}: env {e} is not an option of {BINARIES[comp]}")
            for a in (c.get("args") or []):
                flag = a.split("=", 1)[0]
                if flag.startswith("--") and a not in (V[{"cache": "cacheService"}.get(comp, comp)].get("extraArgs") or []):
                    check(flag in flags, f"{comp}: flag {flag} is not an option of {BINARIES[comp]}")
            probes = json.dumps([c.get("readinessProbe"), c.get("livenessProbe")])
            if not V["tls"]["enabled"] and comp != "router":  # the router's probes are HTTP /health
                check('"grpc"' in probes, f"{comp}: expected gRPC health probes")
        # Each declared port is one the process listens on, /metrics on the one named "metrics" (a
        # port nothing listens on would pass every probe-free check and serve nothing).
        listens = {}
        for a in (c.get("args") or []):
            m = re.fullmatch(r"--([a-z-]*listen)=.*:(\d+)", a)
            if m:
                listens[m.group(1)] = int(m.group(2))
        for e in (c.get("env") or []):
            m = re.fullmatch(r".*:(\d+)", str(e.get("value", "")))
            if e["name"].endswith("LISTEN") and m:
                listens[e["name"].lower().replace("_", "-")] = int(m.group(1))
        ports = {p["name"]: p["containerPort"] for p in (c.get("ports") or [])}
        for name, port in ports.items():
            check(port in listens.values(), f"{comp}: container port {name} ({port}) is not one the process listens on {listens}")
        if "metrics" in ports:
            check(any("metrics" in k and v == ports["metrics"] for k, v in listens.items()),
                  f"{comp}: /metrics is not served on the metrics port ({listens})")
        for svc in objs("Service", comp):
            for p in svc["spec"]["ports"]:
                check(p.get("targetPort", p["port"]) in (set(ports) | set(ports.values())),
                      f"{comp}: Service {svc['metadata']['name']} targets {p.get('targetPort')}, not a port of the pod")
                if svc["metadata"]["name"].endswith("-metrics"):
                    check(p.get("targetPort") in ("metrics", ports.get("metrics")),
                          f"{comp}: metrics Service targets {p.get('targetPort')}")
        if comp in ("encoder", "decoder"):
            check("model" in mounts, f"{comp}: model not mounted")
            check(("weight-tiles" in mounts) == (V["model"]["weightTiles"] == "file"),
                  f"{comp}: weight-tiles mount does not follow model.weightTiles")
            check(c.get("envFrom"), f"{comp}: ConfigMap not loaded")
        if comp == "decoder":
            check(("--speculative" in (c.get("args") or [])) == bool(V["decoder"].get("speculative")),
                  "decoder: --speculative does not follow decoder.speculative")
        if comp == "router":
            check(c["readinessProbe"].get("httpGet", {}).get("path") == "/health", "router: readiness not on /health")
            # Liveness must not follow the pools (a decoder outage would restart every router).
            check(c["livenessProbe"].get("httpGet", {}).get("path") == "/livez", "router: liveness not on /livez")
            check(("auth" in mounts) == bool(V["auth"]["enabled"]), "router: auth secret mount does not follow auth.enabled")
            admin = V["auth"].get("adminTokenSecret") or ""
            admin_vols = [v for v in pod["spec"].get("volumes", []) if v["name"] == "admin-token"]
            check(("admin-token" in mounts) == bool(admin) and len(admin_vols) == int(bool(admin)),
                  "router: admin token mount does not follow auth.adminTokenSecret")
            check(not admin_vols or admin_vols[0]["secret"]["secretName"] == admin, "router: admin token from another Secret")
            check(("--admin-token-file=/etc/ds41/admin/admin-token" in (c.get("args") or [])) == bool(admin),
                  "router: --admin-token-file does not follow auth.adminTokenSecret")
            profile = V["router"].get("costProfile") or {}
            check(("cost-profile" in mounts) == bool(profile), "router: cost profile mount does not follow router.costProfile")
            check(("--cost-profile=/etc/ds41/cost-profile/cost-profile.json" in (c.get("args") or [])) == bool(profile),
                  "router: --cost-profile does not follow router.costProfile")
            maps = {m["metadata"]["name"]: m for m in objs("ConfigMap")}
            rendered = [m for n, m in maps.items() if n.endswith("-cost-profile")]
            check(len(rendered) == int(bool(profile)), "router: cost profile ConfigMap count")
            if profile and rendered:
                check(json.loads(rendered[0]["data"]["cost-profile.json"]) == profile,
                      "router: cost profile ConfigMap differs from router.costProfile")

# --- replicas and autoscaling
for comp in ("encoder", "decoder"):
    a = V[comp]["autoscaling"]
    hpas = objs("HorizontalPodAutoscaler", comp)
    w = workloads.get(comp)
    if a["enabled"]:
        check(len(hpas) == 1, f"{comp}: HPA missing")
        if hpas and w:
            h = hpas[0]["spec"]
            check(h["scaleTargetRef"]["name"] == w["metadata"]["name"], f"{comp}: HPA targets the wrong workload")
            check(h["minReplicas"] == a["minReplicas"] and h["maxReplicas"] == a["maxReplicas"],
                  f"{comp}: HPA bounds differ from values")
            names = [m["pods"]["metric"]["name"] for m in h["metrics"] if m["type"] == "Pods"]
            want = [a["computedTokensMetric"]] if comp == "encoder" else \
                [a["residentBytesMetric"], a["runningSequencesMetric"]]
            check(names == want, f"{comp}: HPA metrics {names} != {want}")
        check(w is None or "replicas" not in w["spec"], f"{comp}: replicas set although the HPA owns them")
    else:
        check(not hpas, f"{comp}: HPA rendered although autoscaling is off")
        check(w is None or w["spec"].get("replicas") == V[comp]["replicas"], f"{comp}: replicas differ from values")

# --- services
router_svcs = objs("Service", "router")
api_svcs = [s for s in router_svcs if not s["metadata"]["name"].endswith("-metrics")]
metrics_svcs = [s for s in router_svcs if s["metadata"]["name"].endswith("-metrics")]
check(len(api_svcs) == 1 and len(metrics_svcs) == 1, f"router: want an API Service and a metrics Service, found {len(router_svcs)}")
router_svc = api_svcs[0] if api_svcs else None
if router_svc:
    ports = {p["name"]: p["port"] for p in router_svc["spec"]["ports"]}
    check(ports == {"http": V["router"]["httpPort"], "grpc": V["router"]["grpcPort"]}, f"router service ports {ports}")
if metrics_svcs:
    # The counters never ride the (possibly public) API Service.
    m_spec = metrics_svcs[0]["spec"]
    check(m_spec["type"] == "ClusterIP" and [(p["name"], p["port"]) for p in m_spec["ports"]] == [("metrics", V["router"]["metricsPort"])],
          f"router metrics Service: {m_spec}")
cache = workloads.get("cache")
headless = [s for s in objs("Service", "cache") if s["spec"].get("clusterIP") == "None"]
check(len(headless) == 1, "cache: headless Service missing")
if cache and headless:
    sts = cache["metadata"]["name"]
    svc = headless[0]["metadata"]["name"]
    check(cache["spec"]["serviceName"] == svc, "cache: StatefulSet serviceName is not the headless Service")
    check(cache["spec"]["replicas"] == V["cacheService"]["replicas"], "cache: replicas differ from values")
    vct = cache["spec"]["volumeClaimTemplates"][0]["spec"]
    sc = V["cacheService"]["persistence"]["storageClassName"]
    check(vct.get("storageClassName", "") == sc, f"cache: storageClassName {vct.get('storageClassName')} != {sc!r}")
    check(vct["resources"]["requests"]["storage"] == V["cacheService"]["persistence"]["size"], "cache: PVC size")
    # The bulk data path: listened on, exposed by the pod and by the headless Service.
    cv = V["cacheService"]
    c0 = cache["spec"]["template"]["spec"]["containers"][0]
    cports = {p["name"]: p["containerPort"] for p in c0.get("ports") or []}
    sports = {p["name"]: p["port"] for p in headless[0]["spec"]["ports"]}
    check(cports.get("data") == cv["dataPort"], f"cache: container data port {cports.get('data')} != {cv['dataPort']}")
    check(sports.get("data") == cv["dataPort"], f"cache: headless Service data port {sports.get('data')} != {cv['dataPort']}")
    cenv = {e["name"]: e.get("value") for e in c0.get("env") or []}
    check(cenv.get("DS41_CACHE_DATA_LISTEN") == f"0.0.0.0:{cv['dataPort']}", "cache: DS41_CACHE_DATA_LISTEN differs from dataPort")
    cms = [d for d in docs if d["kind"] == "ConfigMap" and "DS41_CACHE_SHARDS" in d.get("data", {})]
    check(len(cms) == 1, "ConfigMap with DS41_CACHE_SHARDS missing")
    if cms:
        shards = cms[0]["data"]["DS41_CACHE_SHARDS"].split(",")
        want = [f"{sts}-{i}.{svc}.{NS}.svc:{V['cacheService']['grpcPort']}" for i in range(V["cacheService"]["replicas"])]
        check(shards == want, f"shard list {shards} != {want}")
        check(cms[0]["data"]["DS41_MODEL"] == V["model"]["path"], "ConfigMap DS41_MODEL differs from model.path")

# --- secrets
secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}
auth_secrets = [s for s in secrets.values() if "api-keys.json" in s.get("stringData", {})]
if V["auth"]["enabled"] and not V["auth"]["existingSecret"]:
    check(len(auth_secrets) == 1, "auth Secret missing")
    if auth_secrets:
        keys = json.loads(auth_secrets[0]["stringData"]["api-keys.json"]).get("keys", {})
        check(set(keys) == {k["key"] for k in V["auth"]["apiKeys"]}, "auth Secret keys differ from values")
        check({v["tenant"] for v in keys.values()} == {k["tenant"] for k in V["auth"]["apiKeys"]},
              "auth Secret tenants differ from values")
        check(all(set(v) == {"tenant", "salt"} for v in keys.values()), "auth Secret entries need tenant and salt")
        # Quotas as the router's tenant file names them (router/tenants.h).
        tenants = json.loads(auth_secrets[0]["stringData"]["api-keys.json"]).get("tenants", {})
        as_router = {"maxRunning": "max_running", "tokensPerMinute": "tokens_per_minute"}
        want = {name: {as_router[k]: v for k, v in q.items()} for name, q in V["auth"].get("quotas", {}).items()}
        check(tenants == want, f"auth Secret quotas {tenants} differ from values {want}")
else:
    check(not auth_secrets, "auth Secret rendered although not wanted")
tls_secrets = [s for s in secrets.values() if "tls.crt" in s.get("data", {})]
check(len(tls_secrets) == int(bool(V["tls"]["enabled"] and not V["tls"]["existingSecret"])), "TLS Secret count")

# --- network policies: each pool admits only its callers (and the metrics scrapers)
CALLERS = {"encoder": {"router", "decoder", "encoder"}, "decoder": {"router", "encoder"},
           "cache": {"router", "encoder", "decoder"}}
policies = objs("NetworkPolicy")
if V["networkPolicy"]["enabled"]:
    check(len(policies) == 4, f"expected 4 NetworkPolicies, found {len(policies)}")
    for comp, key in [("encoder", "encoder"), ("decoder", "decoder"), ("cache", "cacheService")]:
        pol = [p for p in policies if p["spec"]["podSelector"]["matchLabels"].get("app.kubernetes.io/component") == comp]
        check(len(pol) == 1, f"{comp}: NetworkPolicy count")
        if not pol:
            continue
        spec = pol[0]["spec"]
        check(spec["policyTypes"] == ["Ingress"], f"{comp}: policy types")
        rules = spec["ingress"]
        grpc_rule = [r for r in rules if any(p["port"] == V[key]["grpcPort"] for p in r["ports"])]
        check(len(grpc_rule) == 1, f"{comp}: one rule for the gRPC port")
        if grpc_rule:
            r = grpc_rule[0]
            froms = {f["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for f in r["from"]}
            check(froms == CALLERS[comp], f"{comp}: gRPC admitted from {sorted(froms)}, want {sorted(CALLERS[comp])}")
            check(all("namespaceSelector" not in f for f in r["from"]), f"{comp}: gRPC open to other namespaces")
            ports = {p["port"] for p in r["ports"]}
            want = {V[key]["grpcPort"]} | ({V[key]["dataPort"]} if comp == "cache" else set())
            check(ports == want, f"{comp}: ports {sorted(ports)} admitted to callers, want {sorted(want)}")
        metrics_rule = [r for r in rules if [p["port"] for p in r["ports"]] == [V[key]["metricsPort"]]]
        check(len(metrics_rule) == 1 and metrics_rule[0]["from"] == V["networkPolicy"]["metricsFrom"],
              f"{comp}: metrics port not admitted from networkPolicy.metricsFrom only")
        check(len(rules) == 2, f"{comp}: unexpected ingress rules")
    # The router: its API ports from apiFrom, /metrics on its own port from metricsFrom only.
    pol = [p for p in policies if p["spec"]["podSelector"]["matchLabels"].get("app.kubernetes.io/component") == "router"]
    check(len(pol) == 1, "router: NetworkPolicy count")
    if pol:
        rules = pol[0]["spec"]["ingress"]
        api = {V["router"]["httpPort"], V["router"]["grpcPort"]}
        check(len(rules) == 2, "router: unexpected ingress rules")
        check(any({p["port"] for p in r["ports"]} == api and r.get("from", []) == V["networkPolicy"]["apiFrom"] for r in rules),
              "router: API ports not admitted from networkPolicy.apiFrom")
        check(any([p["port"] for p in r["ports"]] == [V["router"]["metricsPort"]] and r["from"] == V["networkPolicy"]["metricsFrom"]
                  for r in rules), "router: metrics port not admitted from networkPolicy.metricsFrom only")
else:
    check(not policies, "NetworkPolicies rendered although networkPolicy.enabled is false")

# --- disruption budgets
for comp, key in [("router", "router"), ("encoder", "encoder"), ("decoder", "decoder"), ("cache", "cacheService")]:
    pdbs = objs("PodDisruptionBudget", comp)
    check(len(pdbs) == int(bool(V[key]["pdb"]["enabled"])), f"{comp}: PodDisruptionBudget count")

# --- monitoring
m = V["monitoring"]
check(len(objs("ServiceMonitor")) == int(bool(m["serviceMonitor"]["enabled"])), "ServiceMonitor toggle")
for sm in objs("ServiceMonitor"):
    # Every pool, the router included, on its "metrics" port: the API port serves no /metrics.
    check([e["port"] for e in sm["spec"]["endpoints"]] == ["metrics"], "ServiceMonitor scrapes other ports than metrics")
rules = objs("PrometheusRule")
check(len(rules) == int(bool(m["prometheusRule"]["enabled"])), "PrometheusRule toggle")
if rules:
    want = yaml.safe_load(open(os.path.join(chart, "rules", "alerts.yaml")))
    check(rules[0]["spec"] == want, "PrometheusRule spec differs from rules/alerts.yaml")
dash = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"].get("labels", {}).get(m["dashboards"]["label"])
        == str(m["dashboards"]["labelValue"])]
n_json = len([f for f in os.listdir(os.path.join(chart, "dashboards")) if f.endswith(".json")])
check(len(dash) == (n_json if m["dashboards"]["enabled"] else 0), f"dashboard ConfigMaps: {len(dash)}")
for d in dash:
    for k, v in d["data"].items():
        try:
            check(json.loads(v).get("panels"), f"{d['metadata']['name']}: dashboard without panels")
        except ValueError as e:
            failures.append(f"{d['metadata']['name']}/{k}: not JSON: {e}")
    if m["dashboards"]["namespace"]:
        check(d["metadata"].get("namespace") == m["dashboards"]["namespace"], "dashboard namespace")

for f in failures:
    print("FAIL:", f)
print(f"{os.path.basename(values_path)}: {len(docs)} objects, {'FAILED' if failures else 'ok'}")
sys.exit(1 if failures else 0)
