#include "tests/engine/batcher_test_util.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine::test {
namespace {

ModelSpec BaseSpec(const char* name) {
  ModelSpec spec;
  spec.name = std::string(name);
  spec.weights_path = std::string(name) + ".safetensors";
  spec.interaction = Interaction::kConcat;
  spec.top_mlp = {1};
  return spec;
}

std::shared_ptr<const Model> Build(const ModelSpec& spec, uint64_t seed) {
  absl::StatusOr<std::shared_ptr<const Model>> model =
      fuserank::testing::BuildTestModel(fuserank::testing::MakeRandomModel(spec, seed));
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

}  // namespace

std::shared_ptr<const Model> DenseScoreModel(uint64_t seed) {
  ModelSpec spec = BaseSpec("scores");
  spec.dense_item = 1;
  return Build(spec, seed);
}

std::shared_ptr<const Model> OneTablePerSideModel(int64_t rows) {
  ModelSpec spec = BaseSpec("tables");
  spec.tables.push_back({"user_0", Side::kUser, rows, 4});
  spec.tables.push_back({"item_0", Side::kItem, rows, 4});
  return Build(spec, 1);
}

RequestDone Record(Outcome* outcome) {
  return [outcome](const absl::Status& status, const RequestResult& result) {
    outcome->status = status;
    outcome->items.assign(result.items.begin(), result.items.end());
    outcome->queue_seconds = result.queue_seconds;
    outcome->batch_candidates = result.batch_candidates;
    outcome->batch_requests = result.batch_requests;
    outcome->position = result.position;
    outcome->done.Notify();
  };
}

}  // namespace fuserank::engine::test
