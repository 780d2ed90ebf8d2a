// The outputs of a ModelInfer answer (SPEC section 6): which ones a request asks for, and
// the response message that carries them, best first. Pure functions; thread-safe.
#ifndef FUSERANK_SERVER_INFER_RESPONSE_H_
#define FUSERANK_SERVER_INFER_RESPONSE_H_

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/batch.h"
#include "inference/grpc_service.pb.h"
#include "server/infer_tensor_view.h"
#include "server/kserve_tensors.h"

namespace fuserank::server {

// The outputs one request asked for, in its order (all three, best-first order, when it
// names none).
struct RequestedOutputs {
  std::array<Output, kNumOutputs> outputs{};
  int count = 0;
};

// `requested` is the request's `outputs` field; `model` names the model in messages.
// INVALID_ARGUMENT for a name that is no output, one asked twice, or one with the
// parameter `classification` (Triton's classification extension, which fuserank does not
// serve); other output parameters are ignored.
absl::Status SelectOutputs(const google::protobuf::RepeatedPtrField<
                               inference::ModelInferRequest::InferRequestedOutputTensor>& requested,
                           absl::string_view model, RequestedOutputs* selected);

// What the answer says besides its tensors.
struct ResponseHeader {
  absl::string_view model_name;
  absl::string_view model_version;
  absl::string_view id;  // the request's id, echoed
};

// Fills `response` (cleared first, its capacity kept) with the `selected` outputs of
// `items` for a request of `item_ids.size()` candidates. INTERNAL when an item's index is
// no candidate of the request.
absl::Status FillInferResponse(const ResponseHeader& header, const RequestedOutputs& selected,
                               absl::Span<const engine::ScoredIndex> items,
                               const Column<int64_t>& item_ids,
                               inference::ModelInferResponse* response);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_INFER_RESPONSE_H_
