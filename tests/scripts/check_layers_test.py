#!/usr/bin/env python3
"""scripts/check_layers.py: the repository passes, and planted forbidden includes fail."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "scripts", "check_layers.py")


def run(*args):
    return subprocess.run([sys.executable, CHECK, *args], capture_output=True, text=True)


class CheckLayersTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="layers.")
        os.makedirs(os.path.join(self.tmp, "scripts"))
        shutil.copy(os.path.join(ROOT, "scripts", "layers.txt"), os.path.join(self.tmp, "scripts"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def plant(self, path, text):
        """A copy of the real file `path` (if any) with `text` appended, in the temp tree."""
        full = os.path.join(self.tmp, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        original = os.path.join(ROOT, path)
        body = open(original).read() if os.path.exists(original) else ""
        open(full, "w").write(body + text)
        return path

    def check(self, *paths):
        return run("--root", self.tmp, *paths)

    def test_the_repository_keeps_its_layers(self):
        p = run()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("check-layers: ok", p.stdout)

    def test_the_real_files_pass_unchanged(self):
        p = self.check(self.plant("engine/batch.cc", ""), self.plant("engine/cuda/cuda_worker.cc", ""),
                       self.plant("server/ranker_service.cc", ""))
        self.assertEqual(p.returncode, 0, p.stdout)

    def test_an_engine_file_including_the_cuda_layer_fails(self):
        path = self.plant("engine/batch.cc", '#include "engine/cuda/cuda_worker.h"\n')
        p = self.check(path)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn('layer engine may not include "engine/cuda/cuda_worker.h"', p.stdout)

    def test_an_include_up_the_layers_fails(self):
        for path, include in [("engine/batch.cc", "server/config.h"),
                              ("kernels/lookup.cu", "engine/batch.h"),
                              ("server/metrics.cc", "kernels/lookup.h"),
                              ("engine/topk.cc", "fuserank/v1/ranker.pb.h")]:
            with self.subTest(path=path):
                p = self.check(self.plant(path, f'#include "{include}"\n'))
                self.assertEqual(p.returncode, 1, p.stdout)
                self.assertIn(f'may not include "{include}"', p.stdout)

    def test_a_cuda_header_outside_the_cuda_layers_fails(self):
        p = self.check(self.plant("server/metrics.cc", "#include <cuda_runtime_api.h>\n"),
                       self.plant("engine/model.cc", "#include <cub/cub.cuh>\n"))
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("CUDA header <cuda_runtime_api.h> in layer server", p.stdout)
        self.assertIn("CUDA header <cub/cub.cuh> in layer engine", p.stdout)

    def test_grpc_in_the_engine_fails(self):
        p = self.check(self.plant("engine/model.cc", "#include <grpcpp/grpcpp.h>\n"))
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("gRPC header <grpcpp/grpcpp.h> in layer engine", p.stdout)

    def test_a_file_in_no_layer_fails(self):
        p = self.check(self.plant("misc/x.cc", "int x;\n"))
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("in no layer", p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
