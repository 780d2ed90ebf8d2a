#!/usr/bin/python3
"""Exports a PyTorch DLRM-style model to fuserank's model format (SPEC section 2).

  fuserank_export.py --module PKG.MOD:FACTORY [--mapping M.yaml] --out DIR/NAME.yaml
  fuserank_export.py --state-dict FILE.pt --mapping M.yaml --out DIR/NAME.yaml
      [--name NAME] [--version V] [--dtype fp32|fp16|bf16|int8]

Writes DIR/NAME.yaml (the spec) and DIR/NAME.safetensors (the weights) beside it, each
through a temporary file, renamed into place (the weights first) once both are written.
The module contract, the mapping file, the dtypes and the int8 row layout are in
docs/export.md. Every problem with the input (a missing key, a wrong shape, a layer
fuserank cannot serve, a limit of the server) or with --out exits with status 2 and a
message naming the tensor, key or path, and replaces nothing.

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

from fuserank_export_model import (DTYPES, ExportError, SourceModel, check_choice, check_name,
                                   validate)
from fuserank_export_readers import MAPPING_KEYS, from_module, from_state_dict
from fuserank_export_writer import (dequantize_rows_int8, model_tensors, quantize_rows_int8,
                                    spec_yaml, write_safetensors, write_safetensors_file)
from fuserank_files import open_new, remove_quietly

__all__ = ["ExportError", "SourceModel", "dequantize_rows_int8", "export", "export_module",
           "export_state_dict", "from_module", "from_state_dict", "main",
           "quantize_rows_int8", "validate", "write_safetensors"]


def export(src: SourceModel, out: str, name: Optional[str] = None, version: str = "1",
           dtype: str = "fp32") -> Tuple[str, str]:
    """Validates `src` and writes `out` (NAME.yaml) and NAME.safetensors beside it.
    Returns (spec path, weights path). Both files are written to temporary names first and
    renamed into place only when both are complete (the weights first); on any failure
    the temporary files are removed and nothing already there is replaced (but for a
    failed rename of the spec after the weights' one: docs/export.md)."""
    check_choice(dtype, DTYPES, "--dtype")
    if not isinstance(out, str) or not out.endswith((".yaml", ".yml")):
        raise ExportError(f"--out {out}: must name the spec file, ending in .yaml")
    stem = os.path.splitext(os.path.basename(out))[0]
    name_what = "--name" if name is not None else f"--out {out}: the model name (NAME.yaml)"
    name = stem if name is None else name
    if not name or not version:
        raise ExportError("--name and --version must not be empty")
    check_name(name, name_what)
    check_name(version, "--version")
    directory = os.path.dirname(out) or "."
    weights = os.path.join(directory, stem + ".safetensors")
    for path in (out, weights):
        if os.path.isdir(path):
            raise ExportError(f"--out {out}: {path} is a directory")
    validate(src)
    tensors = model_tensors(src, dtype)
    spec = spec_yaml(src, name, version, os.path.basename(weights), dtype)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        reason = "exists and is not a directory" if isinstance(e, FileExistsError) else \
            e.strerror or str(e)
        raise ExportError(f"--out {out}: cannot create the folder {e.filename or directory}: "
                          f"{reason}") from e
    temporary = (weights + ".tmp", out + ".tmp")
    old_weights = weights + ".old"  # the weights replaced, until the spec is replaced too
    try:
        write_safetensors_file(temporary[0], tensors, {"format": "pt",
                                                       "producer": "fuserank_export",
                                                       "name": name, "version": version})
        with open_new(temporary[1], "w", encoding="utf-8") as f:
            f.write(spec)
            f.flush()
            os.fsync(f.fileno())
        replace_pair(temporary, (weights, out), old_weights)
    except OSError as e:
        where = e.filename if e.filename is not None else out
        raise ExportError(f"--out {out}: cannot write {where}: "
                          f"{e.strerror or e}") from e
    finally:
        for path in (*temporary, old_weights):
            remove_quietly(path)
    return out, weights


def replace_pair(new: Tuple[str, str], dest: Tuple[str, str], side: str) -> None:
    """Renames new[0] over dest[0], then new[1] over dest[1]; when the second rename fails,
    puts the old dest[0] back (kept as a hard link at `side` meanwhile; removed when there
    was none), so that a spec never names weights it was not written with. A process that
    dies between the two renames leaves the new weights beside the old spec, the old
    weights at `side`."""
    had_old = os.path.lexists(dest[0])
    if had_old:
        remove_quietly(side)
        os.link(dest[0], side, follow_symlinks=False)  # a link there is kept as a link
    os.replace(new[0], dest[0])
    try:
        os.replace(new[1], dest[1])
    except OSError:
        if had_old:
            os.replace(side, dest[0])
        else:
            remove_quietly(dest[0])
        raise


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
    except UnicodeDecodeError as e:  # a binary file (a .pt given for the mapping)
        raise ExportError(f"--mapping {path}: not a YAML text file (byte "
                          f"0x{e.object[e.start]:02x} at offset {e.start} is not UTF-8)") from e
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


def _user_code_error(target: str, what: str, e: BaseException) -> ExportError:
    return ExportError(f"--module {target}: {what} raised {type(e).__name__}: {e}")


def _import_file(target: str, path: str) -> Any:
    """FILE.py as a module: registered in sys.modules before it runs (dataclasses and
    pickling look their module up there), with its folder on sys.path for its imports."""
    if not os.path.isfile(path):
        raise ExportError(f"--module {target}: no file {path}")
    name = "_fuserank_export_src"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ExportError(f"--module {target}: cannot load {path} as a Python module")
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # anything the user's file raises
        del sys.modules[name]
        raise _user_code_error(target, f"loading {path}", e) from e
    return mod


def load_module(target: str) -> Any:
    """'pkg.mod:factory' or 'path/file.py:factory': calls factory() for the module. An
    error raised by the user's code is an ExportError naming it."""
    mod_name, _, attr = target.rpartition(":")
    if not mod_name or not attr:
        raise ExportError(f"--module {target}: expected PKG.MOD:FACTORY or FILE.py:FACTORY")
    if mod_name.endswith(".py"):
        mod = _import_file(target, mod_name)
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            raise ExportError(f"--module {target}: {e}") from e
        except Exception as e:  # anything the user's module raises on import
            raise _user_code_error(target, f"importing {mod_name}", e) from e
    factory = getattr(mod, attr, None)
    if factory is None:
        raise ExportError(f"--module {target}: {mod_name} has no attribute '{attr}'")
    if callable(factory) and not isinstance(factory, nn.Module):
        try:
            module = factory()
        except ExportError:
            raise
        except Exception as e:  # anything the user's factory raises
            raise _user_code_error(target, f"{attr}()", e) from e
    else:
        module = factory
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
