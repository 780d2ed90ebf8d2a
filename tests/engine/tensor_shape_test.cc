// NumElements and ShapeString (engine/tensor_shape.h).
#include "engine/tensor_shape.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

TEST(TensorShapeTest, CountsElementsAndRefusesNegativeOrOverflowingShapes) {
  uint64_t n = 7;
  ASSERT_TRUE(NumElements(std::vector<int64_t>{2, 3, 4}, &n));
  EXPECT_EQ(n, 24u);
  ASSERT_TRUE(NumElements({}, &n));
  EXPECT_EQ(n, 1u);
  ASSERT_TRUE(NumElements(std::vector<int64_t>{5, 0}, &n));
  EXPECT_EQ(n, 0u);
  n = 7;
  EXPECT_FALSE(NumElements(std::vector<int64_t>{2, -1}, &n));
  EXPECT_FALSE(NumElements(std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 40}, &n));
  EXPECT_EQ(n, 7u) << "a refused shape leaves the count unchanged";
}

TEST(TensorShapeTest, WritesAShapeAsMessagesDo) {
  EXPECT_EQ(ShapeString(std::vector<int64_t>{2, 3}), "[2, 3]");
  EXPECT_EQ(ShapeString({}), "[]");
  EXPECT_EQ(ShapeString(std::vector<int64_t>{-1}), "[-1]");
}

}  // namespace
}  // namespace fuserank::engine
