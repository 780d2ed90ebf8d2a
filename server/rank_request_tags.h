// Tags, (field << 3) | wire type, of proto/fuserank/v1/ranker.proto's RankRequest,
// Candidate and Feature, for the parsers that read a RankRequest from its wire bytes
// (rank_request_view.cc, request_decoder_canonical.cc). Any other tag is an unknown
// field to protobuf, a known field number with another wire type too.
#ifndef FUSERANK_SERVER_RANK_REQUEST_TAGS_H_
#define FUSERANK_SERVER_RANK_REQUEST_TAGS_H_

#include <cstdint>

namespace fuserank::server::tags {

constexpr uint32_t kRequestId = 10;          // RankRequest.request_id, length-delimited
constexpr uint32_t kUserFeatures = 18;       // RankRequest.user_features
constexpr uint32_t kUserDensePacked = 26;    // RankRequest.user_dense, packed
constexpr uint32_t kUserDense = 29;          // RankRequest.user_dense, one fixed32
constexpr uint32_t kCandidates = 34;         // RankRequest.candidates
constexpr uint32_t kTopK = 40;               // RankRequest.top_k, varint
constexpr uint32_t kModel = 50;              // RankRequest.model
constexpr uint32_t kItemId = 8;              // Candidate.item_id, varint
constexpr uint32_t kCandidateFeatures = 18;  // Candidate.features
constexpr uint32_t kDensePacked = 26;        // Candidate.dense, packed
constexpr uint32_t kDense = 29;              // Candidate.dense, one fixed32
constexpr uint32_t kName = 10;               // Feature.name
constexpr uint32_t kIds = 16;                // Feature.ids, one varint
constexpr uint32_t kIdsPacked = 18;          // Feature.ids, packed
constexpr uint32_t kWeightsPacked = 26;      // Feature.weights, packed
constexpr uint32_t kWeights = 29;            // Feature.weights, one fixed32

}  // namespace fuserank::server::tags

#endif  // FUSERANK_SERVER_RANK_REQUEST_TAGS_H_
