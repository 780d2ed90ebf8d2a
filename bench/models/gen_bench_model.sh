#!/usr/bin/env bash
# Generates the bench model (seeded, so every run scores the same model):
#   26 sparse features, dim 32: 8 user tables (4 x 200k rows, 4 x 1000 rows) and
#   18 item tables (9 x 200k rows, 9 x 1000 rows); 13 dense (5 user + 8 item);
#   bottom MLP 64-32, dot interaction, top MLP 256-128-1; fp32 tables (~335 MB).
# usage: bench/models/gen_bench_model.sh [GEN_BIN] [OUT_YAML]
set -euo pipefail
GEN=${1:-build/bin/fuserank-gen-model}
OUT=${2:-bench/out/model/bench.yaml}
L=200000 S=1000
USER_ROWS="$L,$L,$L,$L,$S,$S,$S,$S"
ITEM_ROWS="$L,$L,$L,$L,$L,$L,$L,$L,$L,$S,$S,$S,$S,$S,$S,$S,$S,$S"
exec "$GEN" --out="$OUT" --name=bench --seed=3 --user_tables=8 --item_tables=18 \
  --rows="$USER_ROWS,$ITEM_ROWS" --dim=32 --dense_user=5 --dense_item=8 \
  --bottom_mlp=64,32 --interaction=dot --top_mlp=256,128,1 --dtype=fp32
