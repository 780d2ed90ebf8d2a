#!/usr/bin/python3
"""Renders deploy/k8s/base and the cpu overlay with the real kustomize (`kustomize build`,
or kubectl's built-in `kubectl kustomize`) and checks what comes out: every object, the
common labels outside the selectors, the cpu overlay dropping only the GPU (and surging
on rollouts, which the GPU base must not) and putting every object in namespace fuserank.

Without either tool it says so and exits 77, which ctest reports as skipped
(SKIP_RETURN_CODE in tests/deploy/CMakeLists.txt), not as passed.
"""

import shutil
import sys
import unittest

import yaml

import deploy_util as du
from k8s_manifests_test import one, rolling_update

SKIP = 77


def gpu_requested(deployment):
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return "nvidia.com/gpu" in container["resources"].get("requests", {})


class KustomizeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.base = du.kustomize(du.K8S_BASE)
        cls.cpu = du.kustomize(du.K8S_CPU)

    def test_base_renders_every_object(self):
        kinds = sorted(d["kind"] for d in self.base)
        self.assertEqual(kinds, sorted(["ConfigMap", "Deployment", "HorizontalPodAutoscaler",
                                        "PodDisruptionBudget", "Service", "Service",
                                        "ServiceMonitor"]))
        for doc in self.base:
            self.assertEqual(doc["metadata"]["labels"]["app.kubernetes.io/part-of"], "fuserank")
        deployment = one(self.base, "Deployment")
        self.assertNotIn("app.kubernetes.io/part-of", deployment["spec"]["selector"]["matchLabels"])
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        self.assertEqual(container["image"], "fuserank:latest")

    def test_cpu_overlay_drops_the_gpu_only(self):
        text = yaml.safe_dump_all(self.cpu)
        self.assertNotIn("nvidia.com/gpu", text)
        cpu_config = yaml.safe_load(one(self.cpu, "ConfigMap")["data"]["fuserank.yaml"])
        base_config = yaml.safe_load(one(self.base, "ConfigMap")["data"]["fuserank.yaml"])
        self.assertEqual(du.unknown_config_keys(cpu_config), [])
        self.assertEqual(cpu_config["engine"]["device"], "cpu")
        cpu_config["engine"]["device"] = base_config["engine"]["device"]
        # The keys only the CUDA backend reads would only be warned of under device: cpu.
        for key in du.CUDA_ONLY_ENGINE_KEYS:
            self.assertNotIn(key, cpu_config["engine"])
            base_config["engine"].pop(key, None)
        self.assertEqual(cpu_config, base_config)
        # Everything else of the base survives: same objects, same probes.
        self.assertEqual(sorted(d["kind"] for d in self.cpu), sorted(d["kind"] for d in self.base))
        (cpu_c,) = one(self.cpu, "Deployment")["spec"]["template"]["spec"]["containers"]
        (base_c,) = one(self.base, "Deployment")["spec"]["template"]["spec"]["containers"]
        for probe in ["livenessProbe", "readinessProbe", "startupProbe"]:
            self.assertEqual(cpu_c[probe], base_c[probe])

    def test_cpu_overlay_lands_in_the_fuserank_namespace(self):
        # docs/deploy.md's commands after `apply -k deploy/k8s/overlays/cpu` use -n fuserank;
        # the base names none (an overlay picks it).
        for doc in self.base:
            self.assertNotIn("namespace", doc["metadata"], doc["kind"])
        for doc in self.cpu:
            self.assertEqual(doc["metadata"].get("namespace"), "fuserank", doc["kind"])

    def test_only_a_deployment_without_gpus_surges(self):
        # With a GPU per pod a surge pod waits for a free GPU (none on a full pool): the
        # rollout replaces one pod at a time. Without, it surges and never runs short.
        base, cpu = one(self.base, "Deployment"), one(self.cpu, "Deployment")
        self.assertTrue(gpu_requested(base))
        self.assertEqual(rolling_update(base), (0, 1))
        self.assertFalse(gpu_requested(cpu))
        self.assertEqual(rolling_update(cpu), (1, 0))


if __name__ == "__main__":
    du.python_check()
    if not (shutil.which("kustomize") or shutil.which("kubectl")):
        print("kustomize_test: SKIPPED: neither kustomize nor kubectl is installed, so the "
              "kustomize output of deploy/k8s was not checked", file=sys.stderr)
        sys.exit(SKIP)
    unittest.main(verbosity=2)
