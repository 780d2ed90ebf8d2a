// Request decode of the ranking port, from the bytes gRPC hands over to a filled engine
// batch, on the bench model (bench/models/gen_bench_model.sh: 8 user + 18 item tables, 5 +
// 8 dense) and the load generator's requests (one id per feature, Zipf 1.05, seed 1; a
// pool of 64 distinct requests cycled). Items processed = requests, so items/s is
// requests decoded per second and 1e6 / that the microseconds per request.
// Every benchmark runs twice: sliced = 0 hands each request over as one slice (WireBytes
// takes its zero-copy view), sliced = 1 as gRPC hands a received message to the server:
// the slices its transport read, at most kSliceBytes each, so WireBytes copies the
// message into the thread's buffer first. A live server sees both (a message that
// landed in one read buffer comes as one slice); neither row alone is the server's.
//   RankDecode/baseline: the decode before the direct wire parse (baseline_rank_decoder.h):
//     top-level scan, feature scan over the ByteBuffer, protobuf parse into a per-thread
//     arena, validation and append from the message.
//   RankDecode/wire: what RankerService runs now: the same top-level scan, the bytes made
//     contiguous (server/wire_bytes.h) and parsed in place within the feature scan's
//     limits (rank_request_view.h, no message built; it stands for the feature scan),
//     then RequestDecoder::AppendParsed.
//   InferDecodeUnscanned: ModelInfer before the scan before the parse: the
//     ModelInferRequest parsed from the ByteBuffer, then TensorDecoder::Append.
//   InferDecode: ModelInfer as KServeService decodes it now: the bytes made contiguous,
//     ScanInferTop, TensorDecoder::CheckWire, the parse, Append.
//   Both with raw_input_contents (typed = 0) and typed contents (typed = 1).
// usage: fuserank-decode-bench [--model=bench/out/model/bench.yaml] [benchmark flags]
#include <google/protobuf/arena.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "bench/decode/baseline_rank_decoder.h"
#include "bench/kserve/infer_request.h"
#include "bench/loadgen/request_pool.h"
#include "benchmark/benchmark.h"
#include "engine/model.h"
#include "inference/grpc_service.pb.h"
#include "server/infer_request_scan.h"
#include "server/rank_request_view.h"
#include "server/request_decoder.h"
#include "server/request_scan.h"
#include "server/tensor_decoder.h"
#include "server/wire_bytes.h"

namespace fuserank::bench {
namespace {

constexpr int kPool = 64;
constexpr int kCandidates[] = {16, 256, 1024};
// The pieces of a received message: gRPC's TCP endpoint reads into 8 KB slices (64 KB
// ones only when it expects a large read), and HTTP/2 DATA frames carry at most 16 KB by
// default, so a message above 8 KB reaches the server in several slices.
constexpr size_t kSliceBytes = 8 << 10;

std::shared_ptr<const engine::Model>& BenchModel() {
  static std::shared_ptr<const engine::Model> model;
  return model;
}

server::DecodeLimits Limits() {
  server::DecodeLimits limits;  // the server's defaults
  return limits;
}

// `bytes` as one slice, or (sliced) as consecutive slices of at most kSliceBytes.
grpc::ByteBuffer ToByteBuffer(const std::string& bytes, bool sliced) {
  if (!sliced) {
    grpc::Slice slice(bytes);
    return grpc::ByteBuffer(&slice, 1);
  }
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += kSliceBytes) {
    slices.emplace_back(bytes.data() + at, std::min(kSliceBytes, bytes.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

int SizeIndex(int n) { return n == 16 ? 0 : n == 256 ? 1 : 2; }

// The pool's RankRequests at `n` candidates, as one slice each or sliced.
const std::vector<grpc::ByteBuffer>& RankPool(int n, bool sliced) {
  static std::vector<grpc::ByteBuffer> pools[2][3];
  std::vector<grpc::ByteBuffer>& pool = pools[sliced][SizeIndex(n)];
  if (pool.empty()) {
    RequestOptions options;
    options.candidates = n;
    options.seed = 1;
    absl::StatusOr<RequestPool> built = BuildRequestPool(BenchModel()->spec(), options, kPool);
    if (!built.ok()) std::abort();
    for (const std::string& bytes : built->serialized) {
      pool.push_back(ToByteBuffer(bytes, sliced));
    }
  }
  return pool;
}

// The pool as ModelInferRequests, raw_input_contents (typed = false) or typed contents.
const std::vector<grpc::ByteBuffer>& InferPool(int n, bool typed, bool sliced) {
  static std::vector<grpc::ByteBuffer> pools[2][2][3];
  std::vector<grpc::ByteBuffer>& pool = pools[typed][sliced][SizeIndex(n)];
  if (pool.empty()) {
    RequestOptions options;
    options.candidates = n;
    options.seed = 1;
    absl::StatusOr<RequestPool> built = BuildRequestPool(BenchModel()->spec(), options, kPool);
    if (!built.ok()) std::abort();
    for (const std::string& bytes : built->serialized) {
      v1::RankRequest request;
      if (!request.ParseFromString(bytes)) std::abort();
      const inference::ModelInferRequest infer = ToInferRequest(
          BenchModel()->spec(), request,
          InferRequestOptions{typed ? TensorContents::kTyped : TensorContents::kRaw});
      pool.push_back(ToByteBuffer(infer.SerializeAsString(), sliced));
    }
  }
  return pool;
}

double MeanBytes(const std::vector<grpc::ByteBuffer>& pool) {
  double bytes = 0;
  for (const grpc::ByteBuffer& b : pool) bytes += static_cast<double>(b.Length());
  return bytes / static_cast<double>(pool.size());
}

absl::Status ScanTop(const grpc::ByteBuffer& request, server::RequestShape* shape) {
  grpc::ByteBuffer copy(request);
  grpc::ProtoBufferReader reader(&copy);
  return server::ScanTopLevel(&reader, Limits().max_candidates, shape);
}

void Check(const absl::Status& status, benchmark::State& state) {
  if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
}

void BM_RankDecodeBaseline(benchmark::State& state) {
  const std::vector<grpc::ByteBuffer>& pool =
      RankPool(static_cast<int>(state.range(0)), state.range(1) != 0);
  const server::RequestDecoder scan_limits_from(BenchModel(), Limits());
  const BaselineRankDecoder decoder(BenchModel(), Limits());
  // The old server's per-thread parse arena: a 1 MB first block.
  std::unique_ptr<char[]> block(new char[1 << 20]);
  google::protobuf::ArenaOptions options;
  options.initial_block = block.get();
  options.initial_block_size = 1 << 20;
  options.start_block_size = 64 << 10;
  options.max_block_size = 1 << 20;
  google::protobuf::Arena arena(options);
  engine::Batch batch;
  std::vector<int64_t> item_ids;
  size_t i = 0;
  for (auto _ : state) {
    const grpc::ByteBuffer& request = pool[i++ % pool.size()];
    batch.Clear();
    item_ids.clear();
    server::RequestShape shape;
    absl::Status status = ScanTop(request, &shape);
    if (status.ok()) {
      grpc::ByteBuffer copy(request);
      grpc::ProtoBufferReader reader(&copy);
      status = server::ScanFeatures(&reader, scan_limits_from.scan_limits(), &shape);
    }
    if (status.ok()) status = BaselineParseAndAppend(request, decoder, &arena, &batch, &item_ids);
    Check(status, state);
    benchmark::DoNotOptimize(batch.item.rows.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * MeanBytes(pool)));
}

// The loop of the Rank benches after the old decoder's: the top-level scan, the bytes
// made contiguous, then `decode` (the wire, the decoder, the batch, the item ids).
template <typename Decode>
void RunRankDecode(benchmark::State& state, Decode decode) {
  const std::vector<grpc::ByteBuffer>& pool =
      RankPool(static_cast<int>(state.range(0)), state.range(1) != 0);
  const server::RequestDecoder decoder(BenchModel(), Limits());
  engine::Batch batch;
  std::vector<int64_t> item_ids;
  size_t i = 0;
  for (auto _ : state) {
    const grpc::ByteBuffer& request = pool[i++ % pool.size()];
    batch.Clear();
    item_ids.clear();
    server::RequestShape shape;
    absl::Status status = ScanTop(request, &shape);
    if (status.ok()) {
      const server::WireBytes wire(request);
      status = decode(wire.view(), decoder, &batch, &item_ids);
    }
    Check(status, state);
    benchmark::DoNotOptimize(batch.item.rows.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * MeanBytes(pool)));
}

// The general path: the parse into the thread's view, then AppendParsed.
void BM_RankDecodeWire(benchmark::State& state) {
  RunRankDecode(state, [](absl::string_view wire, const server::RequestDecoder& decoder,
                          engine::Batch* batch, std::vector<int64_t>* item_ids) {
    const server::ThreadRankRequestView parsed;
    if (!server::ParseRankRequest(wire, decoder.parse_bounds(), &*parsed)) {
      std::abort();  // the pool holds valid requests only
    }
    return decoder.AppendParsed(*parsed, batch, item_ids);
  });
}

// As the server reads a Rank request now: the one-pass decode of the shape clients send
// (which every request here has; a request it gave up on would take the general path).
void BM_RankDecodeCanonical(benchmark::State& state) {
  RunRankDecode(state, [](absl::string_view wire, const server::RequestDecoder& decoder,
                          engine::Batch* batch, std::vector<int64_t>* item_ids) {
    server::CanonicalRequest read;
    if (!decoder.AppendCanonical(wire, batch, item_ids, &read)) {
      std::abort();  // the pool holds requests of the canonical shape only
    }
    return absl::OkStatus();
  });
}

// ModelInfer before the scan: the request parsed from the ByteBuffer, then Append.
void BM_InferDecodeUnscanned(benchmark::State& state) {
  const std::vector<grpc::ByteBuffer>& pool =
      InferPool(static_cast<int>(state.range(0)), state.range(1) != 0, state.range(2) != 0);
  const server::TensorDecoder decoder(*BenchModel(), Limits());
  inference::ModelInferRequest request;  // reused, as KServeService's pooled calls do
  engine::Batch batch;
  size_t i = 0;
  for (auto _ : state) {
    batch.Clear();
    grpc::ByteBuffer wire(pool[i++ % pool.size()]);
    const grpc::Status parsed =
        grpc::GenericDeserialize<grpc::ProtoBufferReader, inference::ModelInferRequest>(&wire,
                                                                                        &request);
    if (!parsed.ok()) state.SkipWithError("not a ModelInferRequest");
    server::InferRequestInfo info;
    Check(decoder.Append(request, BenchModel(), &batch, &info), state);
    benchmark::DoNotOptimize(batch.item.rows.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * MeanBytes(pool)));
}

// ModelInfer as KServeService decodes it now: the bytes made contiguous, the top-level scan,
// the decoder's checks of the inputs' bytes (infer_request_scan.h), the parse, Append.
void BM_InferDecode(benchmark::State& state) {
  const std::vector<grpc::ByteBuffer>& pool =
      InferPool(static_cast<int>(state.range(0)), state.range(1) != 0, state.range(2) != 0);
  const server::TensorDecoder decoder(*BenchModel(), Limits());
  inference::ModelInferRequest request;
  engine::Batch batch;
  size_t i = 0;
  for (auto _ : state) {
    batch.Clear();
    const server::WireBytes wire(pool[i++ % pool.size()]);
    server::InferRequestTop top;
    server::TensorDecoder::WireInputs scanned;
    absl::Status status = server::ScanInferTop(wire.view(), &top);
    if (status.ok()) status = decoder.CheckWire(wire.view(), &top, &scanned);
    if (status.ok() &&
        !request.ParseFromArray(wire.view().data(), static_cast<int>(wire.view().size()))) {
      status = absl::InvalidArgumentError("not a ModelInferRequest");
    }
    server::InferRequestInfo info;
    if (status.ok()) status = decoder.Append(request, BenchModel(), &batch, &info, &scanned);
    Check(status, state);
    benchmark::DoNotOptimize(batch.item.rows.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * MeanBytes(pool)));
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"candidates", "sliced"});
  for (int sliced : {0, 1}) {
    for (int n : kCandidates) b->Args({n, sliced});
  }
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_RankDecodeBaseline)->Apply(Sizes);
BENCHMARK(BM_RankDecodeWire)->Apply(Sizes);
BENCHMARK(BM_RankDecodeCanonical)->Apply(Sizes);
void InferSizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"candidates", "typed", "sliced"});
  for (int sliced : {0, 1}) {
    for (int typed : {0, 1}) {
      for (int n : kCandidates) b->Args({n, typed, sliced});
    }
  }
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_InferDecodeUnscanned)->Apply(InferSizes);
BENCHMARK(BM_InferDecode)->Apply(InferSizes);

}  // namespace
}  // namespace fuserank::bench

int main(int argc, char** argv) {
  std::string path = "bench/out/model/bench.yaml";
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (absl::StartsWith(argv[i], "--model=")) {
      path = argv[i] + std::strlen("--model=");
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  absl::StatusOr<std::shared_ptr<const fuserank::engine::Model>> model =
      fuserank::engine::Model::Load(path);
  if (!model.ok()) {
    std::fprintf(stderr,
                 "fuserank-decode-bench: %s (make the bench model with "
                 "bench/models/gen_bench_model.sh)\n",
                 std::string(model.status().message()).c_str());
    return 1;
  }
  fuserank::bench::BenchModel() = *model;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
