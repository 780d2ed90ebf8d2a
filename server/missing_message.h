// A call gRPC handed over without its message, most often because the client cancelled
// first (gRPC may report that cancel only after the handler has run). It is answered at
// once but counted (metrics, access log) only when gRPC reports the call done: as
// CANCELLED if it was cancelled by then, else as the INVALID_ARGUMENT it was answered.
// Shared by the Rank and ModelInfer services; owned by one call, used by its threads in
// turn (the handler, Finish, OnDone).
#ifndef FUSERANK_SERVER_MISSING_MESSAGE_H_
#define FUSERANK_SERVER_MISSING_MESSAGE_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fuserank::server {

class MissingMessage {
 public:
  // `message_type`: the request message's full name, for the INVALID_ARGUMENT text.
  explicit MissingMessage(absl::string_view message_type)
      : no_message_(absl::StrCat("the call carried no ", message_type, " message")) {}

  void Reset() {
    pending_ = false;
    seconds_ = 0;
  }
  // The answer to a call without its message; counting it waits for Done() unless it
  // was cancelled already.
  absl::Status Answer(bool cancelled_now) {
    if (cancelled_now) return absl::CancelledError(kCancelledFirst);
    pending_ = true;
    return absl::InvalidArgumentError(no_message_);
  }
  // At Finish, `seconds` after the call began: true when the call is counted now.
  bool CountAtFinish(double seconds) {
    if (pending_) seconds_ = seconds;
    return !pending_;
  }
  // At Done: whether a count is left to make, and if so its code, message and seconds.
  bool pending() const { return pending_; }
  grpc::StatusCode code(bool cancelled) const {
    return cancelled ? grpc::StatusCode::CANCELLED : grpc::StatusCode::INVALID_ARGUMENT;
  }
  const std::string& message(bool cancelled) const {
    static const std::string* const kCancelled = new std::string(kCancelledFirst);
    return cancelled ? *kCancelled : no_message_;
  }
  double seconds() const { return seconds_; }

 private:
  static constexpr char kCancelledFirst[] = "the call was cancelled before its request arrived";

  const std::string no_message_;
  bool pending_ = false;
  double seconds_ = 0;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_MISSING_MESSAGE_H_
