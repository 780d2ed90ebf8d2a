#!/usr/bin/python3
"""Runs the real server's `--check-config` on every config that deploy/ ships (the
Kubernetes ConfigMap, the cpu overlay's, the image's), with the model path pointed at the
repository's demo model (the image's path does not exist here): the server rejects unknown
keys and bad values, so a deploy config that would stop a pod fails here first. A config
with `engine.device: cuda` on a machine without a usable GPU must be refused for that
alone, and pass with the device left to `auto`. A shipped config must also start without a
warning (a key that does nothing, a token file others can read, ...): every `warning:` line
fails the test but the no-GPU one, allowed by name.

  config_check_test.py --server build/bin/fuserank-server --model config/models/demo.yaml
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

import yaml

import deploy_util as du

SERVER = MODEL = None

# Warnings a shipped config may draw, each for a stated reason. On a machine without a
# usable GPU the CUDA probe's complaint (today a refusal of engine.device: cuda, handled
# below) is allowed should it come as a warning; nothing else is.
ALLOWED_WARNINGS = [re.compile(r"engine\.device.*no usable CUDA device")]


def unexpected_warnings(output):
    """The `warning:` lines of --check-config's output that ALLOWED_WARNINGS does not name."""
    return [line for line in output.splitlines()
            if line.startswith("warning:")
            and not any(p.search(line) for p in ALLOWED_WARNINGS)]


def check_config(config):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fuserank.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        return subprocess.run([SERVER, "--check-config", path], capture_output=True, text=True,
                              timeout=120)


class ConfigCheckTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for path in [SERVER, MODEL]:
            if not path or not os.path.exists(path):
                raise AssertionError(f"{path} does not exist (build everything first)")

    def assert_accepted(self, config, what):
        config["model"]["path"] = os.path.abspath(MODEL)
        result = check_config(config)
        output = f"{what}:\n{result.stdout}{result.stderr}"
        if result.returncode != 0 and config.get("engine", {}).get("device") == "cuda":
            # --check-config also asks whether a GPU can serve: where none can (this
            # machine), the refusal must be that alone, and the rest must pass without it.
            self.assertIn("engine.device is cuda: ", output)
            config["engine"]["device"] = "auto"
            result = check_config(config)
            output = f"{what} (engine.device: auto):\n{result.stdout}{result.stderr}"
        self.assertEqual(result.returncode, 0, output)
        self.assertEqual(unexpected_warnings(result.stderr), [], output)

    def test_configmap(self):
        self.assert_accepted(du.configmap_config(), "deploy/k8s/base/configmap.yaml")

    def test_cpu_overlay(self):
        self.assert_accepted(du.configmap_config(os.path.join(du.K8S_CPU, "configmap-cpu.yaml")),
                             "deploy/k8s/overlays/cpu/configmap-cpu.yaml")

    def test_image_config(self):
        self.assert_accepted(du.load_yaml(du.DOCKER_CONFIG), "deploy/docker/fuserank.yaml")

    def test_a_warning_fails_the_check(self):
        # The cpu overlay with a key only the CUDA backend reads: the server starts, but
        # warns that the key does nothing, and a shipped config must not.
        config = du.configmap_config(os.path.join(du.K8S_CPU, "configmap-cpu.yaml"))
        config["model"]["path"] = os.path.abspath(MODEL)
        config["engine"]["cuda_graphs"] = True
        result = check_config(config)
        self.assertEqual(result.returncode, 0, result.stderr)
        (warning,) = unexpected_warnings(result.stderr)
        self.assertIn("engine.cuda_graphs: has no effect with engine.device: cpu", warning)
        self.assertEqual(unexpected_warnings(
            "warning: x.yaml: engine.device is cuda: no usable CUDA device: none\n"), [])

    def test_a_bad_key_is_refused(self):
        config = du.configmap_config()
        config["model"]["path"] = os.path.abspath(MODEL)
        config["engine"]["queue_capacityy"] = 1
        result = check_config(config)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("queue_capacityy", result.stdout + result.stderr)


if __name__ == "__main__":
    for flag in ["--server", "--model"]:
        if flag in sys.argv:
            i = sys.argv.index(flag)
            globals()[flag[2:].upper()] = sys.argv[i + 1]
            del sys.argv[i:i + 2]
    du.python_check()
    unittest.main(verbosity=2)
