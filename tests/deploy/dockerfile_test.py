#!/usr/bin/python3
"""Checks deploy/Dockerfile without a container engine (none runs here): a small parser
reads its instructions and stages, and the test checks what docs/deploy.md promises of the image
(multi-stage CUDA devel -> runtime, the -dev packages of scripts/install-deps.sh, non-root,
the demo model, EXPOSE, a gRPC HEALTHCHECK) and that every file it copies exists.
deploy/docker/runtime-packages.sh has its own test: runtime_packages_test.py.

  dockerfile_test.py

A skipped check makes the run exit 77 (ctest SKIP_RETURN_CODE: skipped, not passed).
"""

import json
import os
import re
import shlex
import sys
import unittest

import deploy_util as du

SKIP_EXIT_CODE = 77  # ctest SKIP_RETURN_CODE: reported as skipped, never as passed


def parse_dockerfile(path):
    """[(INSTRUCTION, arguments)] with comments dropped and continuations joined."""
    instructions, current = [], ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not current and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if current and line.lstrip().startswith("#"):
                continue  # a comment inside a continued instruction
            if line.endswith("\\"):
                current += line[:-1] + " "
                continue
            current += line
            keyword, _, args = current.strip().partition(" ")
            instructions.append((keyword.upper(), args.strip()))
            current = ""
    assert not current, "the file ends inside a continued line"
    return instructions


class Stage:
    def __init__(self, image, name):
        self.image, self.name, self.instructions = image, name, []

    def all(self, keyword):
        return [a for k, a in self.instructions if k == keyword]


def stages(instructions):
    args, out = {}, []
    for keyword, value in instructions:
        if keyword == "ARG" and not out:
            name, _, default = value.partition("=")
            args[name] = default.strip('"')
        elif keyword == "FROM":
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], value.split()[0])
            name = value.split()[2] if " AS " in value.upper() else None
            out.append(Stage(image, name))
        elif out:
            out[-1].instructions.append((keyword, value))
    return out


def apt_installed(stage):
    """Package names the stage's `apt-get install` lines name."""
    packages = []
    for run in stage.all("RUN"):
        for part in run.split("&&"):
            words = shlex.split(part)
            if "apt-get" in words and "install" in words:
                packages += [w for w in words[words.index("install") + 1:]
                             if not w.startswith("-")]
    return packages


def install_deps_packages(name):
    with open(os.path.join(du.SOURCE_DIR, "scripts", "install-deps.sh"), encoding="utf-8") as f:
        text = f.read()
    match = re.search(name + r"=\(([^)]*)\)", text)
    return match.group(1).split()


class DockerfileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.instructions = parse_dockerfile(du.DOCKERFILE)
        cls.stages = stages(cls.instructions)
        cls.build, cls.runtime = cls.stages[0], cls.stages[-1]

    def test_multi_stage_cuda_devel_then_runtime(self):
        self.assertEqual(len(self.stages), 2)
        self.assertEqual(self.build.name, "build")
        self.assertRegex(self.build.image, r"^nvidia/cuda:13\.0\.\d+-devel-ubuntu\d\d\.\d\d$")
        self.assertEqual(self.runtime.image, self.build.image.replace("-devel-", "-runtime-"))

    def test_build_stage_installs_the_dev_packages_of_install_deps(self):
        installed = set(apt_installed(self.build))
        # curl and clang-format are tools of the developer machine, not of the build.
        wanted = set(install_deps_packages("BUILD_PKGS")) - {"curl", "clang-format"}
        self.assertEqual(wanted - installed, set())
        builds = " ".join(self.build.all("RUN"))
        for target in ["fuserank-server", "fuserank_cuda", "demo_model"]:
            self.assertRegex(builds, r"--target [^&]*\b" + target + r"\b")
        self.assertIn("-DFUSERANK_CUDA=ON", builds)

    def test_runtime_stage_has_no_build_tools(self):
        installed = apt_installed(self.runtime)
        self.assertEqual([p for p in installed if p.endswith("-dev")], [])
        for tool in ["cmake", "g++", "ninja-build", "protobuf-compiler"]:
            self.assertNotIn(tool, installed)
        self.assertIn("python3-grpcio", installed)  # the health check's only dependency
        self.assertIn("runtime-packages.txt", " ".join(self.runtime.all("RUN")))

    def test_runtime_stage_checks_every_library_is_found(self):
        # CUDA's libraries are left to the runtime image (runtime-packages.sh): the stage
        # proves it has them, for both binaries it copied.
        runs = self.runtime.all("RUN")
        (check,) = [r for r in runs if "--check-found" in r]
        self.assertIn("source=deploy/docker/runtime-packages.sh", check)
        for binary in ["/opt/fuserank/bin/fuserank-server", "/opt/fuserank/lib/libfuserank_cuda.so"]:
            self.assertIn(binary, check)
        keywords = [k for k, _ in self.runtime.instructions]
        check_at = next(i for i, (k, a) in enumerate(self.runtime.instructions)
                        if k == "RUN" and "--check-found" in a)
        last_copy = max(i for i, k in enumerate(keywords) if k == "COPY")
        self.assertGreater(check_at, last_copy)

    def test_non_root_user(self):
        users = self.runtime.all("USER")
        self.assertTrue(users, "the runtime stage sets no USER")
        user = users[-1].split(":")[0]
        self.assertRegex(user, r"^\d+$")  # numeric: Kubernetes' runAsNonRoot can check it
        self.assertNotEqual(int(user), 0)
        # Nothing after USER switches back.
        last_user = max(i for i, (k, _) in enumerate(self.runtime.instructions) if k == "USER")
        self.assertNotIn("RUN", [k for k, _ in self.runtime.instructions[last_user:]])

    def test_exposes_grpc_and_metrics_not_admin(self):
        ports = set()
        for value in self.runtime.all("EXPOSE"):
            ports.update(int(p.split("/")[0]) for p in value.split())
        self.assertEqual(ports, {8700, 8702})

    def test_grpc_healthcheck(self):
        (check,) = self.runtime.all("HEALTHCHECK")
        self.assertIn("--start-period=", check)
        cmd = check.split("CMD", 1)[1].strip()
        self.assertTrue(cmd.startswith("["), "exec form")
        words = json.loads(cmd)
        script = next(w for w in words if w.startswith("/opt/fuserank/"))
        self.assertIn("127.0.0.1:8700", words)
        # The script is deploy/healthcheck.py, installed by the build stage.
        build_runs = " ".join(self.build.all("RUN"))
        self.assertRegex(build_runs, r"deploy/healthcheck\.py /out/bin/" + os.path.basename(script))
        self.assertIn("--from=build /out/bin/ " + os.path.dirname(script) + "/",
                      " ".join(self.runtime.all("COPY")))

    def test_demo_model_and_config(self):
        build_runs = " ".join(self.build.all("RUN"))
        self.assertIn("config/models/demo.yaml config/models/demo.safetensors /out/models/",
                      build_runs)
        copies = self.runtime.all("COPY")
        self.assertIn("--from=build /out/models/ /opt/fuserank/models/", copies)
        config = du.load_yaml(du.DOCKER_CONFIG)
        self.assertEqual(du.unknown_config_keys(config), [])
        self.assertEqual(config["model"]["path"], "/opt/fuserank/models/demo.yaml")
        self.assertTrue(du.is_loopback(du.host_port(config["server"]["admin_listen"])[0]))
        # The same config as the Kubernetes ConfigMap but for the device choice.
        k8s = du.configmap_config()
        self.assertEqual(config["engine"].pop("device"), "auto")
        k8s["engine"].pop("device")
        self.assertEqual(config, k8s)

    def test_entrypoint_runs_the_server_with_the_config(self):
        (entrypoint,) = self.runtime.all("ENTRYPOINT")
        self.assertEqual(json.loads(entrypoint), ["/opt/fuserank/bin/fuserank-server"])
        (cmd,) = self.runtime.all("CMD")
        self.assertEqual(json.loads(cmd), ["--config", "/etc/fuserank/fuserank.yaml"])
        self.assertIn("deploy/docker/fuserank.yaml /etc/fuserank/fuserank.yaml",
                      self.runtime.all("COPY"))

    def test_copied_sources_exist(self):
        for stage in self.stages:
            for value in stage.all("COPY"):
                words = value.split()
                if any(w.startswith("--from=") for w in words):
                    continue
                for source in [w for w in words[:-1] if not w.startswith("--")]:
                    self.assertTrue(os.path.exists(os.path.join(du.SOURCE_DIR, source)), source)
        runs = self.build.all("RUN") + self.runtime.all("RUN")
        for script in re.findall(r"deploy/[\w/.-]+", " ".join(runs)):
            self.assertTrue(os.path.exists(os.path.join(du.SOURCE_DIR, script)), script)

    def test_dockerignore_keeps_build_outputs_out(self):
        with open(du.DOCKERFILE + ".dockerignore", encoding="utf-8") as f:
            patterns = {l.strip() for l in f if l.strip() and not l.startswith("#")}
        for pattern in [".git", "build*/", "config/models/*.safetensors"]:
            self.assertIn(pattern, patterns)


if __name__ == "__main__":
    du.python_check()
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.skipped:  # a check not run must not read as passed
        for test, why in result.skipped:
            print(f"SKIPPED {test.id()}: {why}", file=sys.stderr)
        sys.exit(SKIP_EXIT_CODE)
