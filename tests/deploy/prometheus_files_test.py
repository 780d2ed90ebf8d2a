#!/usr/bin/python3
"""Checks deploy/prometheus beyond what `promtool check` sees: rules read only SPEC
section 4 metrics and defined recording rules, every alert has a `for:`, a severity and
annotations, the scrape configs point at the metrics port and the Kubernetes Service's
labels, and the Kubernetes service-discovery config passes promtool (Debian's Prometheus
is built without Kubernetes discovery: then the same config with a static target is
checked instead)."""

import copy
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import yaml

import deploy_util as du

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def promtool(*args, cwd=None):
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


class RulesTest(unittest.TestCase):
    def test_recording_rules_read_spec_metrics_and_earlier_rules(self):
        rules = du.recording_rules()
        spec = du.spec_series_names()
        seen = set()
        for name, expr in rules.items():
            recorded, raw = du.promql_names(expr)
            self.assertEqual(raw - spec, set(), name)
            self.assertEqual(recorded - seen, set(), f"{name} reads a rule defined after it")
            seen.add(name)
            self.assertRegex(name, r"^[a-z_]+:[a-z0-9_]+:[a-z0-9_]+$")  # level:metric:ops

    def test_recording_rules_cover_issue_7(self):
        rules = du.recording_rules()
        for name in ["job_table:fuserank_embedding_cache_hit_ratio:rate5m",
                     "job_stage:fuserank_stage_duration_seconds:p50_rate5m",
                     "job_stage:fuserank_stage_duration_seconds:p99_rate5m",
                     "job_rpc:fuserank_request_duration_seconds:p99_rate5m",
                     "job:fuserank_requests:rate1m",
                     "job_rpc:fuserank_request_errors:ratio_rate5m"]:
            self.assertIn(name, rules)

    def test_alerts(self):
        defined = set(du.recording_rules())
        spec = du.spec_series_names()
        names = set()
        for rule in du.alert_rules():
            name = rule["alert"]
            names.add(name)
            self.assertRegex(rule["for"], r"^\d+[smh]$", name)
            self.assertIn(rule["labels"]["severity"], {"critical", "warning", "info"}, name)
            self.assertTrue(rule["annotations"]["summary"], name)
            self.assertTrue(rule["annotations"]["description"], name)
            recorded, raw = du.promql_names(rule["expr"])
            self.assertEqual(recorded - defined, set(), name)
            self.assertEqual(raw - spec, set(), name)
        for name in ["FuserankRankLatencyP99High", "FuserankServerErrorRatioHigh",
                     "FuserankErrorRatioHigh", "FuserankEmbeddingCacheHitRateDrop",
                     "FuserankQueueSaturated"]:
            self.assertIn(name, names)

    def test_every_aggregation_keeps_namespace_and_job(self):
        # The ServiceMonitor names the job after the Service, `fuserank` in every
        # namespace: a rule that summed the namespace away would add staging and prod
        # together, and an alert would page for (or hide) the other one's errors.
        exprs = [(name, expr) for name, expr in du.recording_rules().items()]
        exprs += [(rule["alert"], rule["expr"]) for rule in du.alert_rules()]
        grouped = 0
        for name, expr in exprs:
            for clause, labels in re.findall(r"\b(by|on)\s*\(([^)]*)\)", expr):
                labels = {l.strip() for l in labels.split(",") if l.strip()}
                if clause == "on" and not labels:
                    continue  # `on ()`: a constant (the queue capacity)
                self.assertTrue({"namespace", "job"} <= labels, f"{name}: {clause} ({labels})")
                grouped += 1
        self.assertGreater(grouped, 20)

    def test_promql_names_sees_through_literals(self):
        recorded, raw = du.promql_names(
            'sum(rate(fuserank_x_total{code!="fuserank_not:a:name"}[5m])) / a:b:c')
        self.assertEqual((recorded, raw), ({"a:b:c"}, {"fuserank_x_total"}))


class PrometheusRuleTest(unittest.TestCase):
    def test_wraps_every_rule_file(self):
        script = os.path.join(du.PROM_DIR, "prometheusrule.py")
        out = subprocess.run(["/usr/bin/python3", script, "--label", "release=prom"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        obj = yaml.safe_load(out)
        self.assertEqual((obj["apiVersion"], obj["kind"]),
                         ("monitoring.coreos.com/v1", "PrometheusRule"))
        self.assertEqual(obj["metadata"]["labels"]["release"], "prom")
        expected = (du.load_yaml(du.RECORDING_RULES)["groups"] +
                    du.load_yaml(du.ALERT_RULES)["groups"])
        self.assertEqual(sorted(g["name"] for g in obj["spec"]["groups"]),
                         sorted(g["name"] for g in expected))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "spec.yml")
            with open(path, "w") as f:
                yaml.safe_dump(obj["spec"], f)
            result = promtool("check", "rules", path)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        rules = sum(len(g["rules"]) for g in expected)
        self.assertIn(f"{rules} rules found", result.stdout)
        bad = subprocess.run(["/usr/bin/python3", script, "--label", "novalue"],
                             capture_output=True, text=True, timeout=60)
        self.assertNotEqual(bad.returncode, 0)


class ScrapeConfigTest(unittest.TestCase):
    def test_local_config(self):
        config = du.load_yaml(os.path.join(du.PROM_DIR, "prometheus.yml"))
        self.assertEqual(sorted(config["rule_files"]),
                         ["rules/fuserank-alerts.yml", "rules/fuserank-recording.yml"])
        (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "fuserank"]
        (static,) = job["static_configs"]
        ports = {du.host_port(t)[1] for t in static["targets"]}
        metrics_port = du.host_port(du.configmap_config()["server"]["metrics_listen"])[1]
        self.assertEqual(ports, {metrics_port})

    def test_kubernetes_config(self):
        path = os.path.join(du.PROM_DIR, "prometheus-kubernetes.yml")
        config = du.load_yaml(path)
        (job,) = config["scrape_configs"]
        self.assertEqual(job["job_name"], "fuserank")
        keep = {tuple(r["source_labels"]): r["regex"] for r in job["relabel_configs"]
                if r.get("action") == "keep"}
        services = [d for d in du.load_yaml_docs(os.path.join(du.K8S_BASE, "service.yaml"))]
        main = next(s for s in services if s["metadata"]["name"] == "fuserank")
        self.assertEqual(
            keep[("__meta_kubernetes_service_label_app_kubernetes_io_name",)],
            main["metadata"]["labels"]["app.kubernetes.io/name"])
        port_name = keep[("__meta_kubernetes_endpoint_port_name",)]
        self.assertIn(port_name, [p["name"] for p in main["spec"]["ports"]])
        self.assertEqual(next(p["port"] for p in main["spec"]["ports"] if p["name"] == port_name),
                         8702)

        result = promtool("check", "config", path)
        no_k8s_sd = "kubernetes_sd_configs not found" in result.stdout + result.stderr
        if result.returncode != 0 and no_k8s_sd:
            # Debian's build leaves Kubernetes discovery out: check the rest of the file.
            static = copy.deepcopy(config)
            del static["scrape_configs"][0]["kubernetes_sd_configs"]
            static["scrape_configs"][0]["static_configs"] = [{"targets": ["127.0.0.1:8702"]}]
            with tempfile.TemporaryDirectory() as tmp:
                shutil.copytree(os.path.join(du.PROM_DIR, "rules"), os.path.join(tmp, "rules"))
                with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
                    yaml.safe_dump(static, f)
                result = promtool("check", "config", "prometheus.yml", cwd=tmp)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)


if __name__ == "__main__":
    du.python_check()
    unittest.main(verbosity=2)
