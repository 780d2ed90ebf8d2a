#!/usr/bin/env python3
"""fuserank-gen-model's --out: it names the spec (DIR/NAME.yaml) and the weights go to
DIR/NAME.safetensors beside it, so any other --out is refused before anything is written
(--out=m.safetensors used to write the spec over its own weights). Both outputs are
checked before anything is written (a folder in their place, a spec that cannot be
replaced, weights over --max_weights_bytes or the free space: exit 2) and replaced
as a pair: a failed write, or a spec whose rename fails after the weights' (the old
weights are put back), leaves the pair that was there and no temporary file.
The binary comes from $FUSERANK_GEN_MODEL (ctest passes the built target); exit 77
(skipped) without it, or when a case skipped (unittest_main)."""
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
from unittest_main import SKIP_EXIT_CODE, run_tests  # noqa: E402

TOOL = os.environ.get("FUSERANK_GEN_MODEL", "")
SMALL = ["--rows=10", "--dim=4", "--top_mlp=4,1"]


class GenModelOutTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="fuserank_gen_model_test_")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def gen(self, out):
        return subprocess.run([TOOL, f"--out={out}", *SMALL], capture_output=True, text=True,
                              timeout=60)

    def test_out_must_name_the_yaml_spec(self):
        for name in ("m.safetensors", "m", "m.json"):
            with self.subTest(out=name):
                out = os.path.join(self.tmp, name)
                done = self.gen(out)
                self.assertNotEqual(done.returncode, 0, done.stdout)
                self.assertIn(f"--out={out}: must name the spec, DIR/NAME.yaml", done.stderr)
                self.assertEqual(os.listdir(self.tmp), [], "nothing is written")

    def test_the_weights_go_beside_the_spec(self):
        for name in ("m.yaml", "n.yml"):
            with self.subTest(out=name):
                out = os.path.join(self.tmp, name)
                done = self.gen(out)
                self.assertEqual(done.returncode, 0, done.stderr)
                with open(out) as f:
                    spec = yaml.safe_load(f)
                stem = os.path.splitext(name)[0]
                self.assertEqual(spec["weights"], f"{stem}.safetensors")
                with open(os.path.join(self.tmp, f"{stem}.safetensors"), "rb") as f:
                    (length,) = struct.unpack("<Q", f.read(8))
                    self.assertIn(b"embeddings.user_0.weight", f.read(length))


def limited_file_size(limit):
    """A preexec_fn: files of the child may not grow past `limit` bytes (a write past it
    fails with EFBIG, "File too large", instead of SIGXFSZ killing the child)."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


class GenModelOutputFilesTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="fuserank_gen_model_files_test_")
        self.tmp = self._tmp.name
        self.spec = os.path.join(self.tmp, "m.yaml")
        self.weights = os.path.join(self.tmp, "m.safetensors")

    def tearDown(self):
        subprocess.run(["chattr", "-i", self.spec], capture_output=True)
        os.chmod(self.tmp, 0o700)
        self._tmp.cleanup()

    def gen(self, *flags, limit=None):
        return subprocess.run([TOOL, f"--out={self.spec}", *SMALL, *flags], capture_output=True,
                              text=True, timeout=120,
                              preexec_fn=limited_file_size(limit) if limit else None)

    def pair(self):
        with open(self.spec, "rb") as s, open(self.weights, "rb") as w:
            return s.read(), w.read()

    def test_a_folder_in_place_of_either_file_writes_nothing(self):
        # --out=<a directory>.yaml left d.safetensors and d.yaml.tmp behind.
        for folder in (self.spec, self.weights):
            with self.subTest(folder=os.path.basename(folder)):
                os.mkdir(folder)
                done = self.gen()
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertIn(f"{folder}: is a directory, not a file", done.stderr)
                self.assertEqual(os.listdir(self.tmp), [os.path.basename(folder)])
                os.rmdir(folder)

    def test_a_spec_that_cannot_be_replaced_is_refused_before_anything_is_written(self):
        # It used to be found at the spec's rename, after the weights' (a broken pair).
        self.assertEqual(self.gen("--seed=1").returncode, 0)
        before = self.pair()
        if os.geteuid() == 0:  # root writes any file but an immutable one
            made = subprocess.run(["chattr", "+i", self.spec], capture_output=True, text=True)
            if made.returncode != 0:
                self.skipTest("as root only an immutable file cannot be replaced, and chattr +i "
                              f"failed here: {made.stderr.strip()}")
        else:
            os.chmod(self.spec, 0o444)
        done = self.gen("--seed=2")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"--out: {self.spec}: exists and cannot be replaced", done.stderr)
        self.assertEqual(self.pair(), before, "the old spec and weights are both kept")
        self.assertEqual(sorted(os.listdir(self.tmp)), ["m.safetensors", "m.yaml"])

    def test_a_spec_rename_that_fails_puts_the_old_weights_back(self):
        # The spec passes the checks but its rename fails after the weights': in a sticky
        # folder (mode 1777, as /tmp) only a file's owner may replace it, so a spec of
        # another user, writable by all, refuses the rename (EPERM) while the weights, the
        # tool's user's own, are replaced. The new weights stayed beside the old spec.
        if os.geteuid() != 0:
            self.skipTest("a process of another user is started from root: as any other "
                          "user, no file of another user can be made here")
        self.assertEqual(self.gen("--seed=1").returncode, 0)
        before = self.pair()
        nobody = 65534
        os.chown(self.weights, nobody, nobody)
        os.chmod(self.spec, 0o666)
        os.chmod(self.tmp, 0o1777)

        # The tool copied beside the model: the build tree may sit under a folder that
        # user cannot enter (a clone under /root). It links no build-tree library.
        tool = os.path.join(self.tmp, "gen-model")
        shutil.copy(TOOL, tool)
        os.chmod(tool, 0o755)

        def as_nobody():
            os.setgroups([])
            os.setgid(nobody)
            os.setuid(nobody)
        done = subprocess.run([tool, f"--out={self.spec}", *SMALL, "--seed=2"],
                              capture_output=True, text=True, timeout=120, preexec_fn=as_nobody)
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertEqual(self.pair(), before, "the old weights are back beside the old spec")
        self.assertEqual(sorted(os.listdir(self.tmp)), ["gen-model", "m.safetensors", "m.yaml"])
        self.assertIn(f"{self.spec}: cannot replace it with {self.spec}.tmp-", done.stderr)
        self.assertIn(f"Operation not permitted; {self.weights} is as it was before",
                      done.stderr)

    def test_a_failed_write_keeps_the_old_pair_and_no_temporary_file(self):
        self.assertEqual(self.gen("--seed=1").returncode, 0)
        before = self.pair()
        done = self.gen("--seed=2", "--rows=100000", limit=64 * 1024)
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn("File too large", done.stderr)
        self.assertEqual(self.pair(), before)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["m.safetensors", "m.yaml"])

    def test_weights_over_the_bound_or_the_free_space_are_refused_naming_the_size(self):
        # 10 rows of dim 4: 160 bytes of tables, 1184 of layers; the header comes on top.
        done = self.gen("--max_weights_bytes=1000")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertRegex(done.stderr, r"the weights would take 0\.0 GiB \(\d+ bytes\), over "
                         r"--max_weights_bytes=1000")
        self.assertEqual(os.listdir(self.tmp), [])
        # Tables of dim 1024 fp32 (4 KiB a row) adding up to 1 GiB more than the free space;
        # the file size limit keeps a check that fails from filling the disk.
        fs = os.statvfs(self.tmp)
        rows = (fs.f_bavail * fs.f_frsize + (1 << 30)) // 4096
        tables = -(-rows // (2**31 - 1))
        per_table = -(-rows // tables)
        done = subprocess.run(
            [TOOL, f"--out={self.spec}", "--user_tables=0", f"--item_tables={tables}",
             f"--rows={per_table}", "--dim=1024", "--top_mlp=1", "--interaction=concat",
             f"--max_weights_bytes={1 << 62}"],
            capture_output=True, text=True, timeout=120, preexec_fn=limited_file_size(1 << 26))
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertRegex(done.stderr, r"the weights would take [\d.]+ GiB \(\d+ bytes\), and "
                         rf"{self.tmp} has [\d.]+ GiB \(\d+ bytes\) free")
        self.assertEqual(os.listdir(self.tmp), [])


if __name__ == "__main__":
    if not TOOL or not os.path.exists(TOOL):
        print("skipped: fuserank-gen-model not built (FUSERANK_GEN_MODEL)")
        sys.exit(SKIP_EXIT_CODE)
    run_tests()
