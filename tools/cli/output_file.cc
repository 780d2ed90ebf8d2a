#include "tools/cli/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fuserank::cli {
namespace {

std::string OsError(int error) { return std::strerror(error); }

// Names to try before giving up on finding one that no file has.
constexpr int kNameTries = 100;

// Six random letters or digits (62^6: a name taken by chance is rare, a guessed one useless).
std::string RandomSuffix() {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device random;  // the OS's entropy (getrandom), not a seeded sequence
  std::string suffix(6, ' ');
  for (char& c : suffix) c = kChars[random() % (sizeof(kChars) - 1)];
  return suffix;
}

absl::Status SyncFile(const std::string& path) {
  // Read-only, or write-only where a umask left the owner no read permission: fsync takes
  // either.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == EACCES) fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    return absl::InternalError(absl::StrCat(path, ": cannot sync it to disk: ", OsError(error)));
  }
  ::close(fd);
  return absl::OkStatus();
}

// Makes a rename in the folder of `path` durable. Best effort: some file systems refuse
// fsync on a folder, and the rename has been done either way.
void SyncFolder(const std::string& path) {
  std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (folder.empty()) folder = ".";
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PendingFile>> PendingFile::Create(std::string destination) {
  for (int i = 0; i < kNameTries; ++i) {
    std::string temp = absl::StrCat(destination, ".tmp-", RandomSuffix());
    // O_EXCL | O_NOFOLLOW: whatever is already at the name (a link planted there, a file
    // left by a crash) is neither followed nor truncated; another name is tried.
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) {
      return std::unique_ptr<PendingFile>(
          new PendingFile(std::move(destination), std::move(temp), fd));
    }
    if (errno != EEXIST) {
      return absl::InternalError(absl::StrCat(temp, ": cannot create: ", OsError(errno)));
    }
  }
  return absl::InternalError(
      absl::StrCat(destination, ": no free temporary name beside it in ", kNameTries, " tries"));
}

PendingFile::~PendingFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

int PendingFile::TakeFd() { return std::exchange(fd_, -1); }

absl::Status PendingFile::Commit() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (absl::Status synced = SyncFile(temp_); !synced.ok()) return synced;
  if (std::rename(temp_.c_str(), destination_.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat(destination_, ": cannot replace it with ", temp_, ": ", OsError(errno)));
  }
  committed_ = true;
  SyncFolder(destination_);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::Create(std::string destination) {
  absl::StatusOr<std::unique_ptr<PendingFile>> pending =
      PendingFile::Create(std::move(destination));
  if (!pending.ok()) return pending.status();
  std::unique_ptr<OutputFile> out(new OutputFile(*std::move(pending)));
  const int fd = out->pending_->TakeFd();
  out->file_ = ::fdopen(fd, "wb");
  if (out->file_ == nullptr) {
    const int error = errno;
    ::close(fd);
    return absl::InternalError(
        absl::StrCat(out->pending_->temp(), ": cannot open: ", OsError(error)));
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
    error_ =
        absl::InternalError(absl::StrCat(pending_->temp(), ": write failed: ", OsError(errno)));
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
        absl::StrCat(pending_->temp(), ": write failed: ", OsError(flushed ? errno : flush_error)));
  }
  return error_;
}

absl::Status OutputFile::Commit() {
  if (absl::Status closed = Close(); !closed.ok()) return closed;
  return pending_->Commit();
}

absl::Status CommitPair(PendingFile& first, PendingFile& second) {
  // The old first stays reachable under a second name until the second is in place.
  const std::string& destination = first.destination();
  std::string aside;
  for (int i = 0; aside.empty(); ++i) {
    const std::string name = absl::StrCat(destination, ".old-", RandomSuffix());
    if (::link(destination.c_str(), name.c_str()) == 0) {
      aside = name;
    } else if (errno == ENOENT) {
      break;  // no old first: putting it back is removing the new one
    } else if (const int error = errno; error != EEXIST || i + 1 == kNameTries) {
      return absl::InternalError(absl::StrCat(destination, ": cannot keep it as ", name,
                                              " to put it back should ", second.destination(),
                                              " fail: ", OsError(error)));
    }
  }
  if (absl::Status committed = first.Commit(); !committed.ok()) {
    if (!aside.empty()) ::unlink(aside.c_str());
    return committed;
  }
  const absl::Status committed = second.Commit();
  if (committed.ok()) {
    // The pair is whole; a link left behind here would only hold the old bytes.
    if (!aside.empty()) ::unlink(aside.c_str());
    return committed;
  }
  const bool restored = aside.empty() ? ::unlink(destination.c_str()) == 0
                                      : std::rename(aside.c_str(), destination.c_str()) == 0;
  const int error = errno;
  if (restored) {
    SyncFolder(destination);
    return absl::Status(committed.code(), absl::StrCat(committed.message(), "; ", destination,
                                                       " is as it was before"));
  }
  return absl::Status(
      committed.code(),
      absl::StrCat(committed.message(), "; and ", destination, " could not be put back (",
                   aside.empty() ? "it was new" : absl::StrCat("the old one is ", aside),
                   "): ", OsError(error)));
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
