// fuserank-load-redis: writes one embedding table into a Redis Cluster in the layout that
// storage: redis tables read (docs/remote-tables.md): key "<key_prefix><table>:<id>",
// value the row's bytes in the model's embedding_dtype (int8: the dim codes, then the row's
// scale and bias as float32). Rows come from a safetensors tensor (an I8 one with its
// qparams tensor beside it; keys from --keys, one int64 per line, else the row index) or
// from a key-value dump (--dump: lines "<id> <v_1> ... <v_dim>", for tables that never
// existed as one file; fields separated by spaces or tabs; with --dtype=int8 "<id> <scale>
// <bias> <q_1> ... <q_dim>"). The input is checked before anything is written (exit 2 on a
// bad line, an fp16/bf16 value out of range, a --dtype unlike the tensor's), then sent one
// batch at a time: the values in memory are one batch's, but the check keeps every row's
// id (8 bytes a row) and a dump from a pipe or stdin is held whole. Idempotent (SET
// overwrites with the same bytes); prints progress and a summary; exits 1 when any row was
// not written.
// Bad flags (a seed node that is no HOST:PORT, --batch or --timeout_ms < 1, --keys/--tensor/
// --qparams with --dump, an argument that is no flag) and bad input (an empty dump, an id
// twice) exit 2 before anything is written.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/remote/cluster_client.h"
#include "engine/remote/cluster_state.h"
#include "tools/cli/flags.h"
#include "tools/load_redis_dump_rows.h"
#include "tools/load_redis_rows.h"
#include "tools/load_redis_safetensors_rows.h"

ABSL_FLAG(std::vector<std::string>, seed_nodes, {}, "host:port of cluster nodes (comma-separated)");
ABSL_FLAG(std::string, table, "", "the table name, as in the model spec");
ABSL_FLAG(std::string, safetensors, "", "weights file holding the table");
ABSL_FLAG(std::string, tensor, "", "tensor name (default embeddings.<table>.weight)");
ABSL_FLAG(std::string, keys, "", "file of int64 keys, one per row (default: the row index)");
ABSL_FLAG(std::string, dump, "", "key-value dump instead of --safetensors");
ABSL_FLAG(std::string, dtype, "",
          "the model's embedding_dtype, fp32 | fp16 | bf16 | int8: how --dump's values are "
          "stored (default fp32); with --safetensors, checked against the tensor's dtype");
ABSL_FLAG(std::string, qparams, "",
          "an I8 tensor's qparams tensor (default: the tensor's name with .qparams for .weight)");
ABSL_FLAG(std::string, key_prefix, "fuserank:", "as remote.key_prefix");
ABSL_FLAG(int, batch, 2000, "rows per pipelined round (1..1048576)");
ABSL_FLAG(int, timeout_ms, 10000, "deadline of one round (>= 1)");

namespace {

using fuserank::remote::ClusterClient;
using fuserank::remote::Command;
using fuserank::remote::Reply;
using fuserank::tools::RowBatch;
using fuserank::tools::RowSource;

constexpr int kMaxBatch = 1 << 20;

void Fail(const std::string& message) {
  std::fprintf(stderr, "fuserank-load-redis: %s\n", message.c_str());
}

// The flags alone, before any file is read: InvalidArgument naming the flag.
absl::Status CheckFlags() {
  if (absl::GetFlag(FLAGS_table).empty() || absl::GetFlag(FLAGS_seed_nodes).empty() ||
      absl::GetFlag(FLAGS_safetensors).empty() == absl::GetFlag(FLAGS_dump).empty()) {
    return absl::InvalidArgumentError(
        "need --seed_nodes, --table and one of --safetensors / --dump (see --help)");
  }
  for (const std::string& seed : absl::GetFlag(FLAGS_seed_nodes)) {
    std::string host;
    int port = 0;
    if (!fuserank::remote::ParseAddress(seed, &host, &port)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--seed_nodes: '", seed, "' is not HOST:PORT (a port in 1..65535, [IPv6]:PORT)"));
    }
  }
  if (const int batch = absl::GetFlag(FLAGS_batch); batch < 1 || batch > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch: want 1..", kMaxBatch, " rows a round, got ", batch));
  }
  if (const int timeout_ms = absl::GetFlag(FLAGS_timeout_ms); timeout_ms < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--timeout_ms: want >= 1, got ", timeout_ms));
  }
  if (!absl::GetFlag(FLAGS_dump).empty()) {
    for (const auto& [name, value] : {std::pair{"keys", absl::GetFlag(FLAGS_keys)},
                                      std::pair{"tensor", absl::GetFlag(FLAGS_tensor)},
                                      std::pair{"qparams", absl::GetFlag(FLAGS_qparams)}}) {
      if (!value.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", name, " applies to --safetensors; a --dump line holds its own id and values"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RowSource>> OpenRows() {
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (!absl::GetFlag(FLAGS_dump).empty()) {
    return fuserank::tools::OpenDumpRows(absl::GetFlag(FLAGS_dump), dtype.empty() ? "fp32" : dtype);
  }
  if (!dtype.empty() && dtype != "fp32" && dtype != "fp16" && dtype != "bf16" && dtype != "int8") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype: fp32, fp16, bf16 or int8, got '", dtype, "'"));
  }
  fuserank::tools::SafetensorsRowsOptions options;
  options.path = absl::GetFlag(FLAGS_safetensors);
  options.tensor = absl::GetFlag(FLAGS_tensor);
  if (options.tensor.empty()) {
    options.tensor = absl::StrCat("embeddings.", absl::GetFlag(FLAGS_table), ".weight");
  }
  options.qparams = absl::GetFlag(FLAGS_qparams);
  options.keys = absl::GetFlag(FLAGS_keys);
  options.dtype = dtype;
  return fuserank::tools::OpenSafetensorsRows(options);
}

struct Totals {
  size_t written = 0;
  size_t failed = 0;
  size_t bytes = 0;
};

// SETs every row of `source`, one pipelined round per batch. An error: the input changed
// after it was checked, and the rows after it were not written.
absl::Status WriteRows(RowSource& source, ClusterClient& client, const std::string& table,
                       Totals* totals) {
  const size_t batch_rows = static_cast<size_t>(absl::GetFlag(FLAGS_batch));
  const std::string prefix = absl::StrCat(absl::GetFlag(FLAGS_key_prefix), table, ":");
  RowBatch batch;
  std::vector<std::string> keys;
  std::vector<Command> commands;
  std::vector<Reply> replies;
  for (size_t done = 0;;) {
    if (absl::Status s = source.Next(batch_rows, &batch); !s.ok()) return s;
    const size_t count = batch.keys.size();
    if (count == 0) return absl::OkStatus();
    keys.clear();
    commands.clear();
    for (size_t i = 0; i < count; ++i) keys.push_back(absl::StrCat(prefix, batch.keys[i]));
    for (size_t i = 0; i < count; ++i) commands.push_back({keys[i], batch.value(i), true});
    client.Run(commands,
               std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(absl::GetFlag(FLAGS_timeout_ms)),
               &replies);
    for (size_t i = 0; i < count; ++i) {
      if (replies[i].state == Reply::State::kValue) {
        ++totals->written;
        totals->bytes += batch.value(i).size();
      } else if (++totals->failed <= 5) {
        Fail(absl::StrCat(keys[i], ": ",
                          std::string(fuserank::remote::ErrorKindName(replies[i].error))));
      }
    }
    done += count;
    std::fprintf(stderr, "fuserank-load-redis: %zu/%zu rows\n", done, source.rows());
  }
}

}  // namespace

int main(int argc, char** argv) {
  fuserank::cli::ParseFlagsOrExit(
      argc, argv, "fuserank-load-redis",
      "fuserank-load-redis --seed_nodes=h:p[,...] --table=T (--safetensors=F [--keys=K] | "
      "--dump=D) [--dtype=fp32|fp16|bf16|int8]",
      {"tools/load_redis.cc"});
  if (absl::Status flags = CheckFlags(); !flags.ok()) {
    Fail(std::string(flags.message()));
    return 2;
  }
  const std::string table = absl::GetFlag(FLAGS_table);
  absl::StatusOr<std::unique_ptr<RowSource>> source = OpenRows();
  if (!source.ok()) {
    Fail(std::string(source.status().message()));
    return 2;
  }
  fuserank::remote::ClusterOptions options;
  options.seeds = absl::GetFlag(FLAGS_seed_nodes);
  std::unique_ptr<ClusterClient> client;
  if (absl::Status s = ClusterClient::Create(options, &client); !s.ok()) {
    Fail(std::string(s.message()));
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  Totals totals;
  const absl::Status written = WriteRows(**source, *client, table, &totals);
  if (!written.ok()) Fail(std::string(written.message()));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("table %s: %zu rows written (%zu bytes), %zu failed, %.2f s\n", table.c_str(),
              totals.written, totals.bytes, totals.failed, seconds);
  return written.ok() && totals.failed == 0 ? 0 : 1;
}
