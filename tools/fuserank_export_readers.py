"""Readers that turn a DLRM-style torch module, or a state_dict plus a mapping file, into
a SourceModel (docs/export.md: "The module contract", "The mapping file")."""

from __future__ import annotations

import difflib
import sys
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch
from torch import nn

from fuserank_export_model import (DOT_ORDERS, POOLINGS, CrossLayer, ExportError, Layer,
                                   SourceModel, TableWeights, as_float32, check_choice,
                                   check_count)

MAPPING_KEYS = ("tables", "dense", "bottom_mlp", "interaction", "dot_order", "cross", "dcn",
                "top_mlp")
TABLE_KEYS = ("name", "key", "side", "pooling", "oov")


# ---- TorchRec's cross networks --------------------------------------------------------------


def _bias_vector(value: Any, what: str) -> torch.Tensor:
    """TorchRec keeps a cross layer's bias as [N, 1]; fuserank's dcn.<l>.bias is [N]."""
    t = as_float32(value, what)
    return t.reshape(-1) if t.dim() == 2 and t.shape[1] == 1 else t


def _cross_layers(get: Any, names: List[str], what: str) -> List[CrossLayer]:
    """TorchRec's LowRankCrossNet (V_kernels.<l> [r, N], W_kernels.<l> [N, r], bias.<l>) or
    CrossNet (kernels.<l> [N, N], bias.<l>) as fuserank's V_l, U_l / W_l, b_l. `get(name)`
    returns a parameter by its TorchRec name or None; `names` lists them all."""
    if any(n.startswith(("U_kernels.", "C_kernels.")) for n in names):
        raise ExportError(f"{what}: LowRankMixtureCrossNet (U/C/V kernels with experts) is not "
                          "served; fuserank serves LowRankCrossNet and CrossNet")
    layers = sorted({int(n.split(".")[1]) for n in names
                     if n.startswith("bias.") and n.split(".")[1].isdigit()})
    if not layers or layers != list(range(len(layers))):
        raise ExportError(f"{what}: expected bias.0 .. bias.<L-1> (TorchRec LowRankCrossNet or "
                          f"CrossNet parameters), got {', '.join(sorted(names)[:8]) or 'none'}")
    low_rank = any(n.startswith("V_kernels.") for n in names)
    out = []
    for l in layers:
        bias = _bias_vector(get(f"bias.{l}"), f"{what}.bias.{l}")
        if low_rank:
            v, u = get(f"V_kernels.{l}"), get(f"W_kernels.{l}")
            if v is None or u is None:
                raise ExportError(f"{what}: layer {l} needs V_kernels.{l} and W_kernels.{l}")
            out.append(CrossLayer(f"{what} layer {l}", as_float32(v, f"{what}.V_kernels.{l}"),
                                  as_float32(u, f"{what}.W_kernels.{l}"), bias))
        else:
            w = get(f"kernels.{l}")
            if w is None:
                raise ExportError(f"{what}: layer {l} needs kernels.{l}")
            w = as_float32(w, f"{what}.kernels.{l}")
            if w.dim() == 2 and w.shape[1] == 1 and w.shape[0] != 1:
                raise ExportError(f"{what}.kernels.{l}: shape {list(w.shape)} is VectorCrossNet "
                                  "(DCN v1), which fuserank does not serve")
            out.append(CrossLayer(f"{what} layer {l}", None, w, bias))
    return out


def _module_crossnet(module: Any) -> List[CrossLayer]:
    """module.crossnet, or TorchRec DLRM_DCN's module.inter_arch.crossnet; [] if neither."""
    what = "module.crossnet"
    net = getattr(module, "crossnet", None)
    if net is None and getattr(module, "inter_arch", None) is not None:
        net, what = getattr(module.inter_arch, "crossnet", None), "module.inter_arch.crossnet"
    if net is None:
        return []
    if not isinstance(net, nn.Module):
        raise ExportError(f"{what}: expected a TorchRec LowRankCrossNet or CrossNet, got "
                          f"{type(net).__name__}")
    params = dict(net.named_parameters())
    return _cross_layers(params.get, list(params), what)


# ---- a module -----------------------------------------------------------------------------


def _linear_layer(module: nn.Module, what: str) -> Layer:
    weight = as_float32(module.weight, f"{what}.weight")
    if module.bias is None:
        bias = torch.zeros(weight.shape[0])
    else:
        bias = as_float32(module.bias, f"{what}.bias")
    return Layer(what, weight, bias)


def _flatten(seq: nn.Module, what: str) -> List[Tuple[str, nn.Module]]:
    if not isinstance(seq, nn.Sequential):
        return [(what, seq)]
    out: List[Tuple[str, nn.Module]] = []
    for name, child in seq.named_children():
        out += _flatten(child, f"{what}.{name}")
    return out


def _mlp_layers(seq: Optional[nn.Module], what: str, relu_after_last: bool) -> List[Layer]:
    """Linear layers of an nn.Sequential of Linear and ReLU (Dropout and Identity are
    skipped; a trailing Sigmoid in top_mlp is taken as the score's sigmoid)."""
    if seq is None:
        return []
    mods = [(n, m) for n, m in _flatten(seq, what)
            if not isinstance(m, (nn.Identity, nn.Dropout, nn.AlphaDropout))]
    if not relu_after_last and mods and isinstance(mods[-1][1], nn.Sigmoid):
        mods.pop()
    layers: List[Layer] = []
    expect_relu = False
    for name, m in mods:
        if expect_relu:
            if not isinstance(m, nn.ReLU):
                raise ExportError(f"{name}: expected nn.ReLU after a Linear layer, got "
                                  f"{type(m).__name__} (fuserank serves Linear+ReLU MLPs)")
            expect_relu = False
        elif isinstance(m, nn.Linear):
            layers.append(_linear_layer(m, name))
            expect_relu = True
        else:
            raise ExportError(f"{name}: expected nn.Linear, got {type(m).__name__} "
                              "(fuserank serves Linear+ReLU MLPs)")
    if relu_after_last and expect_relu:
        raise ExportError(f"{what}: the bottom MLP needs a ReLU after its last Linear layer")
    if not relu_after_last and not expect_relu and layers:
        raise ExportError(f"{what}: the top MLP must end with a Linear layer, not a ReLU")
    return layers


def _module_table(name: str, bag: Any, what: str) -> Tuple[torch.Tensor, Optional[str]]:
    """The weight of one entry of `embeddings` and the pooling its module implies."""
    if torch.is_tensor(bag):
        return as_float32(bag, what), None
    if not hasattr(bag, "weight"):
        raise ExportError(f"{what}: expected nn.EmbeddingBag or nn.Embedding, "
                          f"got {type(bag).__name__}")
    weight = as_float32(bag.weight, what)
    if getattr(bag, "max_norm", None) is not None:
        raise ExportError(f"{what}: max_norm renormalizes rows at lookup; fuserank does not")
    mode = getattr(bag, "mode", None) if isinstance(bag, nn.EmbeddingBag) else None
    if mode is not None and mode not in POOLINGS:
        raise ExportError(f"{what}: EmbeddingBag mode {mode!r} is not served (sum | mean)")
    pad = getattr(bag, "padding_idx", None)
    if isinstance(bag, nn.EmbeddingBag) and pad is not None:
        if mode != "sum" or bool(weight[pad].any()):
            raise ExportError(f"{what}: EmbeddingBag padding_idx={pad} skips that id when "
                              "pooling; fuserank pools every id (allowed only with mode sum "
                              "and an all-zero padding row)")
    return weight, mode


def from_module(module: Any, mapping: Optional[Mapping] = None) -> SourceModel:
    """Reads a DLRM-style module (the contract in docs/export.md); `mapping` may give
    tables[].side/pooling/oov, dense and interaction where the module has no attribute."""
    mapping = dict(mapping or {})
    embeddings = getattr(module, "embeddings", None)
    if embeddings is None or not hasattr(embeddings, "items"):
        raise ExportError("module.embeddings: missing; expected an nn.ModuleDict (or dict) "
                          "of nn.EmbeddingBag / nn.Embedding keyed by table name")
    overrides: Dict[str, Mapping] = {}
    for i, entry in enumerate(mapping.get("tables") or []):
        _check_table_entry(entry, i, needs_key=False)
        if entry["name"] not in embeddings:
            raise ExportError(f"mapping tables[{i}]: no table {entry['name']!r} in "
                              f"module.embeddings (has: {', '.join(embeddings.keys())})")
        overrides[entry["name"]] = entry
    attr = lambda n: getattr(module, n, None) or {}  # noqa: E731
    tables = []
    for name, bag in embeddings.items():
        what = f"module.embeddings[{name!r}]"
        weight, mode = _module_table(name, bag, what)
        o = overrides.get(name, {})
        side = o.get("side", attr("table_sides").get(name))
        if side is None:
            raise ExportError(f"{what}: no side; give module.table_sides[{name!r}] = 'user' "
                              "or 'item', or a mapping entry {name: ..., side: ...}")
        pooling = o.get("pooling", attr("table_pooling").get(name, mode or "sum"))
        oov = o.get("oov", attr("table_oov").get(name, "modulo"))
        tables.append(TableWeights(name, side, pooling, oov, what, weight))
    bottom = _mlp_layers(getattr(module, "bottom_mlp", None), "module.bottom_mlp", True)
    dense = mapping.get("dense")
    if dense is not None:
        dense_user, dense_item = _mapping_dense(dense)
    elif hasattr(module, "dense_user") or hasattr(module, "dense_item"):
        dense_user = check_count(getattr(module, "dense_user", 0), "module.dense_user")
        dense_item = check_count(getattr(module, "dense_item", 0), "module.dense_item")
    elif bottom:
        raise ExportError("module.dense_user / module.dense_item: missing; they say how the "
                          f"bottom MLP's {bottom[0].weight.shape[1]} inputs split into user "
                          "and item dense features (or give dense: {user: U, item: I} in "
                          "the mapping)")
    else:
        dense_user = dense_item = 0
    interaction = mapping.get("interaction", getattr(module, "interaction", None))
    if interaction is None:
        raise ExportError("module.interaction: missing; expected 'concat', 'dot', 'linear' or "
                          "'dcn'")
    cross = getattr(module, "cross", None)
    if cross is not None:
        if not isinstance(cross, nn.Linear):
            raise ExportError(f"module.cross: expected nn.Linear, got {type(cross).__name__}")
        cross = _linear_layer(cross, "module.cross")
    top_seq = getattr(module, "top_mlp", None)
    if top_seq is None:
        raise ExportError("module.top_mlp: missing; expected an nn.Sequential of Linear+ReLU")
    top = _mlp_layers(top_seq, "module.top_mlp", relu_after_last=False)
    return SourceModel(tables, dense_user, dense_item, bottom, interaction, cross, top,
                       _module_crossnet(module), _dot_order(mapping, interaction, "fuserank"))


# ---- a state_dict with a mapping file ----------------------------------------------------


def _check_table_entry(entry: Any, i: int, needs_key: bool) -> None:
    if not isinstance(entry, dict):
        raise ExportError(f"mapping tables[{i}]: expected a map like "
                          "{name: user_id, key: ..., side: user}")
    unknown = sorted(set(entry) - set(TABLE_KEYS))
    if unknown:
        raise ExportError(f"mapping tables[{i}].{unknown[0]}: unknown key "
                          f"(expected one of: {', '.join(TABLE_KEYS)})")
    for required in ("name", "key", "side") if needs_key else ("name",):
        if required not in entry:
            raise ExportError(f"mapping tables[{i}].{required}: missing")
    for field in ("name", "key"):
        if field in entry and not isinstance(entry[field], str):
            raise ExportError(f"mapping tables[{i}].{field}: expected a string, got "
                              f"{entry[field]!r}")


def _dot_order(mapping: Mapping, interaction: Any, default: str) -> str:
    """mapping dot_order, given only with interaction dot; `default` when absent."""
    if "dot_order" not in mapping:
        return default
    if interaction != "dot":
        raise ExportError(f"mapping dot_order: only with interaction dot, got interaction "
                          f"{interaction!r}")
    return check_choice(mapping["dot_order"], DOT_ORDERS, "mapping dot_order")


def _mapping_dense(dense: Any) -> Tuple[int, int]:
    if not isinstance(dense, dict) or set(dense) - {"user", "item"}:
        raise ExportError(f"mapping dense: expected {{user: U, item: I}}, got {dense!r}")
    return (check_count(dense.get("user", 0), "mapping dense.user"),
            check_count(dense.get("item", 0), "mapping dense.item"))


def _natural_key(key: str) -> Tuple:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in key.split("."))


def _get(state: Mapping, key: str, what: str) -> Any:
    if key not in state:
        close = difflib.get_close_matches(key, list(state.keys()), n=3)
        hint = f" (closest: {', '.join(close)})" if close else ""
        raise ExportError(f"{what}: state_dict key '{key}' not found{hint}")
    return state[key]


def _state_layers(state: Mapping, spec: Any, what: str, used: set) -> List[Layer]:
    """Linear layers named by a prefix (every 2-D '<prefix>.*weight', in natural order)
    or by an explicit list of layer names ('<name>.weight' and '<name>.bias')."""
    if spec is None:
        return []
    if isinstance(spec, str):
        prefix = spec.rstrip(".") + "."
        keys = [k for k in state if k.startswith(prefix)]
        if not keys:
            raise ExportError(f"mapping {what}: no state_dict key starts with '{prefix}'")
        bases = sorted((k[:-len(".weight")] for k in keys
                        if k.endswith(".weight") and getattr(state[k], "dim", lambda: 0)() == 2),
                       key=_natural_key)
        for k in keys:
            if k[:k.rfind(".")] not in bases or not k.endswith((".weight", ".bias")):
                raise ExportError(f"mapping {what}: state_dict key '{k}' under '{prefix}' is "
                                  "not the weight or bias of a Linear layer (fuserank serves "
                                  "Linear+ReLU MLPs)")
    elif isinstance(spec, list) and all(isinstance(s, str) for s in spec):
        bases = spec
    else:
        raise ExportError(f"mapping {what}: expected a key prefix or a list of layer names, "
                          f"got {spec!r}")
    layers = []
    for i, base in enumerate(bases):
        name = f"{what}.{i}"
        weight = as_float32(_get(state, base + ".weight", f"{name}.weight"), base + ".weight")
        bias = as_float32(_get(state, base + ".bias", f"{name}.bias"), base + ".bias")
        used.update((base + ".weight", base + ".bias"))
        layers.append(Layer(f"state_dict '{base}'", weight, bias))
    return layers


def from_state_dict(state: Mapping, mapping: Mapping) -> SourceModel:
    """Reads tensors named by `mapping` (docs/export.md, "The mapping file")."""
    if not isinstance(mapping.get("tables"), list):
        raise ExportError("mapping tables: missing; expected a list of "
                          "{name, key, side, pooling, oov}")
    used: set = set()
    tables = []
    for i, entry in enumerate(mapping["tables"]):
        _check_table_entry(entry, i, needs_key=True)
        what = f"mapping tables[{i}] ({entry['name']})"
        weight = as_float32(_get(state, entry["key"], what), f"state_dict '{entry['key']}'")
        used.add(entry["key"])
        tables.append(TableWeights(entry["name"], entry["side"], entry.get("pooling", "sum"),
                                   entry.get("oov", "modulo"), f"state_dict '{entry['key']}'",
                                   weight))
    dense_user, dense_item = _mapping_dense(mapping.get("dense", {}))
    if "interaction" not in mapping:
        raise ExportError("mapping interaction: missing; expected concat | dot | linear | dcn")
    if "top_mlp" not in mapping:
        raise ExportError("mapping top_mlp: missing; expected the top MLP's key prefix")
    bottom = _state_layers(state, mapping.get("bottom_mlp"), "bottom_mlp", used)
    cross = None
    if mapping.get("cross") is not None:
        if not isinstance(mapping["cross"], str):
            raise ExportError(f"mapping cross: expected a layer name, got {mapping['cross']!r}")
        cross = _state_layers(state, [mapping["cross"]], "cross", used)[0]
    dcn = []
    if mapping.get("dcn") is not None:
        if not isinstance(mapping["dcn"], str):
            raise ExportError(f"mapping dcn: expected the cross network's key prefix (e.g. "
                              f"inter_arch.crossnet), got {mapping['dcn']!r}")
        prefix = mapping["dcn"].rstrip(".") + "."
        names = [k[len(prefix):] for k in state if k.startswith(prefix)]
        if not names:
            raise ExportError(f"mapping dcn: no state_dict key starts with '{prefix}'")
        used.update(prefix + n for n in names)
        dcn = _cross_layers(lambda n: state.get(prefix + n), names,
                            f"state_dict '{prefix.rstrip('.')}'")
    top = _state_layers(state, mapping["top_mlp"], "top_mlp", used)
    unused = [k for k in state if k not in used]
    if unused:
        print(f"fuserank_export: note: {len(unused)} state_dict entries not used: "
              f"{', '.join(unused[:8])}{' ...' if len(unused) > 8 else ''}", file=sys.stderr)
    # A state_dict's top_mlp.0 is taken as TorchRec's DLRM trained it unless the mapping
    # says otherwise (docs/export.md, "dot_order").
    dot_order = _dot_order(mapping, mapping["interaction"], "torchrec")
    if mapping["interaction"] == "dot" and "dot_order" not in mapping:
        print("fuserank_export: note: top_mlp.0's dot products are taken in TorchRec's order "
              "(dot_order: torchrec, the default); give dot_order: fuserank in the mapping "
              "for a state_dict in fuserank's (or facebookresearch/dlrm's) order",
              file=sys.stderr)
    return SourceModel(tables, dense_user, dense_item, bottom, mapping["interaction"], cross,
                       top, dcn, dot_order)
