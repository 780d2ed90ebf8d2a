// A scripted Redis node on 127.0.0.1 for tests of what a broken or hostile node can send:
// every command a connection sends is read (RESP arrays of bulk strings) and handed, with
// the connection's socket, to the test's `answer`, which writes whatever it likes (a
// reply, a reply dripped a byte at a time, an endless stream) and may ask for the
// connection to be closed. Test helper: the node's threads end when it is destroyed.
#ifndef FUSERANK_TESTS_ENGINE_REMOTE_FAKE_NODE_UTIL_H_
#define FUSERANK_TESTS_ENGINE_REMOTE_FAKE_NODE_UTIL_H_

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace fuserank::testing {

class FakeNode {
 public:
  // Writes the answer to `command` on `fd` (SendAll); false closes the connection.
  using Answer = std::function<bool(int fd, const std::vector<std::string>& command)>;

  explicit FakeNode(Answer answer);
  ~FakeNode();

  int port() const { return port_; }
  std::string address() const;  // "127.0.0.1:<port>"
  // True once the node is being destroyed: an answer that streams forever stops.
  bool stopping() const { return stopping_.load(); }
  // Connections the node has closed after an answer said so.
  int closed() const { return closed_.load(); }

  // Writes all of `bytes` (false when the peer went away).
  static bool SendAll(int fd, std::string_view bytes);
  // A CLUSTER SLOTS reply giving every slot to host:port.
  static std::string AllSlotsTo(std::string_view host, int port);

  FakeNode(const FakeNode&) = delete;
  FakeNode& operator=(const FakeNode&) = delete;

 private:
  void AcceptLoop();
  void Serve(int fd);

  Answer answer_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> closed_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> fds_;  // open connections (shut down on destruction)
  std::vector<std::thread> servers_;
};

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_ENGINE_REMOTE_FAKE_NODE_UTIL_H_
