"""Shared facts and helpers of the deploy/ tests (run by Debian's /usr/bin/python3).

The metric names and config keys below are copied from SPEC sections 4 and 5 (the
contract): a deploy file that names anything else is wrong, whatever the server does.
"""

import os
import re
import shutil
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
from unittest_main import run_tests  # noqa: E402,F401 (the suites call du.run_tests)

SOURCE_DIR = os.environ.get(
    "FUSERANK_SOURCE_DIR",
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEPLOY_DIR = os.path.join(SOURCE_DIR, "deploy")
K8S_BASE = os.path.join(DEPLOY_DIR, "k8s", "base")
K8S_CPU = os.path.join(DEPLOY_DIR, "k8s", "overlays", "cpu")
PROM_DIR = os.path.join(DEPLOY_DIR, "prometheus")
RECORDING_RULES = os.path.join(PROM_DIR, "rules", "fuserank-recording.yml")
ALERT_RULES = os.path.join(PROM_DIR, "rules", "fuserank-alerts.yml")
DASHBOARD = os.path.join(DEPLOY_DIR, "grafana", "fuserank-dashboard.json")
DOCKERFILE = os.path.join(DEPLOY_DIR, "Dockerfile")
DOCKER_CONFIG = os.path.join(DEPLOY_DIR, "docker", "fuserank.yaml")

# SPEC section 4: name -> (type, labels).
SPEC_METRICS = {
    "fuserank_requests_total": ("counter", {"rpc", "code"}),
    "fuserank_request_duration_seconds": ("histogram", {"rpc"}),
    "fuserank_stage_duration_seconds": ("histogram", {"stage"}),
    "fuserank_batch_candidates": ("histogram", set()),
    "fuserank_embedding_cache_lookups_total": ("counter", {"table", "result"}),
    "fuserank_hot_rows": ("gauge", {"table"}),
    "fuserank_hot_rows_version": ("gauge", set()),
    "fuserank_inflight_requests": ("gauge", set()),
    "fuserank_queue_depth": ("gauge", set()),
    "fuserank_model_info": ("gauge", {"model", "version", "device"}),
}
SPEC_STAGES = ["decode", "queue", "lookup", "cross", "dnn", "topk", "encode"]
# Additions beside section 4 (docs/spec.md): the storage: redis tier, whose families hold
# series only when a served model has a redis table (docs/remote-tables.md).
REMOTE_METRICS = {
    "fuserank_embedding_tier_lookups_total": ("counter", {"table", "tier"}),
    "fuserank_remote_errors_total": ("counter", {"table", "kind"}),
    "fuserank_remote_fetch_duration_seconds": ("histogram", set()),
    "fuserank_remote_round_trips_total": ("counter", set()),
    "fuserank_remote_fetches_total": ("counter", set()),
}


def spec_series_names():
    """Every series name a scrape can hold: histograms add _bucket, _sum and _count."""
    names = set()
    for name, (kind, _) in {**SPEC_METRICS, **REMOTE_METRICS}.items():
        names.add(name)
        if kind == "histogram":
            names.update({name + "_bucket", name + "_sum", name + "_count"})
    return names


# engine.* keys only the CUDA backend reads: under device: cpu the server warns that they do
# nothing (server/config_keys.cc, CudaOnly).
CUDA_ONLY_ENGINE_KEYS = ("gpu", "cuda_graphs", "allow_tf32", "cuda_wait", "on_device_failure")


def move_to_cpu(config):
    """`config` (a parsed server config) on the CPU engine, without the CUDA-only keys."""
    engine = config.setdefault("engine", {})
    engine["device"] = "cpu"
    for key in CUDA_ONLY_ENGINE_KEYS:
        engine.pop(key, None)
    return config


# SPEC section 5: the config keys (a dict is a section, None a leaf).
SPEC_CONFIG = {
    "server": {
        "listen": None, "admin_listen": None, "admin_token_file": None,
        "metrics_listen": None,
        "tls": {"cert_file": None, "key_file": None, "client_ca_file": None},
        "max_request_bytes": None, "max_candidates": None, "max_ids_per_feature": None,
        "shutdown_grace_seconds": None,
    },
    "engine": {
        "device": None, "gpu": None, "streams": None, "max_batch_candidates": None,
        "max_batch_wait_us": None, "queue_capacity": None, "cuda_graphs": None,
    },
    "cache": {"hot_rows_per_table": None, "policy": None, "rebuild_interval_seconds": None},
    "model": {"path": None},
    "logging": {"level": None, "format": None},
}


def unknown_config_keys(config, schema=SPEC_CONFIG, prefix=""):
    """Dotted keys of `config` that SPEC section 5 does not have."""
    bad = []
    if not isinstance(config, dict):
        return [prefix or "(top level)"]
    for key, value in config.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in schema:
            bad.append(path)
        elif isinstance(schema[key], dict):
            if value is not None:
                bad.extend(unknown_config_keys(value, schema[key], path))
        elif isinstance(value, (dict, list)):
            bad.append(path + " (a leaf, got a " + type(value).__name__ + ")")
    return bad


def load_yaml_docs(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def load_yaml(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def host_port(address):
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def is_loopback(host):
    return host == "localhost" or host == "::1" or host.startswith("127.")


# PromQL: recording-rule names have colons; raw metric names here all start fuserank_.
RECORDED_NAME = re.compile(r"\b[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]*[a-zA-Z0-9_]\b")
RAW_FUSERANK_NAME = re.compile(r"\bfuserank_[a-zA-Z0-9_]+\b")
STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"')


def promql_names(expr):
    """(recorded names, raw fuserank_* names) an expression reads. String literals (label
    values) and `[5m]` durations are left out."""
    code = STRING_LITERAL.sub('""', expr)
    code = re.sub(r"\[[^\]]*\]", "", code)  # range selectors hold no names
    recorded = set(RECORDED_NAME.findall(code))
    raw = set(RAW_FUSERANK_NAME.findall(RECORDED_NAME.sub(" ", code)))
    return recorded, raw


def recording_rules():
    """record name -> expr, from fuserank-recording.yml."""
    out = {}
    for group in load_yaml(RECORDING_RULES)["groups"]:
        for rule in group["rules"]:
            out[rule["record"]] = rule["expr"]
    return out


def alert_rules():
    out = []
    for group in load_yaml(ALERT_RULES)["groups"]:
        out.extend(group["rules"])
    return out


def configmap_config(path=os.path.join(K8S_BASE, "configmap.yaml")):
    (doc,) = load_yaml_docs(path)
    return yaml.safe_load(doc["data"]["fuserank.yaml"])


def kustomize(directory):
    """Rendered manifests of a kustomization (kubectl's built-in kustomize), or None when
    neither kubectl nor kustomize is installed."""
    if shutil.which("kustomize"):
        cmd = ["kustomize", "build", directory]
    elif shutil.which("kubectl"):
        cmd = ["kubectl", "kustomize", directory]
    else:
        return None
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    return [d for d in yaml.safe_load_all(out.stdout) if d is not None]


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def labels_match(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def python_check():
    """The tests need Debian's python3 (python3-yaml, python3-grpcio)."""
    if not sys.executable.startswith("/usr/bin/"):
        print(f"note: running under {sys.executable}, not /usr/bin/python3", file=sys.stderr)
