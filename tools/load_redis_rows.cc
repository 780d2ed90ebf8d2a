#include "tools/load_redis_rows.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace fuserank::tools {

void RowBatch::Clear() {
  keys.clear();
  bytes.clear();
  ends.clear();
}

std::string_view RowBatch::value(size_t i) const {
  const size_t begin = i == 0 ? 0 : ends[i - 1];
  return std::string_view(bytes).substr(begin, ends[i] - begin);
}

absl::Status OpenInput(const std::string& path, std::ifstream* in) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a file"));
  }
  errno = 0;
  *in = std::ifstream(path);
  if (!*in) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno != 0 ? errno : EIO)));
  }
  return absl::OkStatus();
}

}  // namespace fuserank::tools
