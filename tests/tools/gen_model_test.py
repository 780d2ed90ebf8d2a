#!/usr/bin/env python3
"""fuserank-gen-model's --out: it names the spec (DIR/NAME.yaml) and the weights go to
DIR/NAME.safetensors beside it, so any other --out is refused before anything is written
(--out=m.safetensors used to write the spec over its own weights).
The binary comes from $FUSERANK_GEN_MODEL (ctest passes the built target); exit 77
(skipped) without it."""
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import yaml

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


if __name__ == "__main__":
    if not TOOL or not os.path.exists(TOOL):
        print("skipped: fuserank-gen-model not built (FUSERANK_GEN_MODEL)")
        sys.exit(77)
    unittest.main(verbosity=2)
