#!/usr/bin/python3
"""Checks deploy/grafana/fuserank-dashboard.json: valid dashboard JSON, panels laid out
without overlap, every query reads SPEC section 4 metrics or recording rules that exist,
every SPEC metric is shown somewhere, the panels operators need are there, and every
query is valid PromQL (promtool checks them as rules, template variables filled in)."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import yaml

import deploy_util as du

TEMPLATE_VALUES = {"$namespace": "prod", "$job": "fuserank", "$instance": ".*",
                   "${datasource}": "prom"}


def load_dashboard():
    with open(du.DASHBOARD, encoding="utf-8") as f:
        return json.load(f)


def data_panels(dashboard):
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def fill_templates(expr):
    for name, value in TEMPLATE_VALUES.items():
        expr = expr.replace(name, value)
    return expr


class DashboardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dashboard = load_dashboard()
        cls.panels = list(data_panels(cls.dashboard))
        cls.exprs = [(p["title"], t["expr"]) for p in cls.panels for t in p["targets"]]

    def test_dashboard_fields(self):
        self.assertEqual(self.dashboard["title"], "fuserank")
        self.assertTrue(self.dashboard["uid"])
        self.assertIsInstance(self.dashboard["schemaVersion"], int)
        ids = [p["id"] for p in self.dashboard["panels"]]
        self.assertEqual(len(ids), len(set(ids)))

    def test_layout_has_no_overlap(self):
        cells = {}
        for panel in self.dashboard["panels"]:
            g = panel["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, panel["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    other = cells.get((x, y))
                    self.assertIsNone(other, f"{panel['title']} overlaps {other}")
                    cells[(x, y)] = panel["title"]

    def test_panels_have_queries_on_the_prometheus_variable(self):
        variables = {v["name"]: v for v in self.dashboard["templating"]["list"]}
        self.assertEqual(variables["datasource"]["query"], "prometheus")
        for panel in self.panels:
            self.assertTrue(panel["targets"], panel["title"])
            self.assertEqual(panel["datasource"]["uid"], "${datasource}", panel["title"])
            refs = [t["refId"] for t in panel["targets"]]
            self.assertEqual(len(refs), len(set(refs)), panel["title"])
            for target in panel["targets"]:
                for var in re.findall(r"\$\{?(\w+)", target["expr"]):
                    self.assertIn(var, variables, panel["title"])

    def test_every_query_picks_one_namespace_and_job(self):
        # The same manifests in two namespaces both scrape as job="fuserank": a panel that
        # selected on the job alone would add staging and prod together.
        variables = [v["name"] for v in self.dashboard["templating"]["list"]]
        self.assertLess(variables.index("namespace"), variables.index("job"))
        queries = {v["name"]: v["query"]["query"] for v in self.dashboard["templating"]["list"]
                   if v["type"] == "query"}
        self.assertEqual(queries["namespace"], "label_values(fuserank_model_info, namespace)")
        self.assertIn('namespace="$namespace"', queries["job"])
        self.assertIn('namespace="$namespace", job="$job"', queries["instance"])
        for title, expr in self.exprs:
            for selector in re.findall(r"\{[^{}]*\}", expr):  # every label selector
                self.assertIn('{namespace="$namespace", job="$job"', selector, title)

    def test_non_ok_codes_panel_draws_only_codes_that_occur(self):
        # Every rpc x code series exists from the start at 0 (about 200): a panel of
        # non-OK codes must leave out the zeros.
        (expr,) = [e for t, e in self.exprs if t == "Non-OK responses per second by code"]
        self.assertIn('code!="OK"', expr)
        self.assertRegex(expr, r"\)?\s*>\s*0\s*$")

    def test_hit_rate_panels_say_what_the_hit_rate_means(self):
        panels = {p["title"]: p for p in self.panels}
        for title in ["Cache hit rate (5m)", "Hit rate per table"]:
            self.assertIn("cache.placement: device", panels[title]["description"], title)
        stat = panels["Cache hit rate (5m)"]
        self.assertTrue(stat["fieldConfig"]["defaults"].get("noValue"))

    def test_queries_read_spec_metrics_and_defined_rules(self):
        defined = set(du.recording_rules())
        spec = du.spec_series_names()
        for title, expr in self.exprs:
            recorded, raw = du.promql_names(expr)
            self.assertEqual(recorded - defined, set(), title)
            self.assertEqual(raw - spec, set(), title)

    def test_every_spec_metric_is_shown(self):
        rules = du.recording_rules()
        shown = set()
        for _, expr in self.exprs:
            recorded, raw = du.promql_names(expr)
            shown |= raw
            pending = list(recorded)
            while pending:  # follow recording rules down to the metrics they read
                rule_recorded, rule_raw = du.promql_names(rules[pending.pop()])
                shown |= rule_raw
                pending += list(rule_recorded)
        for name, (kind, _) in du.SPEC_METRICS.items():
            series = {name}
            if kind == "histogram":
                series = {name + "_bucket", name + "_sum", name + "_count"}
            self.assertTrue(series & shown, name)

    def test_the_operator_panels_are_there(self):
        by_metric = {}
        for title, expr in self.exprs:
            by_metric.setdefault(title, []).append(expr)
        text = json.dumps(by_metric)
        for needle in ["job:fuserank_requests:rate1m",  # QPS
                       "job_rpc:fuserank_request_errors:ratio_rate5m",  # error ratio
                       "job_rpc:fuserank_request_duration_seconds:p50_rate5m",
                       "job_rpc:fuserank_request_duration_seconds:p99_rate5m",
                       "job_stage:fuserank_stage_duration_seconds:p99_rate5m",
                       "job:fuserank_batch_candidates:mean_rate5m",  # batch size
                       "fuserank_queue_depth", "fuserank_inflight_requests",
                       "job_table:fuserank_embedding_cache_hit_ratio:rate5m",
                       "fuserank_hot_rows_version", "fuserank_model_info"]:
            self.assertIn(needle, text)

    def test_queries_are_valid_promql(self):
        rules = [{"record": f"dashboard:query:{i}", "expr": fill_templates(expr)}
                 for i, (_, expr) in enumerate(self.exprs)]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "dashboard-queries.yml")
            with open(path, "w") as f:
                yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
            promtool = shutil.which("promtool") or "/usr/bin/promtool"
            result = subprocess.run([promtool, "check", "rules", path], capture_output=True,
                                    text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn(f"{len(rules)} rules found", result.stdout)


if __name__ == "__main__":
    du.python_check()
    unittest.main(verbosity=2)
