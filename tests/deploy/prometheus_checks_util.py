"""What the Prometheus integration test requires of a live fuserank-server: the recording
rules' values through PromQL, the /metrics page against SPEC section 4, and the Grafana
dashboard's queries."""

import json
import math
import re

import deploy_util as du
from rank_traffic_util import INVALID_EVERY


def finite(v):
    return not math.isnan(v) and not math.isinf(v)


def checks(tables, hot_version):
    """(name, PromQL, predicate on [(labels, value)]) that must all hold together."""
    def one(pred):
        return lambda r: len(r) == 1 and pred(r[0][1])

    def per_label(label, wanted, pred):
        return lambda r: ({l.get(label) for l, v in r if pred(v)} >= set(wanted))

    # Without a hot-row cache (hot_version None) there are no lookups to count: the hit
    # rate rules must still return a series per table, but it is NaN (0 / 0).
    hit_ok = (lambda v: finite(v) and 0 <= v <= 1) if hot_version is not None else (lambda v: True)

    j = '{job="fuserank"}'
    jr = '{job="fuserank",rpc="Rank"}'
    out = [
        ("target up", f"up{j}", one(lambda v: v == 1)),
        ("QPS", f"job:fuserank_requests:rate1m{j}", one(lambda v: v > 1)),
        ("QPS of Rank", f"job_rpc:fuserank_requests:rate1m{jr}", one(lambda v: v > 1)),
        ("QPS by code",
         'job_rpc_code:fuserank_requests:rate1m{job="fuserank",rpc="Rank",code="INVALID_ARGUMENT"}',
         one(lambda v: v > 0)),
        # 1 in INVALID_EVERY requests is refused: the error ratio is near 0.1.
        ("error ratio", f"job_rpc:fuserank_request_errors:ratio_rate5m{jr}",
         one(lambda v: 0.5 / INVALID_EVERY <= v <= 2.0 / INVALID_EVERY)),
        # ... and none of it is the server's fault.
        ("server error ratio", f"job_rpc:fuserank_request_server_errors:ratio_rate5m{jr}",
         one(lambda v: v == 0)),
        ("Rank p50", f"job_rpc:fuserank_request_duration_seconds:p50_rate5m{jr}",
         one(lambda v: finite(v) and 0 < v < 10)),
        ("Rank p99", f"job_rpc:fuserank_request_duration_seconds:p99_rate5m{jr}",
         one(lambda v: finite(v) and 0 < v < 10)),
        ("Rank p99 >= p50", f"job_rpc:fuserank_request_duration_seconds:p99_rate5m{jr} - "
         f"job_rpc:fuserank_request_duration_seconds:p50_rate5m{jr}", one(lambda v: v >= 0)),
        ("stage p50, every stage", f"job_stage:fuserank_stage_duration_seconds:p50_rate5m{j}",
         per_label("stage", du.SPEC_STAGES, lambda v: finite(v) and v > 0)),
        ("stage p99, every stage", f"job_stage:fuserank_stage_duration_seconds:p99_rate5m{j}",
         per_label("stage", du.SPEC_STAGES, lambda v: finite(v) and v > 0)),
        ("batch size mean", f"job:fuserank_batch_candidates:mean_rate5m{j}",
         one(lambda v: finite(v) and v >= 8)),
        ("batch size p99", f"job:fuserank_batch_candidates:p99_rate5m{j}",
         one(lambda v: finite(v) and v >= 8)),
        ("hit rate, every table", f"job_table:fuserank_embedding_cache_hit_ratio:rate5m{j}",
         per_label("table", tables, hit_ok)),
        ("hit rate, all tables", f"job:fuserank_embedding_cache_hit_ratio:rate5m{j}",
         one(hit_ok)),
        ("hit rate per pod, every table",
         f"instance_table:fuserank_embedding_cache_hit_ratio:rate5m{j}",
         per_label("table", tables, hit_ok)),
        ("queue saturation", f"instance:fuserank_queue_depth:saturation_max1m{j}",
         one(lambda v: finite(v) and 0 <= v <= 1)),
        ("in-flight", f"fuserank_inflight_requests{j}", one(lambda v: v >= 0)),
        ("model info", 'fuserank_model_info{job="fuserank",model="demo",device="cpu"}',
         one(lambda v: v == 1)),
    ]
    if hot_version is not None:  # the admin swap went through: Prometheus must see it
        out += [
            ("hot rows version", f"fuserank_hot_rows_version{j}", one(lambda v: v == hot_version)),
            (f"hot rows of {tables[0]}", f'fuserank_hot_rows{{job="fuserank",table="{tables[0]}"}}',
             one(lambda v: v == 100)),
        ]
    else:
        out.append(("hot rows version", f"fuserank_hot_rows_version{j}", one(lambda v: v >= 0)))
    return out


def check_metrics_page(text):
    """The scrape has every SPEC section 4 family with its type and labels."""
    types, labels = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
        elif line and not line.startswith("#"):
            name = line.split("{")[0].split(" ")[0]
            if "{" in line:
                body = line[line.index("{") + 1:line.rindex("}")]
                keys = {kv.split("=")[0] for kv in body.split('",') if "=" in kv}
                labels.setdefault(name, set()).update(k.strip(",") for k in keys)
    problems = []
    for name, (kind, want_labels) in du.SPEC_METRICS.items():
        if types.get(name) != kind:
            problems.append(f"{name}: TYPE {types.get(name)}, SPEC says {kind}")
            continue
        series = name + "_bucket" if kind == "histogram" else name
        got = labels.get(series, set()) - {"le"}
        if got != want_labels and not (name == "fuserank_model_info" and not got):
            problems.append(f"{name}: labels {sorted(got)}, SPEC says {sorted(want_labels)}")
    return problems


# Series that exist only for models with storage: redis tables.
REMOTE_ONLY = re.compile(r"fuserank_(embedding_tier_lookups|remote_)")


def dashboard_queries():
    with open(du.DASHBOARD, encoding="utf-8") as f:
        dashboard = json.load(f)
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            # No namespace label on a local scrape: Grafana's namespace variable is then
            # None, whose value is "", and namespace="" selects series without the label.
            expr = (target["expr"].replace("$namespace", "").replace("$job", "fuserank")
                    .replace("$instance", ".*"))
            yield panel["title"], expr
