#!/usr/bin/env python3
"""Checks every include of the tracked C++/CUDA sources against scripts/layers.txt.

Fails (exit 1), listing each offence as FILE:LINE: why, on an include of a layer the
file's layer may not use, on a CUDA or gRPC header outside the layers allowed them, and on
a source file outside every layer. Exit 0 with a one-line summary otherwise.
usage: check_layers.py [--root DIR] [--layers FILE] [FILE ...]
  (no FILE: every tracked *.h, *.cc, *.cu of the repository at --root, default: this one)
"""

import argparse
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
CUDA = re.compile(r"^(cuda[^/]*\.h|cuda/|cub/|thrust/|cublas[^/]*\.h|curand[^/]*\.h|"
                  r"cufft[^/]*\.h|cusparse[^/]*\.h|cusolver[^/]*\.h|nvrtc[^/]*\.h|nvtx|"
                  r"driver_types\.h|vector_types\.h|crt/)")
GRPC = re.compile(r"^(grpcpp/|grpc/|grpc\+\+/)")
PROTO = ("fuserank/v1/", "inference/")  # generated from proto/


def read_layers(path):
    """{layer: (allowed layers, {"cuda", "grpc"} flags)} from layers.txt."""
    layers = {}
    for number, raw in enumerate(open(path), 1):
        line = raw.split("#")[0].strip()
        if not line:
            continue
        m = re.match(r"^([\w/]+):\s*([^|]*)\|?\s*(.*)$", line)
        if not m:
            raise SystemExit(f"{path}:{number}: cannot read '{raw.rstrip()}'")
        allowed = set(m.group(2).split())
        flags = set(m.group(3).split())
        if flags - {"cuda", "grpc"}:
            raise SystemExit(f"{path}:{number}: unknown flags {sorted(flags - {'cuda', 'grpc'})}")
        layers[m.group(1)] = (allowed, flags)
    for layer, (allowed, _) in layers.items():
        for other in allowed - {"*"}:
            if other not in layers:
                raise SystemExit(f"{path}: {layer} may include '{other}', which is no layer")
    return layers


def layer_of(path, layers):
    """The layer of the longest listed folder holding `path` (a repo-relative path)."""
    best = None
    for layer in layers:
        if path.startswith(layer + "/") and (best is None or len(layer) > len(best)):
            best = layer
    return best


def included_layer(target, layers):
    if target.startswith(PROTO) and target.endswith(".pb.h"):
        return "proto"
    return layer_of(target, layers)


def check_file(root, path, layers):
    """Offences of one file, as 'path:line: why' strings."""
    layer = layer_of(path, layers)
    if layer is None:
        return [f"{path}: in no layer of layers.txt"]
    allowed, flags = layers[layer]
    problems = []
    with open(os.path.join(root, path), errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(2)
            where = f"{path}:{number}"
            if m.group(1) == "<":
                if CUDA.match(target) and "cuda" not in flags:
                    problems.append(f"{where}: CUDA header <{target}> in layer {layer}")
                if GRPC.match(target) and "grpc" not in flags:
                    problems.append(f"{where}: gRPC header <{target}> in layer {layer}")
                continue
            other = included_layer(target, layers)
            if other is None or other == layer or "*" in allowed or other in allowed:
                continue
            problems.append(f'{where}: layer {layer} may not include "{target}" (layer {other})')
    return problems


def tracked_sources(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "*.h", "*.cc", "*.cu"],
                         capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if p]


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(here))
    parser.add_argument("--layers", default=None)
    parser.add_argument("files", nargs="*")
    args = parser.parse_args(argv)
    layers = read_layers(args.layers or os.path.join(args.root, "scripts", "layers.txt"))
    files = args.files or tracked_sources(args.root)
    problems = []
    for path in files:
        problems.extend(check_file(args.root, path, layers))
    for p in problems:
        print(p)
    if problems:
        print(f"check-layers: FAIL ({len(problems)} forbidden includes; the rules: scripts/layers.txt)")
        return 1
    print(f"check-layers: ok ({len(files)} files, {len(layers)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
