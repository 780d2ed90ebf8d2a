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
#include "server/rank_request_fault.h"
#include "server/rank_request_view.h"
#include "server/request_scan.h"
#include "server/wire_reader.h"

namespace fuserank::server {

struct DecodeLimits {
  int max_candidates = defaults::kMaxCandidates;          // server.max_candidates
  int max_ids_per_feature = defaults::kMaxIdsPerFeature;  // server.max_ids_per_feature
  int64_t max_ids = defaults::kMaxBatchIds;  // engine.max_batch_ids: user + item ids of one request
};

// What AppendCanonical read of a request besides its bags, dense values and item ids.
struct CanonicalRequest {
  absl::string_view request_id;  // a view of the wire bytes
  uint32_t top_k = 0;            // as sent
  int candidates = 0;
  int64_t ids = 0;  // user and item ids
};

class RequestDecoder {
 public:
  // `served_name`: the name the model is served under, which messages name (a client
  // addresses it so); "" = the spec's own name.
  RequestDecoder(std::shared_ptr<const engine::Model> model, DecodeLimits limits,
                 std::string served_name = "");

  // Appends `request` (parsed by ParseRankRequest) as the next request of `batch`, and its
  // candidates' item ids to `item_ids` (when not null). An empty batch takes this
  // decoder's model; a batch of another model is an INTERNAL error. On any error the batch
  // and `item_ids` are left exactly as they were. No allocation once the batch's buffers
  // have grown.
  absl::Status AppendParsed(const RankRequestView& request, engine::Batch* batch,
                            std::vector<int64_t>* item_ids = nullptr) const;
  // The one-pass decode of the shape clients send, without the view: true when `wire`
  // holds only that shape's fields -- the top level's in any order (user_dense at most
  // once); a candidate's item_id, then its features, then its dense values, packed; a
  // feature's name, then its ids, then its weights, packed -- each feature list names a
  // leading run of the side's tables in the model's order (tables left out at the end get
  // empty bags) and nothing in the request is refused. It is then appended, with the batch and item
  // ids ParseRankRequest and AppendParsed give it. False for any other bytes, the batch and
  // `item_ids` left as they were: the caller takes that path, which reads every other
  // request and says what is wrong with a bad one. Always false for a model with
  // storage: redis tables.
  bool AppendCanonical(absl::string_view wire, engine::Batch* batch, std::vector<int64_t>* item_ids,
                       CanonicalRequest* read) const;
  // AppendCanonical, else the parse into the calling thread's view and AppendParsed;
  // bytes that do not parse are NotARankRequest(wire) (rank_request_fault.h).
  absl::Status AppendWire(absl::string_view wire, engine::Batch* batch,
                          std::vector<int64_t>* item_ids = nullptr) const;
  // The same for a message in hand (tests, tools): serialized, then appended as above.
  absl::Status Append(const v1::RankRequest& request, engine::Batch* batch) const;

  const std::shared_ptr<const engine::Model>& model() const { return model_; }
  const DecodeLimits& limits() const { return limits_; }
  // The model's name in messages: the served name given, else the spec's.
  const std::string& model_name() const { return scan_limits_.model_name; }
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

  // AppendCanonical's tables, per side in the model's order.
  struct CanonicalTable {
    absl::string_view name;
    int64_t rows = 0;
    engine::Oov oov = engine::Oov::kModulo;
  };
  bool CanonicalAppend(wire::Reader in, engine::Batch* batch, std::vector<int64_t>* item_ids,
                       CanonicalRequest* read) const;
  bool CanonicalCandidate(wire::Reader in, engine::Batch* batch, int64_t* ids,
                          std::vector<int64_t>* item_ids) const;
  bool CanonicalBag(wire::Reader in, const CanonicalTable& table, engine::BagSet* bags,
                    int64_t* ids) const;

  std::shared_ptr<const engine::Model> model_;
  DecodeLimits limits_;
  ScanLimits scan_limits_;
  ParseBounds parse_bounds_;
  absl::flat_hash_map<std::string, TableRef> tables_;
  // The model has storage: redis tables, so each id's raw key goes with the batch too.
  bool keyed_ = false;
  std::vector<CanonicalTable> canonical_user_;
  std::vector<CanonicalTable> canonical_item_;
  bool canonical_ = false;  // AppendCanonical may read requests for this model
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_REQUEST_DECODER_H_
