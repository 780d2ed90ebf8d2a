#include "server/model_files.h"

#include <sys/stat.h>

#include "engine/model_spec.h"
#include "engine/status_macros.h"

namespace fuserank::server {

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

absl::StatusOr<ModelFiles> StampModelFiles(const std::string& spec_path) {
  ModelFiles files;
  files.spec_path = spec_path;
  files.spec = StampFile(spec_path);
  ASSIGN_OR_RETURN(const engine::ModelSpec spec, engine::ParseModelSpecFile(spec_path));
  files.weights_path = spec.weights_path;
  files.weights = StampFile(files.weights_path);
  return files;
}

ModelFiles Restamp(const ModelFiles& files) {
  ModelFiles now = files;
  now.spec = StampFile(files.spec_path);
  now.weights = StampFile(files.weights_path);
  return now;
}

}  // namespace fuserank::server
