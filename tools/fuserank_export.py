#!/usr/bin/python3
"""Exports a PyTorch DLRM-style model to fuserank's model format (SPEC section 2).

  fuserank_export.py --module PKG.MOD:FACTORY [--mapping M.yaml] --out DIR/NAME.yaml
  fuserank_export.py --state-dict FILE.pt --mapping M.yaml --out DIR/NAME.yaml
      [--name NAME] [--version V] [--dtype fp32|fp16|bf16|int8]

Writes DIR/NAME.yaml (the spec) and DIR/NAME.safetensors (the weights) beside it, each
through a temporary file renamed into place, the weights first. The module contract,
the mapping file, the dtypes and the int8 row layout are in docs/export.md. Every
problem with the input (a missing key, a wrong shape, a layer fuserank cannot serve)
exits with status 2 and a message naming the tensor or key.

Run with Debian's /usr/bin/python3 (python3-torch, python3-numpy, python3-yaml).
The pieces, beside this file: fuserank_export_readers.py (a module or a state_dict ->
SourceModel), fuserank_export_model.py (SourceModel and its validation),
fuserank_export_writer.py (dtypes, int8 rows, safetensors and YAML).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import torch
from torch import nn
import yaml

from fuserank_export_model import DTYPES, ExportError, SourceModel, check_choice, validate
from fuserank_export_readers import MAPPING_KEYS, from_module, from_state_dict
from fuserank_export_writer import (dequantize_rows_int8, model_tensors, quantize_rows_int8,
                                    spec_yaml, write_safetensors)

__all__ = ["ExportError", "SourceModel", "dequantize_rows_int8", "export", "export_module",
           "export_state_dict", "from_module", "from_state_dict", "main",
           "quantize_rows_int8", "validate", "write_safetensors"]


def export(src: SourceModel, out: str, name: Optional[str] = None, version: str = "1",
           dtype: str = "fp32") -> Tuple[str, str]:
    """Validates `src` and writes `out` (NAME.yaml) and NAME.safetensors beside it.
    Returns (spec path, weights path)."""
    check_choice(dtype, DTYPES, "--dtype")
    if not out.endswith((".yaml", ".yml")):
        raise ExportError(f"--out {out}: must name the spec file, ending in .yaml")
    stem = os.path.splitext(os.path.basename(out))[0]
    name = stem if name is None else name
    if not name or not version:
        raise ExportError("--name and --version must not be empty")
    validate(src)
    tensors = model_tensors(src, dtype)
    directory = os.path.dirname(out) or "."
    os.makedirs(directory, exist_ok=True)
    weights = os.path.join(directory, stem + ".safetensors")
    write_safetensors(weights, tensors, {"format": "pt", "producer": "fuserank_export",
                                         "name": name, "version": version})
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        f.write(spec_yaml(src, name, version, os.path.basename(weights), dtype))
    os.replace(out + ".tmp", out)
    return out, weights


def export_module(module: Any, out: str, mapping: Optional[Mapping] = None,
                  **kwargs: Any) -> Tuple[str, str]:
    return export(from_module(module, mapping), out, **kwargs)


def export_state_dict(state: Mapping, mapping: Mapping, out: str,
                      **kwargs: Any) -> Tuple[str, str]:
    return export(from_state_dict(state, mapping), out, **kwargs)


# ---- command line -----------------------------------------------------------------------


def load_mapping(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            mapping = yaml.safe_load(f)
    except OSError as e:
        raise ExportError(f"--mapping {path}: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise ExportError(f"--mapping {path}: invalid YAML: {e}") from e
    if not isinstance(mapping, dict):
        raise ExportError(f"--mapping {path}: expected a YAML map (tables:, top_mlp:, ...)")
    unknown = sorted(set(mapping) - set(MAPPING_KEYS))
    if unknown:
        raise ExportError(f"--mapping {path}: key '{unknown[0]}': unknown key (expected one "
                          f"of: {', '.join(MAPPING_KEYS)})")
    return mapping


def load_state_dict(path: str) -> Mapping:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError as e:
        raise ExportError(f"--state-dict {path}: no such file") from e
    except Exception as e:  # torch raises many types for a file it cannot read
        raise ExportError(f"--state-dict {path}: cannot load ({e}); save model.state_dict() "
                          "with torch.save") from e
    if not isinstance(state, Mapping):
        raise ExportError(f"--state-dict {path}: expected a dict of tensors, got "
                          f"{type(state).__name__}")
    return state


def load_module(target: str) -> Any:
    """'pkg.mod:factory' or 'path/file.py:factory': calls factory() for the module."""
    mod_name, _, attr = target.rpartition(":")
    if not mod_name or not attr:
        raise ExportError(f"--module {target}: expected PKG.MOD:FACTORY or FILE.py:FACTORY")
    try:
        if mod_name.endswith(".py"):
            spec = importlib.util.spec_from_file_location("_fuserank_export_src", mod_name)
            if spec is None or not os.path.exists(mod_name):
                raise ExportError(f"--module {target}: no file {mod_name}")
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        else:
            sys.path.insert(0, os.getcwd())
            mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        raise ExportError(f"--module {target}: {e}") from e
    factory = getattr(mod, attr, None)
    if factory is None:
        raise ExportError(f"--module {target}: {mod_name} has no attribute '{attr}'")
    module = factory() if callable(factory) and not isinstance(factory, nn.Module) else factory
    if isinstance(module, nn.Module):
        module.eval()
    return module


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Export a PyTorch DLRM-style model to fuserank's YAML + safetensors.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--module", metavar="PKG.MOD:FACTORY",
                        help="a factory returning the module (or FILE.py:FACTORY)")
    source.add_argument("--state-dict", metavar="FILE", help="a torch.save'd state_dict")
    parser.add_argument("--mapping", metavar="M.yaml",
                        help="table keys, sides and layer prefixes (needed with --state-dict)")
    parser.add_argument("--out", required=True, metavar="DIR/NAME.yaml",
                        help="the spec to write; NAME.safetensors goes beside it")
    parser.add_argument("--name", help="model name (default: NAME of --out)")
    parser.add_argument("--version", default="1", help='model version (default: "1")')
    parser.add_argument("--dtype", default="fp32", choices=DTYPES,
                        help="how embedding tables are stored (default: fp32)")
    args = parser.parse_args(argv)
    if args.state_dict and not args.mapping:
        parser.error("--state-dict needs --mapping")
    try:
        mapping = load_mapping(args.mapping) if args.mapping else None
        if args.state_dict:
            src = from_state_dict(load_state_dict(args.state_dict), mapping)
        else:
            src = from_module(load_module(args.module), mapping)
        spec_path, weights_path = export(src, args.out, args.name, args.version, args.dtype)
    except ExportError as e:
        print(f"fuserank_export: error: {e}", file=sys.stderr)
        return 2
    print(f"fuserank_export: wrote {spec_path} and {weights_path} ({len(src.tables)} tables, "
          f"embedding_dtype {args.dtype}, interaction {src.interaction})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
