#include "tests/fuzz/fuzz_model.h"

#include <utility>

#include "tests/fuzz/fuzz_check.h"
#include "tests/testing/test_model.h"

namespace fuserank::fuzz {

std::shared_ptr<const engine::Model> BuildFuzzModel(engine::ModelSpec spec) {
  auto model = testing::BuildTestModel(testing::MakeRandomModel(std::move(spec), 1));
  FUZZ_CHECK(model.ok(), model.status().ToString());
  return *model;
}

std::shared_ptr<const engine::Model> FuzzModel() {
  engine::ModelSpec spec = testing::SmallSpec(2, 2, 100, 4);
  spec.tables[1].rows = 50;
  spec.tables[1].oov = engine::Oov::kReject;
  spec.tables[3].rows = 10;
  spec.tables[3].oov = engine::Oov::kReject;
  spec.tables[3].pooling = engine::Pooling::kMean;
  return BuildFuzzModel(std::move(spec));
}

}  // namespace fuserank::fuzz
