#!/usr/bin/env python3
"""tools/fuserank_onnx_export.py on input and output it cannot use: each is one line
naming the file and the reason, exit 2, never a traceback (a truncated safetensors gave
numpy's "cannot reshape array ..."; a missing --out folder was reported under the model's
path). These errors come before ONNX is imported, so the test needs only numpy and
PyYAML (Debian's python3-numpy, python3-yaml), not onnx.
Run: /usr/bin/python3 tests/tools/onnx_export_errors_test.py
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXPORTER = os.path.join(REPO, "tools", "fuserank_onnx_export.py")
SPEC = ("name: m\nversion: '1'\nweights: m.safetensors\nembedding_dtype: fp32\n"
        "tables: [{name: item_id, side: item, rows: 4, dim: 2}]\ninteraction: concat\n"
        "top_mlp: [1]\n")


def safetensors_bytes(tensors):
    """tensors: [(name, shape, float32 values)] -> the file's bytes."""
    header, data = {}, b""
    for name, shape, values in tensors:
        raw = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


WEIGHTS = safetensors_bytes([("embeddings.item_id.weight", [4, 2], [0.5] * 8),
                             ("top_mlp.0.weight", [1, 2], [1, -1]),
                             ("top_mlp.0.bias", [1], [0.25])])


class OnnxExportErrorsTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="fuserank_onnx_errors_test_")
        self.tmp = self._tmp.name
        self.spec = self.write("m.yaml", SPEC.encode())
        self.weights = self.write("m.safetensors", WEIGHTS)
        self.out = os.path.join(self.tmp, "m.onnx")

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, name, data):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def export(self, model=None, out=None):
        done = subprocess.run([sys.executable, EXPORTER, f"--model={model or self.spec}",
                               f"--out={out or self.out}"], capture_output=True, text=True,
                              timeout=60)
        self.assertNotIn("Traceback", done.stderr)
        return done

    def assert_error(self, done, message):
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn(f"fuserank_onnx_export: error: {message}", done.stderr)
        self.assertEqual(done.stderr.strip().count("\n"), 0, done.stderr)
        self.assertFalse(os.path.exists(self.out))

    def test_truncated_weights_name_the_file_and_say_truncated(self):
        for keep, message in ((len(WEIGHTS) - 4, "tensor 'top_mlp.0.bias' ends at byte"),
                              (40, "the header says it is"),
                              (5, "5 bytes, not even the 8-byte length of the header")):
            with self.subTest(keep=keep):
                self.write("m.safetensors", WEIGHTS[:keep])
                self.assert_error(self.export(), f"{self.weights}: truncated: {message}")

    def test_weights_that_are_no_safetensors_are_named(self):
        self.write("m.safetensors", struct.pack("<Q", 4) + b"\xff\xfe{}")
        self.assert_error(self.export(), f"{self.weights}: not a safetensors file")
        os.remove(self.weights)
        self.assert_error(self.export(), f"{self.weights}: No such file or directory")

    def test_a_missing_out_folder_names_out_not_the_model(self):
        out = os.path.join(self.tmp, "none", "m.onnx")
        self.assert_error(self.export(out=out),
                          f"--out {out}: no folder {os.path.join(self.tmp, 'none')}")
        self.assert_error(self.export(out=self.tmp), f"--out {self.tmp}: is a directory")

    def test_a_model_that_is_no_spec_is_named(self):
        self.assert_error(self.export(model=self.weights),
                          f"--model {self.weights}: not a model spec YAML")
        no_weights = self.write("w.yaml", SPEC.replace("weights: m.safetensors\n", "").encode())
        self.assert_error(self.export(model=no_weights),
                          f"--model {no_weights}: not a model spec the export reads: missing key "
                          "'weights'")
        missing = os.path.join(self.tmp, "none.yaml")
        self.assert_error(self.export(model=missing), f"--model {missing}: No such file")


if __name__ == "__main__":
    try:
        import numpy  # noqa: F401
        import yaml  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e} (python3-numpy, python3-yaml)", file=sys.stderr)
        sys.exit(77)
    unittest.main(verbosity=2)
