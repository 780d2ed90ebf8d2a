// ValidateBatch (engine/batch_validation.h), the engine's one check of a batch where it
// enters: a valid batch and a merge of valid batches pass, and each malformed batch is
// refused with INVALID_ARGUMENT and the message that names what is wrong.
#include "engine/batch_validation.h"

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine {
namespace {

using ::testing::HasSubstr;

// One user table and two item tables (user_0, item_0, item_1) of 20 rows; dense user 2,
// item 3.
std::shared_ptr<const Model> SmallModel() {
  absl::StatusOr<std::shared_ptr<const Model>> model = testing::BuildTestModel(
      testing::MakeRandomModel(testing::SmallSpec(1, 2, 20, 4), /*seed=*/5));
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

// Appends a bag of `rows` (weight 1 each).
void AddBag(BagSet* bags, std::initializer_list<int32_t> rows) {
  for (int32_t row : rows) {
    bags->rows.push_back(row);
    bags->weights.push_back(1.0f);
  }
  bags->bag_begin.push_back(static_cast<uint32_t>(bags->rows.size()));
}

// Two requests of 3 and 2 candidates, every bag filled, all rows in range.
Batch GoodBatch(std::shared_ptr<const Model> model) {
  Batch batch;
  batch.model = std::move(model);
  int row = 0;
  for (uint32_t candidates : {3u, 2u}) {
    batch.candidate_begin.push_back(batch.candidate_begin.back() + candidates);
    batch.top_k.push_back(2);
    batch.user_dense.insert(batch.user_dense.end(), {0.5f, -0.5f});
    AddBag(&batch.user, {row++ % 20, 19});
    for (uint32_t c = 0; c < candidates; ++c) {
      batch.item_dense.insert(batch.item_dense.end(), {1.0f, 2.0f, 3.0f});
      AddBag(&batch.item, {row++ % 20});
      AddBag(&batch.item, {});
    }
  }
  return batch;
}

TEST(BatchValidationTest, AcceptsAValidBatchAndAMergeOfValidBatches) {
  const std::shared_ptr<const Model> model = SmallModel();
  ASSERT_NE(model, nullptr);
  const Batch good = GoodBatch(model);
  EXPECT_TRUE(ValidateBatch(good).ok()) << ValidateBatch(good);
  Batch merged = good;
  merged.Append(good);
  EXPECT_TRUE(ValidateBatch(merged).ok()) << ValidateBatch(merged);
  Batch empty;
  empty.model = model;
  EXPECT_TRUE(ValidateBatch(empty).ok()) << ValidateBatch(empty);
  // A request of no candidates has top_k 0, as the decoders write it.
  Batch none = good;
  none.candidate_begin.push_back(none.candidate_begin.back());
  none.top_k.push_back(0);
  none.user_dense.insert(none.user_dense.end(), {0.0f, 0.0f});
  AddBag(&none.user, {1});
  EXPECT_TRUE(ValidateBatch(none).ok()) << ValidateBatch(none);
}

struct BadBatch {
  const char* name;
  std::function<void(Batch*)> spoil;
  const char* message;
};

class BatchValidationRejectsTest : public ::testing::TestWithParam<BadBatch> {};

TEST_P(BatchValidationRejectsTest, RefusesWithItsMessage) {
  const std::shared_ptr<const Model> model = SmallModel();
  ASSERT_NE(model, nullptr);
  Batch batch = GoodBatch(model);
  GetParam().spoil(&batch);
  const absl::Status status = ValidateBatch(batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    EachMalformation, BatchValidationRejectsTest,
    ::testing::Values(
        BadBatch{"NoModel", [](Batch* b) { b->model.reset(); }, "batch: no model"},
        BadBatch{"NoCandidateBegin", [](Batch* b) { b->candidate_begin.clear(); },
                 "batch: candidate_begin or top_k malformed"},
        BadBatch{"CandidateBeginNotFromZero", [](Batch* b) { b->candidate_begin[0] = 1; },
                 "batch: candidate_begin or top_k malformed"},
        BadBatch{"TopKMissing", [](Batch* b) { b->top_k.pop_back(); },
                 "batch: candidate_begin or top_k malformed"},
        BadBatch{"TopKPastTheCandidates", [](Batch* b) { b->top_k[0] = 4; },
                 "batch: request 0 has top_k 4 for 3 candidates (expected 1..3)"},
        // Past INT_MAX: a signed min() with the count would go negative.
        BadBatch{"TopKPastIntMax", [](Batch* b) { b->top_k[1] = 0x80000000u; },
                 "batch: request 1 has top_k 2147483648 for 2 candidates"},
        BadBatch{"TopKZeroForCandidates", [](Batch* b) { b->top_k[1] = 0; },
                 "batch: request 1 has top_k 0 for 2 candidates"},
        BadBatch{"CandidateBeginDecreases", [](Batch* b) { b->candidate_begin[1] = 6; },
                 "batch: candidate_begin decreases"},
        BadBatch{"ItemDenseShort", [](Batch* b) { b->item_dense.pop_back(); },
                 "batch: dense features of the wrong size"},
        BadBatch{"UserDenseLong", [](Batch* b) { b->user_dense.push_back(0.0f); },
                 "batch: dense features of the wrong size"},
        BadBatch{"UserBagMissing", [](Batch* b) { b->user.bag_begin.pop_back(); },
                 "batch: user bags malformed (1 bags, expected 2)"},
        BadBatch{"ItemRowOutsideEveryBag", [](Batch* b) { b->item.rows.push_back(0); },
                 "batch: item bags malformed (10 bags, expected 10)"},
        BadBatch{"ItemWeightMissing", [](Batch* b) { b->item.weights.pop_back(); },
                 "batch: item bags malformed"},
        BadBatch{"ItemBagReversed",
                 [](Batch* b) { b->item.bag_begin[2] = b->item.bag_begin[1] - 1; },
                 "batch: item bag 1 reversed"},
        // Up past the rows, then down again: refused before bag 0's rows are read.
        BadBatch{"ItemBagEndsPastTheRows",
                 [](Batch* b) {
                   b->item.bag_begin[1] = static_cast<uint32_t>(b->item.rows.size() + 100);
                 },
                 "batch: item bag 0 ends past the rows"},
        BadBatch{"RowPastItsTable", [](Batch* b) { b->item.rows[0] = 20; },
                 "batch: row 20 out of range for table 'item_0'"},
        BadBatch{"NegativeRow", [](Batch* b) { b->user.rows[1] = -1; },
                 "batch: row -1 out of range for table 'user_0'"}),
    [](const ::testing::TestParamInfo<BadBatch>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace fuserank::engine
