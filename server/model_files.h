// What a model version was loaded from: its spec and weights paths and a stamp of each
// file (device, inode, size, modification time), so that a watcher can tell when either
// has been replaced or rewritten. Plain data and pure functions; thread-safe.
#ifndef FUSERANK_SERVER_MODEL_FILES_H_
#define FUSERANK_SERVER_MODEL_FILES_H_

#include <cstdint>
#include <string>

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
  std::string weights_path;  // the safetensors file it names, resolved
  FileStamp spec;
  FileStamp weights;

  // Same files, same stamps.
  friend bool operator==(const ModelFiles&, const ModelFiles&) = default;
};

// The stamp of `path` now (exists = false when it cannot be stat'ed).
FileStamp StampFile(const std::string& path);

// The same paths stamped again.
ModelFiles Restamp(const ModelFiles& files);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_MODEL_FILES_H_
