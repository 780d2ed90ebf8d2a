// A read-only memory mapping of a whole file (MAP_PRIVATE, PROT_READ): the weights of a
// model are served straight from the page cache, never copied. The mapping lives as long
// as the MappedFile; it is immutable, so any thread may read it concurrently.
#ifndef FUSERANK_ENGINE_MAPPED_FILE_H_
#define FUSERANK_ENGINE_MAPPED_FILE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace fuserank::engine {

class MappedFile {
 public:
  // Maps `path`; errors name the path and the system's reason (NOT_FOUND when it is
  // missing). An empty file maps to data() == nullptr, size() == 0.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool Contains(const std::byte* p) const { return p >= data_ && p < data_ + size_; }

  // Hints the kernel about the pages covering [p, p + n) (madvise; rounded out to pages).
  // Best effort: a failed hint changes nothing but speed.
  void Advise(const std::byte* p, size_t n, int advice) const;

 private:
  MappedFile(std::string path, const std::byte* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_MAPPED_FILE_H_
