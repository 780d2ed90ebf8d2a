#!/usr/bin/python3
"""Checks deploy/Dockerfile without a container engine (none runs here): a small parser
reads its instructions and stages, and the test checks what docs/deploy.md promises of the image
(multi-stage CUDA devel -> runtime, the -dev packages of scripts/install-deps.sh, non-root,
the demo model, EXPOSE, a gRPC HEALTHCHECK), that every file it copies exists, and that
deploy/docker/runtime-packages.sh finds the runtime packages of a real binary.

  dockerfile_test.py [--server build/bin/fuserank-server]

A check that cannot run here (no C compiler, no dpkg-query, no CUDA module) is skipped,
and the run then exits 77 (ctest SKIP_RETURN_CODE: skipped, not passed), naming each
skipped check and why.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

import deploy_util as du

SERVER = None  # --server: a built fuserank-server for the runtime-packages check
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


class RuntimePackagesTest(unittest.TestCase):
    SCRIPT = os.path.join(du.DEPLOY_DIR, "docker", "runtime-packages.sh")

    def run_script(self, *files):
        return subprocess.run(["bash", self.SCRIPT, *files], capture_output=True, text=True,
                              timeout=60)

    def test_server_binary(self):
        if not SERVER or not os.path.exists(SERVER):
            self.skipTest("no --server binary given")
        result = self.run_script(SERVER)
        self.assertEqual(result.returncode, 0, result.stderr)
        packages = result.stdout.split()
        self.assertEqual(packages, sorted(set(packages)))
        for prefix in ["libgrpc++", "libprotobuf", "libyaml-cpp", "libabsl"]:
            self.assertTrue(any(p.startswith(prefix) for p in packages), (prefix, packages))
        for p in packages:
            self.assertFalse(p.endswith("-dev"), p)
            self.assertNotIn(p, ["libc6", "libstdc++6", "libgcc-s1"])

    def test_unpackaged_or_missing_library_fails(self):
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            self.skipTest("no C compiler")
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "f.c"), "w") as f:
                f.write("int f(void) { return 0; }\n")
            with open(os.path.join(tmp, "m.c"), "w") as f:
                f.write("int f(void);\nint main(void) { return f(); }\n")
            subprocess.run([cc, "-shared", "-fPIC", "-o", "libf.so", "f.c"], cwd=tmp, check=True)
            # Found through its rpath, but no package owns it.
            subprocess.run([cc, "-o", "with_rpath", "m.c", "-L.", "-lf", f"-Wl,-rpath,{tmp}"],
                           cwd=tmp, check=True)
            result = self.run_script(os.path.join(tmp, "with_rpath"))
            self.assertNotEqual(result.returncode, 0)
            self.assertIn("belongs to no package", result.stderr)
            # Not found at all.
            subprocess.run([cc, "-o", "no_rpath", "m.c", "-L.", "-lf"], cwd=tmp, check=True)
            result = self.run_script(os.path.join(tmp, "no_rpath"))
            self.assertNotEqual(result.returncode, 0)
            self.assertIn("libf.so is not found", result.stderr)

    def test_missing_file_fails(self):
        result = self.run_script("/nonexistent/fuserank-server")
        self.assertNotEqual(result.returncode, 0)

    def test_check_found(self):
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            self.skipTest("no C compiler")
        with tempfile.TemporaryDirectory() as tmp:
            exe = build_with_library(cc, tmp, os.path.join(tmp, "lib"), "libf.so", rpath=False)
            result = self.run_script("--check-found", exe)
            self.assertNotEqual(result.returncode, 0)
            self.assertIn("libf.so is not found", result.stderr)
            exe = build_with_library(cc, tmp, os.path.join(tmp, "lib"), "libf.so")
            result = self.run_script("--check-found", exe)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(result.stdout, "")


def build_with_library(cc, tmp, lib_dir, soname, rpath=True):
    """An executable in `tmp` that loads a shared library `soname` from `lib_dir` (found
    through its rpath, or not found at all)."""
    os.makedirs(lib_dir, exist_ok=True)
    with open(os.path.join(tmp, "f.c"), "w") as f:
        f.write("int f(void) { return 0; }\n")
    with open(os.path.join(tmp, "m.c"), "w") as f:
        f.write("int f(void);\nint main(void) { return f(); }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", os.path.join(lib_dir, soname),
                    f"-Wl,-soname,{soname}", "f.c"], cwd=tmp, check=True)
    exe = os.path.join(tmp, "uses_" + soname.split(".")[0] + ("" if rpath else "_no_rpath"))
    args = [cc, "-o", exe, "m.c", f"-L{lib_dir}", f"-l:{soname}"]
    if rpath:
        args.append(f"-Wl,-rpath,{lib_dir}")
    subprocess.run(args, cwd=tmp, check=True)
    return exe


# A dpkg-query that answers as nvidia/cuda's devel image does: the files under the
# directories given by FAKE_NVIDIA_DIRS (colon-separated) belong to NVIDIA's
# libcublas-13-0 .deb (or to FAKE_NVIDIA_PACKAGE); every other path gets the real
# dpkg-query's answer.
FAKE_DPKG_QUERY = r"""#!/bin/bash
/usr/bin/dpkg-query "$@" 2>/dev/null
IFS=: read -r -a dirs <<<"$FAKE_NVIDIA_DIRS"
for a in "$@"; do
  for d in "${dirs[@]}"; do
    case "$a" in "$d"/*) echo "${FAKE_NVIDIA_PACKAGE:-libcublas-13-0}:amd64: $a";; esac
  done
done
exit 0
"""


class RuntimePackagesCudaTest(unittest.TestCase):
    """CUDA's libraries are left to the runtime image, even where (as in nvidia/cuda's
    devel image) a package of NVIDIA's repository owns them: that package is held in the
    runtime image, and installing it stops the build."""

    SCRIPT = RuntimePackagesTest.SCRIPT

    def setUp(self):
        self.cc = shutil.which("cc") or shutil.which("gcc")
        if not shutil.which("dpkg-query"):
            self.skipTest("no dpkg-query")
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        fakebin = os.path.join(self.tmp, "fakebin")
        os.makedirs(fakebin)
        with open(os.path.join(fakebin, "dpkg-query"), "w") as f:
            f.write(FAKE_DPKG_QUERY)
        os.chmod(os.path.join(fakebin, "dpkg-query"), 0o755)
        self.env = dict(os.environ, PATH=fakebin + os.pathsep + os.environ["PATH"])

    def run_script(self, *files, **env):
        return subprocess.run(["bash", self.SCRIPT, *files], capture_output=True, text=True,
                              timeout=60, env=dict(self.env, **env))

    def cuda_tree(self):
        """<tmp>/cuda-13.0/targets/x86_64-linux/lib/libcublasLt.so.13 and the
        <tmp>/cuda -> cuda-13.0 link, as the CUDA toolkit lays them out."""
        real = os.path.join(self.tmp, "cuda-13.0", "targets", "x86_64-linux", "lib")
        os.makedirs(real)
        os.symlink("cuda-13.0", os.path.join(self.tmp, "cuda"))
        os.symlink(os.path.join("targets", "x86_64-linux", "lib"),
                   os.path.join(self.tmp, "cuda-13.0", "lib64"))
        return real

    def test_a_packaged_library_under_the_cuda_tree_is_left_to_the_base_image(self):
        if not self.cc:
            self.skipTest("no C compiler")
        real = self.cuda_tree()
        # Linked through the version-less link, as LD_LIBRARY_PATH=/usr/local/cuda/lib64;
        # dpkg knows the file by its real path, under cuda-13.0/targets.
        exe = build_with_library(self.cc, self.tmp, os.path.join(self.tmp, "cuda", "lib64"),
                                 "libcublasLt.so.13")
        owner = {"FAKE_NVIDIA_DIRS": real, "FAKE_NVIDIA_PACKAGE": "vendor-blas-13"}
        # The path decides, whatever package owns the file (here one no pattern names).
        # The default pattern is /usr/local/cuda; this tree is elsewhere.
        cuda_paths = "^" + re.escape(self.tmp) + "/cuda"
        result = self.run_script(exe, LEAVE_TO_BASE_PATHS=cuda_paths, **owner)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(), [])
        self.assertIn("libcublasLt.so.13 (" + os.path.realpath(real), result.stderr)
        self.assertIn("left to the CUDA runtime image", result.stderr)
        # Outside the CUDA tree the owner is listed.
        result = self.run_script(exe, **owner)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(), ["vendor-blas-13"])
        # NVIDIA's own package name is left to the base image wherever the file is.
        result = self.run_script(exe, FAKE_NVIDIA_DIRS=real)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(), [])

    def test_a_library_of_a_cuda_package_is_left_to_the_base_image(self):
        if not self.cc:
            self.skipTest("no C compiler")
        lib_dir = os.path.join(self.tmp, "x86_64-linux-gnu")
        exe = build_with_library(self.cc, self.tmp, lib_dir, "libcublasLt.so.13")
        result = self.run_script(exe, FAKE_NVIDIA_DIRS=lib_dir)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("libcublas", result.stdout)
        self.assertIn("belongs to libcublas-13-0: left to the CUDA runtime image", result.stderr)

    def test_the_cuda_module(self):
        module = os.path.join(os.path.dirname(os.path.dirname(SERVER or "")), "lib",
                              "libfuserank_cuda.so")
        if not SERVER or not os.path.exists(module):
            self.skipTest("no CUDA module built beside --server")
        ldd = subprocess.run(["ldd", module], capture_output=True, text=True, timeout=60)
        cuda_libs = [l.split()[2] for l in ldd.stdout.splitlines()
                     if "=> /usr/local/cuda" in l]
        if not cuda_libs:
            self.skipTest("the module loads no library from /usr/local/cuda here")
        dirs = {os.path.dirname(os.path.realpath(l)) for l in cuda_libs}
        result = self.run_script(SERVER, module, FAKE_NVIDIA_DIRS=":".join(sorted(dirs)))
        self.assertEqual(result.returncode, 0, result.stderr)
        packages = result.stdout.split()
        self.assertNotIn("libcublas-13-0", packages)
        self.assertTrue(any(p.startswith("libgrpc++") for p in packages), packages)
        for lib in cuda_libs:
            self.assertIn(lib, result.stderr)


if __name__ == "__main__":
    if "--server" in sys.argv:
        i = sys.argv.index("--server")
        SERVER = sys.argv[i + 1]
        del sys.argv[i:i + 2]
    du.python_check()
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.skipped:  # a check not run must not read as passed
        for test, why in result.skipped:
            print(f"SKIPPED {test.id()}: {why}", file=sys.stderr)
        sys.exit(SKIP_EXIT_CODE)
