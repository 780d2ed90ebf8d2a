#include "tests/e2e/grpc_util.h"

#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace fuserank::testing {
namespace {

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& slice : slices) {
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return out;
}

grpc::ByteBuffer FromString(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// Minimal protobuf wire reading: calls `field(number, wire_type, value/bytes)`.
struct WireField {
  int number = 0;
  int type = 0;
  uint64_t varint = 0;
  std::string bytes;
};

bool ReadVarint(const std::string& in, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *pos < in.size(); shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(in[(*pos)++]);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

std::vector<WireField> ParseWire(const std::string& in) {
  std::vector<WireField> fields;
  size_t pos = 0;
  while (pos < in.size()) {
    uint64_t key = 0;
    if (!ReadVarint(in, &pos, &key)) break;
    WireField field;
    field.number = static_cast<int>(key >> 3);
    field.type = static_cast<int>(key & 7);
    if (field.type == 0) {
      if (!ReadVarint(in, &pos, &field.varint)) break;
    } else if (field.type == 2) {
      uint64_t length = 0;
      if (!ReadVarint(in, &pos, &length) || pos + length > in.size()) break;
      field.bytes = in.substr(pos, length);
      pos += length;
    } else {
      break;  // not used by the messages read here
    }
    fields.push_back(std::move(field));
  }
  return fields;
}

bool Next(grpc::CompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  return cq->Next(&tag, &ok) && ok;
}

}  // namespace

absl::StatusOr<int> HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& service) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  std::string request;
  if (!service.empty()) {
    request.push_back(0x0a);  // field 1, string
    request.push_back(static_cast<char>(service.size()));
    request += service;
  }
  auto call =
      stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", FromString(request), &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  Next(&cq);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  for (const WireField& field : ParseWire(ToString(response))) {
    if (field.number == 1 && field.type == 0) return static_cast<int>(field.varint);
  }
  return 0;  // UNKNOWN (the default value is not on the wire)
}

namespace {

// One ServerReflectionRequest (`request`, its wire bytes) on a new reflection stream: the
// response's wire bytes, or the call's error.
absl::StatusOr<std::string> ReflectionCall(const std::shared_ptr<grpc::Channel>& channel,
                                           const std::string& request) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  call->StartCall(reinterpret_cast<void*>(1));
  if (!Next(&cq)) return absl::UnavailableError("reflection: cannot start the call");
  call->Write(FromString(request), reinterpret_cast<void*>(2));
  if (!Next(&cq)) return absl::UnavailableError("reflection: write failed");
  call->WritesDone(reinterpret_cast<void*>(3));
  Next(&cq);
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(4));
  const bool read = Next(&cq);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  Next(&cq);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  if (!read) return absl::UnavailableError("reflection: no response");
  return ToString(response);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReflectionServices(
    const std::shared_ptr<grpc::Channel>& channel) {
  absl::StatusOr<std::string> response =
      ReflectionCall(channel, std::string("\x3a\x00", 2));  // list_services = 7: ""
  if (!response.ok()) return response.status();
  std::vector<std::string> names;
  for (const WireField& field : ParseWire(*response)) {
    if (field.number != 6 || field.type != 2) continue;  // list_services_response
    for (const WireField& service : ParseWire(field.bytes)) {
      if (service.number != 1 || service.type != 2) continue;
      for (const WireField& name : ParseWire(service.bytes)) {
        if (name.number == 1 && name.type == 2) names.push_back(name.bytes);
      }
    }
  }
  return names;
}

absl::StatusOr<int> ReflectionDescribe(const std::shared_ptr<grpc::Channel>& channel,
                                       const std::string& symbol) {
  if (symbol.size() >= 128) return absl::InvalidArgumentError("symbol too long for this helper");
  std::string request = "\x22";  // file_containing_symbol = 4, length-delimited
  request.push_back(static_cast<char>(symbol.size()));
  request += symbol;
  absl::StatusOr<std::string> response = ReflectionCall(channel, request);
  if (!response.ok()) return response.status();
  for (const WireField& field : ParseWire(*response)) {
    if (field.number == 4 && field.type == 2) {  // file_descriptor_response
      int files = 0;
      for (const WireField& file : ParseWire(field.bytes)) files += file.number == 1 ? 1 : 0;
      return files;
    }
    if (field.number == 7 && field.type == 2) {  // error_response
      std::string message;
      for (const WireField& part : ParseWire(field.bytes)) {
        if (part.number == 2 && part.type == 2) message = part.bytes;
      }
      return absl::NotFoundError(
          absl::StrCat("reflection cannot describe ", symbol, ": ", message));
    }
  }
  return absl::InternalError("reflection: neither a descriptor nor an error in the response");
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to 127.0.0.1:", port));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("write failed");
  }
  std::string reply;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) reply.append(buffer, n);
  close(fd);
  const size_t body = reply.find("\r\n\r\n");
  if (reply.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) {
    return absl::InternalError(absl::StrCat("not an HTTP reply: ", reply.substr(0, 200)));
  }
  if (reply.find(" 200 ") > reply.find("\r\n")) {
    return absl::InternalError(absl::StrCat("HTTP error: ", reply.substr(0, reply.find("\r\n"))));
  }
  return reply.substr(body + 4);
}

}  // namespace fuserank::testing
