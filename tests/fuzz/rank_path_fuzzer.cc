// libFuzzer target: the whole request path of RankerService on any bytes, minus gRPC. The
// wire scan (request_scan.h), the parse, the decode (request_decoder.h), a merge with other
// requests under the batcher's per-batch budgets (engine.max_batch_candidates and
// engine.max_batch_ids, as Batcher::FormBatch merges) and a CPU backend run. Every input
// ends in finite scores in [0, 1], best first, one top-K per request, or in a clean
// INVALID_ARGUMENT; the scan refuses nothing that parses and decodes, and passes nothing
// the parser refuses as malformed; a decoded request passes ValidateBatch (the engine's
// check where it enters); a merged batch never fails, and the other requests in
// it score bit for bit as they do alone.
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/backend.h"
#include "engine/backend_factory.h"
#include "engine/batch.h"
#include "engine/batch_validation.h"
#include "fuserank/v1/ranker.pb.h"
#include "server/request_decoder.h"
#include "server/request_scan.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_model.h"
#include "tests/fuzz/fuzz_verdict.h"

namespace fuserank::fuzz {
namespace {

// Small limits and budgets so that short inputs reach them.
constexpr int kMaxCandidates = 16;
constexpr int kMaxIdsPerFeature = 8;
constexpr int64_t kMaxBatchIds = 40;
constexpr int kMaxBatchCandidates = 24;

// The model of fuzz_model.h (the seeds use its names).
struct Fixture {
  Fixture() {
    model = FuzzModel();
    server::DecodeLimits limits;
    limits.max_candidates = kMaxCandidates;
    limits.max_ids_per_feature = kMaxIdsPerFeature;
    limits.max_ids = kMaxBatchIds;
    decoder = std::make_unique<server::RequestDecoder>(model, limits);
    engine::BackendOptions options;
    options.workers = 1;
    options.max_batch_candidates = kMaxBatchCandidates;
    auto cpu = engine::CreateBackend(model, engine::DeviceChoice::kCpu, options);
    FUZZ_CHECK(cpu.ok(), cpu.status().ToString());
    backend = std::move(*cpu);
    // The other request of every merged batch: valid, three candidates.
    v1::RankRequest other;
    other.add_user_dense(0.25f);
    other.add_user_dense(-1.5f);
    v1::Feature* f = other.add_user_features();
    f->set_name("user_0");
    f->add_ids(3);
    f->add_ids(77);
    for (int c = 0; c < 3; ++c) {
      v1::Candidate* candidate = other.add_candidates();
      v1::Feature* item = candidate->add_features();
      item->set_name("item_1");
      item->add_ids(c);
      for (float d : {1.0f, 2.0f, -3.0f}) candidate->add_dense(d * static_cast<float>(c + 1));
    }
    other.set_top_k(2);
    FUZZ_CHECK(decoder->Append(other, &other_batch).ok(), "the fixed request must decode");
    Run(other_batch, &other_alone);
  }

  void Run(const engine::Batch& batch, engine::BatchResult* result) const {
    result->Clear();
    const absl::Status status = backend->Run(0, batch, result);
    FUZZ_CHECK(status.ok(), absl::StrCat("a batch of valid requests failed: ", status.ToString()));
  }

  std::shared_ptr<const engine::Model> model;
  std::unique_ptr<server::RequestDecoder> decoder;
  std::unique_ptr<engine::Backend> backend;
  engine::Batch other_batch;
  engine::BatchResult other_alone;
};

const Fixture& GetFixture() {
  static const Fixture* fixture = new Fixture();
  return *fixture;
}

// Scans like RankerService::Start: the top level, then every feature.
absl::Status Scan(const uint8_t* data, size_t size, const server::ScanLimits& limits) {
  server::RequestShape shape;
  google::protobuf::io::ArrayInputStream top(data, static_cast<int>(size));
  absl::Status status = server::ScanTopLevel(&top, limits.max_candidates, &shape);
  if (!status.ok()) return status;
  google::protobuf::io::ArrayInputStream deep(data, static_cast<int>(size));
  return server::ScanFeatures(&deep, limits, &shape);
}

// Request r's results: one top-K of min(top_k, count) items, best first (ties: lower
// index), every score finite in [0, 1], every index a candidate of r.
void CheckResults(const engine::Batch& batch, const engine::BatchResult& result) {
  const int requests = batch.num_requests();
  FUZZ_CHECK(result.result_begin.size() == static_cast<size_t>(requests) + 1,
             "not one result range per request");
  for (int r = 0; r < requests; ++r) {
    const uint32_t count = batch.candidate_begin[r + 1] - batch.candidate_begin[r];
    const uint32_t begin = result.result_begin[r];
    const uint32_t end = result.result_begin[r + 1];
    FUZZ_CHECK(end >= begin && end <= result.items.size(), "result ranges out of order");
    FUZZ_CHECK(end - begin == std::min(batch.top_k[r], count),
               absl::StrCat("request ", r, ": ", end - begin, " items for top_k ", batch.top_k[r],
                            " of ", count));
    for (uint32_t i = begin; i < end; ++i) {
      const engine::ScoredIndex& item = result.items[i];
      FUZZ_CHECK(std::isfinite(item.score) && item.score >= 0.0f && item.score <= 1.0f,
                 absl::StrCat("request ", r, ": score ", item.score));
      FUZZ_CHECK(item.index < count, absl::StrCat("request ", r, ": index ", item.index));
      if (i > begin) {
        const engine::ScoredIndex& prev = result.items[i - 1];
        FUZZ_CHECK(prev.score > item.score || (prev.score == item.score && prev.index < item.index),
                   absl::StrCat("request ", r, ": items out of order at ", i - begin));
      }
    }
  }
}

// The results of request `r` of `merged` are exactly those of `alone`'s only request.
void CheckSameAsAlone(const engine::BatchResult& merged, int r, const engine::BatchResult& alone) {
  const uint32_t begin = merged.result_begin[r];
  const uint32_t size = merged.result_begin[r + 1] - begin;
  FUZZ_CHECK(size == alone.items.size(), "merging changed another request's item count");
  for (uint32_t i = 0; i < size; ++i) {
    FUZZ_CHECK(merged.items[begin + i].index == alone.items[i].index &&
                   merged.items[begin + i].score == alone.items[i].score,
               absl::StrCat("merging changed another request's item ", i));
  }
}

size_t Ids(const engine::Batch& batch) { return batch.user.rows.size() + batch.item.rows.size(); }

// [other, request, other] within the per-batch budgets, as the batcher merges; a request
// that does not fit beside the other runs alone.
void MergeAndRun(const Fixture& f, const engine::Batch& request) {
  engine::Batch merged;
  merged.Append(f.other_batch);
  const bool fits = merged.num_candidates() + request.num_candidates() <= kMaxBatchCandidates &&
                    static_cast<int64_t>(Ids(merged) + Ids(request)) <= kMaxBatchIds;
  engine::BatchResult result;
  if (!fits) {
    f.Run(request, &result);
    CheckResults(request, result);
    return;
  }
  merged.Append(request);
  const int position = merged.num_requests() - 1;
  if (merged.num_candidates() + f.other_batch.num_candidates() <= kMaxBatchCandidates &&
      static_cast<int64_t>(Ids(merged) + Ids(f.other_batch)) <= kMaxBatchIds) {
    merged.Append(f.other_batch);
  }
  f.Run(merged, &result);
  CheckResults(merged, result);
  for (int r = 0; r < merged.num_requests(); ++r) {
    if (r != position) CheckSameAsAlone(result, r, f.other_alone);
  }
}

}  // namespace
}  // namespace fuserank::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fuserank;
  const fuzz::Fixture& f = fuzz::GetFixture();
  const absl::Status scanned = fuzz::Scan(data, size, f.decoder->scan_limits());
  v1::RankRequest request;
  const bool parsed = request.ParseFromArray(data, static_cast<int>(size));
  if (!scanned.ok()) {
    FUZZ_CHECK(scanned.code() == absl::StatusCode::kInvalidArgument, scanned.ToString());
    if (absl::StrContains(scanned.message(), "not a valid fuserank.v1.RankRequest")) {
      FUZZ_CHECK(!parsed, absl::StrCat("the scan refused bytes that parse: ", scanned.message()));
    }
  }
  if (!parsed) {
    fuzz::FuzzVerdict(false, scanned.ok() ? "not a serialized RankRequest" : scanned.message());
    return 0;
  }
  engine::Batch batch;
  const absl::Status decoded = f.decoder->Append(request, &batch);
  if (!scanned.ok()) {
    // What the scan refuses, the decoder would have refused after building it.
    FUZZ_CHECK(!decoded.ok(),
               absl::StrCat("the scan refused a request the decoder takes: ", scanned.message()));
    fuzz::FuzzVerdict(false, scanned.message());
    return 0;
  }
  if (!decoded.ok()) {
    FUZZ_CHECK(decoded.code() == absl::StatusCode::kInvalidArgument, decoded.ToString());
    fuzz::FuzzVerdict(false, decoded.message());
    return 0;
  }
  fuzz::FuzzVerdict(true);
  // What the Batcher checks where the request enters the engine; the backend trusts it.
  const absl::Status valid = engine::ValidateBatch(batch);
  FUZZ_CHECK(valid.ok(),
             absl::StrCat("a decoded request is not a valid batch: ", valid.ToString()));
  if (batch.num_candidates() > 0) fuzz::MergeAndRun(f, batch);
  return 0;
}
