// Files a tool writes whole or not at all: the content goes to a temporary file beside
// the destination (same folder, so same file system), renamed over the destination only
// once it is complete, and removed on any failure; a reader of the destination sees its old
// content or the whole new one, never a part. Errors name the path and the OS's reason
// (strerror). One thread uses an object.
#ifndef FUSERANK_TOOLS_CLI_OUTPUT_FILE_H_
#define FUSERANK_TOOLS_CLI_OUTPUT_FILE_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fuserank::cli {

// The name of a temporary file beside `destination` ("<destination>.tmp-<pid>"), removed
// when the object goes unless Commit() renamed it onto the destination. What writes the
// temporary is the caller's (e.g. a SafetensorsWriter given temp()).
class PendingFile {
 public:
  explicit PendingFile(std::string destination);
  ~PendingFile();
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;

  const std::string& destination() const { return destination_; }
  const std::string& temp() const { return temp_; }
  // Renames the temporary onto the destination (atomic on POSIX).
  absl::Status Commit();

 private:
  std::string destination_;
  std::string temp_;
  bool committed_ = false;
};

// A PendingFile written through stdio: Create, Append..., Commit.
class OutputFile {
 public:
  static absl::StatusOr<std::unique_ptr<OutputFile>> Create(std::string destination);
  ~OutputFile();

  const std::string& destination() const { return pending_.destination(); }
  absl::Status Append(absl::string_view bytes);
  // Flushes and closes the temporary: every byte is on the file system after an OK, the
  // destination not touched yet. Commit() calls it when it was not.
  absl::Status Close();
  absl::Status Commit();

 private:
  explicit OutputFile(std::string destination) : pending_(std::move(destination)) {}

  PendingFile pending_;
  std::FILE* file_ = nullptr;
  absl::Status error_;  // the first write error; later calls return it
};

// The destination can be replaced: it is not a folder, and it is writable when it exists
// (a read-only or immutable file is refused before anything is written, not after).
// Errors name it: "<destination>: is a directory, not a file".
absl::Status CheckReplaceable(const std::string& destination);

}  // namespace fuserank::cli

#endif  // FUSERANK_TOOLS_CLI_OUTPUT_FILE_H_
