// Opening and reading files that an operator or a client names (model specs, weights, the
// admin token): only regular files, opened without blocking (a FIFO or a device answers at
// once instead of hanging or streaming forever), read with a size bound. Errors name the
// path and say what was found instead; they never quote the file's bytes.
// Pure functions of the file system; thread-safe.
#ifndef FUSERANK_ENGINE_REGULAR_FILE_H_
#define FUSERANK_ENGINE_REGULAR_FILE_H_

#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fuserank::engine {

// An open regular file: the descriptor (owned: closed by the destructor) and its fstat.
class RegularFile {
 public:
  // Opens `path` read-only with O_NONBLOCK | O_NOCTTY | O_CLOEXEC and checks that it is a
  // regular file. NOT_FOUND when it does not exist, PERMISSION_DENIED when it cannot be
  // read, FAILED_PRECONDITION for a directory, FIFO, socket or device ("is a FIFO, not a
  // regular file"). `what` ("model spec", "weights") starts the message.
  static absl::StatusOr<RegularFile> Open(const std::string& path, absl::string_view what);

  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  int fd() const { return fd_; }
  const struct stat& stat() const { return stat_; }
  uint64_t size() const { return static_cast<uint64_t>(stat_.st_size); }
  const std::string& path() const { return path_; }

  // Reads exactly [offset, offset + n) into `out`; DATA_LOSS when the file ends early.
  absl::Status ReadAt(uint64_t offset, uint64_t n, void* out) const;
  // OK when size and modification time are what Open() saw (the file was not changed in
  // place meanwhile), else FAILED_PRECONDITION saying so.
  absl::Status CheckUnchanged() const;

 private:
  RegularFile(std::string path, int fd, const struct stat& st)
      : path_(std::move(path)), fd_(fd), stat_(st) {}

  std::string path_;
  int fd_ = -1;
  struct stat stat_ {};
};

// The whole of regular file `path`, when it holds at most `max_bytes` bytes; a larger file
// is FAILED_PRECONDITION naming both sizes. Errors as RegularFile::Open.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes,
                                            absl::string_view what);

// What st_mode is, for messages: "a regular file", "a directory", "a FIFO", ...
absl::string_view FileTypeName(mode_t mode);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_REGULAR_FILE_H_
