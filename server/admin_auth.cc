#include "server/admin_auth.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace fuserank::server {
namespace {

constexpr char kKey[] = "server.admin_token_file";
constexpr absl::string_view kScheme = "Bearer ";

absl::Status Unauthenticated(absl::string_view why) {
  return absl::UnauthenticatedError(
      absl::StrCat(why,
                   "; admin calls need the metadata 'authorization: Bearer <token>' with "
                   "the token of server.admin_token_file"));
}

}  // namespace

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Every byte of `a` is compared whatever `b` holds; only the lengths show in the time.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    const unsigned char other = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | (static_cast<unsigned char>(a[i]) ^ other);
  }
  return diff == 0;
}

absl::StatusOr<AdminAuth> AdminAuth::FromToken(absl::string_view token) {
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) {
    token.remove_suffix(1);
  }
  if (token.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(kKey, ": the token is empty; put the admin bearer token in the file"));
  }
  for (char c : token) {
    if (c <= ' ' || c > '~') {
      return absl::FailedPreconditionError(absl::StrCat(
          kKey,
          ": the token may hold printable ASCII without spaces only (it travels in the "
          "'authorization' header); found byte ",
          static_cast<int>(static_cast<unsigned char>(c))));
    }
  }
  return AdminAuth(std::string(token));
}

absl::StatusOr<AdminAuth> AdminAuth::FromTokenFile(const std::string& token_file) {
  if (token_file.empty()) return AdminAuth();
  std::ifstream in(token_file, std::ios::binary);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat(kKey, ": cannot read '", token_file, "': ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<AdminAuth> auth = FromToken(text.str());
  if (!auth.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(auth.status().message(), " ('", token_file, "')"));
  }
  return auth;
}

absl::Status AdminAuth::CheckMetadata(
    const std::multimap<grpc::string_ref, grpc::string_ref>& client_metadata) const {
  if (!required()) return absl::OkStatus();
  const auto range = client_metadata.equal_range("authorization");
  if (range.first == range.second) return Unauthenticated("no 'authorization' metadata");
  if (std::next(range.first) != range.second) {
    return Unauthenticated("more than one 'authorization' metadata entry");
  }
  const absl::string_view value(range.first->second.data(), range.first->second.size());
  if (value.size() < kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
    return Unauthenticated("the 'authorization' metadata is not 'Bearer <token>'");
  }
  if (!ConstantTimeEquals(token_, value.substr(kScheme.size()))) {
    return Unauthenticated("the admin token is wrong");
  }
  return absl::OkStatus();
}

absl::Status AdminAuth::Check(const grpc::CallbackServerContext& context) const {
  return CheckMetadata(context.client_metadata());
}

}  // namespace fuserank::server
