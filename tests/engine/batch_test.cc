// Batch::Clear keeps capacity; Batch::Append concatenates requests with shifted offsets.
#include "engine/batch.h"

#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

// One request of `candidates` candidates, with one user table and one item table; ids
// and dense values derive from `tag` so batches are told apart.
Batch OneRequest(int candidates, int user_ids, int tag) {
  Batch b;
  b.candidate_begin = {0, static_cast<uint32_t>(candidates)};
  b.top_k = {static_cast<uint32_t>(candidates)};
  for (int i = 0; i < user_ids; ++i) {
    b.user.rows.push_back(tag * 100 + i);
    b.user.weights.push_back(1.0f);
  }
  b.user.bag_begin.push_back(user_ids);
  for (int c = 0; c < candidates; ++c) {
    for (int i = 0; i <= c; ++i) {  // candidate c has c + 1 ids
      b.item.rows.push_back(tag * 1000 + c * 10 + i);
      b.item.weights.push_back(0.5f * i);
    }
    b.item.bag_begin.push_back(static_cast<uint32_t>(b.item.rows.size()));
    b.item_dense.push_back(tag + 0.25f * c);
  }
  b.user_dense = {static_cast<float>(tag)};
  return b;
}

TEST(BatchTest, AppendShiftsOffsets) {
  Batch batch = OneRequest(2, 3, 1);
  const Batch second = OneRequest(3, 0, 2);
  batch.Append(second);
  EXPECT_EQ(batch.num_requests(), 2);
  EXPECT_EQ(batch.num_candidates(), 5);
  EXPECT_EQ(batch.candidate_begin, (std::vector<uint32_t>{0, 2, 5}));
  EXPECT_EQ(batch.top_k, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(batch.user.bag_begin, (std::vector<uint32_t>{0, 3, 3}));  // empty bag kept
  EXPECT_EQ(batch.user.rows, (std::vector<int32_t>{100, 101, 102}));
  EXPECT_EQ(batch.item.bag_begin, (std::vector<uint32_t>{0, 1, 3, 4, 6, 9}));
  EXPECT_EQ(batch.item.rows,
            (std::vector<int32_t>{1000, 1010, 1011, 2000, 2010, 2011, 2020, 2021, 2022}));
  EXPECT_EQ(batch.item.weights.size(), batch.item.rows.size());
  EXPECT_EQ(batch.item.weights[8], 1.0f);
  EXPECT_EQ(batch.user_dense, (std::vector<float>{1, 2}));
  EXPECT_EQ(batch.item_dense, (std::vector<float>{1, 1.25f, 2, 2.25f, 2.5f}));
}

TEST(BatchTest, AppendToEmptyCopiesAndSelfAppendDoubles) {
  Batch empty;
  const Batch one = OneRequest(2, 1, 3);
  empty.Append(one);
  EXPECT_EQ(empty.candidate_begin, one.candidate_begin);
  EXPECT_EQ(empty.item.bag_begin, one.item.bag_begin);
  EXPECT_EQ(empty.item.rows, one.item.rows);
  EXPECT_EQ(empty.user.bag_begin, one.user.bag_begin);

  empty.Append(empty);
  EXPECT_EQ(empty.candidate_begin, (std::vector<uint32_t>{0, 2, 4}));
  EXPECT_EQ(empty.item.bag_begin, (std::vector<uint32_t>{0, 1, 3, 4, 6}));
  EXPECT_EQ(empty.user.bag_begin, (std::vector<uint32_t>{0, 1, 2}));
}

TEST(BatchTest, ClearEmptiesButKeepsCapacity) {
  Batch batch = OneRequest(50, 20, 1);
  batch.Append(OneRequest(40, 5, 2));
  const size_t rows_capacity = batch.item.rows.capacity();
  const size_t begin_capacity = batch.item.bag_begin.capacity();
  const size_t dense_capacity = batch.item_dense.capacity();
  batch.Clear();
  EXPECT_EQ(batch.num_requests(), 0);
  EXPECT_EQ(batch.num_candidates(), 0);
  EXPECT_EQ(batch.item.num_bags(), 0u);
  EXPECT_EQ(batch.user.num_bags(), 0u);
  EXPECT_TRUE(batch.item.rows.empty());
  EXPECT_TRUE(batch.top_k.empty());
  EXPECT_TRUE(batch.user_dense.empty());
  EXPECT_TRUE(batch.item_dense.empty());
  EXPECT_EQ(batch.model, nullptr);
  EXPECT_EQ(batch.item.rows.capacity(), rows_capacity);
  EXPECT_EQ(batch.item.bag_begin.capacity(), begin_capacity);
  EXPECT_EQ(batch.item_dense.capacity(), dense_capacity);
  batch.Append(OneRequest(1, 1, 4));  // usable again after Clear
  EXPECT_EQ(batch.candidate_begin, (std::vector<uint32_t>{0, 1}));
}

}  // namespace
}  // namespace fuserank::engine
