// The model spec's `storage` field: a storage: redis table takes no rows or oov, may be
// int8 like a local one, round-trips through ModelSpecToYaml, and its tensor is not expected
// in the weights.
#include <string>

#include "engine/model_memory.h"
#include "engine/model_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

using ::testing::HasSubstr;

std::string Spec(const std::string& item_table, const std::string& dtype = "fp32") {
  return R"(name: m
weights: m.safetensors
embedding_dtype: )" +
         dtype + R"(
tables:
  - {name: user_id, side: user, rows: 10, dim: 4}
  - )" + item_table +
         R"(
interaction: concat
top_mlp: [1]
)";
}

TEST(ModelSpecStorageTest, ARedisTableIsAddressedByRawIdsAndRoundTrips) {
  absl::StatusOr<ModelSpec> spec =
      ParseModelSpec(Spec("{name: item_id, side: item, dim: 4, storage: redis}"), "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->tables[0].remote());
  EXPECT_TRUE(spec->tables[1].remote());
  EXPECT_EQ(spec->tables[1].rows, 0);
  EXPECT_TRUE(spec->has_remote_tables());
  absl::StatusOr<ModelSpec> again = ParseModelSpec(ModelSpecToYaml(*spec), "");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << ModelSpecToYaml(*spec);
  EXPECT_TRUE(again->tables[1].remote());
  for (const SpecTensor& tensor : SpecTensors(*spec)) {
    EXPECT_NE(tensor.name, "embeddings.item_id.weight");
  }
}

TEST(ModelSpecStorageTest, RowsOrOovOnARedisTableAreRefusedNamingTheTable) {
  for (const char* table : {"{name: item_id, side: item, dim: 4, storage: redis, rows: 5}",
                            "{name: item_id, side: item, dim: 4, storage: redis, oov: reject}"}) {
    absl::StatusOr<ModelSpec> spec = ParseModelSpec(Spec(table), "");
    ASSERT_FALSE(spec.ok()) << table;
    EXPECT_THAT(spec.status().message(), HasSubstr("tables[1]")) << table;
    EXPECT_THAT(spec.status().message(), HasSubstr("storage: redis")) << table;
  }
}

TEST(ModelSpecStorageTest, ALocalTableStillNeedsRowsAndStorageIsChecked) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(Spec("{name: item_id, side: item, dim: 4}"), "");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("tables[1].rows"));
  spec = ParseModelSpec(Spec("{name: item_id, side: item, rows: 3, dim: 4, storage: s3}"), "");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("storage"));
}

TEST(ModelSpecStorageTest, Int8RedisTablesParse) {
  absl::StatusOr<ModelSpec> spec =
      ParseModelSpec(Spec("{name: item_id, side: item, dim: 4, storage: redis}", "int8"), "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->embedding_dtype, DType::kInt8);
  EXPECT_TRUE(spec->tables[1].remote());
}

}  // namespace
}  // namespace fuserank::engine
