#!/usr/bin/env bash
# Regenerates the seed corpus under tests/fuzz/corpus/<target>/ (the files are committed;
# run this only to change them). RankRequest seeds are text protos encoded with
# `protoc --encode`; safetensors seeds are written byte by byte by python3; config and
# model spec seeds are plain YAML. Each target gets a few valid and a few invalid inputs:
# a seed named valid_* must be accepted by the code under test and bad_* refused, which
# scripts/test-fuzz.sh checks before fuzzing (FUSERANK_FUZZ_VERDICT, tests/fuzz/fuzz_verdict.h).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${ROOT}/tests/fuzz/corpus"
rm -rf "${OUT}"
mkdir -p "${OUT}"/{request_decoder,infer_request,config,safetensors,model_spec,model_load,resp_frame}

# --- request_decoder: the fuzzer's model has user_0 (100 rows), user_1 (50, oov reject),
# item_0 (100), item_1 (10, oov reject); dense {user: 2, item: 3}; limits 16 candidates,
# 8 ids per feature.
request() {  # name, text proto
  printf '%s\n' "$2" | protoc --encode=fuserank.v1.RankRequest --proto_path="${ROOT}/proto" \
    "${ROOT}/proto/fuserank/v1/ranker.proto" >"${OUT}/request_decoder/$1.pb"
}
USER='user_features {name: "user_1" ids: [3, 49]}
user_features {name: "user_0" ids: [7, 107, -1] weights: [0.5, 2, 1]}
user_dense: [1, -2]'
C0='candidates {item_id: 1000 features {name: "item_0" ids: 5}
  features {name: "item_1" ids: [9, 0] weights: [0.25, 0.75]} dense: [0.1, 0.2, 0.3]}'
C1='candidates {item_id: 1001 features {name: "item_1" ids: 4} dense: [0.4, 0.5, 0.6]}'
request valid_two_candidates "${USER} ${C0} ${C1} top_k: 1 request_id: \"r1\""
request valid_no_candidates 'user_dense: [0, 0]'
request valid_all_sorted "${USER} ${C1} ${C1} ${C0} top_k: 9"
request valid_modulo_extremes 'user_dense: [0, 0]
user_features {name: "user_0" ids: [-9223372036854775808, 9223372036854775807]}
candidates {features {name: "item_0" ids: [-100, 100, 12345678901]} dense: [1, 2, 3]}'
request bad_reject_oov "${USER} candidates {features {name: \"item_1\" ids: 10} dense: [1, 2, 3]}"
request bad_duplicate_table "${USER} user_features {name: \"user_0\" ids: 1}"
request bad_wrong_side 'user_dense: [0, 0] user_features {name: "item_0" ids: 1}'
request bad_unknown_table 'user_dense: [0, 0] user_features {name: "user_9" ids: 1}'
request bad_nan_weight 'user_dense: [0, 0] user_features {name: "user_0" ids: [1] weights: [nan]}'
request bad_inf_dense "user_dense: [0, inf] ${C1}"
request bad_weight_count 'user_dense: [0, 0] user_features {name: "user_0" ids: [1, 2] weights: [1]}'
request bad_too_many_ids 'user_dense: [0, 0]
user_features {name: "user_0" ids: [0, 1, 2, 3, 4, 5, 6, 7, 8]}'
request bad_item_dense_count 'user_dense: [0, 0] candidates {dense: [1, 2]}'
: >"${OUT}/request_decoder/bad_empty.pb"

# --- config
# The shipped reference config (every key at its default) without its comments, but for the
# lines that start at column 0: under the fuzzer's -max_len of 8192 bytes (the commented
# file is larger), and still a seed that fails the seed check when the shipped config stops
# being valid.
sed -E '/^[[:space:]]+#/d; s/[[:space:]]{2,}#.*$//; /^#$/d' "${ROOT}/config/fuserank.yaml" \
  >"${OUT}/config/valid_default.yaml"
if (($(wc -c <"${OUT}/config/valid_default.yaml") > 8192)); then
  echo "make_corpus: config/valid_default.yaml is over 8192 bytes (test-fuzz.sh's -max_len)" >&2
  exit 1
fi
: >"${OUT}/config/valid_empty.yaml"
cat >"${OUT}/config/valid_models_list.yaml" <<'EOF'
server: {listen: "127.0.0.1:0", admin_listen: "", metrics_listen: "", max_candidates: 64}
engine: {device: cpu, streams: 2, max_batch_candidates: 64, queue_capacity: 8}
models:
  - {name: a, path: a.yaml}
  - {name: b, path: "dir/b.yaml"}
logging: {level: debug, format: json, access_log_sample: 0.25}
EOF
cat >"${OUT}/config/bad_types.yaml" <<'EOF'
server:
  listen: [1, 2]
  max_candidates: "12"
  tls: yes
engine: {device: tpu, streams: 1e99, cuda_graphs: maybe}
cache: {policy: lru, placement: 3}
EOF
cat >"${OUT}/config/bad_keys.yaml" <<'EOF'
serverr: {}
model: {path: x.yaml, name: m}
models: [{name: a, path: a.yaml}, 7]
logging: {access_log_sample: 2}
EOF
printf 'server: {listen: "0.0.0.0:8700"\nengine: [\n' >"${OUT}/config/bad_syntax.yaml"
# Control characters in strings (a carriage return, a tab, a DEL): the effective config
# must write them so that they read back.
printf 'server: {listen: "127.0.0.1:0\\r", admin_listen: ""}\nmodels: [{name: "a\\x7f", path: "dir/\\tb.yaml"}]\n' \
  >"${OUT}/config/valid_control_chars.yaml"
# cache.placement: host needs engine.device: cuda (server/config_keys.cc), so this is refused.
cat >"${OUT}/config/bad_cache_placement_host.yaml" <<'EOF'
engine: {device: cpu, cpu_threads: 2, max_batch_wait_us: 0, cuda_graphs: false}
cache: {hot_rows_per_table: 0, policy: frequency, rebuild_interval_seconds: 5, placement: host}
model: {path: /models/m.yaml}
logging: {level: "off"}
EOF
cat >"${OUT}/config/bad_tls.yaml" <<'EOF'
server:
  tls: {cert_file: /nonexistent/cert.pem, key_file: "", client_ca_file: ca.pem}
  shutdown_grace_seconds: -1
engine: {max_batch_candidates: 1, queue_capacity: 0}
EOF

# Read by yaml-cpp as one empty document (all defaults) with more after it, where its
# LoadAll never ends; and two documents, of which Load would read the first alone.
printf ', server: {max_candidates: 10}\n' >"${OUT}/config/bad_stray_comma.yaml"
printf 'server: {max_candidates: 10}\n---\nserver: {}\n' >"${OUT}/config/bad_two_documents.yaml"

# --- model_spec
cat >"${OUT}/model_spec/valid_dot.yaml" <<'EOF'
name: demo
version: "7"
weights: demo.safetensors
embedding_dtype: fp16
tables:
  - {name: user_id,  side: user, rows: 100000, dim: 16, pooling: mean}
  - {name: item_id,  side: item, rows: 500000, dim: 16, pooling: sum, oov: reject}
dense: {user: 4, item: 3}
bottom_mlp: [64, 16]
interaction: dot
cross_dim: 0
top_mlp: [64, 32, 1]
EOF
cat >"${OUT}/model_spec/valid_linear_int8.yaml" <<'EOF'
name: lin
weights: /abs/lin.safetensors
embedding_dtype: int8
tables: [{name: a, side: item, rows: 10, dim: 4}, {name: b, side: user, rows: 3, dim: 2}]
dense: {user: 1, item: 0}
interaction: linear
cross_dim: 8
top_mlp: [1]
EOF
cat >"${OUT}/model_spec/valid_dense_only.yaml" <<'EOF'
name: m
weights: m.safetensors
dense: {user: 2, item: 2}
interaction: concat
top_mlp: [1]
EOF
cat >"${OUT}/model_spec/bad_fields.yaml" <<'EOF'
name: ""
tables: [{name: a, side: left, rows: -1, dim: 0}, {name: a, side: item, rows: 2147483648, dim: 4}]
interaction: dot
top_mlp: [4, 2]
EOF
cat >"${OUT}/model_spec/bad_types.yaml" <<'EOF'
name: t
weights: t.safetensors
embedding_dtype: fp64
tables: {name: a}
dense: {user: many, item: -3}
interaction: cross
top_mlp: 1
EOF
printf 'name: s\ntables: [{name: a, side: user\ntop_mlp: [1]\n' >"${OUT}/model_spec/bad_syntax.yaml"
printf ', name: s\n' >"${OUT}/model_spec/bad_stray_comma.yaml"

# --- safetensors: header length (u64 LE), JSON header, data; or the fuzzer's bare form.
python3 - "${OUT}/safetensors" <<'EOF'
import struct, sys
out = sys.argv[1]
def st(name, header, data=b""):
    h = header.encode()
    with open(f"{out}/{name}.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)
st("valid_two", '{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},'
   '"b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]},'
   '"__metadata__":{"format":"pt","k":"v\\u00e9\\ud83d\\ude00"}}', bytes(range(22)))
st("valid_empty", "{}")
st("valid_scalar_and_zero", '{"s":{"dtype":"I8","shape":[],"data_offsets":[0,1]},'
   '"z":{"dtype":"F16","shape":[0,5],"data_offsets":[1,1]}}  ', b"\x07")
st("bad_overlap", '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
   '"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8))
st("bad_past_end", '{"a":{"dtype":"F64","shape":[4],"data_offsets":[0,32]}}', bytes(8))
st("bad_count", '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', bytes(8))
st("bad_dtype", '{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}', bytes(1))
st("bad_json", '{"a":{"dtype":"F32","shape":[1,],"data_offsets":[0,4]}', bytes(4))
# Bare form (tests/fuzz/safetensors_fuzzer.cc): JSON header then data, no length prefix.
def bare(name, header, data=b""):
    with open(f"{out}/{name}.safetensors", "wb") as f:
        f.write(header.encode() + data)
bare("valid_bare_three", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
     '"b":{"dtype":"I16","shape":[2,1],"data_offsets":[4,8]},'
     '"c":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}}', bytes(11))
bare("bad_bare_shape", '{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', bytes(4))
with open(f"{out}/bad_header_length.safetensors", "wb") as f:
    f.write(struct.pack("<Q", 1 << 40) + b"{}")
with open(f"{out}/bad_short.safetensors", "wb") as f:
    f.write(b"\x02\x00\x00")
EOF
# --- model_load: a 2-byte spec length, the spec, a safetensors file (tests/fuzz/model_load_fuzzer.cc).
# One seed per hardening finding where it fits: huge weights / a mean bag (NaN scores), a NaN
# table, a fold of terabytes, tables of terabytes, raw bytes in messages.
python3 - "${OUT}/model_load" <<'EOF'
import struct, sys
out = sys.argv[1]
def f32(values):
    return b"".join(struct.pack("<f", v) for v in values)
def safetensors(tensors):
    """tensors: list of (name, dtype, shape, bytes) -> the file's bytes."""
    header, data = [], b""
    for name, dtype, shape, raw in tensors:
        header.append('"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}'
                      % (name, dtype, ",".join(map(str, shape)), len(data), len(data) + len(raw)))
        data += raw
    h = ("{" + ",".join(header) + "}").encode()
    return struct.pack("<Q", len(h)) + h + data
def seed(name, spec, file, tail=b""):
    s = spec.encode()
    with open(f"{out}/{name}.bin", "wb") as fh:
        fh.write(struct.pack("<H", len(s)) + s + file + tail)
def layer(prefix, i, n_in, n_out, value):
    return [(f"{prefix}.{i}.weight", "F32", [n_out, n_in], f32([value] * (n_in * n_out))),
            (f"{prefix}.{i}.bias", "F32", [n_out], f32([value / 2] * n_out))]
# A dot model: user table u (4 x 2), item table i (3 x 2), dense {user 1, item 1},
# bottom [2], top [2, 1]; interaction width = z (2) + 3 dots.
DOT = """name: d
weights: d.safetensors
tables: [{name: u, side: user, rows: 4, dim: 2, pooling: %s}, {name: i, side: item, rows: 3, dim: 2}]
dense: {user: 1, item: 1}
bottom_mlp: [2]
interaction: dot
top_mlp: [2, 1]
"""
def dot_tensors(table, w):
    return ([("embeddings.u.weight", "F32", [4, 2], f32(table * 8)),
             ("embeddings.i.weight", "F32", [3, 2], f32(table * 6))]
            + layer("bottom_mlp", 0, 2, 2, w) + layer("top_mlp", 0, 5, 2, w) + layer("top_mlp", 1, 2, 1, w))
seed("valid_dot", DOT % "sum", safetensors(dot_tensors([0.25], 0.5)))
# Findings: huge finite weights and a mean bag over huge bag weights once scored NaN.
seed("valid_huge_weights", DOT % "mean", safetensors(dot_tensors([3e38], 3e38)),
     tail=bytes([0xff, 0x7f] * 32))
seed("valid_linear", """name: l
weights: l.safetensors
tables: [{name: a, side: item, rows: 5, dim: 3}]
dense: {user: 2, item: 0}
interaction: linear
cross_dim: 4
top_mlp: [1]
""", safetensors([("embeddings.a.weight", "F32", [5, 3], f32([0.1 * k for k in range(15)]))]
                 + [("cross.weight", "F32", [4, 5], f32([0.5] * 20)), ("cross.bias", "F32", [4], f32([0.0] * 4))]
                 + layer("top_mlp", 0, 4, 1, -0.25)))
# Finding: a NaN in a table was served; now refused naming table and row.
seed("bad_nan_table", DOT % "sum", safetensors(
    [("embeddings.u.weight", "F32", [4, 2], f32([0.5] * 5 + [float("nan")] + [0.5] * 2)),
     ("embeddings.i.weight", "F32", [3, 2], f32([0.5] * 6))]
    + layer("bottom_mlp", 0, 2, 2, 0.5) + layer("top_mlp", 0, 5, 2, 0.5) + layer("top_mlp", 1, 2, 1, 0.5)))
# Finding: the linear cross's fold is [top_mlp[0], concat]: 2^20 x 2^20 floats (4 TiB) from a
# spec of a few lines: refused by the memory limit before anything is allocated.
seed("bad_fold_terabytes", """name: f
weights: f.safetensors
dense: {user: 1048576, item: 0}
interaction: linear
cross_dim: 1
top_mlp: [1048576, 1]
""", safetensors([]))
seed("bad_table_terabytes", """name: t
weights: t.safetensors
tables: [{name: a, side: item, rows: 2147483647, dim: 1048576}]
interaction: concat
top_mlp: [1]
""", safetensors([]))
# Finding: messages quoted raw file bytes; now every message is printable UTF-8.
seed("bad_raw_bytes", 'name: "n\\e[2J"\nweights: w\ninteraction: "dot\\a"\ntop_mlp: [1]\n"k\\n": 1\n',
     safetensors([("x\n\x1b", "F32", [1], f32([1.0]))]))
seed("bad_extra_tensor_name", DOT % "sum",
     safetensors(dot_tensors([0.5], 0.5) + [("e\\u0007\\n\\u001b[2J", "F32", [1], f32([1.0]))]))
seed("bad_truncated", DOT % "sum", safetensors(dot_tensors([0.5], 0.5))[:-9])
EOF
# --- rank_path: the request_decoder model and its seeds, plus the over-limit floods
# at the target's small limits (16 candidates, 8 ids per feature, 40 ids in all).
mkdir -p "${OUT}/rank_path"
cp "${OUT}"/request_decoder/*.pb "${OUT}/rank_path/"
rank_request() {  # name, text proto
  printf '%s\n' "$2" | protoc --encode=fuserank.v1.RankRequest --proto_path="${ROOT}/proto" \
    "${ROOT}/proto/fuserank/v1/ranker.proto" >"${OUT}/rank_path/$1.pb"
}
repeat() {  # count, text
  local i out=""
  for ((i = 0; i < $1; ++i)); do out+="$2 "; done
  printf '%s' "${out}"
}
rank_request valid_full_batch "user_dense: [1, 2] $(repeat 16 "candidates {features {name: \"item_0\" ids: [1, 2]} dense: [1, 2, 3]}")"
rank_request bad_empty_candidates_flood "user_dense: [0, 0] $(repeat 400 'candidates {}')"
rank_request bad_empty_features_flood "user_dense: [0, 0] candidates {$(repeat 300 'features {}') dense: [1, 2, 3]}"
rank_request bad_user_features_flood "user_dense: [0, 0] $(repeat 300 'user_features {}')"
rank_request bad_ids_flood "user_dense: [0, 0] user_features {name: \"user_0\" ids: [$(repeat 500 '1,') 1]}"
rank_request bad_ids_in_all "user_dense: [0, 0] $(repeat 6 "candidates {features {name: \"item_0\" ids: [1, 2, 3, 4, 5, 6, 7, 8]} dense: [1, 2, 3]}")"

# --- infer_request: ModelInferRequest bytes for the request_decoder model (the fuzzer's
# limits: 16 candidates, 8 ids per feature, 64 ids in all).
infer() {  # name, text proto[, raw bytes appended]
  printf '%s\n' "$2" | protoc --encode=inference.ModelInferRequest --proto_path="${ROOT}/proto" \
    "${ROOT}/proto/inference/grpc_service.proto" >"${OUT}/infer_request/$1.pb"
  if [[ $# -ge 3 ]]; then printf "$3" >>"${OUT}/infer_request/$1.pb"; fi
}
I64='datatype: "INT64"'
I32='datatype: "INT32"'
F32='datatype: "FP32"'
TYPED="inputs {name: \"user_0\" ${I64} shape: [2] contents {int64_contents: [3, 107]}}
inputs {name: \"user_0__lengths\" ${I32} shape: [1] contents {int_contents: [2]}}
inputs {name: \"user_0__weights\" ${F32} shape: [2] contents {fp32_contents: [0.5, 2]}}
inputs {name: \"user_dense\" ${F32} shape: [1, 2] contents {fp32_contents: [1, -2]}}
inputs {name: \"item_1\" ${I64} shape: [3] contents {int64_contents: [9, 0, 4]}}
inputs {name: \"item_1__lengths\" ${I32} shape: [2] contents {int_contents: [2, 1]}}
inputs {name: \"item_dense\" ${F32} shape: [2, 3] contents {fp32_contents: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}}
inputs {name: \"item_ids\" ${I64} shape: [2] contents {int64_contents: [1000, 1001]}}"
infer valid_typed "model_name: \"m\" id: \"r1\" parameters {key: \"top_k\" value {int64_param: 1}} ${TYPED}
outputs {name: \"scores\"} outputs {name: \"item_ids\"}"
infer valid_raw 'inputs {name: "item_0" datatype: "INT64" shape: [1]}
inputs {name: "item_0__lengths" datatype: "INT32" shape: [1]}
inputs {name: "user_dense" datatype: "FP32" shape: [1, 2]}
inputs {name: "item_dense" datatype: "FP32" shape: [1, 3]}
inputs {name: "item_ids" datatype: "INT64" shape: [1]}
raw_input_contents: "\005\000\000\000\000\000\000\000"
raw_input_contents: "\001\000\000\000"
raw_input_contents: "\000\000\200?\000\000\000@"
raw_input_contents: "\000\000\200?\000\000\000@\000\000@@"
raw_input_contents: "\350\003\000\000\000\000\000\000"'
infer valid_no_candidates "inputs {name: \"user_dense\" ${F32} shape: [1, 2] contents {fp32_contents: [0, 0]}}
inputs {name: \"item_ids\" ${I64} shape: [0]}"
infer bad_unknown_input "${TYPED} inputs {name: \"nope\" ${I64} shape: [1] contents {int64_contents: [1]}}"
# An input whose name reads like the scan's refusal of malformed bytes: its message begins
# with that name (found by the fuzzer on 2026-12-07, when the check took it for the scan's).
infer bad_input_named_like_a_scan_refusal "${TYPED} inputs {name: \"the request is not a valid inference.ModelInferRequest: x\" ${I64} shape: [1] contents {int64_contents: [1]}}"
infer bad_input_twice "${TYPED} inputs {name: \"item_ids\" ${I64} shape: [2] contents {int64_contents: [1, 2]}}"
FROM='[3, 107]'
TO="[$(repeat 9 '1,') 1]"
infer bad_too_many_ids "${TYPED/"${FROM}"/"${TO}"}"
FROM='{int_contents: [2]}'
TO='{int_contents: [2] fp64_contents: [1]}'
infer bad_outside_the_field "${TYPED/"${FROM}"/"${TO}"}"
infer bad_many_parameters "${TYPED} $(for i in $(seq 0 64); do printf 'parameters {key: "p%d" value {bool_param: true}} ' "$i"; done)"
infer bad_empty_inputs_flood "$(repeat 300 'inputs {}')"
infer bad_group "${TYPED}" '\243\001\244\001'
# SPEC section 3's content errors, one seed each: every one must be refused, and the
# fuzzer's reference (tests/fuzz/reference_infer.h) must agree.
swap() {  # name, from, to: TYPED with `from` replaced by `to`
  [[ "${TYPED}" == *"$2"* ]] || { echo "make_corpus: '$2' is not in TYPED" >&2; exit 1; }
  infer "$1" "${TYPED/"$2"/"$3"}"
}
swap bad_weight_count 'shape: [2] contents {fp32_contents: [0.5, 2]}' \
  'shape: [1] contents {fp32_contents: [0.5]}'
swap bad_nan_weight '[0.5, 2]' '[0.5, nan]'
swap bad_inf_user_dense '[1, -2]' '[1, -inf]'
swap bad_nan_item_dense '[0.1, 0.2, 0.3, 0.4, 0.5, 0.6]' '[0.1, 0.2, 0.3, 0.4, nan, 0.6]'
swap bad_user_dense_width 'shape: [1, 2] contents {fp32_contents: [1, -2]}' \
  'shape: [1, 1] contents {fp32_contents: [1]}'
swap bad_item_dense_rows 'shape: [2, 3] contents {fp32_contents: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}' \
  'shape: [1, 3] contents {fp32_contents: [0.1, 0.2, 0.3]}'
swap bad_item_dense_width 'shape: [2, 3] contents {fp32_contents: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}' \
  'shape: [2, 2] contents {fp32_contents: [0.1, 0.2, 0.3, 0.4]}'
swap bad_reject_oov '[9, 0, 4]' '[9, 0, 10]'
swap bad_datatype "\"item_1\" ${I64} shape: [3] contents {int64_contents: [9, 0, 4]}" \
  "\"item_1\" ${I32} shape: [3] contents {int_contents: [9, 0, 4]}"
swap bad_lengths_sum '[2, 1]' '[2, 2]'
swap bad_negative_length '[2, 1]' '[4, -1]'
swap bad_user_lengths_shape 'shape: [1] contents {int_contents: [2]}' \
  'shape: [2] contents {int_contents: [1, 1]}'
swap bad_item_lengths_count 'shape: [2] contents {int_contents: [2, 1]}' \
  'shape: [3] contents {int_contents: [2, 1, 0]}'
swap bad_ids_without_lengths "inputs {name: \"item_1__lengths\" ${I32} shape: [2] contents {int_contents: [2, 1]}}" ''
swap bad_no_item_ids "inputs {name: \"item_ids\" ${I64} shape: [2] contents {int64_contents: [1000, 1001]}}" ''
infer bad_top_k_kind "${TYPED} parameters {key: \"top_k\" value {string_param: \"1\"}}"
# Typed contents in a request of raw contents, on an input whose name (70 bytes, not a
# table) the refusal quotes: quoted as LogSafe quotes it (a 64-byte cut failed the check).
LONG_NAME="$(printf 'n%.0s' $(seq 70))"
infer bad_long_name_typed_under_raw "inputs {name: \"${LONG_NAME}\" ${I64} shape: [1] contents {int64_contents: [5]}}
inputs {name: \"item_0__lengths\" ${I32} shape: [1]}
raw_input_contents: \"\\005\\000\\000\\000\\000\\000\\000\\000\"
raw_input_contents: \"\\001\\000\\000\\000\""
# Weighted item bags over two candidates (the second bag starts past the first's ids).
infer valid_item_weights "${TYPED}
inputs {name: \"item_0\" ${I64} shape: [3] contents {int64_contents: [1, 2, 3]}}
inputs {name: \"item_0__lengths\" ${I32} shape: [2] contents {int_contents: [1, 2]}}
inputs {name: \"item_0__weights\" ${F32} shape: [3] contents {fp32_contents: [0.5, 0.25, 2]}}"
FROM='[3, 107]'
TO='[-9223372036854775808, 9223372036854775807]'
infer valid_modulo_extremes "${TYPED/"${FROM}"/"${TO}"}
parameters {key: \"top_k\" value {uint64_param: 18446744073709551615}}"
# raw_input_contents: a NaN (0x7fc00000) among the item dense values, an id past an
# oov: reject table, and raw bytes of the wrong size.
RAW_INPUTS='inputs {name: "item_1" datatype: "INT64" shape: [1]}
inputs {name: "item_1__lengths" datatype: "INT32" shape: [1]}
inputs {name: "user_dense" datatype: "FP32" shape: [1, 2]}
inputs {name: "item_dense" datatype: "FP32" shape: [1, 3]}
inputs {name: "item_ids" datatype: "INT64" shape: [1]}'
raw() {  # name, raw item_1 id, raw item dense values
  infer "$1" "${RAW_INPUTS}
raw_input_contents: \"$2\"
raw_input_contents: \"\\001\\000\\000\\000\"
raw_input_contents: \"\\000\\000\\200?\\000\\000\\000@\"
raw_input_contents: \"$3\"
raw_input_contents: \"\\350\\003\\000\\000\\000\\000\\000\\000\""
}
raw valid_raw_reject_table '\011\000\000\000\000\000\000\000' '\000\000\200?\000\000\000@\000\000@@'
raw bad_raw_nan_dense '\011\000\000\000\000\000\000\000' '\000\000\200?\000\000\300\177\000\000@@'
raw bad_raw_reject_oov '\012\000\000\000\000\000\000\000' '\000\000\200?\000\000\000@\000\000@@'
raw bad_raw_size '\011\000\000\000\000\000\000' '\000\000\200?\000\000\000@\000\000@@'

# --- admin_request: one byte that picks the request the seed check judges (0 SetHotRows,
# 1 GetHotRows, 2 RebuildHotRows, 3 ReloadModel), then its bytes; the fuzzer's hot-set
# capacity is 4 ids per table.
mkdir -p "${OUT}/admin_request"
admin() {  # name, selector (a printf escape), message type, text proto[, raw bytes appended]
  {
    printf "$2"
    printf '%s\n' "$4" | protoc --encode="fuserank.v1.$3" --proto_path="${ROOT}/proto" \
      "${ROOT}/proto/fuserank/v1/admin.proto"
    if [[ $# -ge 5 ]]; then printf "$5"; fi
  } >"${OUT}/admin_request/$1.pb"
}
admin_raw() { printf "$2" >"${OUT}/admin_request/$1.pb"; }  # name, bytes
admin valid_set_two_tables '\000' SetHotRowsRequest \
  'tables {table: "user_0" ids: [1, 2, -1]} tables {table: "item_0" ids: [5]} model: "m"'
admin valid_set_at_capacity '\000' SetHotRowsRequest 'tables {table: "item_1" ids: [0, 1, 2, 3]}'
admin_raw valid_set_empty '\000'
# Ids not packed, a packed run split in two, unknown fields (a varint, a group) inside a
# table: 4 ids in all, as protobuf merges them.
admin_raw valid_set_split_ids '\000\012\022\012\001a\020\001\022\002\002\003\020\377\001\070\011\073\070\001\074'
admin bad_set_over_capacity '\000' SetHotRowsRequest \
  'tables {table: "user_0" ids: [1]} tables {table: "item_0" ids: [1, 2, 3, 4, 5]}'
admin_raw bad_set_over_capacity_split '\000\012\014\012\001b\022\003\001\002\003\020\004\020\005'
admin_raw bad_set_truncated '\000\012\010\012\001a\022\003\001'
admin_raw bad_set_name_not_utf8 '\000\012\003\012\001\377'
admin_raw bad_set_end_group '\000\014'
admin_raw bad_set_unterminated_packed_id '\000\012\005\012\000\022\001\200'
admin valid_get_tables '\001' GetHotRowsRequest 'tables: ["user_0", "item_0"] model: "m"'
admin_raw valid_get_all '\001'
admin_raw bad_get_not_utf8 '\001\012\002\300\200'
admin valid_rebuild_tables '\002' RebuildHotRowsRequest 'tables: ["item_1"]'
admin_raw bad_rebuild_truncated '\002\012\005item'
admin valid_reload '\003' ReloadModelRequest 'model: "m" path: "/models/m.yaml"'
admin_raw bad_reload_bad_wire_type '\003\017'

# --- resp_frame: what a Redis node sends (the fuzzer's limits: lines 64 bytes, bulk strings
# 256, arrays 16 elements, 64 in all, 4 deep).
resp() { printf -- "$2" >"${OUT}/resp_frame/$1.resp"; }
resp valid_bulk '$3\r\nrow\r\n'
resp valid_moved '-MOVED 3999 :6380\r\n'
resp valid_cluster_slots '*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n'
resp bad_huge_array '*2147483647\r\n*3\r\n:0\r\n'
resp bad_huge_bulk '$100000000000\r\nvvvv'
resp bad_deep '*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n'

find "${OUT}" -type f | sort | sed "s|${ROOT}/||"
