"""Tests of tools/fuserank_export.py's state_dict path without a server: TorchRec-named
state_dicts with a mapping export like the module they came from, and every problem of a
state_dict, a mapping or the command line is an error naming the key or the layer.

Run: /usr/bin/python3 tests/tools/export_state_dict_test.py   (ctest: export_state_dict_tests,
label unit)
"""

import errno
import os
import resource
import subprocess
import sys
import unittest
import unittest.mock

import numpy as np
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# First: it exits 77 (skipped) without torch.
from export_test_util import EXPORTER, ExportTestBase  # noqa: E402
import torch  # noqa: E402

import export_fixtures as fx  # noqa: E402
import fuserank_export as fe  # noqa: E402  (tools/ is on sys.path via export_fixtures)


class StateDictExportTest(ExportTestBase):
    def _save(self, sd, mapping, stem="sd"):
        sd_path = os.path.join(self.tmp, f"{stem}.pt")
        map_path = os.path.join(self.tmp, f"{stem}_mapping.yaml")
        torch.save(sd, sd_path)
        with open(map_path, "w") as f:
            yaml.safe_dump(mapping, f)
        return sd_path, map_path

    def test_torchrec_names_export_like_the_module(self):
        for seed, interaction in enumerate(("dot", "linear", "dcn", "dcn_full"), start=61):
            with self.subTest(interaction=interaction, seed=seed):
                model = fx.make_model(interaction, seed)
                sd_path, map_path = self._save(*fx.torchrec_state_dict(model))
                out = os.path.join(self.tmp, f"sd_{interaction}", "m.yaml")
                proc = self.run_cli("--state-dict", sd_path, "--mapping", map_path, "--out",
                                    out, "--name", "m", "--version", "2", "--dtype", "fp32")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assert_scores_match(model, out, seed)
                module_out = os.path.join(self.tmp, f"mod_{interaction}", "m.yaml")
                fe.export_module(model, module_out, version="2")
                for suffix in (".yaml", ".safetensors"):
                    with open(out.replace(".yaml", suffix), "rb") as a, \
                            open(module_out.replace(".yaml", suffix), "rb") as b:
                        self.assertEqual(a.read(), b.read(), f"{suffix} differs")

    def test_torchrec_dot_order_scores_like_torchrecs_forward(self):
        # 4 tables (+ z): n >= 4, where TorchRec's triu order of the dot products and
        # fuserank's tril order differ. The tensors are only renamed, so what they mean is
        # TorchRec's forward over them (fx.TorchRecDot, written in the test with torch).
        for seed, dense in ((68, True), (69, False)):
            with self.subTest(dense=dense, seed=seed):
                model = fx.make_model("dot", seed, dense=dense)
                sd, mapping = fx.torchrec_state_dict(model, torchrec_meaning=False)
                sd_path, map_path = self._save(sd, mapping, stem=f"trec{seed}")
                out = os.path.join(self.tmp, f"trec{seed}", "m.yaml")
                status, stderr = self.run_main("--state-dict", sd_path, "--mapping", map_path,
                                               "--out", out)
                self.assertEqual(status, 0, stderr)
                self.assert_scores_match(fx.TorchRecDot(model), out, seed)
                # dot_order: fuserank reads the same tensors in fuserank's own order.
                mapping["dot_order"] = "fuserank"
                sd_path, map_path = self._save(sd, mapping, stem=f"tril{seed}")
                out = os.path.join(self.tmp, f"tril{seed}", "m.yaml")
                status, stderr = self.run_main("--state-dict", sd_path, "--mapping", map_path,
                                               "--out", out)
                self.assertEqual(status, 0, stderr)
                self.assert_scores_match(model, out, seed)

    def test_the_fixture_reorders_like_torchrec(self):
        # fx.torchrec_state_dict(model) is the model as TorchRec would hold it: TorchRec's
        # forward over its top_mlp.0 scores like the model (so the byte comparison of
        # test_torchrec_names_export_like_the_module checks TorchRec's meaning).
        model = fx.make_model("dot", 70)
        sd, _ = fx.torchrec_state_dict(model)
        reordered = fx.with_tables(model, lambda n, w: w)
        with torch.no_grad():
            reordered.top_mlp[0].weight.copy_(sd["over_arch.model.0._mlp.0._linear.weight"])
        self.assertFalse(torch.equal(reordered.top_mlp[0].weight, model.top_mlp[0].weight))
        rng = np.random.default_rng(70)
        request = fx.random_request(rng, model, 9)
        torch.testing.assert_close(fx.TorchRecDot(reordered).score_request(request),
                                   model.score_request(request))

    def test_dot_order_problems_are_errors(self):
        model = fx.make_model("dot", 71)
        sd, mapping = fx.torchrec_state_dict(model)
        mapping["dot_order"] = "tril"
        self.assert_cli_error(sd, mapping, "mapping dot_order", "fuserank | torchrec", "tril")
        model = fx.make_model("concat", 71)
        sd, mapping = fx.torchrec_state_dict(model)
        mapping["dot_order"] = "torchrec"
        self.assert_cli_error(sd, mapping, "mapping dot_order: only with interaction dot")

    def test_explicit_layer_list_in_the_mapping(self):
        model = fx.make_model("concat", 63)
        sd, mapping = fx.torchrec_state_dict(model)
        mapping["top_mlp"] = ["over_arch.model.0._mlp.0._linear",
                              "over_arch.model.0._mlp.1._linear", "over_arch.model.1"]
        sd_path, map_path = self._save(sd, mapping)
        out = os.path.join(self.tmp, "list.yaml")
        status, stderr = self.run_main("--state-dict", sd_path, "--mapping", map_path,
                                       "--out", out)
        self.assertEqual(status, 0, stderr)
        self.assert_scores_match(model, out, 63)

    def assert_cli_error(self, sd, mapping, *needles):
        sd_path, map_path = self._save(sd, mapping)
        out = os.path.join(self.tmp, "bad", "m.yaml")
        status, stderr = self.run_main("--state-dict", sd_path, "--mapping", map_path,
                                       "--out", out)
        self.assertEqual(status, 2, stderr)
        for needle in needles:
            self.assertIn(needle, stderr)
        self.assertFalse(os.path.exists(out), "a failed export must not leave a spec behind")

    def test_missing_tensor_is_an_error_naming_the_key(self):
        model = fx.make_model("dot", 64)
        sd, mapping = fx.torchrec_state_dict(model)
        del sd["dense_arch.model._mlp.1._linear.bias"]
        self.assert_cli_error(sd, mapping, "bottom_mlp.1.bias",
                              "dense_arch.model._mlp.1._linear.bias")
        sd, mapping = fx.torchrec_state_dict(model)
        del sd["sparse_arch.embedding_bag_collection.embedding_bags.t_item_id.weight"]
        self.assert_cli_error(sd, mapping, "tables[2] (item_id)",
                              "embedding_bags.t_item_id.weight")

    def test_dcn_problems_name_the_layer(self):
        model = fx.make_model("dcn", 66)
        sd, mapping = fx.torchrec_state_dict(model)
        sd["inter_arch.crossnet.W_kernels.1"] = torch.zeros(5, 25)  # V's orientation
        self.assert_cli_error(sd, mapping, "dcn.1.U.weight", "expected shape [25, 5]",
                              "[5, 25]")
        sd, mapping = fx.torchrec_state_dict(model)
        del sd["inter_arch.crossnet.V_kernels.2"]
        self.assert_cli_error(sd, mapping, "layer 2 needs V_kernels.2 and W_kernels.2")
        sd, mapping = fx.torchrec_state_dict(model)
        mapping["interaction"] = "concat"
        self.assert_cli_error(sd, mapping, "dcn", "present, but interaction is 'concat'")
        sd, mapping = fx.torchrec_state_dict(model)
        del mapping["dcn"]
        self.assert_cli_error(sd, mapping, "dcn: missing")
        sd, mapping = fx.torchrec_state_dict(model)
        for l in range(3):  # VectorCrossNet: kernels.<l> [N, 1]
            for k in ("V_kernels", "W_kernels"):
                del sd[f"inter_arch.crossnet.{k}.{l}"]
            sd[f"inter_arch.crossnet.kernels.{l}"] = torch.zeros(25, 1)
        self.assert_cli_error(sd, mapping, "VectorCrossNet")

    def test_wrong_shape_is_an_error_naming_the_tensor(self):
        model = fx.make_model("dot", 65)
        sd, mapping = fx.torchrec_state_dict(model)
        sd["over_arch.model.0._mlp.1._linear.weight"] = torch.zeros(8, 15)
        self.assert_cli_error(sd, mapping, "top_mlp.1.weight",
                              "over_arch.model.0._mlp.1._linear", "15 inputs")
        sd, mapping = fx.torchrec_state_dict(model)
        sd["sparse_arch.embedding_bag_collection.embedding_bags.t_user_hist.weight"] = \
            torch.zeros(40, 7)
        self.assert_cli_error(sd, mapping, "embeddings.user_hist.weight", "dim 7")
        sd, mapping = fx.torchrec_state_dict(model)
        sd["dense_arch.model._mlp.0._linear.bias"] = torch.zeros(3)
        self.assert_cli_error(sd, mapping, "bottom_mlp.0.bias", "[16]")

    def test_bad_values_and_mappings_are_errors(self):
        model = fx.make_model("linear", 66)
        sd, mapping = fx.torchrec_state_dict(model)
        sd["inter_arch.cross.weight"][2, 3] = float("nan")
        self.assert_cli_error(sd, mapping, "inter_arch.cross.weight", "nan")
        sd, mapping = fx.torchrec_state_dict(model)
        mapping["tables"][0]["side"] = "both"
        self.assert_cli_error(sd, mapping, "user_id", "side")
        sd, mapping = fx.torchrec_state_dict(model)
        mapping["bottom_layers"] = "x"
        self.assert_cli_error(sd, mapping, "bottom_layers", "unknown key")
        sd, mapping = fx.torchrec_state_dict(model)
        del mapping["cross"]
        self.assert_cli_error(sd, mapping, "cross: missing")
        sd, mapping = fx.torchrec_state_dict(model)
        sd["over_arch.model.0._mlp.0.norm.weight"] = torch.ones(16)
        self.assert_cli_error(sd, mapping, "over_arch.model.0._mlp.0.norm.weight")

    def test_usage_errors_exit_2(self):
        proc = self.run_cli("--state-dict", "x.pt", "--out", os.path.join(self.tmp, "a.yaml"))
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--mapping", proc.stderr)
        # A missing mapping and a missing state_dict, each named (the mapping is read first,
        # so the state_dict case needs a mapping that loads).
        _, map_path = self._save({}, fx.torchrec_state_dict(fx.make_model("dot", 67))[1])
        missing = os.path.join(self.tmp, "nope.pt")
        status, stderr = self.run_main("--state-dict", missing, "--mapping", missing + ".yaml",
                                       "--out", os.path.join(self.tmp, "a.yaml"))
        self.assertEqual(status, 2)
        self.assertIn("--mapping " + missing + ".yaml", stderr)
        status, stderr = self.run_main("--state-dict", missing, "--mapping", map_path,
                                       "--out", os.path.join(self.tmp, "a.yaml"))
        self.assertEqual(status, 2)
        self.assertIn(f"--state-dict {missing}: no such file", stderr)

    def test_a_binary_mapping_is_a_one_line_error(self):
        # The state_dict's .pt given as the mapping raised UnicodeDecodeError, a traceback.
        sd, mapping = fx.torchrec_state_dict(fx.make_model("dot", 68))
        sd_path, _ = self._save(sd, mapping)
        out = os.path.join(self.tmp, "b.yaml")
        proc = self.run_cli("--state-dict", sd_path, "--mapping", sd_path, "--out", out)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertEqual(proc.stderr.strip().count("\n"), 0, proc.stderr)
        self.assertRegex(proc.stderr, rf"fuserank_export: error: --mapping {sd_path}: not a YAML "
                         r"text file \(byte 0x[0-9a-f]{2} at offset \d+ is not UTF-8\)")
        self.assertFalse(os.path.exists(out))

    def test_cli_error_exits_2_naming_the_key(self):
        model = fx.make_model("dot", 67)
        sd, mapping = fx.torchrec_state_dict(model)
        del sd["over_arch.model.1.bias"]
        sd_path, map_path = self._save(sd, mapping)
        proc = self.run_cli("--state-dict", sd_path, "--mapping", map_path, "--out",
                            os.path.join(self.tmp, "m.yaml"))
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("fuserank_export: error: top_mlp.2.bias: state_dict key "
                      "'over_arch.model.1.bias' not found", proc.stderr)


    def test_mapping_keys_of_the_wrong_type_are_errors(self):
        model = fx.make_model("dot", 72)
        for key in (["a"], 5):
            sd, mapping = fx.torchrec_state_dict(model)
            mapping["tables"][1]["key"] = key
            self.assert_cli_error(sd, mapping, "mapping tables[1].key: expected a string",
                                  repr(key))
        sd, mapping = fx.torchrec_state_dict(model)
        mapping["tables"][0]["name"] = ["user_id"]
        self.assert_cli_error(sd, mapping, "mapping tables[0].name: expected a string")

    def test_meta_tensors_are_an_error_naming_the_key(self):
        model = fx.make_model("dot", 73)
        sd, mapping = fx.torchrec_state_dict(model)
        key = "sparse_arch.embedding_bag_collection.embedding_bags.t_item_id.weight"
        sd[key] = torch.empty(60, 8, device="meta")
        self.assert_cli_error(sd, mapping, key, "meta device")


class OutputPathTest(ExportTestBase):
    """A bad --out is an error (exit 2) that replaces nothing and leaves no temporary file."""

    def setUp(self):
        super().setUp()
        model = fx.make_model("dot", 74)
        sd, mapping = fx.torchrec_state_dict(model)
        self.sd_path = os.path.join(self.tmp, "sd.pt")
        self.map_path = os.path.join(self.tmp, "mapping.yaml")
        torch.save(sd, self.sd_path)
        with open(self.map_path, "w") as f:
            yaml.safe_dump(mapping, f)

    def export(self, out):
        return self.run_main("--state-dict", self.sd_path, "--mapping", self.map_path, "--out",
                             out)

    def listing(self, folder):
        return {name: open(os.path.join(folder, name), "rb").read()
                if os.path.isfile(os.path.join(folder, name)) else "dir"
                for name in os.listdir(folder)}

    def test_unwritable_folders_are_errors(self):
        status, stderr = self.export("/proc/no/such/m.yaml")
        self.assertEqual(status, 2, stderr)
        self.assertIn("fuserank_export: error: --out /proc/no/such/m.yaml: cannot create the "
                      "folder", stderr)
        blocker = os.path.join(self.tmp, "file")
        open(blocker, "w").close()
        for out in (os.path.join(blocker, "m.yaml"), os.path.join(blocker, "sub", "m.yaml")):
            status, stderr = self.export(out)
            self.assertEqual(status, 2, stderr)
            self.assertIn(f"--out {out}: cannot create the folder {blocker}", stderr)

    def test_a_directory_named_by_out_replaces_nothing(self):
        out_dir = os.path.join(self.tmp, "o")
        os.makedirs(os.path.join(out_dir, "d.yaml"))
        with open(os.path.join(out_dir, "d.safetensors"), "wb") as f:
            f.write(b"the weights of the model being served")
        before = self.listing(out_dir)
        status, stderr = self.export(os.path.join(out_dir, "d.yaml"))
        self.assertEqual(status, 2, stderr)
        self.assertIn("d.yaml is a directory", stderr)
        self.assertEqual(self.listing(out_dir), before)

    def test_a_failed_write_replaces_nothing_and_leaves_no_temporary_file(self):
        out_dir = os.path.join(self.tmp, "w")
        os.makedirs(out_dir)
        for suffix in (".yaml", ".safetensors"):
            with open(os.path.join(out_dir, "m" + suffix), "wb") as f:
                f.write(b"old " + suffix.encode())
        before = self.listing(out_dir)
        limit = 4096  # bytes: the weights (5.4 KB of tables) do not fit
        proc = subprocess.run(
            [sys.executable, EXPORTER, "--state-dict", self.sd_path, "--mapping", self.map_path,
             "--out", os.path.join(out_dir, "m.yaml")], capture_output=True, text=True,
            cwd=fx.REPO, timeout=120,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("fuserank_export: error: --out", proc.stderr)
        self.assertIn("File too large", proc.stderr)
        self.assertEqual(self.listing(out_dir), before)


    def test_links_planted_at_the_temporary_names_are_not_followed(self):
        out_dir = os.path.join(self.tmp, "p")
        os.makedirs(out_dir)
        victim = os.path.join(self.tmp, "victim")
        with open(victim, "wb") as f:
            f.write(b"keep me")
        for name in ("m.safetensors.tmp", "m.yaml.tmp"):
            os.symlink(victim, os.path.join(out_dir, name))
        status, stderr = self.export(os.path.join(out_dir, "m.yaml"))
        self.assertEqual(status, 0, stderr)
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), b"keep me")
        self.assertEqual(sorted(os.listdir(out_dir)), ["m.safetensors", "m.yaml"])

    def test_a_spec_rename_that_fails_puts_the_old_weights_back(self):
        out_dir = os.path.join(self.tmp, "r")
        os.makedirs(out_dir)
        for suffix in (".yaml", ".safetensors"):
            with open(os.path.join(out_dir, "m" + suffix), "wb") as f:
                f.write(b"old " + suffix.encode())
        before = self.listing(out_dir)
        real_replace = os.replace

        def replace(src, dst):  # the spec's rename fails; the weights' goes through
            if str(dst).endswith(".yaml"):
                raise OSError(errno.EPERM, "Operation not permitted", dst)
            real_replace(src, dst)
        with unittest.mock.patch.object(fe.os, "replace", replace):
            status, stderr = self.export(os.path.join(out_dir, "m.yaml"))
        self.assertEqual(status, 2, stderr)
        self.assertIn("Operation not permitted", stderr)
        self.assertEqual(self.listing(out_dir), before, "the old weights are back")


if __name__ == "__main__":
    unittest.main(verbosity=2)
