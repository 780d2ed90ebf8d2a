// The Rank decode as it stood before the direct wire parse (commit 01c0e58): the request
// parsed by protobuf into a per-thread arena, then validated and appended to the batch
// from the message. Kept only as the baseline that bench/decode/decode_bench.cc measures
// the server's decode against, side by side; the server no longer uses it.
// Immutable after construction; Append() is thread-safe (one Batch per caller).
#ifndef FUSERANK_BENCH_DECODE_BASELINE_RANK_DECODER_H_
#define FUSERANK_BENCH_DECODE_BASELINE_RANK_DECODER_H_

#include <google/protobuf/arena.h>
#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "engine/batch.h"
#include "engine/model.h"
#include "fuserank/v1/ranker.pb.h"
#include "server/request_decoder.h"

namespace fuserank::bench {

class BaselineRankDecoder {
 public:
  BaselineRankDecoder(std::shared_ptr<const engine::Model> model, server::DecodeLimits limits);

  // Appends `request` as the next request of `batch`. An empty batch takes this decoder's
  // model; a batch of another model is an INTERNAL error. On any error the batch is left
  // exactly as it was. No allocation once the batch's buffers have grown.
  absl::Status Append(const v1::RankRequest& request, engine::Batch* batch) const;

  const std::shared_ptr<const engine::Model>& model() const { return model_; }

 private:
  struct TableRef {
    int table = 0;  // index into Model::tables()
    int slot = 0;   // position in Model::user_tables() or item_tables()
    engine::Side side = engine::Side::kItem;
  };
  using Features = google::protobuf::RepeatedPtrField<v1::Feature>;

  absl::Status AppendImpl(const v1::RankRequest& request, engine::Batch* batch) const;
  // Appends one bag per table of `side` (empty bags for tables not sent). `candidate` is
  // the candidate's index in the request, or -1 for user_features (for messages only).
  absl::Status AppendBags(const Features& features, engine::Side side, int candidate,
                          engine::BagSet* bags) const;
  absl::Status CheckFeature(const Features& features, int k, engine::Side side, int candidate,
                            int* slot_feature) const;
  absl::Status AppendBag(const v1::Feature& feature, const engine::EmbeddingTable& table, int k,
                         int candidate, engine::BagSet* bags) const;
  std::string TableNames(engine::Side side) const;

  std::shared_ptr<const engine::Model> model_;
  server::DecodeLimits limits_;
  absl::flat_hash_map<std::string, TableRef> tables_;
};

// The old RankerService::ParseAndDecode: `request` parsed into `arena` (reset after), then
// appended to `batch`; the candidates' item ids go to `item_ids` on success.
absl::Status BaselineParseAndAppend(const grpc::ByteBuffer& request,
                                    const BaselineRankDecoder& decoder,
                                    google::protobuf::Arena* arena, engine::Batch* batch,
                                    std::vector<int64_t>* item_ids);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_DECODE_BASELINE_RANK_DECODER_H_
