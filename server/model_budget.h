// The host-memory budget that every served model version shares (model.memory_budget_bytes).
// A version reserves its estimate (engine/model_memory.h) before anything of it is read or
// allocated and gives it back when it is destroyed, so a model or a reload that would not
// fit beside the versions already in memory is refused with a message instead of taking the
// process down (std::bad_alloc, the OOM killer). Thread-safe.
#ifndef FUSERANK_SERVER_MODEL_BUDGET_H_
#define FUSERANK_SERVER_MODEL_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fuserank::server {

class MemoryBudget {
 public:
  // Bytes held for one version; given back when destroyed. Move-only; empty by default.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation();
    uint64_t bytes() const { return bytes_; }

   private:
    friend class MemoryBudget;
    Reservation(std::shared_ptr<std::atomic<uint64_t>> used, uint64_t bytes)
        : used_(std::move(used)), bytes_(bytes) {}
    std::shared_ptr<std::atomic<uint64_t>> used_;  // outlives the budget if need be
    uint64_t bytes_ = 0;
  };

  // `limit` bytes; 0: AutoLimit().
  explicit MemoryBudget(uint64_t limit);

  // Three quarters of the memory available to the process: the smaller of physical memory
  // and the cgroup's limit (memory.max, v2; memory.limit_in_bytes, v1) when there is one.
  static uint64_t AutoLimit();

  // Reserves `bytes` for `what` ("model 'ctr' version '8'", `detail` saying what the bytes
  // are for); RESOURCE_EXHAUSTED, naming the numbers and model.memory_budget_bytes, when
  // they do not fit beside what is reserved.
  absl::StatusOr<Reservation> Reserve(uint64_t bytes, absl::string_view what,
                                      absl::string_view detail = {});
  // The same check without reserving (a reload's early refusal).
  absl::Status Check(uint64_t bytes, absl::string_view what, absl::string_view detail = {}) const;

  uint64_t limit() const { return limit_; }
  uint64_t used() const { return used_->load(); }

 private:
  absl::Status Refusal(uint64_t bytes, uint64_t used, absl::string_view what,
                       absl::string_view detail) const;

  const uint64_t limit_;
  std::shared_ptr<std::atomic<uint64_t>> used_ = std::make_shared<std::atomic<uint64_t>>(0);
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_MODEL_BUDGET_H_
