"""The fuserank model (SPEC section 2) in PyTorch eager: the reference peer's engine.

Loads the same spec YAML + safetensors files as fuserank-server and scores candidates
with nn.EmbeddingBag per table, the bottom MLP, the dot/concat/linear/dcn interaction, the
top MLP and a sigmoid. `decode_request` turns a fuserank.v1.RankRequest into tensors the
way a straightforward Python service would. Not thread-safe to build; forward() only
reads the module, so concurrent calls are fine.
"""

import os

import numpy as np
import torch
import yaml

import safetensors_np


class BadRequest(ValueError):
    """A request the model cannot score (gRPC INVALID_ARGUMENT)."""


class TableSpec:
    def __init__(self, entry):
        self.name = str(entry["name"])
        self.side = entry.get("side", "item")
        self.rows = int(entry["rows"])
        self.dim = int(entry["dim"])
        self.pooling = entry.get("pooling", "sum")
        self.oov = entry.get("oov", "modulo")
        if self.side not in ("user", "item") or self.pooling not in ("sum", "mean"):
            raise ValueError(f"table '{self.name}': bad side or pooling")
        if self.oov not in ("modulo", "reject"):
            raise ValueError(f"table '{self.name}': bad oov")


class ModelSpec:
    def __init__(self, path):
        with open(path) as f:
            doc = yaml.safe_load(f)
        self.name = str(doc.get("name", ""))
        self.version = str(doc.get("version", ""))
        self.weights_path = os.path.join(os.path.dirname(os.path.abspath(path)), doc["weights"])
        self.embedding_dtype = doc.get("embedding_dtype", "fp32")
        self.tables = [TableSpec(t) for t in doc["tables"]]
        dense = doc.get("dense") or {}
        self.dense_user = int(dense.get("user", 0))
        self.dense_item = int(dense.get("item", 0))
        self.bottom_mlp = [int(w) for w in doc.get("bottom_mlp") or []]
        self.interaction = doc.get("interaction", "concat")
        self.cross_dim = int(doc.get("cross_dim", 0) or 0)
        dcn = doc.get("dcn") or {}
        self.dcn_layers = int(dcn.get("layers", 0))
        self.dcn_low_rank = int(dcn.get("low_rank", 0))
        self.top_mlp = [int(w) for w in doc["top_mlp"]]


def _to_torch(dtype, array):
    if dtype == "BF16":
        return torch.from_numpy(np.asarray(array).view(np.int16)).view(torch.bfloat16).float()
    tensor = torch.from_numpy(np.asarray(array))
    return tensor if tensor.dtype == torch.float32 else tensor.float()


def _linear(name, in_width, out, tensors):
    linear = torch.nn.Linear(in_width, out)
    weight = _to_torch(*tensors[f"{name}.weight"])
    bias = _to_torch(*tensors[f"{name}.bias"])
    if tuple(weight.shape) != (out, in_width) or tuple(bias.shape) != (out,):
        raise ValueError(f"{name}: shape {tuple(weight.shape)}, want {(out, in_width)}")
    linear.weight = torch.nn.Parameter(weight, requires_grad=False)
    linear.bias = torch.nn.Parameter(bias, requires_grad=False)
    return linear


def _mlp(prefix, widths, in_width, tensors, relu_last):
    layers = []
    for i, out in enumerate(widths):
        layers.append(_linear(f"{prefix}.{i}", in_width, out, tensors))
        if relu_last or i + 1 < len(widths):
            layers.append(torch.nn.ReLU())
        in_width = out
    return torch.nn.Sequential(*layers), in_width


def _cross_layers(spec, d0, tensors):
    """DCNv2 layers as (V, U with b) Linear pairs, or (None, W with b) at full rank."""
    layers = []
    for l in range(spec.dcn_layers):
        bias = _to_torch(*tensors[f"dcn.{l}.bias"])
        if spec.dcn_low_rank:
            down = torch.nn.Linear(d0, spec.dcn_low_rank, bias=False)
            down.weight = torch.nn.Parameter(_to_torch(*tensors[f"dcn.{l}.V.weight"]),
                                             requires_grad=False)
            up_weight = _to_torch(*tensors[f"dcn.{l}.U.weight"])
        else:
            down, up_weight = None, _to_torch(*tensors[f"dcn.{l}.W.weight"])
        up = torch.nn.Linear(up_weight.shape[1], d0)
        up.weight = torch.nn.Parameter(up_weight, requires_grad=False)
        up.bias = torch.nn.Parameter(bias, requires_grad=False)
        layers.append((down, up))
    return layers


class TorchDlrm(torch.nn.Module):
    def __init__(self, spec_path):
        super().__init__()
        spec = ModelSpec(spec_path)
        if spec.embedding_dtype not in ("fp32", "fp16", "bf16"):
            raise ValueError(f"embedding_dtype {spec.embedding_dtype}: the peer reads fp32/16, bf16")
        tensors = safetensors_np.load(spec.weights_path)
        self.spec = spec
        self.bags = torch.nn.ModuleList()
        for t in spec.tables:
            weight = _to_torch(*tensors[f"embeddings.{t.name}.weight"])
            if tuple(weight.shape) != (t.rows, t.dim):
                raise ValueError(f"embeddings.{t.name}.weight: shape {tuple(weight.shape)}")
            self.bags.append(torch.nn.EmbeddingBag.from_pretrained(weight, mode="sum"))
        self.user_tables = [i for i, t in enumerate(spec.tables) if t.side == "user"]
        self.item_tables = [i for i, t in enumerate(spec.tables) if t.side == "item"]
        self.user_index = {spec.tables[i].name: k for k, i in enumerate(self.user_tables)}
        self.item_index = {spec.tables[i].name: k for k, i in enumerate(self.item_tables)}
        dense = spec.dense_user + spec.dense_item
        self.bottom, z_width = _mlp("bottom_mlp", spec.bottom_mlp, dense, tensors, True)
        self.has_z = dense > 0
        n = len(spec.tables) + (1 if self.has_z else 0)
        concat = (z_width if self.has_z else 0) + sum(t.dim for t in spec.tables)
        self.cross = None
        if spec.interaction == "dot":
            li, lj = torch.tril_indices(n, n, offset=-1)
            self.register_buffer("li", li)
            self.register_buffer("lj", lj)
            top_in = (z_width if self.has_z else 0) + n * (n - 1) // 2
        elif spec.interaction == "concat":
            top_in = concat
        elif spec.interaction == "linear":
            self.cross = _linear("cross", concat, spec.cross_dim, tensors)
            top_in = spec.cross_dim
        elif spec.interaction == "dcn":
            self.dcn = _cross_layers(spec, concat, tensors)
            top_in = concat
        else:
            raise ValueError(f"interaction {spec.interaction}")
        self.top, _ = _mlp("top_mlp", spec.top_mlp, top_in, tensors, False)
        self.eval()

    def _pool(self, t, ids, offsets, weights):
        table = self.spec.tables[t]
        if table.oov == "reject":
            if bool(((ids < 0) | (ids >= table.rows)).any()):
                raise BadRequest(f"table '{table.name}': id out of range [0, {table.rows})")
        else:
            ids = torch.remainder(ids, table.rows)
        out = self.bags[t](ids, offsets, per_sample_weights=weights)
        if table.pooling == "mean":
            n = offsets.numel()
            lengths = torch.diff(offsets, append=torch.tensor([ids.numel()]))
            if weights is None:
                denom = lengths.float()
            else:
                bag_of = torch.repeat_interleave(torch.arange(n), lengths)
                denom = torch.zeros(n).index_add_(0, bag_of, weights)
            denom = denom.unsqueeze(1)
            out = torch.where(denom != 0, out / torch.where(denom != 0, denom, 1.0), 0.0)
        return out

    def forward(self, batch):
        """Scores of batch.n candidates, a float32 tensor [n]."""
        n = batch.n
        vecs = [None] * len(self.spec.tables)
        zero = torch.zeros(1, dtype=torch.long)
        for k, t in enumerate(self.user_tables):
            ids, weights = batch.user_bags[k]
            vecs[t] = self._pool(t, ids, zero, weights).expand(n, -1)
        for k, t in enumerate(self.item_tables):
            ids, offsets, weights = batch.item_bags[k]
            vecs[t] = self._pool(t, ids, offsets, weights)
        if self.has_z:
            x = torch.cat([batch.user_dense.expand(n, -1), batch.item_dense], dim=1)
            vecs.insert(0, self.bottom(x))
        if self.spec.interaction == "dot":
            stacked = torch.stack(vecs, dim=1)  # [n, V, d]
            dots = torch.bmm(stacked, stacked.transpose(1, 2))[:, self.li, self.lj]
            h = torch.cat([vecs[0], dots], dim=1) if self.has_z else dots
        else:
            h = torch.cat(vecs, dim=1)
            if self.cross is not None:
                h = self.cross(h)
            if self.spec.interaction == "dcn":
                x0 = h
                for down, up in self.dcn:  # x_{l+1} = x0 * (U (V x_l) + b) + x_l
                    h = torch.addcmul(h, x0, up(down(h) if down is not None else h))
        return torch.sigmoid(self.top(h)).view(-1)


class Batch:
    """One request as tensors: user bags once, item bags with offsets per candidate."""

    def __init__(self, n, user_bags, user_dense, item_bags, item_dense):
        self.n = n
        self.user_bags = user_bags  # per user table: (ids, weights or None)
        self.user_dense = user_dense  # [1, dense_user]
        self.item_bags = item_bags  # per item table: (ids, offsets [n], weights or None)
        self.item_dense = item_dense  # [n, dense_item]


def _weights(pieces, total, what):
    """Weights aligned with a table's flat ids, from (position, feature) pieces of the
    features that sent weights (ones elsewhere); None when no feature sent any."""
    if not pieces:
        return None
    w = np.ones(total, np.float32)
    for position, f in pieces:
        if len(f.weights) != len(f.ids):
            raise BadRequest(f"{what} '{f.name}': {len(f.weights)} weights for {len(f.ids)} ids")
        w[position:position + len(f.ids)] = f.weights
    if not np.isfinite(w).all():
        raise BadRequest(f"{what}: weights must be finite")
    return torch.from_numpy(w)


def _user_bags(model, request):
    user = [None] * len(model.user_tables)
    for f in request.user_features:
        k = model.user_index.get(f.name)
        if k is None:
            raise BadRequest(f"user feature '{f.name}' is no user table")
        if user[k] is not None:
            raise BadRequest(f"user feature '{f.name}' given twice")
        user[k] = f
    bags = []
    for f in user:
        ids = list(f.ids) if f is not None else []
        pieces = [(0, f)] if f is not None and len(f.weights) else []
        bags.append((torch.tensor(ids, dtype=torch.long), _weights(pieces, len(ids), "user feature")))
    return bags


def decode_request(model, request):
    """RankRequest -> Batch, raising BadRequest like the server's decoder would.
    One pass over the candidates; ids go to flat per-table lists."""
    spec = model.spec
    n = len(request.candidates)
    tables = len(model.item_tables)
    index = model.item_index
    lengths = [[-1] * n for _ in range(tables)]  # -1: the candidate sent no such feature
    flat = [[] for _ in range(tables)]
    weighted = [[] for _ in range(tables)]
    dense = []
    for c, candidate in enumerate(request.candidates):
        for f in candidate.features:
            k = index.get(f.name)
            if k is None:
                raise BadRequest(f"candidate {c}: feature '{f.name}' is no item table")
            if lengths[k][c] >= 0:
                raise BadRequest(f"candidate {c}: feature '{f.name}' given twice")
            ids = f.ids
            lengths[k][c] = len(ids)
            if len(f.weights):
                weighted[k].append((len(flat[k]), f))
            flat[k].extend(ids)
        if len(candidate.dense) != spec.dense_item:
            raise BadRequest(f"candidate {c}: {len(candidate.dense)} dense values, "
                             f"want {spec.dense_item}")
        dense.extend(candidate.dense)
    if len(request.user_dense) != spec.dense_user:
        raise BadRequest(f"user_dense: {len(request.user_dense)} values, want {spec.dense_user}")
    user_dense = np.asarray(request.user_dense, np.float32).reshape(1, spec.dense_user)
    item_dense = np.asarray(dense, np.float32).reshape(n, spec.dense_item)
    if not (np.isfinite(item_dense).all() and np.isfinite(user_dense).all()):
        raise BadRequest("dense values must be finite")
    item_bags = []
    for k in range(tables):
        counts = np.maximum(np.asarray(lengths[k], np.int64), 0)
        offsets = np.zeros(n, np.int64)
        np.cumsum(counts[:-1], out=offsets[1:])
        ids = np.asarray(flat[k], np.int64)
        item_bags.append((torch.from_numpy(ids), torch.from_numpy(offsets),
                          _weights(weighted[k], ids.size, "item feature")))
    return Batch(n, _user_bags(model, request), torch.from_numpy(user_dense), item_bags,
                 torch.from_numpy(item_dense))


def rank(model, request):
    """[(index, score)] best first, ties by lower index, cut to top_k (0: all)."""
    n = len(request.candidates)
    if n == 0:
        return []
    batch = decode_request(model, request)
    with torch.inference_mode():
        scores = model(batch)
        k = n if request.top_k == 0 or request.top_k >= n else request.top_k
        order = torch.sort(scores, descending=True, stable=True).indices[:k]
    return list(zip(order.tolist(), scores[order].tolist()))
