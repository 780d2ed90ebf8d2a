// The JSON header of a safetensors file, read by a small parser that accepts exactly the
// shape the format defines (an object of tensor objects plus an optional "__metadata__"
// object of strings), so there is no JSON dependency and every malformed header gets a
// message with the byte position. Internal to engine/ (safetensors.cc, model_checks.cc
// through ParseSafetensorsHeader). Pure functions; thread-safe.
#ifndef FUSERANK_ENGINE_SAFETENSORS_HEADER_H_
#define FUSERANK_ENGINE_SAFETENSORS_HEADER_H_

#include <cstddef>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/safetensors.h"

namespace fuserank::engine {

// Parses `json` into `tensors` (and the "__metadata__" strings into `metadata`, when not
// null). INVALID_ARGUMENT naming the byte position, or past `max_tensors` tensors or
// kMaxSafetensorsDims dimensions.
absl::Status ParseHeaderJson(absl::string_view json, size_t max_tensors,
                             std::map<std::string, SafetensorsEntry>* tensors,
                             std::map<std::string, std::string>* metadata);

// Text of the header (a name, a dtype) as messages quote it: escaped, cut to 128 bytes.
std::string QuoteHeaderText(absl::string_view text);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_SAFETENSORS_HEADER_H_
