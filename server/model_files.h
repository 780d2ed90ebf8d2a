// What a model version was loaded from: its spec and weights paths and a stamp of each
// file (device, inode, size, modification time), so that a watcher can tell when either
// has been replaced or rewritten, or when the spec names another weights file. Plain data
// and pure functions of their arguments and the file system; thread-safe.
#ifndef FUSERANK_SERVER_MODEL_FILES_H_
#define FUSERANK_SERVER_MODEL_FILES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fuserank::server {

// One file as stat(2) sees it. Two stamps differ when the file was replaced (new inode),
// rewritten (size or mtime) or has appeared or gone.
struct FileStamp {
  bool exists = false;
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;

  friend bool operator==(const FileStamp&, const FileStamp&) = default;
};

struct ModelFiles {
  std::string spec_path;     // the spec YAML, as configured
  std::string weights_path;  // the safetensors file it names, as WeightsAsNamed gives it
  FileStamp spec;
  FileStamp weights;

  // Same files, same stamps.
  friend bool operator==(const ModelFiles&, const ModelFiles&) = default;
};

// The stamp of `path` now (exists = false when it cannot be stat'ed).
FileStamp StampFile(const std::string& path);

// The directory part of `path` ("." for a bare file name).
std::string ParentDirectory(const std::string& path);

// realpath(3) of `path` (every symlink followed, "." and ".." removed); NOT_FOUND with
// strerror when it or a directory on the way does not exist.
absl::StatusOr<std::string> ResolvePath(const std::string& path);

// The weights path to watch. `weights` is the path the spec names, made absolute against
// the directory of `spec_read`, the resolved path the spec was read from. When the directory
// of `spec_named` (the spec path as configured) resolves to that same directory, the path is
// given under the configured directory instead, so that a directory symlink switched later
// shows up as a change; otherwise (the spec file itself is a symlink into another directory)
// `weights` as it is.
std::string WeightsAsNamed(const std::string& weights, const std::string& spec_read,
                           const std::string& spec_named);

// The weights path the spec at `spec_path` (as configured) names now, as WeightsAsNamed
// gives it: the spec is resolved and read (a regular file of at most
// engine::kMaxModelSpecBytes) and parsed. The spec parser's errors.
absl::StatusOr<std::string> NamedWeightsPath(const std::string& spec_path);

// `files` stamped again. When the spec's stamp differs from files.spec, the weights file it
// names now is stamped, so that a spec that names a new file is followed: its path is taken
// from the first of `seen` (files stamped before, e.g. a refused version's) with the same
// spec path and stamp, else the spec is read again (NamedWeightsPath; a spec that cannot be
// read keeps files.weights_path). A spec already read is not read again at every poll: a
// refused one may cost seconds to parse.
ModelFiles Restamp(const ModelFiles& files, absl::Span<const ModelFiles* const> seen = {});

// What differs from `before` in `now`, for a log line: the spec path, the weights path (now's:
// a spec may have named another file), or both joined by " and "; "" when nothing does.
std::string ChangedFiles(const ModelFiles& before, const ModelFiles& now);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_MODEL_FILES_H_
