#include "engine/batch.h"

#include <cstdint>

#include "engine/check.h"

namespace fuserank::engine {
namespace {

// `base + count` as a 32-bit offset; a batch past 32 bits is a broken invariant of whoever
// built it (the batcher's budgets keep merged batches far below), never a wrap.
uint32_t Offset(size_t base, size_t count, const char* what) {
  FUSERANK_CHECK(base + count <= UINT32_MAX)
      << "Batch::Append: " << what << " past 32-bit offsets (" << base << " + " << count << ")";
  return static_cast<uint32_t>(base);
}

// Appends `other`'s bags after `bags`' own, shifting their row offsets.
void AppendBags(const BagSet& other, BagSet* bags) {
  const uint32_t base = Offset(bags->rows.size(), other.rows.size(), "rows");
  bags->bag_begin.reserve(bags->bag_begin.size() + other.num_bags());
  for (size_t b = 1; b < other.bag_begin.size(); ++b) {
    bags->bag_begin.push_back(base + other.bag_begin[b]);
  }
  bags->rows.insert(bags->rows.end(), other.rows.begin(), other.rows.end());
  bags->weights.insert(bags->weights.end(), other.weights.begin(), other.weights.end());
  bags->keys.insert(bags->keys.end(), other.keys.begin(), other.keys.end());
}

template <typename T>
void AppendAll(const std::vector<T>& from, std::vector<T>* to) {
  to->insert(to->end(), from.begin(), from.end());
}

}  // namespace

size_t Batch::capacity_bytes() const {
  return candidate_begin.capacity() * sizeof(uint32_t) + top_k.capacity() * sizeof(uint32_t) +
         user.capacity_bytes() + item.capacity_bytes() +
         (user_dense.capacity() + item_dense.capacity()) * sizeof(float);
}

void Batch::Clear() {
  model.reset();  // do not keep a replaced model alive through an idle batch
  candidate_begin.assign(1, 0);
  top_k.clear();
  user.Clear();
  item.Clear();
  user_dense.clear();
  item_dense.clear();
  deadline = std::chrono::steady_clock::time_point::max();
}

void Batch::Append(const Batch& other) {
  if (&other == this) {
    const Batch copy = other;
    Append(copy);
    return;
  }
  if (model == nullptr) model = other.model;
  // The batcher merges requests of one model only: a broken invariant, not a request error.
  FUSERANK_CHECK(other.model == nullptr || other.model == model)
      << "Batch::Append: batches of different models";
  const uint32_t base = Offset(candidate_begin.back(), other.candidate_begin.back(), "candidates");
  for (size_t r = 1; r < other.candidate_begin.size(); ++r) {
    candidate_begin.push_back(base + other.candidate_begin[r]);
  }
  AppendAll(other.top_k, &top_k);
  AppendBags(other.user, &user);
  AppendBags(other.item, &item);
  AppendAll(other.user_dense, &user_dense);
  AppendAll(other.item_dense, &item_dense);
}

}  // namespace fuserank::engine
