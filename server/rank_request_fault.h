// Why protobuf would refuse a RankRequest's bytes, for the INVALID_ARGUMENT a client gets:
// the first field, by its path, that does not parse and what is wrong with it
// ("candidates[3].features[1].name is not valid UTF-8"). Runs only after the parse
// (rank_request_view.h) has refused the bytes, so it walks them again at leisure, with the
// same wire rules (wire_reader.h). Pure function; thread-safe.
#ifndef FUSERANK_SERVER_RANK_REQUEST_FAULT_H_
#define FUSERANK_SERVER_RANK_REQUEST_FAULT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fuserank::server {

// The first fault of `wire` as a RankRequest, or "" when it has none (it parses).
std::string DescribeRankRequestFault(absl::string_view wire);

// INVALID_ARGUMENT "the request is not a valid fuserank.v1.RankRequest: <fault>" for bytes
// the parse refused.
absl::Status NotARankRequest(absl::string_view wire);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_RANK_REQUEST_FAULT_H_
