// The bytes of a whole file in memory, read-only, in one of two forms:
//   CopyOf: a private copy in anonymous memory, filled by read(2). Nothing done to the file
//     afterwards (truncating it, rewriting it in place) reaches the copy, so a model serves
//     exactly the bytes that were checked when it loaded, and a file changed under a
//     serving version cannot fault (SIGBUS) the process. This is what Model::Load uses.
//   Open: a shared mapping of the file (MAP_PRIVATE, PROT_READ) served from the page cache:
//     only for files nothing rewrites while they are mapped (tools, tests).
// The memory lives as long as the MappedFile; it is immutable, so any thread may read it.
#ifndef FUSERANK_ENGINE_MAPPED_FILE_H_
#define FUSERANK_ENGINE_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/regular_file.h"

namespace fuserank::engine {

class MappedFile {
 public:
  // Maps `path`; errors name the path and the system's reason (NOT_FOUND when it is
  // missing). An empty file maps to data() == nullptr, size() == 0.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);

  // Reads all of `file` (its size when opened) into private memory placed so that byte
  // `align_at` of the file lies on a 64-byte boundary (a safetensors data section, for
  // aligned tables), then makes it read-only. Errors: the file ending early or changing
  // size or modification time while it is read (FAILED_PRECONDITION or DATA_LOSS, naming
  // the path), memory that cannot be mapped (RESOURCE_EXHAUSTED).
  static absl::StatusOr<std::unique_ptr<MappedFile>> CopyOf(const RegularFile& file,
                                                            uint64_t align_at = 0);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool Contains(const std::byte* p) const { return p >= data_ && p < data_ + size_; }
  // True for CopyOf: the bytes are the process's own, not the file's pages.
  bool is_private_copy() const { return private_copy_; }

  // Hints the kernel about the pages covering [p, p + n) (madvise; rounded out to pages).
  // Best effort: a failed hint changes nothing but speed.
  void Advise(const std::byte* p, size_t n, int advice) const;

 private:
  MappedFile(std::string path, void* base, size_t mapped, const std::byte* data, size_t size,
             bool private_copy)
      : path_(std::move(path)),
        base_(base),
        mapped_(mapped),
        data_(data),
        size_(size),
        private_copy_(private_copy) {}

  std::string path_;
  void* base_ = nullptr;  // what munmap gets
  size_t mapped_ = 0;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool private_copy_ = false;
};

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_MAPPED_FILE_H_
