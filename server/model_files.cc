#include "server/model_files.h"

#include <sys/stat.h>

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

ModelFiles Restamp(const ModelFiles& files) {
  ModelFiles now = files;
  now.spec = StampFile(files.spec_path);
  now.weights = StampFile(files.weights_path);
  return now;
}

}  // namespace fuserank::server
