// Files a tool writes whole or not at all: the content goes to a new temporary file beside
// the destination (same folder, so same file system), is synced to disk and renamed over the
// destination only once complete, and is removed on any failure; a reader of the destination
// sees its old content or the whole new one, never a part, and so does a reader after a crash.
// The temporary's name is one no file had ("<destination>.tmp-" and six random letters or
// digits, created with O_EXCL | O_NOFOLLOW): a file or link planted beside the destination
// is neither followed nor truncated. The rename replaces the destination's name, not its
// content: a symbolic link there becomes a regular file (its target is left alone), and the
// new file has the default mode (0666 less the umask) and owner, not the old file's. Errors
// name the path and the OS's reason (strerror). One thread uses an object.
#ifndef FUSERANK_TOOLS_CLI_OUTPUT_FILE_H_
#define FUSERANK_TOOLS_CLI_OUTPUT_FILE_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fuserank::cli {

// A new, empty temporary file beside `destination`, removed when the object goes unless
// Commit() renamed it onto the destination. What writes the temporary is the caller's
// (through TakeFd(), or by name: a SafetensorsWriter given temp() renames its own file onto
// it).
class PendingFile {
 public:
  static absl::StatusOr<std::unique_ptr<PendingFile>> Create(std::string destination);
  ~PendingFile();
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;

  const std::string& destination() const { return destination_; }
  const std::string& temp() const { return temp_; }
  // The temporary's descriptor, open for writing; the caller closes it. -1 once taken.
  int TakeFd();
  // Syncs the temporary to disk (fsync), renames it onto the destination (atomic on POSIX)
  // and syncs the folder, where its file system allows, so that the rename outlives a crash.
  absl::Status Commit();

 private:
  PendingFile(std::string destination, std::string temp, int fd)
      : destination_(std::move(destination)), temp_(std::move(temp)), fd_(fd) {}

  std::string destination_;
  std::string temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// A PendingFile written through stdio: Create, Append..., Commit.
class OutputFile {
 public:
  static absl::StatusOr<std::unique_ptr<OutputFile>> Create(std::string destination);
  ~OutputFile();

  const std::string& destination() const { return pending_->destination(); }
  PendingFile& pending() { return *pending_; }
  absl::Status Append(absl::string_view bytes);
  // Flushes and closes the temporary: after an OK every byte was taken by the OS (a full
  // disk shows here), but is not yet on disk and the destination is not touched; Commit()
  // syncs and renames. Commit() calls Close() when it was not.
  absl::Status Close();
  absl::Status Commit();

 private:
  explicit OutputFile(std::unique_ptr<PendingFile> pending) : pending_(std::move(pending)) {}

  std::unique_ptr<PendingFile> pending_;
  std::FILE* file_ = nullptr;
  absl::Status error_;  // the first write error; later calls return it
};

// Commits `first`, then `second`, as a pair: when the second's commit fails, what was at
// the first's destination is put back (the old file, which a hard link beside it
// "<destination>.old-XXXXXX" keeps until then, or nothing), so a failure leaves both
// destinations as they were. An old first that cannot be linked (a file system without
// hard links; another user's file where fs.protected_hardlinks is set) is an error before
// either is committed. A crash between the two renames leaves the new first beside the old
// second, and the old first under the .old- name.
absl::Status CommitPair(PendingFile& first, PendingFile& second);

// The destination can be replaced: it is not a folder, and it is writable when it exists
// (a read-only or immutable file is refused before anything is written, not after).
// Errors name it: "<destination>: is a directory, not a file".
absl::Status CheckReplaceable(const std::string& destination);

}  // namespace fuserank::cli

#endif  // FUSERANK_TOOLS_CLI_OUTPUT_FILE_H_
