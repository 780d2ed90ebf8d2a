// A cheap pass over the wire bytes of a fuserank.v1.RankRequest before it is parsed: it
// counts what parsing would build (candidates, features, ids) and checks the counts against
// the configured limits, so that an over-limit request is refused without ever being
// materialized (16 MB of empty candidates would parse into 8 million objects). Two passes:
// ScanTopLevel reads only the top-level fields (each candidate skipped by its length) to
// count candidates and find the model; ScanFeatures walks every feature of the request.
// Neither allocates, but for the model name. Messages match RequestDecoder's.
// A parse within ParseBoundsOf(limits) (rank_request_view.h) stands for ScanFeatures: bytes
// protobuf parses are never malformed to the scan, so a parse that stays within the bounds
// passes it (with shape->ids the view's ids), and one stopped at them fails it.
// Plain functions; thread-safe.
#ifndef FUSERANK_SERVER_REQUEST_SCAN_H_
#define FUSERANK_SERVER_REQUEST_SCAN_H_

#include <google/protobuf/io/zero_copy_stream.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "engine/config_defaults.h"
#include "server/rank_request_view.h"

namespace fuserank::server {

struct ScanLimits {
  int max_candidates = defaults::kMaxCandidates;          // server.max_candidates
  int max_ids_per_feature = defaults::kMaxIdsPerFeature;  // server.max_ids_per_feature
  int64_t max_ids = defaults::kMaxBatchIds;  // engine.max_batch_ids: user + item ids of one request
  // A valid request sends each of the model's tables at most once, so a feature list far
  // longer (by 16) than the model has tables of its side is refused before it is parsed.
  int user_tables = 0;
  int item_tables = 0;
  std::string model_name;  // for messages
};

// The scan's limits as bounds of ParseRankRequest (see above).
ParseBounds ParseBoundsOf(const ScanLimits& limits);

// What the scans found.
struct RequestShape {
  std::string model;  // RankRequest.model, as parsing would set it (the last one wins)
  int candidates = 0;
  int64_t ids = 0;  // user and item ids of the whole request (ScanFeatures)
};

// Counts the candidates and reads the model name. INVALID_ARGUMENT when the bytes are no
// RankRequest at the top level, or when they hold more than `max_candidates` candidates.
absl::Status ScanTopLevel(google::protobuf::io::ZeroCopyInputStream* input, int max_candidates,
                          RequestShape* shape);

// Walks every feature: INVALID_ARGUMENT (naming the field and the limit) for a feature list
// far longer than its side's tables, more ids in one feature than max_ids_per_feature, more ids
// in all than max_ids, or bytes that are not a RankRequest. Sets shape->ids.
absl::Status ScanFeatures(google::protobuf::io::ZeroCopyInputStream* input,
                          const ScanLimits& limits, RequestShape* shape);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_REQUEST_SCAN_H_
