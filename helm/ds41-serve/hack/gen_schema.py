#!/usr/bin/python3
"""Generates ../values.schema.json (committed; or the path given as the argument, which
tests/ops/check_values_schema.py compares with it). Objects of the chart's own sections are closed
(additionalProperties: false) so that a misspelt key is an error rather than silently ignored."""
import json
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "values.schema.json")


def obj(props, required=None, closed=True, **kw):
    o = {"type": "object", "properties": props, "additionalProperties": not closed}
    if required:
        o["required"] = required
    o.update(kw)
    return o


S = {"type": "string"}
B = {"type": "boolean"}
ANY_OBJ = {"type": "object"}
LIST = {"type": "array"}
PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
POS = {"type": "integer", "minimum": 1}
NONNEG = {"type": "integer", "minimum": 0}
BYTES = {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?[KMGT]?$",
         "description": "byte size with an optional K/M/G/T suffix (as the binaries parse it)"}
QUANTITY = {"anyOf": [{"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?([eE][0-9]+|[KMGTPE]i?|m|k)?$"},
                      {"type": "number", "minimum": 0}]}
RESOURCES = obj({"requests": ANY_OBJ, "limits": ANY_OBJ})
CMD = {"type": "array", "items": S, "minItems": 1}
# NetworkPolicy peers (from: entries) allowed to reach a port.
PEERS = {"type": "array", "items": obj({"podSelector": ANY_OBJ, "namespaceSelector": ANY_OBJ, "ipBlock": ANY_OBJ})}
ENV = {"type": "array", "items": obj({"name": S, "value": S, "valueFrom": ANY_OBJ}, required=["name"])}
ARGS = {"type": "array", "items": S}
PDB = obj({"enabled": B, "minAvailable": {"type": ["integer", "string"]},
           "maxUnavailable": {"type": ["integer", "string"]}}, required=["enabled"])
STARTUP = obj({"failureThreshold": POS})
SCHED = {"nodeSelector": ANY_OBJ, "tolerations": LIST, "affinity": ANY_OBJ}


def grace(what):
    return {"type": "integer", "minimum": 0, "maximum": 3600,
            "description": f"on SIGTERM, seconds in-flight {what} may finish before they are cancelled; the pod's "
                           "terminationGracePeriodSeconds is this + 10"}


def hpa(extra):
    props = {"enabled": B, "minReplicas": POS, "maxReplicas": POS, "scaleDownStabilizationSeconds": NONNEG}
    props.update(extra)
    return obj(props, required=["enabled", "minReplicas", "maxReplicas"])


METRIC_NAME = {"type": "string", "pattern": "^[a-zA-Z_:][a-zA-Z0-9_:]*$"}

schema = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "ds41-serve values",
    "type": "object",
    "additionalProperties": False,
    "required": ["image", "model", "router", "encoder", "decoder", "cacheService", "auth", "tls", "monitoring"],
    "properties": {
        "global": ANY_OBJ,
        "nameOverride": S,
        "fullnameOverride": S,
        "mallocTunables": dict(S, description="GLIBC_TUNABLES for every binary; empty: glibc's defaults"),
        "image": obj({"repository": {"type": "string", "minLength": 1}, "tag": S,
                      "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]}}, required=["repository"]),
        "imagePullSecrets": {"type": "array", "items": obj({"name": S}, required=["name"])},
        "model": obj({"path": {"type": "string", "pattern": "^/"},
                      "fingerprint": {"type": "string", "pattern": "^([0-9a-fA-F]{64})?$"},
                      "existingClaim": S, "hostPath": {"type": "string", "pattern": "^(/.*)?$"},
                      "weightTiles": {"enum": ["file", "memory", "off"]},
                      "weightTilesHostPath": {"type": "string", "pattern": "^/"},
                      "fp4Numerics": {"enum": ["canonical", "grid"]}},
                     required=["path"]),
        "podAnnotations": ANY_OBJ,
        "podLabels": ANY_OBJ,
        "podSecurityContext": ANY_OBJ,
        "securityContext": ANY_OBJ,
        "router": obj({"replicas": NONNEG, "command": CMD, "httpPort": PORT, "grpcPort": PORT,
                       "service": obj({"type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
                                       "annotations": ANY_OBJ}),
                       "maxRequestBytes": POS, "maxRunning": POS,
                       "placement": {"type": "string", "enum": ["cost", "round_robin", "random", "least_loaded",
                                                                "sticky", "prefix_affinity"],
                                     "description": "placement policy; cost is the production one, the others are "
                                                    "baselines for comparison"},
                       "costProfile": dict(ANY_OBJ, description="rate profile the cost model starts from (ds41-sim "
                                                                "calibrate's JSON as YAML; docs/simulator.md); "
                                                                "empty: generic rates"),
                       "maxQueueSeconds": {"type": "number", "minimum": 0, "maximum": 86400,
                                           "description": "refuse a new request with 429 and Retry-After when its "
                                                          "predicted wait behind queued work exceeds this (0: never)"},
                       "maxMigrations": dict(NONNEG, description="times a request whose decoder dies mid-stream "
                                                               "may move to another decoder (0: end its stream "
                                                               "with an error event)"),
                       "replySplice": dict(B, description="splice chat replies' generated ids back when clients "
                                                          "re-send them, so agent turns hit the whole previous "
                                                          "context (docs/session_reuse.md)"),
                       "requestTimeoutSeconds": {"type": "integer", "minimum": 1, "maximum": 86400,
                                                 "description": "a request's deadline when its client sets none "
                                                                "(x-request-timeout, x-stainless-timeout), and the "
                                                                "longest"},
                       "shutdownGraceSeconds": grace("requests"),
                       "extraArgs": ARGS, "extraEnv": ENV, "resources": RESOURCES, "pdb": PDB, **SCHED,
                       "metricsPort": PORT},
                      required=["replicas", "httpPort", "grpcPort", "metricsPort"]),
        "encoder": obj({"replicas": NONNEG, "command": CMD, "grpcPort": PORT, "metricsPort": PORT,
                        "threads": NONNEG, "stepTokens": {"type": "integer", "minimum": 1, "maximum": 1048576},
                        "swaPoolBytes": BYTES, "swaTtlSeconds": NONNEG, "shutdownGraceSeconds": grace("calls"),
                        "extraArgs": ARGS, "extraEnv": ENV, "resources": RESOURCES, "startupProbe": STARTUP,
                        "pdb": PDB, **SCHED,
                        "autoscaling": hpa({"computedTokensMetric": METRIC_NAME,
                                            "targetComputedTokensPerSecond": QUANTITY})},
                       required=["replicas", "grpcPort", "metricsPort", "autoscaling"]),
        "decoder": obj({"replicas": NONNEG, "command": CMD, "grpcPort": PORT, "metricsPort": PORT,
                        "threads": NONNEG, "expertCacheBytes": BYTES, "sessionBytes": BYTES,
                        "sessionTtlSeconds": NONNEG, "swaPoolBytes": BYTES, "swaTtlSeconds": NONNEG,
                        "maxRunning": {"type": "integer", "minimum": 1, "maximum": 4096},
                        "speculative": dict(B, description="speculative decoding with the model's DSpark "
                                                           "layers (--speculative)"),
                        "shutdownGraceSeconds": grace("calls"),
                        "extraArgs": ARGS, "extraEnv": ENV, "resources": RESOURCES, "startupProbe": STARTUP,
                        "pdb": PDB, **SCHED,
                        "autoscaling": hpa({"residentBytesMetric": METRIC_NAME, "targetResidentBytes": QUANTITY,
                                            "runningSequencesMetric": METRIC_NAME,
                                            "targetRunningSequences": QUANTITY})},
                       required=["replicas", "grpcPort", "metricsPort", "autoscaling"]),
        "cacheService": obj({"replicas": POS, "command": CMD, "grpcPort": PORT, "metricsPort": PORT,
                             "dataPort": dict(PORT, description="bulk data path port (unit payloads beside gRPC; "
                                                                "TLS when tls.enabled)"),
                             "capacity": BYTES, "ttlHours": {"type": "number", "minimum": 0},
                             "sweepSeconds": POS, "syncWrites": B, "bufferedWrites": B, "readCache": BYTES,
                             "indexMemory": BYTES, "indexCache": BYTES,
                             "extraArgs": ARGS, "extraEnv": ENV, "resources": RESOURCES, "pdb": PDB, **SCHED,
                             "persistence": obj({"storageClassName": S, "size": QUANTITY,
                                                 "accessModes": {"type": "array", "items": S, "minItems": 1}},
                                                required=["size"])},
                            required=["replicas", "grpcPort", "metricsPort", "dataPort", "capacity", "persistence"]),
        "auth": obj({"enabled": B, "existingSecret": S,
                     "adminTokenSecret": {"type": "string", "pattern": "^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)?$"},
                     "apiKeys": {"type": "array",
                                 "items": obj({"tenant": {"type": "string", "minLength": 1},
                                               "key": {"type": "string", "minLength": 8},
                                               "salt": {"type": "string", "minLength": 8}},
                                              required=["tenant", "key", "salt"])},
                     "quotas": {"type": "object",
                                "additionalProperties": obj({"maxRunning": POS, "tokensPerMinute": POS},
                                                            minProperties=1)}},
                    required=["enabled"],
                    # Enabled with the keys in the chart (no existing Secret): at least one key.
                    **{"if": {"properties": {"enabled": {"const": True}, "existingSecret": {"const": ""}},
                              "required": ["enabled"]},
                       "then": {"properties": {"apiKeys": {"minItems": 1}}, "required": ["apiKeys"]}}),
        "tls": obj({"enabled": B, "clientAuth": B, "serverName": S, "existingSecret": S, "cert": S, "key": S, "ca": S,
                    "mountPath": {"type": "string", "pattern": "^/"}}, required=["enabled"]),
        "monitoring": obj({
            "serviceMonitor": obj({"enabled": B, "interval": S, "scrapeTimeout": S, "labels": ANY_OBJ},
                                  required=["enabled"]),
            "prometheusRule": obj({"enabled": B, "labels": ANY_OBJ}, required=["enabled"]),
            "dashboards": obj({"enabled": B, "label": {"type": "string", "minLength": 1}, "labelValue": S,
                               "namespace": S, "folder": S, "annotations": ANY_OBJ}, required=["enabled"]),
        }),
        "networkPolicy": obj({"enabled": B, "apiFrom": PEERS, "metricsFrom": PEERS}, required=["enabled"]),
    },
}

out = sys.argv[1] if len(sys.argv) > 1 else OUT
with open(out, "w") as f:
    json.dump(schema, f, indent=2)
    f.write("\n")
print("wrote", out)
