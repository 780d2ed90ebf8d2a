#include "tests/engine/hot_rows/hot_row_test_util.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "tests/testing/test_model.h"

namespace fuserank::engine::test {

std::shared_ptr<const Model> MakeHotRowTestModel(int64_t rows, int dim, DType dtype,
                                                 uint64_t seed) {
  ModelSpec spec = fuserank::testing::SmallSpec(1, 2, rows, dim);
  spec.embedding_dtype = dtype;
  spec.tables[2].oov = Oov::kReject;
  auto model = fuserank::testing::BuildTestModel(fuserank::testing::MakeRandomModel(spec, seed));
  if (!model.ok()) {
    std::fprintf(stderr, "hot-row test model: %s\n", std::string(model.status().message()).c_str());
    std::abort();
  }
  return *model;
}

std::unique_ptr<HotRowManager> MakeHotRowManager(std::shared_ptr<const Model> model, int capacity,
                                                 int sample_period) {
  HotRowOptions options;
  options.capacity = capacity;
  options.sample_period = sample_period;
  auto manager = HotRowManager::Create(std::move(model), options);
  if (!manager.ok()) {
    std::fprintf(stderr, "hot-row manager: %s\n", std::string(manager.status().message()).c_str());
    std::abort();
  }
  return *std::move(manager);
}

std::vector<int32_t> HotRows(const HotRowManager& manager, int table) {
  const auto rows = manager.snapshot()->table(table).rows();
  return std::vector<int32_t>(rows.begin(), rows.end());
}

}  // namespace fuserank::engine::test
