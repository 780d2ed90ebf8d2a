#!/usr/bin/python3
"""Checks deploy/docker/runtime-packages.sh, which lists the Debian packages the runtime
image installs: it finds the runtime packages of a real binary, fails on a library no
package owns or that is missing, and leaves CUDA's libraries (under /usr/local/cuda*, or
of NVIDIA's packages, checked with a fake dpkg-query) to the CUDA runtime base image.

  runtime_packages_test.py [--server build/bin/fuserank-server]

A check that cannot run here (no C compiler, no dpkg-query, no CUDA module) is skipped,
and the run then exits 77 (ctest SKIP_RETURN_CODE: skipped, not passed), naming each
skipped check and why.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import deploy_util as du

SERVER = None  # --server: a built fuserank-server

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
    du.run_tests()
