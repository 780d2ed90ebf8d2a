#!/usr/bin/env python3
"""JSON lines of server_e2e.sh: a load point from fuserank-bench, and the /metrics check.

usage: e2e_report.py load CANDIDATES CONCURRENCY [MODEL] < fuserank-bench --json's last line
       e2e_report.py metrics PORT DEVICE
       e2e_report.py stages PORT STATE_FILE
Each prints one JSON line; exit 1 when the load point had errors or the check failed.
`stages` prints the mean of each fuserank_stage_duration_seconds stage and of a call as
the server sees it (us), the mean batch size in candidates and requests, over the samples since the scrape saved in
STATE_FILE (all of them when it does not exist), and saves this scrape there.
"""

import json
import re
import sys
import urllib.request


def load(candidates, concurrency, model="bench"):
    text = sys.stdin.read().strip()
    try:
        r = json.loads(text)
    except ValueError:
        print(json.dumps({"bench": "load", "candidates": candidates, "concurrency": concurrency,
                          "qps": 0, "p50_ms": 0, "p99_ms": 0, "errors": -1,
                          "problem": f"no JSON from fuserank-bench: {text[:200]}"}))
        return 1
    row = {"bench": "load", "candidates": candidates, "concurrency": concurrency,
           "qps": r.get("qps", 0), "p50_ms": r.get("p50_ms", 0), "p99_ms": r.get("p99_ms", 0),
           "errors": r.get("errors", 0), "ok": r.get("ok", 0), "model": model}
    print(json.dumps(row))
    return 0 if row["errors"] == 0 and row["ok"] > 0 else 1


def series(text, name):
    """{labels string: value} of every sample of metric `name`."""
    out = {}
    for m in re.finditer(r"^%s(\{[^}]*\})? ([^ \n]+)" % re.escape(name), text, re.M):
        out[m.group(1) or ""] = float(m.group(2))
    return out


def scrape(port, bench):
    """The /metrics text at `port`, or None after printing `bench`'s failure line."""
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    except OSError as e:
        print(json.dumps({"bench": bench, "ok": False, "problems": [f"scrape failed: {e}"]}))
        return None


def metrics(port, device):
    problems = []
    text = scrape(port, "metrics")
    if text is None:
        return 1
    counts = series(text, "fuserank_stage_duration_seconds_count")
    for stage in ("decode", "queue", "dnn", "encode"):
        if counts.get('{stage="%s"}' % stage, 0) <= 0:
            problems.append(f"stage {stage} histogram did not move")
    lookups = series(text, "fuserank_embedding_cache_lookups_total")
    if sum(lookups.values()) <= 0:
        problems.append("fuserank_embedding_cache_lookups_total did not move")
    info = series(text, "fuserank_model_info")
    if not any(f'device="{device}"' in labels and v == 1 for labels, v in info.items()):
        problems.append(f'no fuserank_model_info with device="{device}" (got {list(info)})')
    failures = series(text, "fuserank_graph_capture_failures_total").get("", 0)
    if failures:
        problems.append(f"{failures:.0f} graph captures failed")
    ok = not problems
    print(json.dumps({"bench": "metrics", "ok": ok, "problems": problems,
                      "dnn_count": counts.get('{stage="dnn"}', 0),
                      "lookups": sum(lookups.values())}))
    return 0 if ok else 1


def hot_cache_row(text):
    """The device hot-row cache's hits and misses in a /metrics text, as a JSON row."""
    lookups = series(text, "fuserank_embedding_cache_lookups_total")
    hit = sum(v for labels, v in lookups.items() if 'result="hit"' in labels)
    miss = sum(v for labels, v in lookups.items() if 'result="miss"' in labels)
    ok = hit > 0
    return {"bench": "hot_cache", "ok": ok, "hits": hit, "misses": miss,
            "hit_rate": hit / (hit + miss) if hit + miss else 0,
            "problems": [] if ok else ["no lookup was served from the device cache"]}


def hits(port):
    """hot_cache_row of the server whose metrics listen on `port`."""
    text = scrape(port, "hot_cache")
    if text is None:
        return 1
    row = hot_cache_row(text)
    print(json.dumps(row))
    return 0 if row["ok"] else 1


def stages(port, state_file):
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    except OSError as e:
        print(json.dumps({"bench": "stages", "problem": f"scrape failed: {e}"}))
        return 1
    now = {}
    for name in ("fuserank_stage_duration_seconds_sum", "fuserank_stage_duration_seconds_count",
                 "fuserank_batch_candidates_sum", "fuserank_batch_candidates_count",
                 "fuserank_requests_total", "fuserank_request_duration_seconds_sum",
                 "fuserank_request_duration_seconds_count"):
        for labels, v in series(text, name).items():
            now[name + labels] = now.get(name + labels, 0) + v
    try:
        with open(state_file) as f:
            before = json.load(f)
    except (OSError, ValueError):
        before = {}
    with open(state_file, "w") as f:
        json.dump(now, f)
    delta = {k: v - before.get(k, 0) for k, v in now.items()}
    row = {"bench": "stages"}
    for key, count in delta.items():
        m = re.match(r'fuserank_stage_duration_seconds_count\{stage="([a-z_]+)"\}', key)
        if m and count > 0:
            total = delta.get(key.replace("_count", "_sum"), 0)
            row[m.group(1) + "_us"] = round(total / count * 1e6, 1)
    calls = sum(v for k, v in delta.items() if k.startswith("fuserank_request_duration_seconds_count"))
    if calls > 0:
        call_s = sum(v for k, v in delta.items() if k.startswith("fuserank_request_duration_seconds_sum"))
        row["request_us"] = round(call_s / calls * 1e6, 1)
    batches = sum(v for k, v in delta.items() if k.startswith("fuserank_batch_candidates_count"))
    cands = sum(v for k, v in delta.items() if k.startswith("fuserank_batch_candidates_sum"))
    requests = sum(v for k, v in delta.items() if k.startswith("fuserank_requests_total"))
    if batches > 0:
        row["batch_candidates"] = round(cands / batches, 1)
        row["batch_requests"] = round(requests / batches, 2)
    print(json.dumps(row))
    return 0


def main(argv):
    if len(argv) in (4, 5) and argv[1] == "load":
        return load(int(argv[2]), int(argv[3]), *argv[4:])
    if len(argv) == 4 and argv[1] == "metrics":
        return metrics(int(argv[2]), argv[3])
    if len(argv) == 3 and argv[1] == "hits":
        return hits(int(argv[2]))
    if len(argv) == 4 and argv[1] == "stages":
        return stages(int(argv[2]), argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
