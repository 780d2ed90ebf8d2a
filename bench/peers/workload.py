"""Synthetic requests for a model spec, like fuserank-bench builds them: Zipf-distributed
ids per table (inverse-CDF sampling, ranks scattered over the rows), fixed bag sizes,
uniform dense floats. NumPy; deterministic for a seed."""

import math

import numpy as np


class ZipfIds:
    def __init__(self, rows, alpha, rng):
        weights = np.arange(1, rows + 1, dtype=np.float64) ** -alpha if alpha > 0 else np.ones(rows)
        self.cdf = np.cumsum(weights)
        self.cdf /= self.cdf[-1]
        self.rows = rows
        self.a = int(rng.integers(1, max(rows, 2)))
        while math.gcd(self.a, rows) != 1:
            self.a = self.a % max(rows - 1, 1) + 1
        self.b = int(rng.integers(0, rows))

    def sample(self, rng, n):
        ranks = np.minimum(np.searchsorted(self.cdf, rng.random(n), side="right"), self.rows - 1)
        return (ranks * self.a + self.b) % self.rows


def make_request(pb2, spec, samplers, rng, candidates, bag=1, top_k=10):
    """A fuserank.v1.RankRequest for `spec` (torch_dlrm.ModelSpec)."""
    request = pb2.RankRequest(request_id="py", top_k=top_k)
    for t, table in enumerate(spec.tables):
        if table.side == "user":
            request.user_features.add(name=table.name, ids=samplers[t].sample(rng, bag).tolist())
    request.user_dense.extend(rng.random(spec.dense_user).tolist())
    item = [t for t, table in enumerate(spec.tables) if table.side == "item"]
    ids = {t: samplers[t].sample(rng, candidates * bag).reshape(candidates, bag) for t in item}
    dense = rng.random((candidates, spec.dense_item))
    for c in range(candidates):
        candidate = request.candidates.add(item_id=c)
        for t in item:
            candidate.features.add(name=spec.tables[t].name, ids=ids[t][c].tolist())
        candidate.dense.extend(dense[c].tolist())
    return request


def samplers_for(spec, alpha, rng):
    return [ZipfIds(t.rows, alpha, rng) for t in spec.tables]
