#include "server/admin_auth.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/regular_file.h"
#include "spdlog/spdlog.h"

namespace fuserank::server {
namespace {

constexpr char kKey[] = "server.admin_token_file";
constexpr absl::string_view kScheme = "Bearer ";

// Whether the process (not root) is in group `gid`, as its own or a supplementary one.
bool InGroup(gid_t gid) {
  if (gid == ::getegid()) return true;
  gid_t groups[256];
  const int n = ::getgroups(256, groups);
  for (int i = 0; i < n; ++i) {
    if (groups[i] == gid) return true;
  }
  return false;
}

// What Kubernetes makes of a Secret volume with defaultMode 0440 in a pod with an fsGroup
// (0400 too: the kubelet adds group read): mode exactly 0440, owned by root, its group the
// fsGroup, which the server (not root) is in. Only the pod's processes are in that group,
// so it is not warned of.
bool SecretVolumeLayout(const struct stat& st) {
  return (st.st_mode & 07777) == 0440 && st.st_uid == 0 && ::geteuid() != 0 && InGroup(st.st_gid);
}

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
  absl::StatusOr<engine::RegularFile> file = engine::RegularFile::Open(token_file, "file");
  if (!file.ok()) {
    const absl::string_view why = file.status().message();
    if (absl::IsFailedPrecondition(file.status())) {  // not a regular file
      return absl::FailedPreconditionError(absl::StrCat(kKey, ": ", why));
    }
    const size_t reason = why.rfind(": ");
    return absl::FailedPreconditionError(
        absl::StrCat(kKey, ": cannot read '", token_file, "'",
                     reason == absl::string_view::npos ? "" : why.substr(reason)));
  }
  const mode_t mode = file->stat().st_mode;
  std::string warning;
  if ((mode & (S_IRGRP | S_IROTH)) != 0 && !SecretVolumeLayout(file->stat())) {
    warning = absl::StrFormat(
        "%s: '%s' can be read by its group or by others (mode %04o); the token is a secret: "
        "chmod 600 it (Kubernetes: a Secret volume with defaultMode: 0440 in a pod with an "
        "fsGroup)",
        kKey, token_file, mode & 07777);
  }
  if (file->size() > kMaxTokenFileBytes) {
    return absl::FailedPreconditionError(absl::StrCat(kKey, ": '", token_file, "' is ",
                                                      file->size(),
                                                      " bytes; a token file holds "
                                                      "at most ",
                                                      kMaxTokenFileBytes));
  }
  std::string text(static_cast<size_t>(file->size()), '\0');
  const absl::Status read = file->ReadAt(0, text.size(), text.data());
  if (!read.ok()) return absl::FailedPreconditionError(absl::StrCat(kKey, ": ", read.message()));
  absl::StatusOr<AdminAuth> auth = FromToken(text);
  if (!auth.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(auth.status().message(), " ('", token_file, "')"));
  }
  auth->warning_ = std::move(warning);
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

void AdminAuth::LogRefusal(absl::string_view method, absl::string_view peer,
                           const absl::Status& status) const {
  uint64_t dropped = 0;
  if (!refusals_->Allow(&dropped)) return;
  spdlog::warn(
      "admin {} from {} refused: {}{}", LogSafe(method, 128), LogSafe(peer, 128),
      std::string(status.message()),
      dropped == 0 ? std::string() : absl::StrCat(" (", dropped, " more refusals not logged)"));
}

}  // namespace fuserank::server
