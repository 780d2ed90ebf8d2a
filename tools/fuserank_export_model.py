"""The model as the exporter sees it, whatever it was read from, and the rules of SPEC
section 2 it must meet before anything is written. Plain data; no I/O."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, List, Optional, Sequence

import torch
from torch import nn

DTYPES = ("fp32", "fp16", "bf16", "int8")
SIDES = ("user", "item")
POOLINGS = ("sum", "mean")
OOVS = ("modulo", "reject")
INTERACTIONS = ("concat", "dot", "linear", "dcn")
# The column order of the dot products in top_mlp.0's input (docs/export.md, "dot_order"):
# fuserank's (and facebookresearch/dlrm's) pairs (i, j), j < i, i ascending then j
# ascending; TorchRec's InteractionArch: triu_indices(n, n, offset=1), (0, 1), (0, 2), ...
DOT_ORDERS = ("fuserank", "torchrec")
MAX_ROWS = 2**31 - 1
MAX_DCN_LAYERS = 64
# The server's limits (engine/model_spec_checks.cc): a spec beyond them does not load.
MAX_WIDTH = 2**20  # any one dim, dense count, layer width or dcn rank
MAX_TOTAL_WIDTH = 2**24  # concat(V) and the number of dot products
MAX_NAME_BYTES = 256  # name, version and table names
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")


class ExportError(Exception):
    """A problem with the input model or mapping; the message names the tensor or key."""


@dataclasses.dataclass
class Layer:
    source: str  # where it came from, for messages
    weight: torch.Tensor  # float32 [out, in]
    bias: torch.Tensor  # float32 [out]


@dataclasses.dataclass
class CrossLayer:
    """One DCNv2 layer: low rank, v [R, d0] and u [d0, R]; full rank, v None and u the
    [d0, d0] W. bias [d0] (TorchRec's [d0, 1] flattened)."""

    source: str
    v: Optional[torch.Tensor]
    u: torch.Tensor
    bias: torch.Tensor


@dataclasses.dataclass
class TableWeights:
    name: str
    side: str
    pooling: str
    oov: str
    source: str
    weight: torch.Tensor  # float32 [rows, dim]


@dataclasses.dataclass
class SourceModel:
    """A model gathered from a module or a state_dict, before validation and writing."""

    tables: List[TableWeights]
    dense_user: int
    dense_item: int
    bottom_mlp: List[Layer]
    interaction: str
    cross: Optional[Layer]
    top_mlp: List[Layer]
    dcn: List[CrossLayer] = dataclasses.field(default_factory=list)
    dot_order: str = "fuserank"  # how top_mlp[0]'s dot columns are ordered (DOT_ORDERS)

    def dcn_low_rank(self) -> int:
        """R of the dcn layers (0: full rank); meaningful once validate() passed."""
        return int(self.dcn[0].v.shape[0]) if self.dcn and self.dcn[0].v is not None else 0


def as_float32(value: Any, what: str) -> torch.Tensor:
    """`value` as a float32 CPU tensor; non-float or non-finite values are errors."""
    if isinstance(value, nn.Parameter) or torch.is_tensor(value):
        t = value.detach()
    else:
        raise ExportError(f"{what}: expected a tensor, got {type(value).__name__}")
    if not t.is_floating_point():
        raise ExportError(f"{what}: expected a floating-point tensor, got {t.dtype}")
    if t.is_meta:
        raise ExportError(f"{what}: a tensor on the meta device has no values; load or "
                          "initialize the weights before exporting")
    try:
        t = t.to(device="cpu", dtype=torch.float32).contiguous()
    except (RuntimeError, NotImplementedError) as e:  # a device or layout torch cannot copy
        raise ExportError(f"{what}: cannot copy to a CPU float32 tensor: {e}") from e
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        index = tuple(int(i) for i in bad.nonzero()[0])
        raise ExportError(f"{what}: element {list(index)} is {t[index].item()}")
    return t


def dot_vectors(src: SourceModel) -> int:
    """n = |V|: the tables, plus z when there are dense features."""
    return len(src.tables) + (1 if src.dense_user + src.dense_item else 0)


def fuserank_dot_columns(dot_order: str, n: int) -> List[int]:
    """For each of fuserank's dot columns, pair (i, j) with j < i in its order, the column
    that holds the dot of V_i and V_j in `dot_order`'s order (both count from 0)."""
    if dot_order == "fuserank":
        return list(range(n * (n - 1) // 2))
    # TorchRec: pairs (a, b), a < b, a ascending then b ascending.
    column = {(a, b): k for k, (a, b) in
              enumerate((a, b) for a in range(n) for b in range(a + 1, n))}
    return [column[(j, i)] for i in range(1, n) for j in range(i)]


def check_choice(value: Any, choices: Sequence[str], what: str) -> str:
    if value not in choices:
        raise ExportError(f"{what}: must be one of {' | '.join(choices)}, got {value!r}")
    return value


def check_name(value: Any, what: str) -> str:
    """The server's rule for the model name, the version and table names: printable UTF-8
    (no C0 or C1 control characters, no DEL) of at most MAX_NAME_BYTES bytes."""
    if not isinstance(value, str):
        raise ExportError(f"{what}: expected a string, got {type(value).__name__}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise ExportError(f"{what}: {value!r} is not valid UTF-8 (a lone surrogate at "
                          f"{e.start})") from e
    if size > MAX_NAME_BYTES:
        raise ExportError(f"{what}: must be at most {MAX_NAME_BYTES} bytes, got {size}")
    bad = next((c for c in value if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F), None)
    if bad is not None:
        raise ExportError(f"{what}: must be printable UTF-8 without control characters, got "
                          f"{value!r} (character U+{ord(bad):04X})")
    return value


def check_width(value: int, what: str) -> int:
    if not 1 <= value <= MAX_WIDTH:
        raise ExportError(f"{what}: must be in 1..{MAX_WIDTH} (the server's limit), got {value}")
    return value


def check_count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ExportError(f"{what}: must be an integer >= 0, got {value!r}")
    return value


def _check_layer(name: str, layer: Layer, in_width: int, in_desc: str) -> int:
    w, b = layer.weight, layer.bias
    if w.dim() != 2:
        raise ExportError(f"{name}.weight ({layer.source}): expected [out, in], got shape "
                          f"{list(w.shape)}")
    if w.shape[1] != in_width:
        raise ExportError(f"{name}.weight ({layer.source}): shape {list(w.shape)} takes "
                          f"{w.shape[1]} inputs, but {in_desc} gives {in_width}")
    if list(b.shape) != [w.shape[0]]:
        raise ExportError(f"{name}.bias ({layer.source}): expected shape [{w.shape[0]}], got "
                          f"{list(b.shape)}")
    if w.shape[0] < 1:
        raise ExportError(f"{name}.weight ({layer.source}): a layer needs >= 1 output")
    return check_width(int(w.shape[0]), f"{name}.weight ({layer.source}): outputs")


def _check_dcn(src: SourceModel, d0: int) -> None:
    """The cross layers: all low rank with one R, or all full rank; shapes against d0."""
    if not src.dcn:
        raise ExportError("dcn: missing; interaction dcn needs the cross network (crossnet: "
                          "a TorchRec LowRankCrossNet or CrossNet)")
    if len(src.dcn) > MAX_DCN_LAYERS:
        raise ExportError(f"dcn: {len(src.dcn)} layers, more than {MAX_DCN_LAYERS}")
    rank = src.dcn_low_rank()
    if rank:
        check_width(rank, f"dcn.0.V.weight ({src.dcn[0].source}): low rank")
    for l, layer in enumerate(src.dcn):
        where = f"dcn.{l} ({layer.source})"
        if (layer.v is None) != (rank == 0):
            raise ExportError(f"{where}: every layer must be low rank or every layer full rank")
        want = [("U.weight", layer.u, [d0, rank]), ("V.weight", layer.v, [rank, d0])] if rank \
            else [("W.weight", layer.u, [d0, d0])]
        want.append(("bias", layer.bias, [d0]))
        for name, t, shape in want:
            if list(t.shape) != shape:
                raise ExportError(f"dcn.{l}.{name} ({layer.source}): expected shape {shape} "
                                  f"(concat(z, tables) is {d0} wide), got {list(t.shape)}")


KSERVE_INPUTS = ("user_dense", "item_dense", "item_ids")  # inputs of every model (SPEC 6)


def validate(src: SourceModel) -> None:
    """Every rule of SPEC section 2 the served model depends on; raises ExportError."""
    seen = set()
    for i, t in enumerate(src.tables):
        tensor = f"embeddings.{t.name}.weight ({t.source})"
        if not isinstance(t.name, str) or not NAME_RE.match(t.name):
            raise ExportError(f"table {t.name!r} ({t.source}): a table name uses letters, "
                              "digits, '_' and '-'")
        shown = t.name if len(t.name) <= 40 else t.name[:40] + "..."
        check_name(t.name, f"table {shown!r} ({t.source}): name")
        if t.name in seen:
            raise ExportError(f"table {t.name!r} ({t.source}): duplicate table name")
        seen.add(t.name)
        check_choice(t.side, SIDES, f"table {t.name!r} side")
        check_choice(t.pooling, POOLINGS, f"table {t.name!r} pooling")
        check_choice(t.oov, OOVS, f"table {t.name!r} oov")
        if t.weight.dim() != 2 or t.weight.shape[1] < 1:
            raise ExportError(f"{tensor}: expected [rows, dim], got shape {list(t.weight.shape)}")
        if not 1 <= t.weight.shape[0] <= MAX_ROWS:
            raise ExportError(f"{tensor}: rows must be in 1..{MAX_ROWS}, got {t.weight.shape[0]}")
        check_width(int(t.weight.shape[1]), f"{tensor}: dim")
    for t in src.tables:  # SPEC section 6 names a model's KServe inputs after its tables
        if t.name in KSERVE_INPUTS:
            raise ExportError(f"table {t.name!r} ({t.source}): '{t.name}' is the name of a KServe "
                              "input of every model (SPEC section 6); rename the table")
        for suffix in ("__lengths", "__weights"):
            base = t.name[:-len(suffix)]
            if t.name.endswith(suffix) and base in seen:
                raise ExportError(f"table {t.name!r} ({t.source}): '{t.name}' is the KServe "
                                  f"{suffix[2:]} input of table '{base}' (SPEC section 6); "
                                  "rename the table")
    for count, what in ((src.dense_user, "dense.user"), (src.dense_item, "dense.item")):
        if check_count(count, what) > MAX_WIDTH:
            raise ExportError(f"{what}: must be at most {MAX_WIDTH} (the server's limit), got "
                              f"{count}")
    check_choice(src.dot_order, DOT_ORDERS, "dot_order")
    dense = src.dense_user + src.dense_item
    if src.bottom_mlp and dense == 0:
        raise ExportError("bottom_mlp: present, but there are no dense features "
                          "(dense.user + dense.item = 0)")
    width = dense
    for i, layer in enumerate(src.bottom_mlp):
        desc = "the dense features (dense.user + dense.item)" if i == 0 else f"bottom_mlp.{i - 1}"
        width = _check_layer(f"bottom_mlp.{i}", layer, width, desc)
    z = width if dense else 0
    check_choice(src.interaction, INTERACTIONS, "interaction")
    concat = z + sum(int(t.weight.shape[1]) for t in src.tables)
    n = len(src.tables) + (1 if z else 0)
    if n == 0:
        raise ExportError("tables: the model needs at least one table or dense feature")
    if concat > MAX_TOTAL_WIDTH or n * (n - 1) // 2 > MAX_TOTAL_WIDTH:
        raise ExportError(f"tables: the interaction is too wide: concat(z, tables) is {concat} "
                          f"wide and there are {n * (n - 1) // 2} dot products (the server's "
                          f"limit is {MAX_TOTAL_WIDTH})")
    if src.interaction != "linear" and src.cross is not None:
        raise ExportError(f"cross ({src.cross.source}): present, but interaction is "
                          f"{src.interaction!r} (only linear uses it)")
    if src.interaction != "dcn" and src.dcn:
        raise ExportError(f"dcn ({src.dcn[0].source}): present, but interaction is "
                          f"{src.interaction!r} (only dcn uses it)")
    if src.interaction == "dot":
        d = z or int(src.tables[0].weight.shape[1])
        for t in src.tables:
            if t.weight.shape[1] != d:
                raise ExportError(f"embeddings.{t.name}.weight ({t.source}): interaction dot "
                                  f"needs every vector {d} wide (z or the first table), got "
                                  f"dim {t.weight.shape[1]}")
        if n < 2:
            raise ExportError("interaction: dot over a single vector gives no features")
        h, h_desc = z + n * (n - 1) // 2, "the dot interaction"
    elif src.interaction == "linear":
        if src.cross is None:
            raise ExportError("cross: missing; interaction linear needs the cross nn.Linear")
        h = _check_layer("cross", src.cross, concat, "concat(z, tables)")
        h_desc = "cross"
    elif src.interaction == "dcn":
        _check_dcn(src, concat)
        h, h_desc = concat, "the dcn output x_L (as wide as concat(z, tables))"
    else:
        h, h_desc = concat, "concat(z, tables)"
    if not src.top_mlp:
        raise ExportError("top_mlp: empty; it needs at least one Linear layer (width 1 last)")
    for i, layer in enumerate(src.top_mlp):
        h = _check_layer(f"top_mlp.{i}", layer, h, h_desc if i == 0 else f"top_mlp.{i - 1}")
    if h != 1:
        last = len(src.top_mlp) - 1
        raise ExportError(f"top_mlp.{last}.weight ({src.top_mlp[-1].source}): the last layer "
                          f"must have 1 output (the score), got {h}")
