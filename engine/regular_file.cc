#include "engine/regular_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fuserank::engine {
namespace {

absl::Status ErrnoError(int err, const std::string& path, absl::string_view what,
                        absl::string_view action) {
  std::string message = absl::StrCat(what, " '", path, "': ", action, ": ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::FailedPreconditionError(message);
}

}  // namespace

absl::string_view FileTypeName(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

absl::StatusOr<RegularFile> RegularFile::Open(const std::string& path, absl::string_view what) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no path given"));
  // O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting for one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, path, what, "cannot open");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, path, what, "cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(what, " '", path, "' is ", FileTypeName(st.st_mode), ", not a regular file"));
  }
  // Regular files ignore O_NONBLOCK for reads; clear it anyway so reads are plain.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return RegularFile(path, fd, st);
}

RegularFile::RegularFile(RegularFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), stat_(other.stat_) {}

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    stat_ = other.stat_;
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status RegularFile::ReadAt(uint64_t offset, uint64_t n, void* out) const {
  auto* dest = static_cast<char*>(out);
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, uint64_t{1} << 30));
    const ssize_t got = ::pread(fd_, dest, chunk, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, path_, "file", "read error");
    }
    if (got == 0) {
      return absl::DataLossError(
          absl::StrCat("'", path_, "' ended at byte ", offset, ", before the ", stat_.st_size,
                       " bytes it had when opened: it was truncated while being read"));
    }
    dest += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

absl::Status RegularFile::CheckUnchanged() const {
  struct stat now;
  if (::fstat(fd_, &now) != 0) return ErrnoError(errno, path_, "file", "cannot stat");
  if (now.st_size != stat_.st_size || now.st_mtim.tv_sec != stat_.st_mtim.tv_sec ||
      now.st_mtim.tv_nsec != stat_.st_mtim.tv_nsec) {
    return absl::FailedPreconditionError(absl::StrCat(
        "'", path_, "' changed while it was being read (", stat_.st_size, " -> ", now.st_size,
        " bytes); write the new file beside it and rename it into place"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes,
                                            absl::string_view what) {
  absl::StatusOr<RegularFile> file = RegularFile::Open(path, what);
  if (!file.ok()) return file.status();
  if (file->size() > max_bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " '", path, "' is ", file->size(), " bytes, more than the limit of ", max_bytes));
  }
  std::string text(static_cast<size_t>(file->size()), '\0');
  absl::Status read = file->ReadAt(0, text.size(), text.data());
  if (!read.ok()) return read;
  return text;
}

}  // namespace fuserank::engine
