// A fuserank.v1.RankRequest read straight from its wire bytes, without building the
// protobuf message: strings are views of the bytes, and every id, weight and dense value
// lies in one flat array of its kind, each feature and candidate being a range of them.
// ParseRankRequest accepts exactly the bytes protobuf's parser (3.21) accepts and reads
// them as it does: the last value of a scalar wins, packed and unpacked repeated values
// concatenate, unknown fields and wrong wire types are skipped as unknown fields, groups
// nest at most as deep as protobuf's recursion limit, strings must be valid UTF-8.
// A view is reused from request to request (its arrays keep their capacity); it is valid
// while the bytes it was parsed from are. Not thread-safe; ParseRankRequest is.
#ifndef FUSERANK_SERVER_RANK_REQUEST_VIEW_H_
#define FUSERANK_SERVER_RANK_REQUEST_VIEW_H_

#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fuserank::server {

struct FeatureView {
  absl::string_view name;
  uint32_t ids_begin = 0;  // [ids_begin, ids_end) of RankRequestView::ids
  uint32_t ids_end = 0;
  uint32_t weights_begin = 0;  // [weights_begin, weights_end) of RankRequestView::weights
  uint32_t weights_end = 0;

  int ids_size() const { return static_cast<int>(ids_end - ids_begin); }
  int weights_size() const { return static_cast<int>(weights_end - weights_begin); }
};

struct CandidateView {
  int64_t item_id = 0;
  uint32_t features_begin = 0;  // [features_begin, features_end) of item_features
  uint32_t features_end = 0;
  uint32_t dense_begin = 0;  // [dense_begin, dense_end) of item_dense
  uint32_t dense_end = 0;
};

struct RankRequestView {
  absl::string_view request_id;
  absl::string_view model;
  uint32_t top_k = 0;
  std::vector<float> user_dense;
  std::vector<FeatureView> user_features;
  std::vector<CandidateView> candidates;
  std::vector<FeatureView> item_features;  // of every candidate, in request order
  std::vector<float> item_dense;           // likewise
  std::vector<int64_t> ids;                // of every feature, user and item
  std::vector<float> weights;              // likewise

  void Clear();
  // Bytes the arrays hold on to, for a caller that bounds what it keeps between requests.
  size_t CapacityBytes() const;

  absl::Span<const FeatureView> features(const CandidateView& c) const {
    return absl::MakeConstSpan(item_features)
        .subspan(c.features_begin, c.features_end - c.features_begin);
  }
  absl::Span<const float> dense(const CandidateView& c) const {
    return absl::MakeConstSpan(item_dense).subspan(c.dense_begin, c.dense_end - c.dense_begin);
  }
  absl::Span<const int64_t> feature_ids(const FeatureView& f) const {
    return absl::MakeConstSpan(ids).subspan(f.ids_begin, f.ids_end - f.ids_begin);
  }
  absl::Span<const float> feature_weights(const FeatureView& f) const {
    return absl::MakeConstSpan(weights).subspan(f.weights_begin, f.weights_end - f.weights_begin);
  }
};

// Counts past which ParseRankRequest stops instead of reading on (the wire scan's limits,
// request_scan.h), so that a request the scan refuses is never read in full: the view
// then holds at most this much.
struct ParseBounds {
  int user_features = INT_MAX;  // features in user_features
  int item_features = INT_MAX;  // features of one candidate
  int ids_per_feature = INT_MAX;
  int64_t ids = INT64_MAX;  // user and item ids in all
};

// Clears `view` and reads `wire` into it. False when protobuf would refuse to parse `wire`
// as a RankRequest, or when the request holds more than `bounds` allow (the view then
// holds part of it).
bool ParseRankRequest(absl::string_view wire, const ParseBounds& bounds, RankRequestView* view);

// The calling thread's view, borrowed for one request: no allocation once it has grown,
// and arrays past 1 MB in all are freed when the borrow ends. One borrow per thread at a
// time.
class ThreadRankRequestView {
 public:
  ThreadRankRequestView();
  ~ThreadRankRequestView();
  ThreadRankRequestView(const ThreadRankRequestView&) = delete;
  ThreadRankRequestView& operator=(const ThreadRankRequestView&) = delete;

  RankRequestView& operator*() const { return *view_; }
  RankRequestView* operator->() const { return view_; }

 private:
  RankRequestView* view_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_RANK_REQUEST_VIEW_H_
