#include "tests/engine/remote/fake_node_util.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>

#include "absl/strings/str_cat.h"

namespace fuserank::testing {
namespace {

// Takes one complete command (an array of bulk strings) off the front of `buffer`.
bool TakeCommand(std::string* buffer, std::vector<std::string>* command) {
  command->clear();
  size_t pos = 0;
  auto number = [&](char type, long* n) {
    if (pos >= buffer->size() || (*buffer)[pos] != type) return false;
    const size_t crlf = buffer->find("\r\n", pos);
    if (crlf == std::string::npos) return false;
    std::from_chars(buffer->data() + pos + 1, buffer->data() + crlf, *n);
    pos = crlf + 2;
    return true;
  };
  long count = 0;
  if (!number('*', &count)) return false;
  for (long i = 0; i < count; ++i) {
    long length = 0;
    if (!number('$', &length) || buffer->size() < pos + length + 2) return false;
    command->push_back(buffer->substr(pos, length));
    pos += length + 2;
  }
  buffer->erase(0, pos);
  return true;
}

}  // namespace

FakeNode::FakeNode(Answer answer) : answer_(std::move(answer)) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length);
  listen(listen_fd_, 64);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FakeNode::~FakeNode() {
  stopping_ = true;
  shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  close(listen_fd_);
  std::vector<std::thread> servers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const int fd : fds_) shutdown(fd, SHUT_RDWR);
    servers.swap(servers_);
  }
  for (std::thread& server : servers) server.join();
}

std::string FakeNode::address() const { return absl::StrCat("127.0.0.1:", port_); }

bool FakeNode::SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(sent));
  }
  return true;
}

std::string FakeNode::AllSlotsTo(std::string_view host, int port) {
  return absl::StrCat("*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$", host.size(), "\r\n", std::string(host),
                      "\r\n:", port, "\r\n");
}

void FakeNode::AcceptLoop() {
  for (;;) {
    const int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      close(fd);
      return;
    }
    fds_.push_back(fd);
    servers_.emplace_back([this, fd] { Serve(fd); });
  }
}

void FakeNode::Serve(int fd) {
  std::string buffer;
  std::vector<std::string> command;
  char chunk[4096];
  bool open = true;
  while (open && !stopping_) {
    const ssize_t got = recv(fd, chunk, sizeof(chunk), 0);
    if (got <= 0) break;
    buffer.append(chunk, static_cast<size_t>(got));
    while (open && TakeCommand(&buffer, &command)) open = answer_(fd, command);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase(fds_, fd);
    close(fd);
  }
  if (!open) ++closed_;
}

}  // namespace fuserank::testing
