#include "server/model_budget.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "engine/model_memory.h"

namespace fuserank::server {
namespace {

// The first line of `path` as a byte count, or 0 ("max", missing, unreadable).
uint64_t ReadLimit(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return 0;
  uint64_t value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &value)) return 0;
  return value;
}

}  // namespace

MemoryBudget::Reservation::Reservation(Reservation&& other) noexcept
    : used_(std::move(other.used_)), bytes_(std::exchange(other.bytes_, 0)) {}

MemoryBudget::Reservation& MemoryBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    if (used_ != nullptr) used_->fetch_sub(bytes_);
    used_ = std::move(other.used_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

MemoryBudget::Reservation::~Reservation() {
  if (used_ != nullptr) used_->fetch_sub(bytes_);
}

MemoryBudget::MemoryBudget(uint64_t limit) : limit_(limit == 0 ? AutoLimit() : limit) {}

uint64_t MemoryBudget::AutoLimit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  uint64_t available = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * page : 0;
  // Regular files in /sys: plain reads cannot block.
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const uint64_t cgroup = ReadLimit(path);
    if (cgroup > 0 && (available == 0 || cgroup < available)) available = cgroup;
  }
  if (available == 0) available = uint64_t{8} << 30;  // unknown: assume a small host
  return available / 4 * 3;
}

absl::Status MemoryBudget::Refusal(uint64_t bytes, uint64_t used, absl::string_view what,
                                   absl::string_view detail) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " needs ", engine::FormatBytes(bytes), detail.empty() ? "" : " (", detail,
      detail.empty() ? "" : ")", ", but ", engine::FormatBytes(used), " of the ",
      engine::FormatBytes(limit_),
      " model memory budget (model.memory_budget_bytes) are taken by "
      "the versions in memory; raise the budget, shrink the model, or wait until a retired version "
      "is freed"));
}

absl::Status MemoryBudget::Check(uint64_t bytes, absl::string_view what,
                                 absl::string_view detail) const {
  const uint64_t used = used_->load();
  if (bytes <= limit_ && used <= limit_ - bytes) return absl::OkStatus();
  return Refusal(bytes, used, what, detail);
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::Reserve(uint64_t bytes,
                                                                absl::string_view what,
                                                                absl::string_view detail) {
  uint64_t used = used_->load();
  do {
    if (bytes > limit_ || used > limit_ - bytes) return Refusal(bytes, used, what, detail);
  } while (!used_->compare_exchange_weak(used, used + bytes));
  return Reservation(used_, bytes);
}

}  // namespace fuserank::server
