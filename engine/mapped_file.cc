#include "engine/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fuserank::engine {
namespace {

constexpr uint64_t kAlignment = 64;
// read(2) in chunks of this: a copy of many GiB stays interruptible and page-cache friendly.
constexpr uint64_t kReadChunk = uint64_t{64} << 20;

absl::Status ErrnoError(int err, const std::string& path, absl::string_view what) {
  std::string message = absl::StrCat(path, ": ", what, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  if (err == ENOMEM) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  absl::StatusOr<RegularFile> file = RegularFile::Open(path, "weights");
  if (!file.ok()) return file.status();
  const size_t size = static_cast<size_t>(file->size());
  void* data = nullptr;
  if (size > 0) {
    data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file->fd(), 0);
    if (data == MAP_FAILED) return ErrnoError(errno, path, "cannot mmap");
  }
  return std::unique_ptr<MappedFile>(new MappedFile(
      path, data, size, static_cast<const std::byte*>(data), size, /*private_copy=*/false));
}

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::CopyOf(const RegularFile& file,
                                                               uint64_t align_at) {
  const uint64_t size = file.size();
  if (size == 0) {
    return std::unique_ptr<MappedFile>(
        new MappedFile(file.path(), nullptr, 0, nullptr, 0, /*private_copy=*/true));
  }
  const uint64_t lead = (kAlignment - align_at % kAlignment) % kAlignment;
  const size_t mapped = static_cast<size_t>(lead + size);
  void* base = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    return ErrnoError(errno, file.path(),
                      absl::StrCat("cannot allocate ", size, " bytes for a private copy"));
  }
  // Huge pages where the kernel has them: a copy of GiBs faults 512 times less (a hint).
  ::madvise(base, mapped, MADV_HUGEPAGE);
  auto* data = static_cast<std::byte*>(base) + lead;
  for (uint64_t offset = 0; offset < size; offset += kReadChunk) {
    const uint64_t n = std::min(kReadChunk, size - offset);
    absl::Status read = file.ReadAt(offset, n, data + offset);
    if (!read.ok()) {
      ::munmap(base, mapped);
      return read;
    }
  }
  absl::Status unchanged = file.CheckUnchanged();
  if (!unchanged.ok()) {
    ::munmap(base, mapped);
    return unchanged;
  }
  ::mprotect(base, mapped, PROT_READ);
  return std::unique_ptr<MappedFile>(
      new MappedFile(file.path(), base, mapped, data, static_cast<size_t>(size), true));
}

MappedFile::~MappedFile() {
  if (base_ != nullptr) ::munmap(base_, mapped_);
}

void MappedFile::Advise(const std::byte* p, size_t n, int advice) const {
  if (data_ == nullptr || n == 0 || !Contains(p)) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t limit = reinterpret_cast<uintptr_t>(data_ + size_);
  uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  if (end > limit) end = limit;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

}  // namespace fuserank::engine
