#include "server/model_files.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "engine/model_spec.h"

namespace fuserank::server {

std::string ParentDirectory(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

FileStamp StampFile(const std::string& path) {
  FileStamp stamp;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return stamp;
  stamp.exists = true;
  stamp.device = static_cast<uint64_t>(st.st_dev);
  stamp.inode = static_cast<uint64_t>(st.st_ino);
  stamp.size = static_cast<int64_t>(st.st_size);
  stamp.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return stamp;
}

absl::StatusOr<std::string> ResolvePath(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    return absl::NotFoundError(std::strerror(errno));
  }
  return std::string(resolved);
}

std::string WeightsAsNamed(const std::string& weights, const std::string& spec_read,
                           const std::string& spec_named) {
  const std::string read_dir = ParentDirectory(spec_read);
  const std::string prefix = read_dir == "/" ? read_dir : read_dir + "/";
  if (!absl::StartsWith(weights, prefix)) return weights;
  // Only a configured directory that is (through symlinks) the one read from: a spec file
  // that is itself a symlink names weights beside its target, not beside the link.
  const absl::StatusOr<std::string> named_dir = ResolvePath(ParentDirectory(spec_named));
  if (!named_dir.ok() || *named_dir != read_dir) return weights;
  return (std::filesystem::path(ParentDirectory(spec_named)) / weights.substr(prefix.size()))
      .string();
}

absl::StatusOr<std::string> NamedWeightsPath(const std::string& spec_path) {
  const absl::StatusOr<std::string> resolved = ResolvePath(spec_path);
  const std::string& read = resolved.ok() ? *resolved : spec_path;
  absl::StatusOr<engine::ModelSpec> spec = engine::ParseModelSpecFile(read);
  if (!spec.ok()) return spec.status();
  return WeightsAsNamed(spec->weights_path, read, spec_path);
}

ModelFiles Restamp(const ModelFiles& files, absl::Span<const ModelFiles* const> seen) {
  ModelFiles now = files;
  now.spec = StampFile(files.spec_path);
  if (!(now.spec == files.spec)) {
    const auto same_spec = [&](const ModelFiles* other) {
      return other != nullptr && other->spec_path == now.spec_path && other->spec == now.spec;
    };
    if (auto it = std::find_if(seen.begin(), seen.end(), same_spec); it != seen.end()) {
      now.weights_path = (*it)->weights_path;
    } else if (absl::StatusOr<std::string> weights = NamedWeightsPath(files.spec_path);
               weights.ok()) {
      now.weights_path = *std::move(weights);
    }
  }
  now.weights = StampFile(now.weights_path);
  return now;
}

std::string ChangedFiles(const ModelFiles& before, const ModelFiles& now) {
  const bool spec = before.spec_path != now.spec_path || !(before.spec == now.spec);
  const bool weights = before.weights_path != now.weights_path || !(before.weights == now.weights);
  if (spec && weights) return now.spec_path + " and " + now.weights_path;
  if (spec) return now.spec_path;
  return weights ? now.weights_path : "";
}

}  // namespace fuserank::server
