// A cheap pass over the wire bytes of an inference.ModelInferRequest before it is parsed.
// protobuf builds an object for every repeated message, map entry, unknown field and typed
// element it reads, so a request within server.max_request_bytes could parse into far more
// memory than it has bytes: 16 MB of empty `inputs` make 8 million tensors (about 1 GB),
// 16 MB of one-byte int64 varints 128 MB. The scan counts what parsing would build, so
// that what no valid request holds is refused without being materialized. Two passes, as
// Rank's (request_scan.h): ScanInferTop reads the top level (the model to look up, and
// counts), ScanInferInputs walks the input tensors once the model is known and hands each
// to a check that knows what the model's inputs may hold (TensorDecoder::CheckScanned).
// Bytes read as protobuf 3.21 reads them (wire_reader.h); nothing is allocated.
// Plain functions; thread-safe.
#ifndef FUSERANK_SERVER_INFER_REQUEST_SCAN_H_
#define FUSERANK_SERVER_INFER_REQUEST_SCAN_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fuserank::server {

// Bounds no valid request comes near, the same for every model.
inline constexpr int kMaxInferParameters = 64;     // entries of one parameters map
inline constexpr int kMaxInferUnknownFields = 64;  // fields the protocol does not define, in all
inline constexpr int kMaxInferShapeDims = 8;       // every fuserank input has 1 or 2

// What ScanInferTop found.
struct InferRequestTop {
  // As parsing would set them (the last one wins); views into the scanned bytes.
  absl::string_view model_name;
  absl::string_view model_version;
  int inputs = 0;
  int outputs = 0;
  int raw_input_contents = 0;
  int unknown_fields = 0;  // so far: ScanInferInputs adds those inside the inputs
  int64_t values = 0;      // numeric values of every input's typed contents (ScanInferInputs)
};

// Reads the top level, the requested outputs and the parameters. INVALID_ARGUMENT for bytes
// that are no ModelInferRequest there, for a group (no field of the protocol is one), for
// more than kMaxInferParameters entries in a parameters map and for more than
// kMaxInferUnknownFields unknown fields.
absl::Status ScanInferTop(absl::string_view wire, InferRequestTop* top);

// One input tensor as the scan saw it.
struct ScannedInput {
  int index = 0;             // its position in `inputs`
  absl::string_view name;    // the last name field, as parsing keeps it; a view of the bytes
  int64_t elements = 0;      // numeric values in its typed contents, every field together
  int64_t bytes_values = 0;  // entries of contents.bytes_contents (a string each)
};

// Walks every input tensor and calls `check` on each, returning its first error.
// INVALID_ARGUMENT, before any check, for an input whose bytes are malformed, whose shape
// has more than kMaxInferShapeDims dimensions, whose parameters map has more than
// kMaxInferParameters entries, or that brings the unknown fields past the bound.
// REQUIRES: ScanInferTop(wire, top) returned OK.
absl::Status ScanInferInputs(absl::string_view wire, InferRequestTop* top,
                             absl::FunctionRef<absl::Status(const ScannedInput&)> check);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_INFER_REQUEST_SCAN_H_
