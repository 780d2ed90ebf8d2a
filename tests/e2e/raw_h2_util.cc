#include "tests/e2e/raw_h2_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace fuserank::testing {
namespace {

constexpr uint8_t kData = 0, kHeaders = 1, kRstStream = 3, kSettings = 4, kPing = 6;
constexpr uint8_t kEndStream = 1, kEndHeaders = 4, kAck = 1;

void AppendUint(std::string* out, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>(value >> (8 * i) & 0xff));
}

// HPACK "literal header field without indexing, new name", lengths under 127 bytes.
void AppendLiteral(std::string* out, const std::string& name, const std::string& value) {
  out->push_back('\0');
  out->push_back(static_cast<char>(name.size()));
  *out += name;
  out->push_back(static_cast<char>(value.size()));
  *out += value;
}

bool ReadFully(int fd, char* data, size_t size) {
  while (size > 0) {
    const ssize_t got = ::recv(fd, data, size, 0);
    if (got <= 0) return false;
    data += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

RawH2Connection::RawH2Connection(int port, uint32_t stream_window) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd_);
    fd_ = -1;
    return;
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  std::string settings;
  AppendUint(&settings, 4, 2);  // SETTINGS_INITIAL_WINDOW_SIZE
  AppendUint(&settings, stream_window, 4);
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (::send(fd_, preface.data(), preface.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(preface.size())) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
  }
  if (!SendFrame(kSettings, 0, 0, settings)) {
    ::close(fd_);
    fd_ = -1;
    return;
  }
  reader_ = std::thread([this] { Read(); });
}

RawH2Connection::~RawH2Connection() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  if (reader_.joinable()) reader_.join();
  if (fd_ >= 0) ::close(fd_);
}

bool RawH2Connection::SendFrame(uint8_t type, uint8_t flags, uint32_t stream_id,
                                const std::string& payload) {
  std::string frame;
  AppendUint(&frame, payload.size(), 3);
  frame.push_back(static_cast<char>(type));
  frame.push_back(static_cast<char>(flags));
  AppendUint(&frame, stream_id & 0x7fffffffu, 4);
  frame += payload;
  std::lock_guard<std::mutex> lock(write_mu_);
  return ::send(fd_, frame.data(), frame.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(frame.size());
}

bool RawH2Connection::SendUnary(uint32_t stream_id, const std::string& path,
                                const std::string& message) {
  std::string headers = "\x83\x86";  // :method POST, :scheme http (static table)
  AppendLiteral(&headers, ":path", path);
  AppendLiteral(&headers, ":authority", "127.0.0.1");
  AppendLiteral(&headers, "content-type", "application/grpc");
  AppendLiteral(&headers, "te", "trailers");
  std::string data(1, '\0');  // not compressed
  AppendUint(&data, message.size(), 4);
  data += message;
  return SendFrame(kHeaders, kEndHeaders, stream_id, headers) &&
         SendFrame(kData, kEndStream, stream_id, data);
}

void RawH2Connection::Read() {
  for (;;) {
    char header[9];
    if (!ReadFully(fd_, header, sizeof(header))) return;
    const size_t length = (static_cast<size_t>(static_cast<uint8_t>(header[0])) << 16) |
                          (static_cast<size_t>(static_cast<uint8_t>(header[1])) << 8) |
                          static_cast<uint8_t>(header[2]);
    const uint8_t type = static_cast<uint8_t>(header[3]);
    const uint8_t flags = static_cast<uint8_t>(header[4]);
    std::string payload(length, '\0');
    if (length > 0 && !ReadFully(fd_, payload.data(), length)) return;
    if (type == kSettings && (flags & kAck) == 0) {
      if (!SendFrame(kSettings, kAck, 0, "")) return;
    } else if (type == kPing && (flags & kAck) == 0) {
      if (!SendFrame(kPing, kAck, 0, payload)) return;
    } else if (type == kRstStream) {
      ++resets_;
    }
  }
}

}  // namespace fuserank::testing
