// fuserank-load-redis: writes one embedding table into a Redis Cluster in the layout that
// storage: redis tables read (docs/remote-tables.md): key "<key_prefix><table>:<id>",
// value the row's bytes in the model's embedding_dtype (int8: the dim codes, then the row's
// scale and bias as float32). Rows come from a safetensors tensor (an I8 one with its
// qparams tensor beside it; keys from --keys, one int64 per line, else the row index) or
// from a key-value dump (--dump: lines "<id> <v_1> ... <v_dim>", for tables that never
// existed as one file; with --dtype=int8 "<id> <scale> <bias> <q_1> ... <q_dim>").
// Idempotent (SET overwrites with the same bytes); prints progress and a summary; exits 1
// when any row was not written.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/cpu/cpu_dtype.h"
#include "engine/mapped_file.h"
#include "engine/remote/cluster_client.h"
#include "engine/safetensors.h"

ABSL_FLAG(std::vector<std::string>, seed_nodes, {}, "host:port of cluster nodes (comma-separated)");
ABSL_FLAG(std::string, table, "", "the table name, as in the model spec");
ABSL_FLAG(std::string, safetensors, "", "weights file holding the table");
ABSL_FLAG(std::string, tensor, "", "tensor name (default embeddings.<table>.weight)");
ABSL_FLAG(std::string, keys, "", "file of int64 keys, one per row (default: the row index)");
ABSL_FLAG(std::string, dump, "", "key-value dump instead of --safetensors");
ABSL_FLAG(std::string, dtype, "fp32",
          "--dump only: fp32 | fp16 | bf16 | int8, the model's embedding_dtype");
ABSL_FLAG(std::string, qparams, "",
          "an I8 tensor's qparams tensor (default: the tensor's name with .qparams for .weight)");
ABSL_FLAG(std::string, key_prefix, "fuserank:", "as remote.key_prefix");
ABSL_FLAG(int, batch, 2000, "rows per pipelined round");
ABSL_FLAG(int, timeout_ms, 10000, "deadline of one round");

namespace {

using fuserank::remote::ClusterClient;
using fuserank::remote::Command;
using fuserank::remote::Reply;

struct Rows {
  std::vector<int64_t> keys;
  std::vector<std::string> values;  // one row's bytes each
};

bool Fail(const std::string& message) {
  std::fprintf(stderr, "fuserank-load-redis: %s\n", message.c_str());
  return false;
}

bool ReadKeys(const std::string& path, size_t rows, std::vector<int64_t>* keys) {
  std::ifstream in(path);
  if (!in) return Fail(absl::StrCat(path, ": cannot open"));
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    int64_t key = 0;
    if (!absl::SimpleAtoi(line, &key)) return Fail(absl::StrCat(path, ":", n, ": not an int64"));
    keys->push_back(key);
  }
  if (keys->size() != rows) {
    return Fail(absl::StrCat(path, ": ", keys->size(), " keys for ", rows, " rows"));
  }
  return true;
}

bool FromSafetensors(Rows* rows) {
  const std::string path = absl::GetFlag(FLAGS_safetensors);
  absl::StatusOr<std::unique_ptr<fuserank::engine::MappedFile>> file =
      fuserank::engine::MappedFile::Open(path);
  if (!file.ok()) return Fail(absl::StrCat(path, ": ", file.status().message()));
  absl::StatusOr<fuserank::engine::TensorMap> tensors =
      fuserank::engine::ParseSafetensors((*file)->data(), (*file)->size());
  if (!tensors.ok()) return Fail(absl::StrCat(path, ": ", tensors.status().message()));
  std::string name = absl::GetFlag(FLAGS_tensor);
  if (name.empty()) name = absl::StrCat("embeddings.", absl::GetFlag(FLAGS_table), ".weight");
  const auto it = tensors->find(name);
  if (it == tensors->end()) return Fail(absl::StrCat(path, ": no tensor '", name, "'"));
  const fuserank::engine::TensorView& t = it->second;
  if (t.shape.size() != 2 ||
      (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16" && t.dtype != "I8")) {
    return Fail(absl::StrCat(name, ": want a [rows, dim] F32, F16, BF16 or I8 tensor"));
  }
  const size_t n = static_cast<size_t>(t.shape[0]);
  const size_t row_bytes = n == 0 ? 0 : t.nbytes / n;
  // An int8 table's (scale, bias) per row, appended to each value.
  const char* qparams = nullptr;
  if (t.dtype == "I8") {
    std::string qname = absl::GetFlag(FLAGS_qparams);
    if (qname.empty()) {
      qname = name;
      if (qname.size() > 7 && qname.compare(qname.size() - 7, 7, ".weight") == 0) {
        qname.resize(qname.size() - 7);
      }
      qname += ".qparams";
    }
    const auto q = tensors->find(qname);
    if (q == tensors->end()) {
      return Fail(absl::StrCat(path, ": ", name, " is I8 but there is no tensor '", qname,
                               "' of its (scale, bias) pairs (--qparams)"));
    }
    if (q->second.dtype != "F32" || q->second.shape.size() != 2 ||
        q->second.shape[0] != t.shape[0] || q->second.shape[1] != 2) {
      return Fail(absl::StrCat(qname, ": want an F32 [", n, ", 2] tensor"));
    }
    qparams = reinterpret_cast<const char*>(q->second.data);
  }
  for (size_t r = 0; r < n; ++r) {
    rows->values.emplace_back(reinterpret_cast<const char*>(t.data) + r * row_bytes, row_bytes);
    if (qparams != nullptr) rows->values.back().append(qparams + r * 8, 8);
  }
  if (!absl::GetFlag(FLAGS_keys).empty())
    return ReadKeys(absl::GetFlag(FLAGS_keys), n, &rows->keys);
  for (size_t r = 0; r < n; ++r) rows->keys.push_back(static_cast<int64_t>(r));
  return true;
}

bool FromDump(Rows* rows) {
  const std::string path = absl::GetFlag(FLAGS_dump);
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype != "fp32" && dtype != "fp16" && dtype != "bf16" && dtype != "int8") {
    return Fail(absl::StrCat("--dtype: fp32, fp16, bf16 or int8, got '", dtype, "'"));
  }
  const bool int8 = dtype == "int8";
  std::ifstream in(path);
  if (!in) return Fail(absl::StrCat(path, ": cannot open"));
  std::string line;
  size_t dim = 0;
  for (size_t n = 1; std::getline(in, line); ++n) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.empty()) continue;
    int64_t key = 0;
    if (!absl::SimpleAtoi(fields[0], &key)) return Fail(absl::StrCat(path, ":", n, ": bad key"));
    // int8: the scale and the bias come first.
    const size_t first = int8 ? 3 : 1;
    if (fields.size() <= first) {
      return Fail(absl::StrCat(path, ":", n, ": no values", int8 ? " after scale and bias" : ""));
    }
    if (dim == 0) dim = fields.size() - first;
    if (fields.size() - first != dim) {
      return Fail(absl::StrCat(path, ":", n, ": ", fields.size() - first, " values, want ", dim));
    }
    std::string value;
    if (int8) {
      float q[2] = {0, 0};
      for (int j = 0; j < 2; ++j) {
        if (!absl::SimpleAtof(fields[1 + j], &q[j]) || !std::isfinite(q[j])) {
          return Fail(absl::StrCat(path, ":", n, ": ", j == 0 ? "scale" : "bias",
                                   " is not a finite number"));
        }
      }
      for (size_t j = first; j < fields.size(); ++j) {
        int code = 0;
        if (!absl::SimpleAtoi(fields[j], &code) || code < -128 || code > 127) {
          return Fail(absl::StrCat(path, ":", n, ": code ", j - first + 1,
                                   " is not an integer in -128..127"));
        }
        value.push_back(static_cast<char>(static_cast<int8_t>(code)));
      }
      value.append(reinterpret_cast<const char*>(q), sizeof(q));
      rows->keys.push_back(key);
      rows->values.push_back(std::move(value));
      continue;
    }
    for (size_t j = 1; j < fields.size(); ++j) {
      float v = 0;
      if (!absl::SimpleAtof(fields[j], &v) || !std::isfinite(v)) {
        return Fail(absl::StrCat(path, ":", n, ": value ", j, " is not a finite number"));
      }
      if (dtype == "fp32") {
        value.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        const uint16_t h = dtype == "fp16" ? fuserank::engine::FloatToHalf(v)
                                           : fuserank::engine::FloatToBFloat16(v);
        value.append(reinterpret_cast<const char*>(&h), 2);
      }
    }
    rows->keys.push_back(key);
    rows->values.push_back(std::move(value));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "fuserank-load-redis --seed_nodes=h:p[,...] --table=T (--safetensors=F [--keys=K] | "
      "--dump=D [--dtype=fp16|int8])");
  absl::ParseCommandLine(argc, argv);
  const std::string table = absl::GetFlag(FLAGS_table);
  if (table.empty() || absl::GetFlag(FLAGS_seed_nodes).empty() ||
      absl::GetFlag(FLAGS_safetensors).empty() == absl::GetFlag(FLAGS_dump).empty()) {
    Fail("need --seed_nodes, --table and one of --safetensors / --dump (see --help)");
    return 2;
  }
  Rows rows;
  if (!(absl::GetFlag(FLAGS_dump).empty() ? FromSafetensors(&rows) : FromDump(&rows))) return 2;
  fuserank::remote::ClusterOptions options;
  options.seeds = absl::GetFlag(FLAGS_seed_nodes);
  std::unique_ptr<ClusterClient> client;
  if (absl::Status s = ClusterClient::Create(options, &client); !s.ok()) {
    Fail(std::string(s.message()));
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  const size_t batch = static_cast<size_t>(std::max(1, absl::GetFlag(FLAGS_batch)));
  std::vector<std::string> keys;
  std::vector<Command> commands;
  std::vector<Reply> replies;
  size_t written = 0;
  size_t failed = 0;
  size_t bytes = 0;
  const std::string prefix = absl::StrCat(absl::GetFlag(FLAGS_key_prefix), table, ":");
  for (size_t first = 0; first < rows.keys.size(); first += batch) {
    const size_t count = std::min(batch, rows.keys.size() - first);
    keys.clear();
    commands.clear();
    for (size_t i = 0; i < count; ++i) keys.push_back(absl::StrCat(prefix, rows.keys[first + i]));
    for (size_t i = 0; i < count; ++i) commands.push_back({keys[i], rows.values[first + i], true});
    client->Run(commands,
                std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(absl::GetFlag(FLAGS_timeout_ms)),
                &replies);
    for (size_t i = 0; i < count; ++i) {
      if (replies[i].state == Reply::State::kValue) {
        ++written;
        bytes += rows.values[first + i].size();
      } else {
        ++failed;
        if (failed <= 5) {
          std::fprintf(stderr, "fuserank-load-redis: %s: %s\n", keys[i].c_str(),
                       std::string(fuserank::remote::ErrorKindName(replies[i].error)).c_str());
        }
      }
    }
    std::fprintf(stderr, "fuserank-load-redis: %zu/%zu rows\n", first + count, rows.keys.size());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("table %s: %zu rows written (%zu bytes), %zu failed, %.2f s\n", table.c_str(),
              written, bytes, failed, seconds);
  return failed == 0 ? 0 : 1;
}
