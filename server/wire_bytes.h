// The bytes of a received gRPC message as one contiguous view, for parsers that read them
// in place (rank_request_view.h): the message's own slice when gRPC holds it in one, else
// a copy in a buffer of the calling thread, which keeps at most 1 MB of it between
// messages. A WireBytes lives on the stack of one call; its view is valid while it lives.
// Not thread-safe; any number of threads may each hold their own.
#ifndef FUSERANK_SERVER_WIRE_BYTES_H_
#define FUSERANK_SERVER_WIRE_BYTES_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <string>

#include "absl/strings/string_view.h"

namespace fuserank::server {

class WireBytes {
 public:
  // REQUIRES: `message` is valid and outlives this; one WireBytes per thread at a time.
  explicit WireBytes(const grpc::ByteBuffer& message);
  ~WireBytes();
  WireBytes(const WireBytes&) = delete;
  WireBytes& operator=(const WireBytes&) = delete;

  absl::string_view view() const { return view_; }

 private:
  grpc::Slice slice_;            // the single slice, when the message is one
  std::string* copy_ = nullptr;  // the thread's buffer, when it is not
  absl::string_view view_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_WIRE_BYTES_H_
