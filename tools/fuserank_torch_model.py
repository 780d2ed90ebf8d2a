"""A reference DLRM-style PyTorch module that follows fuserank's forward pass exactly.

It is what tools/fuserank_export.py expects of a module (docs/export.md, "The module
contract"), and its forward pass is SPEC section 2 written in torch, so a model trained
with it scores the same in torch and in fuserank. Tests build it with random weights,
export it and compare the scores; users can start from it or mirror its attributes.

    model = DLRM(tables=[Table("user_id", "user", 1000, 8),
                         Table("item_id", "item", 5000, 8, oov="modulo")],
                 dense_user=3, dense_item=2, bottom_mlp=[16, 8],
                 interaction="dot", top_mlp=[16, 1])
    scores = model.score_request(request)  # request: a dict shaped like RankRequest

Needs only torch. Not thread-safe while training; forward is safe to call concurrently.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import nn
import torch.nn.functional as F

SIDES = ("user", "item")
POOLINGS = ("sum", "mean")
OOVS = ("modulo", "reject")
INTERACTIONS = ("concat", "dot", "linear", "dcn")


@dataclasses.dataclass(frozen=True)
class Table:
    """One embedding table (one sparse feature) of the model spec."""

    name: str
    side: str  # "user" | "item"
    rows: int
    dim: int
    pooling: str = "sum"  # "sum" | "mean" (weighted mean: sum(w*e) / sum(w))
    oov: str = "modulo"  # "modulo" | "reject"


# One bag per sample for one table: flat ids, the start of each bag in them, and
# optional per-id weights (None: every weight is 1). The EmbeddingBag input convention.
Bags = Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]


class LowRankCrossNet(nn.Module):
    """DCNv2 with low-rank layers, parameters named and shaped as TorchRec's
    torchrec.modules.crossnet.LowRankCrossNet: W_kernels.<l> [N, r] (fuserank's U_l),
    V_kernels.<l> [r, N] (V_l), bias.<l> [N, 1]. x_{l+1} = x0 * (W (V x_l) + b) + x_l."""

    def __init__(self, in_features: int, num_layers: int, low_rank: int) -> None:
        super().__init__()
        self.W_kernels = nn.ParameterList(
            [nn.Parameter(nn.init.xavier_normal_(torch.empty(in_features, low_rank)))
             for _ in range(num_layers)])
        self.V_kernels = nn.ParameterList(
            [nn.Parameter(nn.init.xavier_normal_(torch.empty(low_rank, in_features)))
             for _ in range(num_layers)])
        self.bias = nn.ParameterList(
            [nn.Parameter(torch.zeros(in_features, 1)) for _ in range(num_layers)])

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        x = x0
        for w, v, b in zip(self.W_kernels, self.V_kernels, self.bias):
            x = x0 * ((x @ v.t()) @ w.t() + b.squeeze(1)) + x
        return x


class CrossNet(nn.Module):
    """DCNv2 with full-rank layers, named as TorchRec's CrossNet: kernels.<l> [N, N] (W_l),
    bias.<l> [N, 1]. x_{l+1} = x0 * (W x_l + b) + x_l."""

    def __init__(self, in_features: int, num_layers: int) -> None:
        super().__init__()
        self.kernels = nn.ParameterList(
            [nn.Parameter(nn.init.xavier_normal_(torch.empty(in_features, in_features)))
             for _ in range(num_layers)])
        self.bias = nn.ParameterList(
            [nn.Parameter(torch.zeros(in_features, 1)) for _ in range(num_layers)])

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        x = x0
        for w, b in zip(self.kernels, self.bias):
            x = x0 * (x @ w.t() + b.squeeze(1)) + x
        return x


def _mlp(widths: Sequence[int], in_width: int, relu_last: bool) -> nn.Sequential:
    layers: List[nn.Module] = []
    for i, out in enumerate(widths):
        layers.append(nn.Linear(in_width, out))
        if relu_last or i + 1 < len(widths):
            layers.append(nn.ReLU())
        in_width = out
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """Embedding bags, bottom MLP, interaction (concat | dot | linear | dcn), top MLP, sigmoid.

    Attributes read by the exporter: `embeddings` (ModuleDict of EmbeddingBag, in spec
    order), `table_sides`, `table_oov`, `dense_user`, `dense_item`, `bottom_mlp`
    (Linear+ReLU, ReLU after every layer), `interaction`, `cross` (nn.Linear or None),
    `crossnet` (dcn: LowRankCrossNet, or CrossNet when dcn_low_rank is 0, else None),
    `top_mlp` (Linear+ReLU, no ReLU after the last layer, which has width 1).
    """

    def __init__(
        self,
        tables: Sequence[Table],
        dense_user: int,
        dense_item: int,
        bottom_mlp: Sequence[int],
        interaction: str,
        top_mlp: Sequence[int],
        cross_dim: int = 0,
        dcn_layers: int = 0,
        dcn_low_rank: int = 0,
    ) -> None:
        super().__init__()
        if interaction not in INTERACTIONS:
            raise ValueError(f"interaction must be one of {INTERACTIONS}, got {interaction!r}")
        for t in tables:
            if t.side not in SIDES or t.pooling not in POOLINGS or t.oov not in OOVS:
                raise ValueError(f"table {t.name!r}: bad side, pooling or oov: {t}")
        self.embeddings = nn.ModuleDict(
            {t.name: nn.EmbeddingBag(t.rows, t.dim, mode=t.pooling) for t in tables}
        )
        self.table_sides: Dict[str, str] = {t.name: t.side for t in tables}
        self.table_oov: Dict[str, str] = {t.name: t.oov for t in tables}
        self.dense_user = dense_user
        self.dense_item = dense_item
        dense = dense_user + dense_item
        self.bottom_mlp = _mlp(bottom_mlp, dense, relu_last=True)
        z_width = (bottom_mlp[-1] if bottom_mlp else dense) if dense else 0
        self.interaction = interaction
        n = len(tables) + (1 if z_width else 0)
        concat_width = z_width + sum(t.dim for t in tables)
        if interaction == "dot":
            h_width = z_width + n * (n - 1) // 2
        elif interaction == "linear":
            h_width = cross_dim
        else:
            h_width = concat_width
        self.cross = nn.Linear(concat_width, cross_dim) if interaction == "linear" else None
        self.crossnet: Optional[nn.Module] = None
        if interaction == "dcn":
            self.crossnet = (LowRankCrossNet(concat_width, dcn_layers, dcn_low_rank)
                             if dcn_low_rank > 0 else CrossNet(concat_width, dcn_layers))
        self.top_mlp = _mlp(top_mlp, h_width, relu_last=False)

    def _pool(self, name: str, bags: Bags) -> torch.Tensor:
        """SPEC section 2, steps 1-2: row mapping, then weighted sum or weighted mean."""
        ids, offsets, weights = bags
        bag = self.embeddings[name]
        rows = bag.weight.shape[0]
        if self.table_oov[name] == "reject" and bool(((ids < 0) | (ids >= rows)).any()):
            raise ValueError(f"table {name!r}: id out of range with oov: reject")
        rows_idx = torch.remainder(ids, rows)  # floor modulo: ((id % rows) + rows) % rows
        if weights is None:
            weights = torch.ones(ids.shape[0], dtype=bag.weight.dtype)
        pooled = F.embedding_bag(rows_idx, bag.weight, offsets, mode="sum",
                                 per_sample_weights=weights)
        if bag.mode == "mean":
            bag_of = torch.bucketize(torch.arange(ids.shape[0]), offsets, right=True) - 1
            # The weights summed in float64, as the engines do: a sum that is 0 reads as 0.
            totals = torch.zeros(offsets.shape[0], dtype=torch.float64)
            totals.index_add_(0, bag_of, weights.to(torch.float64))
            safe = torch.where(totals == 0, torch.ones_like(totals), totals)
            pooled = torch.where((totals == 0)[:, None], torch.zeros_like(pooled),
                                 (pooled.to(torch.float64) / safe[:, None]).to(pooled.dtype))
        return pooled

    def forward(self, dense: Optional[torch.Tensor], bags: Mapping[str, Bags]) -> torch.Tensor:
        """Scores B samples: dense [B, dense_user + dense_item] (user first), one Bags per
        table with B bags. Returns sigmoid scores [B]."""
        vectors: List[torch.Tensor] = []
        if self.dense_user + self.dense_item > 0:
            vectors.append(self.bottom_mlp(dense))
        vectors += [self._pool(name, bags[name]) for name in self.embeddings]
        if self.interaction == "concat":
            h = torch.cat(vectors, dim=1)
        elif self.interaction == "linear":
            h = self.cross(torch.cat(vectors, dim=1))
        elif self.interaction == "dcn":
            h = self.crossnet(torch.cat(vectors, dim=1))
        else:
            stacked = torch.stack(vectors, dim=1)  # [B, n, d]
            gram = torch.bmm(stacked, stacked.transpose(1, 2))
            n = stacked.shape[1]
            i, j = torch.tril_indices(n, n, offset=-1)  # i ascending, then j ascending
            dots = gram[:, i, j]
            has_z = self.dense_user + self.dense_item > 0
            h = torch.cat([vectors[0], dots], dim=1) if has_z else dots
        return torch.sigmoid(self.top_mlp(h)).squeeze(1)

    @torch.no_grad()
    def score_request(self, request: Mapping) -> torch.Tensor:
        """Scores one request given as a dict shaped like fuserank.v1.RankRequest
        (user_features, user_dense, candidates[{features, dense}]); returns [candidates]."""
        candidates = request.get("candidates", [])
        b = len(candidates)
        if b == 0:
            return torch.zeros(0)
        user = {f["name"]: f for f in request.get("user_features", [])}
        bags: Dict[str, Bags] = {}
        for name in self.embeddings:
            if self.table_sides[name] == "user":
                per_sample = [user.get(name)] * b
            else:
                per_sample = [
                    next((f for f in c.get("features", []) if f["name"] == name), None)
                    for c in candidates
                ]
            bags[name] = _to_bags(per_sample)
        dense = None
        if self.dense_user + self.dense_item > 0:
            user_dense = list(request.get("user_dense", []))
            dense = torch.tensor([user_dense + list(c.get("dense", [])) for c in candidates],
                                 dtype=torch.float32).reshape(b, -1)
        return self.forward(dense, bags)


def _to_bags(features: Sequence[Optional[Mapping]]) -> Bags:
    ids: List[int] = []
    weights: List[float] = []
    offsets: List[int] = []
    for f in features:
        offsets.append(len(ids))
        if f is None:
            continue
        f_ids = list(f.get("ids", []))
        f_weights = list(f.get("weights", [])) or [1.0] * len(f_ids)
        ids += f_ids
        weights += f_weights
    return (torch.tensor(ids, dtype=torch.int64), torch.tensor(offsets, dtype=torch.int64),
            torch.tensor(weights, dtype=torch.float32))


@torch.no_grad()
def spread_init(model: DLRM) -> DLRM:
    """Random weights whose scores spread over (0, 1) (torch's default init leaves an
    untrained model's scores within a few hundredths of 0.5): rows ~ N(0, 0.5^2), Linear
    weights He-normal, biases ~ N(0, 0.1^2). Uses torch's global generator."""
    for bag in model.embeddings.values():
        bag.weight.normal_(0.0, 0.5)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            m.weight.normal_(0.0, (2.0 / m.in_features) ** 0.5)
            m.bias.normal_(0.0, 0.1)
    if model.crossnet is not None:  # x_l stays O(|x0|): kernels ~ N(0, 1 / (4 fan_in))
        for name, p in model.crossnet.named_parameters():
            fan_in = p.shape[1] if not name.startswith("bias") else 1
            p.normal_(0.0, 0.1 if name.startswith("bias") else 0.5 / fan_in ** 0.5)
    return model


def example_model(interaction: str = "dot", seed: int = 0) -> DLRM:
    """A small seeded model with two user and two item tables, for docs and smoke tests:
    `fuserank_export.py --module fuserank_torch_model:example_model --out m/demo.yaml`."""
    torch.manual_seed(seed)
    dims = {"dot": (8, 8, 8, 8), "concat": (4, 6, 8, 3), "linear": (4, 6, 8, 3),
            "dcn": (4, 6, 8, 3)}[interaction]
    tables = [
        Table("user_id", "user", 1000, dims[0]),
        Table("user_history", "user", 500, dims[1], pooling="mean"),
        Table("item_id", "item", 2000, dims[2]),
        Table("item_category", "item", 50, dims[3], pooling="mean", oov="reject"),
    ]
    return spread_init(DLRM(tables, dense_user=3, dense_item=2, bottom_mlp=[16, 8],
                            interaction=interaction, top_mlp=[16, 8, 1],
                            cross_dim=12 if interaction == "linear" else 0,
                            dcn_layers=3 if interaction == "dcn" else 0,
                            dcn_low_rank=8 if interaction == "dcn" else 0))
