// Fixtures shared by the hot-row tests: a small model with a modulo and a reject table,
// a HotRowManager over it, and a table's hot rows in slot order. Not thread-safe.
#ifndef FUSERANK_TESTS_ENGINE_HOT_ROWS_HOT_ROW_TEST_UTIL_H_
#define FUSERANK_TESTS_ENGINE_HOT_ROWS_HOT_ROW_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/hot_rows/hot_row_manager.h"
#include "engine/model.h"

namespace fuserank::engine::test {

// Tables user_0 (index 0), item_0 (1) and item_1 (2, oov: reject), `rows` x `dim` each,
// random weights from `seed`. Aborts if the model cannot be built.
std::shared_ptr<const Model> MakeHotRowTestModel(int64_t rows, int dim, DType dtype, uint64_t seed);

// A manager with `capacity` rows per table and `sample_period`. Aborts on error.
std::unique_ptr<HotRowManager> MakeHotRowManager(std::shared_ptr<const Model> model, int capacity,
                                                 int sample_period = 1);

// The rows of table `table`'s current hot set, in slot order.
std::vector<int32_t> HotRows(const HotRowManager& manager, int table);

}  // namespace fuserank::engine::test

#endif  // FUSERANK_TESTS_ENGINE_HOT_ROWS_HOT_ROW_TEST_UTIL_H_
