#include "server/wire_bytes.h"

#include <grpcpp/support/proto_buffer_reader.h>

namespace fuserank::server {
namespace {

// The copy buffer a thread keeps between messages (larger ones are freed after use).
constexpr size_t kKeptCopyBytes = 1 << 20;

std::string& ThreadCopy() {
  thread_local std::string copy;
  return copy;
}

}  // namespace

WireBytes::WireBytes(const grpc::ByteBuffer& message) {
  if (message.TrySingleSlice(&slice_).ok()) {
    view_ = absl::string_view(reinterpret_cast<const char*>(slice_.begin()), slice_.size());
    return;
  }
  copy_ = &ThreadCopy();
  copy_->clear();
  copy_->reserve(message.Length());
  grpc::ByteBuffer shared(message);  // shares the slices; the reader consumes this copy
  grpc::ProtoBufferReader reader(&shared);
  const void* data = nullptr;
  int size = 0;
  while (reader.Next(&data, &size)) copy_->append(static_cast<const char*>(data), size);
  view_ = *copy_;
}

WireBytes::~WireBytes() {
  if (copy_ != nullptr && copy_->capacity() > kKeptCopyBytes) std::string().swap(*copy_);
}

}  // namespace fuserank::server
