// Validates a RankRequest against one model and appends it to an engine::Batch: ids mapped
// to rows (SPEC section 2 step 1), bags ordered by the model's user/item tables, dense
// values copied. The request is read from its wire bytes (rank_request_view.h), never
// built as a protobuf message. Every bad input of SPEC section 3 becomes INVALID_ARGUMENT
// with a message that names the field, the value and the fix.
// Immutable after construction; Append() is thread-safe (one Batch per caller).
#ifndef FUSERANK_SERVER_REQUEST_DECODER_H_
#define FUSERANK_SERVER_REQUEST_DECODER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/batch.h"
#include "engine/config_defaults.h"
#include "engine/model.h"
#include "fuserank/v1/ranker.pb.h"
#include "server/rank_request_view.h"
#include "server/request_scan.h"

namespace fuserank::server {

struct DecodeLimits {
  int max_candidates = defaults::kMaxCandidates;          // server.max_candidates
  int max_ids_per_feature = defaults::kMaxIdsPerFeature;  // server.max_ids_per_feature
  int64_t max_ids = defaults::kMaxBatchIds;  // engine.max_batch_ids: user + item ids of one request
};

// What a request gets whose bytes protobuf would not parse as a RankRequest:
// INVALID_ARGUMENT "the request is not a valid fuserank.v1.RankRequest: ".
absl::Status NotARankRequest();

class RequestDecoder {
 public:
  RequestDecoder(std::shared_ptr<const engine::Model> model, DecodeLimits limits);

  // Appends `request` (parsed by ParseRankRequest) as the next request of `batch`, and its
  // candidates' item ids to `item_ids` (when not null). An empty batch takes this
  // decoder's model; a batch of another model is an INTERNAL error. On any error the batch
  // and `item_ids` are left exactly as they were. No allocation once the batch's buffers
  // have grown.
  absl::Status AppendParsed(const RankRequestView& request, engine::Batch* batch,
                            std::vector<int64_t>* item_ids = nullptr) const;
  // Parses `wire` (with no bounds) into the calling thread's view, then appends it as
  // above; bytes that do not parse are NotARankRequest().
  absl::Status AppendWire(absl::string_view wire, engine::Batch* batch,
                          std::vector<int64_t>* item_ids = nullptr) const;
  // The same for a message in hand (tests, tools): serialized, then appended as above.
  absl::Status Append(const v1::RankRequest& request, engine::Batch* batch) const;

  const std::shared_ptr<const engine::Model>& model() const { return model_; }
  const DecodeLimits& limits() const { return limits_; }
  // The same limits, and the model's table counts, for the wire scan before parsing, and
  // as the bounds of the parse (ParseBoundsOf).
  const ScanLimits& scan_limits() const { return scan_limits_; }
  const ParseBounds& parse_bounds() const { return parse_bounds_; }

 private:
  struct TableRef {
    int table = 0;  // index into Model::tables()
    int slot = 0;   // position in Model::user_tables() or item_tables()
    engine::Side side = engine::Side::kItem;
  };
  using Features = absl::Span<const FeatureView>;

  absl::Status AppendImpl(const RankRequestView& request, engine::Batch* batch) const;
  // Appends one bag per table of `side` (empty bags for tables not sent). `candidate` is
  // the candidate's index in the request, or -1 for user_features (for messages only).
  absl::Status AppendBags(const RankRequestView& request, Features features, engine::Side side,
                          int candidate, engine::BagSet* bags) const;
  absl::Status CheckFeature(Features features, int k, engine::Side side, int candidate,
                            int* slot_feature) const;
  absl::Status AppendBag(const RankRequestView& request, const FeatureView& feature,
                         const engine::EmbeddingTable& table, int k, int candidate,
                         engine::BagSet* bags) const;
  std::string TableNames(engine::Side side) const;

  std::shared_ptr<const engine::Model> model_;
  DecodeLimits limits_;
  ScanLimits scan_limits_;
  ParseBounds parse_bounds_;
  absl::flat_hash_map<std::string, TableRef> tables_;
  // The model has storage: redis tables, so each id's raw key goes with the batch too.
  bool keyed_ = false;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_REQUEST_DECODER_H_
