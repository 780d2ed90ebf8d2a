"""Shared by the exporter tests: seeded DLRM models of every interaction, random requests
shaped like fuserank.v1.RankRequest, and a TorchRec-style renaming of a state_dict."""

import copy
import os
import sys

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))

import fuserank_torch_model as ftm  # noqa: E402

# Dims per table for each interaction (dot needs one width: the bottom MLP's output).
_DIMS = {"dot": (8, 8, 8, 8), "concat": (4, 6, 8, 3), "linear": (4, 6, 8, 3),
         "dcn": (4, 6, 8, 3), "dcn_full": (4, 6, 8, 3)}


def make_model(interaction, seed, dense=True):
    """Two user and two item tables (sum and mean pooling, one oov: reject table).
    "dcn": 3 low-rank (5) cross layers; "dcn_full": 2 full-rank ones."""
    torch.manual_seed(seed)
    d = _DIMS[interaction]
    dcn = {"dcn": (3, 5), "dcn_full": (2, 0)}.get(interaction, (0, 0))
    interaction = "dcn" if dcn[0] else interaction
    tables = [
        ftm.Table("user_id", "user", 50, d[0]),
        ftm.Table("user_hist", "user", 40, d[1], pooling="mean"),
        ftm.Table("item_id", "item", 60, d[2]),
        ftm.Table("item_cat", "item", 20, d[3], pooling="mean", oov="reject"),
    ]
    model = ftm.DLRM(tables, dense_user=3 if dense else 0, dense_item=2 if dense else 0,
                     bottom_mlp=[16, d[0]] if dense else [], interaction=interaction,
                     top_mlp=[16, 8, 1], cross_dim=10 if interaction == "linear" else 0,
                     dcn_layers=dcn[0], dcn_low_rank=dcn[1])
    ftm.spread_init(model)
    return model.eval()


def with_tables(model, fn):
    """A copy of `model` with every table replaced by fn(name, weight)."""
    out = copy.deepcopy(model)
    with torch.no_grad():
        for name, bag in out.embeddings.items():
            bag.weight.copy_(fn(name, bag.weight))
    return out


def _f32(x):
    return float(np.float32(x))


def random_request(rng, model, n_candidates):
    """Ids in and out of range (modulo tables only), weighted and unweighted bags, empty
    and absent bags, a mean bag whose weights sum to zero."""

    def feature(name):
        rows = model.embeddings[name].weight.shape[0]
        reject = model.table_oov[name] == "reject"
        kind = rng.integers(0, 6)
        if kind == 0:
            return None
        lo, hi = (0, rows) if reject else (-3 * rows, 3 * rows)
        n = {1: 1, 2: 0}.get(kind, int(rng.integers(2, 6)))
        f = {"name": name, "ids": [int(i) for i in rng.integers(lo, hi, n)]}
        if kind == 4:
            f["weights"] = [_f32(w) for w in rng.uniform(-1.0, 2.0, n)]
        elif kind == 5 and n >= 2:
            w = _f32(rng.uniform(0.5, 1.5))
            f["weights"] = [w, -w] + [0.0] * (n - 2)
        return f

    def features(side):
        out = []
        for name in model.embeddings:
            if model.table_sides[name] == side:
                f = feature(name)
                if f is not None:
                    out.append(f)
        return out

    request = {
        "request_id": f"r{int(rng.integers(1 << 30))}",
        "user_features": features("user"),
        "user_dense": [_f32(x) for x in rng.normal(0, 1, model.dense_user)],
        "candidates": [],
    }
    for k in range(n_candidates):
        request["candidates"].append({
            "item_id": int(rng.integers(1, 1 << 40)),
            "features": features("item"),
            "dense": [_f32(x) for x in rng.normal(0, 1, model.dense_item)],
        })
    return request


def _torchrec_dot_pairs(n):
    """TorchRec InteractionArch's dot columns: torch.triu_indices(n, n, offset=1)."""
    a, b = torch.triu_indices(n, n, offset=1)
    return [(int(x), int(y)) for x, y in zip(a, b)]


class TorchRecDot:
    """What TorchRec's DLRM computes with `model`'s weights (interaction dot): its
    InteractionArch puts the dot products in triu order ((0, 1), (0, 2), ...) where
    fuserank_torch_model.DLRM puts them in tril order ((1, 0), (2, 0), (2, 1), ...);
    everything else is the model's. Has what random_request needs, and score_request."""

    def __init__(self, model):
        assert model.interaction == "dot"
        self.model = model
        for name in ("embeddings", "table_sides", "table_oov", "dense_user", "dense_item"):
            setattr(self, name, getattr(model, name))

    @torch.no_grad()
    def score_request(self, request):
        m, candidates = self.model, request["candidates"]
        user = {f["name"]: f for f in request.get("user_features", [])}
        vectors = []
        if m.dense_user + m.dense_item:
            dense = torch.tensor([list(request.get("user_dense", [])) + list(c["dense"])
                                  for c in candidates], dtype=torch.float32)
            vectors.append(m.bottom_mlp(dense))  # TorchRec's DenseArch
        for name in m.embeddings:  # TorchRec's SparseArch, in feature order
            bags = [user.get(name) if m.table_sides[name] == "user" else
                    next((f for f in c.get("features", []) if f["name"] == name), None)
                    for c in candidates]
            vectors.append(m._pool(name, ftm._to_bags(bags)))
        combined = torch.stack(vectors, dim=1)  # [B, n, d]
        gram = torch.bmm(combined, combined.transpose(1, 2))
        dots = torch.stack([gram[:, a, b] for a, b in _torchrec_dot_pairs(len(vectors))], 1)
        h = torch.cat([vectors[0], dots], 1) if m.dense_user + m.dense_item else dots
        return torch.sigmoid(m.top_mlp(h)).squeeze(1)


def _to_torchrec_dot_order(model, weight):
    """top_mlp.0's weight with its dot columns moved from the model's tril order to
    TorchRec's triu order, so TorchRec's forward computes what the model does."""
    n = len(model.embeddings) + (1 if model.dense_user + model.dense_item else 0)
    z = weight.shape[1] - n * (n - 1) // 2
    tril = {(i, j): z + k for k, (i, j) in
            enumerate((i, j) for i in range(1, n) for j in range(i))}
    columns = list(range(z)) + [tril[(b, a)] for a, b in _torchrec_dot_pairs(n)]
    return weight[:, columns].clone()


def torchrec_state_dict(model, torchrec_meaning=True):
    """The model's tensors under TorchRec DLRM names, plus the mapping that undoes it.
    With interaction dot and torchrec_meaning, top_mlp.0's dot columns are put in
    TorchRec's order, so the state_dict is the model as TorchRec would have trained it
    (the mapping's default dot_order: torchrec); otherwise the tensors are only renamed
    (TorchRecDot(model) is then what TorchRec computes with them)."""
    sd = {}
    tables = []
    for name, bag in model.embeddings.items():
        key = f"sparse_arch.embedding_bag_collection.embedding_bags.t_{name}.weight"
        sd[key] = bag.weight.detach().clone()
        tables.append({"name": name, "key": key, "side": model.table_sides[name],
                       "pooling": bag.mode, "oov": model.table_oov[name]})
    linears = [m for m in model.bottom_mlp if isinstance(m, torch.nn.Linear)]
    for i, m in enumerate(linears):
        sd[f"dense_arch.model._mlp.{i}._linear.weight"] = m.weight.detach().clone()
        sd[f"dense_arch.model._mlp.{i}._linear.bias"] = m.bias.detach().clone()
    tops = [m for m in model.top_mlp if isinstance(m, torch.nn.Linear)]
    for i, m in enumerate(tops[:-1]):
        sd[f"over_arch.model.0._mlp.{i}._linear.weight"] = m.weight.detach().clone()
        sd[f"over_arch.model.0._mlp.{i}._linear.bias"] = m.bias.detach().clone()
    sd["over_arch.model.1.weight"] = tops[-1].weight.detach().clone()
    sd["over_arch.model.1.bias"] = tops[-1].bias.detach().clone()
    if model.interaction == "dot" and torchrec_meaning:
        first = "over_arch.model.0._mlp.0._linear.weight" if len(tops) > 1 else \
            "over_arch.model.1.weight"
        sd[first] = _to_torchrec_dot_order(model, sd[first])
    mapping = {"tables": tables, "dense": {"user": model.dense_user, "item": model.dense_item},
               "interaction": model.interaction, "top_mlp": "over_arch.model"}
    if linears:
        mapping["bottom_mlp"] = "dense_arch.model._mlp."
    if model.cross is not None:
        sd["inter_arch.cross.weight"] = model.cross.weight.detach().clone()
        sd["inter_arch.cross.bias"] = model.cross.bias.detach().clone()
        mapping["cross"] = "inter_arch.cross"
    if model.crossnet is not None:  # TorchRec DLRM_DCN: inter_arch.crossnet.{V,W}_kernels.<l>
        for name, p in model.crossnet.named_parameters():
            sd[f"inter_arch.crossnet.{name}"] = p.detach().clone()
        mapping["dcn"] = "inter_arch.crossnet"
    return sd, mapping
