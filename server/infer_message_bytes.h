// What parts of a parsed ModelInferRequest hold, capacity included, read through protobuf's
// public API (KServeService sizes its pooled calls with them). Pure functions; thread-safe.
#ifndef FUSERANK_SERVER_INFER_MESSAGE_BYTES_H_
#define FUSERANK_SERVER_INFER_MESSAGE_BYTES_H_

#include <cstddef>
#include <string>

#include "inference/grpc_service.pb.h"

namespace fuserank::server {

// Keys, values and string parameters of one parameters map.
size_t ParameterBytes(
    const google::protobuf::Map<std::string, inference::InferParameter>& parameters);

// One input tensor: name, datatype, parameters, shape and every typed contents field.
size_t InputBytes(const inference::ModelInferRequest::InferInputTensor& input);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_INFER_MESSAGE_BYTES_H_
