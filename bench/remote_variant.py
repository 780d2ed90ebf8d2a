#!/usr/bin/env python3
"""Writes a variant of a model whose listed tables are `storage: redis`: the spec with
those tables' `rows`/`oov` dropped and `storage: redis` set, and a safetensors file without
their tensors (every other tensor copied byte for byte).

usage: bench/remote_variant.py SPEC.yaml OUT.yaml TABLE[,TABLE...]|all"""
import json
import os
import struct
import sys

import yaml


def main():
    spec_path, out_path, which = sys.argv[1:4]
    with open(spec_path, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    names = [t["name"] for t in spec["tables"]]
    remote = set(names) if which == "all" else set(which.split(","))
    unknown = remote - set(names)
    if unknown:
        sys.exit(f"remote_variant: no table {sorted(unknown)} in {spec_path}")
    for table in spec["tables"]:
        if table["name"] in remote:
            table.pop("rows", None)
            table.pop("oov", None)
            table["storage"] = "redis"
    weights_in = os.path.join(os.path.dirname(spec_path), spec["weights"])
    weights_out = os.path.splitext(out_path)[0] + ".safetensors"
    with open(weights_in, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        base = 8 + length
        kept = {}
        offset = 0
        chunks = []
        for name, entry in sorted(header.items(), key=lambda kv: kv[1].get("data_offsets", [0])[0]
                                  if kv[0] != "__metadata__" else -1):
            if name == "__metadata__":
                kept[name] = entry
                continue
            if name.startswith("embeddings.") and name.split(".")[1] in remote:
                continue
            begin, end = entry["data_offsets"]
            f.seek(base + begin)
            chunks.append(f.read(end - begin))
            kept[name] = dict(entry, data_offsets=[offset, offset + end - begin])
            offset += end - begin
    out_header = json.dumps(kept, separators=(",", ":")).encode()
    out_header += b" " * (-len(out_header) % 8)
    with open(weights_out, "wb") as f:
        f.write(struct.pack("<Q", len(out_header)) + out_header)
        for chunk in chunks:
            f.write(chunk)
    spec["weights"] = os.path.basename(weights_out)
    with open(out_path, "w", encoding="utf-8") as f:
        yaml.safe_dump(spec, f, sort_keys=False, default_flow_style=None)


if __name__ == "__main__":
    main()
