#include "server/infer_message_bytes.h"

namespace fuserank::server {

size_t ParameterBytes(
    const google::protobuf::Map<std::string, inference::InferParameter>& parameters) {
  size_t bytes = 0;
  for (const auto& [key, value] : parameters) {
    bytes += key.capacity() + sizeof(value) + value.string_param().capacity();
  }
  return bytes;
}

size_t InputBytes(const inference::ModelInferRequest::InferInputTensor& input) {
  const inference::InferTensorContents& c = input.contents();
  return input.name().capacity() + input.datatype().capacity() +
         ParameterBytes(input.parameters()) +
         sizeof(int64_t) * static_cast<size_t>(input.shape().Capacity()) +
         static_cast<size_t>(c.bool_contents().Capacity()) +
         4 * static_cast<size_t>(c.int_contents().Capacity() + c.uint_contents().Capacity() +
                                 c.fp32_contents().Capacity()) +
         8 * static_cast<size_t>(c.int64_contents().Capacity() + c.uint64_contents().Capacity() +
                                 c.fp64_contents().Capacity());
}

}  // namespace fuserank::server
