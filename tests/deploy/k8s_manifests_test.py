#!/usr/bin/python3
"""Checks the Kubernetes manifests of deploy/k8s: every file parses, the
kustomization lists them, and the fields operators rely on are there and agree with each
other (GPU request, a rollout that needs no spare GPU, gRPC probes on 8700, no admin port
outside the pod, non-root, HPA / PDB / ServiceMonitor pointing at the right objects, the
ConfigMap's config). The rendered kustomize output is checked by kustomize_test.py."""

import os
import re
import subprocess
import sys
import unittest

import deploy_util as du

GRPC_PORT, ADMIN_PORT, METRICS_PORT = 8700, 8701, 8702


def base_docs():
    docs = []
    for name in sorted(os.listdir(du.K8S_BASE)):
        if name.endswith(".yaml") and name != "kustomization.yaml":
            docs.extend(du.load_yaml_docs(os.path.join(du.K8S_BASE, name)))
    return docs


def one(docs, kind):
    found = du.by_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def rolling_update(deployment):
    """(maxSurge, maxUnavailable) of a Deployment's RollingUpdate strategy (counts only)."""
    strategy = deployment["spec"]["strategy"]
    assert strategy["type"] == "RollingUpdate", strategy
    update = strategy["rollingUpdate"]
    return int(update["maxSurge"]), int(update["maxUnavailable"])


class BaseManifestsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = base_docs()
        cls.deployment = one(cls.docs, "Deployment")
        cls.pod = cls.deployment["spec"]["template"]["spec"]
        cls.pod_labels = cls.deployment["spec"]["template"]["metadata"]["labels"]
        (cls.container,) = cls.pod["containers"]
        cls.config = du.configmap_config()

    def test_every_file_is_listed_in_the_kustomization(self):
        kustomization = du.load_yaml(os.path.join(du.K8S_BASE, "kustomization.yaml"))
        self.assertEqual(kustomization["kind"], "Kustomization")
        files = {n for n in os.listdir(du.K8S_BASE)
                 if n.endswith(".yaml") and n != "kustomization.yaml"}
        self.assertEqual(set(kustomization["resources"]), files)
        for name in ["configmap.yaml", "deployment.yaml", "service.yaml", "hpa.yaml",
                     "pdb.yaml", "servicemonitor.yaml"]:
            self.assertIn(name, files)
        # Common labels must not touch selectors (they are immutable on a Deployment).
        for entry in kustomization.get("labels", []):
            self.assertFalse(entry.get("includeSelectors", False))
        self.assertNotIn("commonLabels", kustomization)

    def test_every_object_has_api_version_kind_and_name(self):
        for doc in self.docs:
            self.assertIn("apiVersion", doc)
            self.assertIn("kind", doc)
            self.assertTrue(doc["metadata"]["name"])
            self.assertEqual(doc["metadata"]["labels"]["app.kubernetes.io/name"], "fuserank")

    def test_api_versions(self):
        expected = {"Deployment": "apps/v1", "Service": "v1", "ConfigMap": "v1",
                    "HorizontalPodAutoscaler": "autoscaling/v2",
                    "PodDisruptionBudget": "policy/v1",
                    "ServiceMonitor": "monitoring.coreos.com/v1"}
        kinds = {d["kind"] for d in self.docs}
        self.assertEqual(kinds, set(expected))
        for doc in self.docs:
            self.assertEqual(doc["apiVersion"], expected[doc["kind"]], doc["kind"])

    def test_deployment_selects_its_pods(self):
        # The HPA owns the replica count: a `replicas:` here would be reset on every apply.
        self.assertNotIn("replicas", self.deployment["spec"])
        selector = self.deployment["spec"]["selector"]["matchLabels"]
        self.assertTrue(selector)
        self.assertTrue(du.labels_match(selector, self.pod_labels))

    def test_gpu_request_and_limit(self):
        resources = self.container["resources"]
        self.assertEqual(int(resources["limits"]["nvidia.com/gpu"]), 1)
        self.assertEqual(int(resources["requests"]["nvidia.com/gpu"]), 1)
        self.assertIn("cpu", resources["requests"])  # the HPA's utilisation needs it
        self.assertIn("memory", resources["limits"])
        self.assertEqual(self.config["engine"]["device"], "cuda")

    def test_gpu_rollout_needs_no_spare_gpu(self):
        # A surge pod would need a free nvidia.com/gpu: on a full GPU pool it stays
        # Pending and, with maxUnavailable 0, the rollout never ends.
        self.assertEqual(rolling_update(self.deployment), (0, 1))
        pdb = one(self.docs, "PodDisruptionBudget")
        self.assertLessEqual(1, pdb["spec"]["maxUnavailable"])

    def test_grpc_probes_on_the_serving_port(self):
        ports = {p["name"]: p["containerPort"] for p in self.container["ports"]}
        for probe_name in ["livenessProbe", "readinessProbe", "startupProbe"]:
            probe = self.container[probe_name]
            # The native gRPC probe calls grpc.health.v1.Health/Check.
            self.assertEqual(set(probe) & {"grpc", "httpGet", "tcpSocket", "exec"}, {"grpc"},
                             probe_name)
            port = probe["grpc"]["port"]
            self.assertEqual(ports.get(port, port), GRPC_PORT, probe_name)
            # Empty service: the server's overall status, which the default health
            # service always has (a named service may be unknown: NOT_FOUND).
            self.assertEqual(probe["grpc"].get("service", ""), "", probe_name)
        startup = self.container["startupProbe"]
        self.assertGreaterEqual(startup["periodSeconds"] * startup["failureThreshold"], 60)

    def test_container_ports(self):
        ports = {p["containerPort"]: p["name"] for p in self.container["ports"]}
        self.assertEqual(ports, {GRPC_PORT: "grpc", METRICS_PORT: "metrics"})
        self.assertEqual(du.host_port(self.config["server"]["listen"])[1], GRPC_PORT)
        self.assertEqual(du.host_port(self.config["server"]["metrics_listen"])[1], METRICS_PORT)
        annotations = self.deployment["spec"]["template"]["metadata"].get("annotations", {})
        if "prometheus.io/port" in annotations:
            self.assertEqual(int(annotations["prometheus.io/port"]), METRICS_PORT)

    def test_admin_port_stays_inside_the_pod(self):
        host, port = du.host_port(self.config["server"]["admin_listen"])
        self.assertTrue(du.is_loopback(host), self.config["server"]["admin_listen"])
        self.assertEqual(port, ADMIN_PORT)
        self.assertNotIn(ADMIN_PORT, [p["containerPort"] for p in self.container["ports"]])
        for service in du.by_kind(self.docs, "Service"):
            for p in service["spec"]["ports"]:
                self.assertNotIn(ADMIN_PORT, [p["port"], p.get("targetPort")])
                self.assertNotIn("admin", [p.get("name"), p.get("targetPort")])
            self.assertNotEqual(service["spec"].get("type"), "LoadBalancer")

    def test_runs_as_non_root(self):
        pod_sc = self.pod["securityContext"]
        self.assertIs(pod_sc["runAsNonRoot"], True)
        self.assertGreater(pod_sc["runAsUser"], 0)
        sc = self.container["securityContext"]
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertIs(sc["readOnlyRootFilesystem"], True)
        self.assertEqual(sc["capabilities"]["drop"], ["ALL"])
        self.assertNotIn("privileged", sc)
        # The image's USER is the same numeric user (deploy/Dockerfile).
        with open(du.DOCKERFILE, encoding="utf-8") as f:
            users = re.findall(r"^USER\s+(\d+)", f.read(), re.M)
        self.assertEqual(users[-1:], [str(pod_sc["runAsUser"])])

    def test_graceful_shutdown_fits_the_grace_period(self):
        grace = self.pod["terminationGracePeriodSeconds"]
        pre_stop = self.container["lifecycle"]["preStop"]["exec"]["command"]
        self.assertEqual(pre_stop[0], "sleep")
        server_grace = self.config["server"]["shutdown_grace_seconds"]
        self.assertGreater(grace, int(pre_stop[1]) + server_grace)

    def test_config_is_mounted_where_the_server_reads_it(self):
        configmap = one(self.docs, "ConfigMap")
        args = self.container["args"]
        config_path = args[args.index("--config") + 1]
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        for mount in self.container["volumeMounts"]:
            volume = volumes[mount["name"]]
            if "configMap" in volume:
                self.assertEqual(volume["configMap"]["name"], configmap["metadata"]["name"])
                self.assertTrue(mount["readOnly"])
                self.assertEqual(os.path.dirname(config_path), mount["mountPath"])
                self.assertIn(os.path.basename(config_path), configmap["data"])
                break
        else:
            self.fail("no ConfigMap volume mounted")

    def test_configmap_holds_spec_config(self):
        self.assertEqual(du.unknown_config_keys(self.config), [])
        for section in du.SPEC_CONFIG:
            self.assertIn(section, self.config)
        # The demo model is where the image puts it.
        self.assertEqual(self.config["model"]["path"], "/opt/fuserank/models/demo.yaml")
        with open(du.DOCKERFILE, encoding="utf-8") as f:
            self.assertIn("/opt/fuserank/models/", f.read())
        self.assertEqual(self.config["logging"]["format"], "json")
        self.assertEqual(self.config["server"]["admin_token_file"], "")

    def test_queue_capacity_matches_the_recording_rule(self):
        rules = du.recording_rules()
        match = re.fullmatch(r"\s*vector\((\d+)\)\s*", rules["fuserank:queue_capacity:config"])
        self.assertIsNotNone(match)
        self.assertEqual(int(match.group(1)), self.config["engine"]["queue_capacity"])

    def test_services(self):
        services = {s["metadata"]["name"]: s for s in du.by_kind(self.docs, "Service")}
        main = services["fuserank"]
        self.assertTrue(du.labels_match(main["spec"]["selector"], self.pod_labels))
        ports = {p["name"]: p for p in main["spec"]["ports"]}
        self.assertEqual(set(ports), {"grpc", "metrics"})
        self.assertEqual(ports["grpc"]["port"], GRPC_PORT)
        self.assertEqual(ports["grpc"]["targetPort"], "grpc")
        self.assertEqual(ports["metrics"]["port"], METRICS_PORT)
        self.assertEqual(ports["metrics"]["targetPort"], "metrics")
        headless = services["fuserank-headless"]
        self.assertEqual(headless["spec"]["clusterIP"], "None")
        self.assertTrue(du.labels_match(headless["spec"]["selector"], self.pod_labels))
        self.assertEqual([p["port"] for p in headless["spec"]["ports"]], [GRPC_PORT])

    def test_hpa_scales_the_deployment(self):
        hpa = one(self.docs, "HorizontalPodAutoscaler")
        target = hpa["spec"]["scaleTargetRef"]
        self.assertEqual((target["apiVersion"], target["kind"], target["name"]),
                         ("apps/v1", "Deployment", self.deployment["metadata"]["name"]))
        self.assertGreaterEqual(hpa["spec"]["minReplicas"], 2)  # else the PDB blocks drains
        self.assertGreater(hpa["spec"]["maxReplicas"], hpa["spec"]["minReplicas"])
        self.assertTrue(hpa["spec"]["metrics"])
        for metric in hpa["spec"]["metrics"]:
            if metric["type"] == "Resource":
                self.assertIn(metric["resource"]["name"], self.container["resources"]["requests"])

    def test_pdb_covers_the_pods_and_allows_a_drain(self):
        pdb = one(self.docs, "PodDisruptionBudget")
        self.assertTrue(du.labels_match(pdb["spec"]["selector"]["matchLabels"], self.pod_labels))
        min_replicas = one(self.docs, "HorizontalPodAutoscaler")["spec"]["minReplicas"]
        if "maxUnavailable" in pdb["spec"]:
            self.assertGreaterEqual(pdb["spec"]["maxUnavailable"], 1)
        else:
            self.assertLess(pdb["spec"]["minAvailable"], min_replicas)

    def test_servicemonitor_scrapes_the_metrics_port_once(self):
        monitor = one(self.docs, "ServiceMonitor")
        selector = monitor["spec"]["selector"]["matchLabels"]
        matched = [s for s in du.by_kind(self.docs, "Service")
                   if du.labels_match(selector, s["metadata"]["labels"])]
        self.assertEqual([s["metadata"]["name"] for s in matched], ["fuserank"])
        ports = {p["name"]: p for p in matched[0]["spec"]["ports"]}
        (endpoint,) = monitor["spec"]["endpoints"]
        self.assertEqual(ports[endpoint["port"]]["port"], METRICS_PORT)
        self.assertEqual(endpoint.get("path", "/metrics"), "/metrics")


class KustomizeSkipTest(unittest.TestCase):
    def test_kustomize_test_skips_visibly_without_the_tools(self):
        # Without kubectl and kustomize the rendering test must not pass in silence: it
        # says why and exits 77, which ctest reports as skipped (SKIP_RETURN_CODE).
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kustomize_test.py")
        result = subprocess.run([sys.executable, script], capture_output=True, text=True,
                                timeout=120, env=dict(os.environ, PATH=""))
        self.assertEqual(result.returncode, 77, result.stdout + result.stderr)
        self.assertIn("SKIPPED", result.stderr)
        self.assertIn("neither kustomize nor kubectl", result.stderr)


if __name__ == "__main__":
    du.python_check()
    unittest.main(verbosity=2)
