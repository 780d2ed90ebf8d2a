#include "tools/cli/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fuserank::cli {
namespace {

std::string OsError(int error) { return std::strerror(error); }

}  // namespace

PendingFile::PendingFile(std::string destination)
    : destination_(std::move(destination)),
      temp_(absl::StrCat(destination_, ".tmp-", static_cast<long>(::getpid()))) {}

PendingFile::~PendingFile() {
  if (!committed_) std::remove(temp_.c_str());
}

absl::Status PendingFile::Commit() {
  if (std::rename(temp_.c_str(), destination_.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat(destination_, ": cannot replace it with ", temp_, ": ", OsError(errno)));
  }
  committed_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::Create(std::string destination) {
  std::unique_ptr<OutputFile> out(new OutputFile(std::move(destination)));
  out->file_ = std::fopen(out->pending_.temp().c_str(), "wb");
  if (out->file_ == nullptr) {
    return absl::InternalError(
        absl::StrCat(out->pending_.temp(), ": cannot create: ", OsError(errno)));
  }
  return out;
}

OutputFile::~OutputFile() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status OutputFile::Append(absl::string_view bytes) {
  if (!error_.ok()) return error_;
  if (file_ == nullptr) return absl::FailedPreconditionError("the file is closed");
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    error_ = absl::InternalError(absl::StrCat(pending_.temp(), ": write failed: ", OsError(errno)));
  }
  return error_;
}

absl::Status OutputFile::Close() {
  if (!error_.ok() || file_ == nullptr) return error_;
  std::FILE* file = std::exchange(file_, nullptr);
  // fflush first: fclose's errno is not reliable once it has freed the stream.
  const bool flushed = std::fflush(file) == 0;
  const int flush_error = errno;
  if (std::fclose(file) != 0 || !flushed) {
    error_ = absl::InternalError(
        absl::StrCat(pending_.temp(), ": write failed: ", OsError(flushed ? errno : flush_error)));
  }
  return error_;
}

absl::Status OutputFile::Commit() {
  if (absl::Status closed = Close(); !closed.ok()) return closed;
  return pending_.Commit();
}

absl::Status CheckReplaceable(const std::string& destination) {
  struct stat st {};
  if (::stat(destination.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(destination, ": ", OsError(errno)));
  }
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(destination, ": is a directory, not a file"));
  }
  if (::access(destination.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(destination, ": exists and cannot be replaced: ", OsError(errno)));
  }
  return absl::OkStatus();
}

}  // namespace fuserank::cli
