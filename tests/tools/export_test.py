"""Tests of tools/fuserank_export.py without a server: the exported files, read back by an
independent NumPy reference (numpy_reference.py), must score like the torch model.

Run: /usr/bin/python3 tests/tools/export_test.py   (ctest: export_tests, label unit)
"""

import os
import subprocess
import sys
import unittest

import numpy as np
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# First: it exits 77 (skipped) without torch.
from export_test_util import EXPORTER, ExportTestBase  # noqa: E402
import torch  # noqa: E402

import export_fixtures as fx  # noqa: E402
import numpy_reference as ref  # noqa: E402
import fuserank_export as fe  # noqa: E402  (tools/ is on sys.path via export_fixtures)


class ModuleExportTest(ExportTestBase):
    def test_fp32_export_scores_like_torch_for_every_interaction(self):
        for seed, interaction in enumerate(("dot", "concat", "linear", "dcn", "dcn_full"),
                                           start=11):
            with self.subTest(interaction=interaction, seed=seed):
                model = fx.make_model(interaction, seed)
                out = os.path.join(self.tmp, f"{interaction}.yaml")
                fe.export_module(model, out, name=f"m_{interaction}", version="3")
                with open(out) as f:
                    spec = yaml.safe_load(f)
                self.assertEqual(spec["name"], f"m_{interaction}")
                self.assertEqual(spec["version"], "3")
                self.assertEqual(spec["weights"], f"{interaction}.safetensors")
                self.assertEqual([t["side"] for t in spec["tables"]],
                                 ["user", "user", "item", "item"])
                self.assertEqual(spec["tables"][3]["oov"], "reject")
                self.assertEqual(spec["tables"][1]["pooling"], "mean")
                self.assertEqual(spec["cross_dim"], 10 if interaction == "linear" else 0)
                self.assertEqual(spec.get("dcn"), {"dcn": {"layers": 3, "low_rank": 5},
                                                   "dcn_full": {"layers": 2, "low_rank": 0}
                                                   }.get(interaction))
                self.assert_scores_match(model, out, seed)

    def test_model_without_dense_features(self):
        for seed, interaction in enumerate(("dot", "concat"), start=21):
            with self.subTest(interaction=interaction, seed=seed):
                model = fx.make_model(interaction, seed, dense=False)
                out = os.path.join(self.tmp, f"nodense_{interaction}.yaml")
                fe.export_module(model, out)
                self.assertEqual(ref.load_model(out)[0]["bottom_mlp"], [])
                self.assert_scores_match(model, out, seed)

    def test_tensor_names_and_order_follow_the_spec(self):
        model = fx.make_model("linear", 5)
        out = os.path.join(self.tmp, "m.yaml")
        fe.export_module(model, out)
        tensors = ref.read_safetensors(os.path.join(self.tmp, "m.safetensors"))
        expected = ["bottom_mlp.0.weight", "bottom_mlp.0.bias", "bottom_mlp.1.weight",
                    "bottom_mlp.1.bias", "cross.weight", "cross.bias", "top_mlp.0.weight",
                    "top_mlp.0.bias", "top_mlp.1.weight", "top_mlp.1.bias", "top_mlp.2.weight",
                    "top_mlp.2.bias", "embeddings.user_id.weight", "embeddings.user_hist.weight",
                    "embeddings.item_id.weight", "embeddings.item_cat.weight"]
        self.assertEqual(list(tensors), expected)
        self.assertEqual(tensors["cross.weight"][1].shape, (10, 4 + 6 + 8 + 3 + 4))
        np.testing.assert_array_equal(tensors["embeddings.item_id.weight"][1],
                                      model.embeddings["item_id"].weight.detach().numpy())
        # Same input, same bytes: the file is deterministic.
        fe.export_module(model, os.path.join(self.tmp, "again.yaml"), name="m")
        with open(os.path.join(self.tmp, "m.safetensors"), "rb") as a, \
                open(os.path.join(self.tmp, "again.safetensors"), "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_cli_module_factory(self):
        out = os.path.join(self.tmp, "demo.yaml")
        env = dict(os.environ, PYTHONPATH=os.path.join(fx.REPO, "tools"))
        proc = subprocess.run([sys.executable, EXPORTER, "--module",
                               "fuserank_torch_model:example_model", "--out", out,
                               "--version", "7"], capture_output=True, text=True, env=env,
                              timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        spec, _, _ = ref.load_model(out)
        self.assertEqual((spec["name"], spec["version"]), ("demo", "7"))
        self.assert_scores_match(fx.ftm.example_model(), out, seed=31)

    def test_cli_module_file_of_the_project(self):
        # FILE.py:FACTORY with the project's own model file, which defines dataclasses
        # (they need the module in sys.modules while it runs).
        out = os.path.join(self.tmp, "demo_file.yaml")
        proc = subprocess.run([sys.executable, EXPORTER, "--module",
                               "tools/fuserank_torch_model.py:example_model", "--out", out],
                              capture_output=True, text=True, cwd=fx.REPO, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assert_scores_match(fx.ftm.example_model(), out, seed=32)

    def test_module_file_errors_exit_2_naming_the_code(self):
        folder = os.path.join(self.tmp, "user_code")
        os.makedirs(folder)
        with open(os.path.join(folder, "helper_of_model.py"), "w") as f:
            f.write("import fuserank_torch_model as ftm\nDIMS = 8\n")
        with open(os.path.join(folder, "model.py"), "w") as f:
            f.write("import helper_of_model  # a sibling: its folder is on sys.path\n"
                    "def ok():\n    return helper_of_model.ftm.example_model()\n"
                    "def broken():\n    raise ValueError('no checkpoint at /x')\n")
        with open(os.path.join(folder, "bad_import.py"), "w") as f:
            f.write("import not_a_module_anywhere\n")
        path = os.path.join(folder, "model.py")
        status, stderr = self.run_main("--module", f"{path}:ok", "--out",
                                       os.path.join(self.tmp, "ok.yaml"))
        self.assertEqual(status, 0, stderr)
        for target, needle in (
                (f"{path}:broken", "broken() raised ValueError: no checkpoint at /x"),
                (f"{folder}/bad_import.py:f", "raised ModuleNotFoundError"),
                (f"{folder}/none.py:f", f"no file {folder}/none.py"),
                (f"{path}:missing", "has no attribute 'missing'")):
            status, stderr = self.run_main("--module", target, "--out",
                                           os.path.join(self.tmp, "x.yaml"))
            self.assertEqual(status, 2, stderr)
            self.assertIn(f"fuserank_export: error: --module {target}: ", stderr)
            self.assertIn(needle, stderr)


class SpecLimitsTest(ExportTestBase):
    """The exporter applies the server's limits (engine/model_spec_checks.cc) and writes
    strings the server's YAML reader takes back unchanged."""

    def test_non_ascii_names_are_written_as_utf8(self):
        model = fx.make_model("concat", 81)
        out = os.path.join(self.tmp, "u.yaml")
        fe.export_module(model, out, name="modèle", version="v1-\U0001f680\u2028")
        with open(out, encoding="utf-8") as f:
            text = f.read()
        self.assertIn('version: "v1-\U0001f680\\u2028"', text)  # raw UTF-8, no surrogates
        self.assertIn('name: "modèle"', text)
        spec = yaml.safe_load(text)
        self.assertEqual((spec["name"], spec["version"]), ("modèle", "v1-\U0001f680\u2028"))

    def test_names_the_server_refuses_are_errors(self):
        model = fx.make_model("concat", 82)
        for kwargs, pattern in (
                ({"version": "v1\t2"}, r"--version: must be printable UTF-8 without control "
                                        r"characters.*U\+0009"),
                ({"version": "v\x85"}, r"--version: .*U\+0085"),
                ({"version": "v\x7f"}, r"--version: .*U\+007F"),
                ({"version": "v\udc80"}, r"--version: .*not valid UTF-8"),
                ({"name": "é" * 129}, r"--name: must be at most 256 bytes, got 258")):
            with self.subTest(kwargs=kwargs):
                with self.assertRaisesRegex(fe.ExportError, pattern):
                    fe.export_module(model, os.path.join(self.tmp, "m.yaml"), **kwargs)
                self.assertEqual(os.listdir(self.tmp), [])
        fe.export_module(model, os.path.join(self.tmp, "m.yaml"), name="é" * 128)  # 256 bytes
        model.embeddings["t" * 300] = model.embeddings.pop("item_cat")
        model.table_sides["t" * 300] = "item"
        with self.assertRaisesRegex(fe.ExportError, r"table 't{40}\.\.\.'.*name: must be at "
                                                    r"most 256 bytes, got 300"):
            fe.export_module(model, os.path.join(self.tmp, "t.yaml"))

    def test_table_names_that_are_kserve_inputs_are_errors(self):
        for name, pattern in (("item_ids", r"table 'item_ids'.*the name of a KServe input"),
                              ("item_id__weights", r"the KServe weights input of table 'item_id'")):
            with self.subTest(name=name):
                model = fx.make_model("concat", 82)
                model.embeddings[name] = model.embeddings.pop("item_cat")
                model.table_sides[name] = "item"
                with self.assertRaisesRegex(fe.ExportError, pattern):
                    fe.export_module(model, os.path.join(self.tmp, "k.yaml"))
                self.assertEqual(os.listdir(self.tmp), [])

    def test_widths_beyond_the_servers_limits_are_errors(self):
        from fuserank_export_model import Layer, SourceModel, TableWeights

        def table(name, dim):
            return TableWeights(name, "item", "sum", "modulo", name, torch.zeros(1, dim))

        def top(width):
            return [Layer("top", torch.zeros(1, width), torch.zeros(1))]

        wide = 2**20 + 1
        fe.validate(SourceModel([table("t", 2**20)], 0, 0, [], "concat", None, top(2**20)))
        for src, pattern in (
                (SourceModel([table("t", wide)], 0, 0, [], "concat", None, top(wide)),
                 r"embeddings\.t\.weight \(t\): dim: must be in 1\.\.1048576 .*got 1048577"),
                (SourceModel([table("t", 4)], wide, 0, [], "concat", None, top(wide + 4)),
                 r"dense\.user: must be at most 1048576"),
                (SourceModel([table("t", 4)], 0, 0, [], "concat", None,
                             [Layer("top0", torch.zeros(wide, 4), torch.zeros(wide))] + top(wide)),
                 r"top_mlp\.0\.weight \(top0\): outputs: must be in 1\.\.1048576"),
                (SourceModel([table(f"t{i}", 2**20) for i in range(17)], 0, 0, [], "concat",
                             None, top(17 * 2**20)),
                 r"the interaction is too wide.*17825792 wide.*limit is 16777216")):
            with self.subTest(pattern=pattern):
                with self.assertRaisesRegex(fe.ExportError, pattern):
                    fe.validate(src)


class HalfPrecisionExportTest(ExportTestBase):
    def _check(self, dtype, torch_dtype, st_dtype, seed):
        model = fx.make_model("dot", seed)
        out = os.path.join(self.tmp, f"{dtype}.yaml")
        fe.export_module(model, out, dtype=dtype)
        spec, _, tensors = ref.load_model(out)
        self.assertEqual(spec["embedding_dtype"], dtype)
        for name, bag in model.embeddings.items():
            got_dtype, got = tensors[f"embeddings.{name}.weight"]
            self.assertEqual(got_dtype, st_dtype)
            want = bag.weight.detach().to(torch_dtype).float().numpy()
            np.testing.assert_array_equal(got.astype(np.float32), want,
                                          f"{name}: not torch's round-to-nearest {dtype}")
        self.assertEqual(tensors["top_mlp.0.weight"][0], "F32")
        # The served model is the torch model with its tables rounded to `dtype`.
        rounded = fx.with_tables(model, lambda n, w: w.to(torch_dtype).float())
        self.assert_scores_match(rounded, out, seed)

    def test_fp16_tables(self):
        self._check("fp16", torch.float16, "F16", seed=41)

    def test_bf16_tables(self):
        self._check("bf16", torch.bfloat16, "BF16", seed=42)

    def test_fp16_overflow_is_an_error_naming_the_table(self):
        model = fx.make_model("dot", 43)
        with torch.no_grad():
            model.embeddings["item_cat"].weight[3, 1] = 1e6
        with self.assertRaisesRegex(fe.ExportError, r"embeddings\.item_cat\.weight.*\[3, 1\]"):
            fe.export_module(model, os.path.join(self.tmp, "x.yaml"), dtype="fp16")


class Int8RowsTest(ExportTestBase):
    def test_dequantized_rows_are_within_half_a_step(self):
        seed = 51
        rng = np.random.default_rng(seed)
        w = rng.normal(0, 1, (300, 13)).astype(np.float32)
        w[0] = 0.25  # a constant row
        w[1] = rng.normal(5, 1e-3, 13)  # small spread far from zero
        w[2, 4] = 40.0  # an outlier
        w[3] = rng.normal(0, 1e-30, 13)  # tiny values
        q, qp = fe.quantize_rows_int8(w)
        self.assertEqual((q.dtype, q.shape), (np.int8, w.shape))
        self.assertEqual((qp.dtype, qp.shape), (np.float32, (300, 2)))
        scale, bias = qp[:, 0].astype(np.float64), qp[:, 1].astype(np.float64)
        deq = fe.dequantize_rows_int8(q, qp)
        self.assertEqual(deq.dtype, np.float32)
        # The documented formula, evaluated independently in double; float32 evaluation may
        # differ by rounding relative to the row's magnitude |bias| + 128 * scale.
        expected = scale[:, None] * q.astype(np.float64) + bias[:, None]
        magnitude = (np.abs(bias) + 128 * scale)[:, None]
        self.assertTrue((np.abs(deq - expected) <= 2.5e-7 * magnitude).all())
        lo, hi = w.min(axis=1).astype(np.float64), w.max(axis=1).astype(np.float64)
        np.testing.assert_allclose(scale, (hi - lo) / 255, rtol=1e-6, atol=1e-37)
        err = np.abs(expected - w)
        bound = scale[:, None] / 2 + 1e-6 * np.abs(w) + 1e-37
        self.assertTrue((err <= bound).all(),
                        f"seed {seed}: row {np.unravel_index((err - bound).argmax(), w.shape)} "
                        f"off by {err.max()}")
        self.assertEqual(deq[0].tolist(), [0.25] * 13)
        self.assertEqual(int(q[2].max()), 127)  # the outlier is the top of its range
        self.assertEqual(int(q[2].min()), -128)

    def test_int8_export_layout_and_scores(self):
        seed = 52
        model = fx.make_model("concat", seed)
        out = os.path.join(self.tmp, "i8.yaml")
        fe.export_module(model, out, dtype="int8")
        spec, _, tensors = ref.load_model(out)
        self.assertEqual(spec["embedding_dtype"], "int8")
        names = list(tensors)
        for name, bag in model.embeddings.items():
            rows, dim = bag.weight.shape
            q_dtype, q = tensors[f"embeddings.{name}.weight"]
            p_dtype, qp = tensors[f"embeddings.{name}.qparams"]
            self.assertEqual((q_dtype, q.shape), ("I8", (rows, dim)))
            self.assertEqual((p_dtype, qp.shape), ("F32", (rows, 2)))
            # Every F32 tensor precedes every I8 one, so none starts misaligned.
            self.assertLess(names.index(f"embeddings.{name}.qparams"),
                            min(names.index(f"embeddings.{n}.weight") for n in model.embeddings))
        dequantized = fx.with_tables(model, lambda n, w: torch.from_numpy(
            fe.dequantize_rows_int8(tensors[f"embeddings.{n}.weight"][1],
                                    tensors[f"embeddings.{n}.qparams"][1])))
        self.assert_scores_match(dequantized, out, seed)


class ModuleContractErrorTest(ExportTestBase):
    def assert_export_error(self, model, pattern, **kwargs):
        with self.assertRaisesRegex(fe.ExportError, pattern):
            fe.export_module(model, os.path.join(self.tmp, "m.yaml"), **kwargs)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "m.yaml")))

    def test_unservable_modules_are_refused_with_the_layer_named(self):
        model = fx.make_model("concat", 71)
        model.top_mlp[1] = torch.nn.Tanh()
        self.assert_export_error(model, r"module\.top_mlp\.1: expected nn\.ReLU.*Tanh")
        model = fx.make_model("concat", 72)
        model.top_mlp.append(torch.nn.ReLU())
        self.assert_export_error(model, r"top MLP must end with a Linear")
        model = fx.make_model("concat", 73)
        model.top_mlp[-1] = torch.nn.Linear(8, 2)
        self.assert_export_error(model, r"top_mlp\.2\.weight.*1 output")
        model = fx.make_model("dot", 74)
        model.embeddings["item_cat"] = torch.nn.EmbeddingBag(20, 4, mode="sum")
        self.assert_export_error(model, r"embeddings\.item_cat\.weight.*8 wide.*dim 4")
        model = fx.make_model("dot", 75)
        model.embeddings["item_cat"] = torch.nn.EmbeddingBag(20, 8, mode="max")
        self.assert_export_error(model, r"item_cat.*mode 'max'")
        model = fx.make_model("dot", 76)
        del model.table_sides["user_hist"]
        self.assert_export_error(model, r"user_hist.*no side")

    def test_mapping_supplies_what_the_module_lacks(self):
        model = fx.make_model("dot", 77)
        sides = dict(model.table_sides)
        model.table_sides = {}
        mapping = {"tables": [{"name": n, "side": s} for n, s in sides.items()]}
        out = os.path.join(self.tmp, "mapped.yaml")
        fe.export_module(model, out, mapping=mapping)
        model.table_sides = sides  # torch's forward needs them
        self.assert_scores_match(model, out, 77)
        model.table_sides = {}
        self.assert_export_error(model, r"no table 'nope'",
                                 mapping={"tables": [{"name": "nope", "side": "user"}]})

    def test_sigmoid_and_dropout_in_the_mlps_are_accepted(self):
        model = fx.make_model("linear", 78)
        plain = os.path.join(self.tmp, "plain.yaml")
        fe.export_module(model, plain)
        model.bottom_mlp.insert(1, torch.nn.Dropout(0.5))
        model.top_mlp.append(torch.nn.Sigmoid())
        other = os.path.join(self.tmp, "other.yaml")
        fe.export_module(model, other, name="plain")
        with open(plain.replace(".yaml", ".safetensors"), "rb") as a, \
                open(other.replace(".yaml", ".safetensors"), "rb") as b:
            self.assertEqual(a.read(), b.read())


if __name__ == "__main__":
    unittest.main(verbosity=2)
