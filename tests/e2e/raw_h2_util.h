// A bare HTTP/2 client over a plain TCP socket, for tests of clients that misbehave in ways
// gRPC's own client never does: it may advertise a stream window of 0 and never open it
// (the server can then write no answer). It acknowledges SETTINGS and PING (so the
// connection stays up) and counts the RST_STREAM frames it receives.
#ifndef FUSERANK_TESTS_E2E_RAW_H2_UTIL_H_
#define FUSERANK_TESTS_E2E_RAW_H2_UTIL_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace fuserank::testing {

class RawH2Connection {
 public:
  // Connects to 127.0.0.1:`port` and sends the preface with SETTINGS_INITIAL_WINDOW_SIZE
  // `stream_window`. ok() is false when the connection failed.
  RawH2Connection(int port, uint32_t stream_window);
  ~RawH2Connection();  // closes the socket and joins the reader

  bool ok() const { return fd_ >= 0; }
  // Opens stream `stream_id` (odd, increasing): HEADERS for POST `path` (application/grpc),
  // then one DATA frame with `message` as one uncompressed gRPC message, ending the stream.
  bool SendUnary(uint32_t stream_id, const std::string& path, const std::string& message);
  // RST_STREAM frames received so far.
  int resets() const { return resets_.load(); }

  RawH2Connection(const RawH2Connection&) = delete;
  RawH2Connection& operator=(const RawH2Connection&) = delete;

 private:
  bool SendFrame(uint8_t type, uint8_t flags, uint32_t stream_id, const std::string& payload);
  void Read();

  int fd_ = -1;
  std::mutex write_mu_;
  std::atomic<int> resets_{0};
  std::thread reader_;
};

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_RAW_H2_UTIL_H_
