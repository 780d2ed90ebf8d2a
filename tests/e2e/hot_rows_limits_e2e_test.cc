// The admin port's message limits through the real server on 127.0.0.1: a SetHotRows
// within cache.hot_rows_per_table but past gRPC's default 4 MiB (500,000 ids near 2^62,
// ~4.5 MB) is installed; one with more ids than the capacity is INVALID_ARGUMENT naming
// the key, the capacity and the ids sent, at any size the transport holds (it was gRPC's
// RESOURCE_EXHAUSTED past the port's receive limit); one larger than any valid SetHotRows
// is INVALID_ARGUMENT naming the size (SPEC section 3), an unknown table NOT_FOUND below
// that size; one past the transport quota is reset and the port serves on.
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/hot_rows_util.h"
#include "tests/e2e/rank_check_util.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

using ::testing::HasSubstr;

constexpr int kCapacity = 500000;
constexpr int kRows = 300;

// `n` distinct ids from 2^62 on: 9 bytes each on the wire; oov: modulo maps them to rows.
std::vector<int64_t> LargeIds(int n) {
  std::vector<int64_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = (int64_t{1} << 62) + i;
  return ids;
}

class HotRowsLimitsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(kCapacity); }

  void Start(int capacity) {
    if (server_ != nullptr) server_->Shutdown();
    const std::string dir = testing::TempDir("hot_rows_limits");
    engine::ModelSpec spec = testing::SmallSpec(1, 1, kRows, 4);
    spec.name = "wide";
    spec.weights_path = "wide.safetensors";
    absl::StatusOr<std::string> path =
        testing::WriteTestModel(testing::MakeRandomModel(spec, 7), dir);
    ASSERT_TRUE(path.ok()) << path.status();
    const std::string yaml = absl::StrCat(
        "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", metrics_listen: \"\", "
        "shutdown_grace_seconds: 2}\n"
        "engine: {device: cpu, streams: 1}\n"
        "cache: {hot_rows_per_table: ",
        capacity, ", policy: static}\nmodel: {path: \"", *path, "\"}\n");
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "limits.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<server::Server>> started = server::Server::Start(*config);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    admin_ = std::make_unique<testing::HotRowsAdmin>(server_->admin_port());
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  std::unique_ptr<server::Server> server_;
  std::unique_ptr<testing::HotRowsAdmin> admin_;
};

TEST_F(HotRowsLimitsE2eTest, ASetWithinCapacityPastFourMebibytesIsInstalled) {
  v1::SetHotRowsRequest wire;
  v1::TableHotRows* table = wire.add_tables();
  table->set_table("item_0");
  for (int64_t id : LargeIds(kCapacity)) table->add_ids(id);
  ASSERT_GT(wire.ByteSizeLong(), size_t{4} << 20) << "the request must pass gRPC's default";

  const testing::AdminReply set = admin_->Set({{"item_0", LargeIds(kCapacity)}});
  ASSERT_TRUE(set.status.ok()) << set.status.error_code() << ": " << set.status.error_message();
  const v1::TableHotRowsStatus* item = testing::FindTable(set.response, "item_0");
  ASSERT_NE(item, nullptr);
  EXPECT_EQ(item->hot_rows(), static_cast<uint32_t>(kRows));  // every row of the table
  EXPECT_EQ(item->capacity(), static_cast<uint32_t>(kCapacity));
}

TEST_F(HotRowsLimitsE2eTest, OneIdPastTheCapacityIsInvalidArgumentNotResourceExhausted) {
  const testing::AdminReply set = admin_->Set({{"item_0", LargeIds(kCapacity + 1)}});
  EXPECT_EQ(set.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << set.status.error_message();
  EXPECT_THAT(set.status.error_message(), HasSubstr("cache.hot_rows_per_table"));
  const testing::AdminReply get = admin_->Get({"item_0"});
  ASSERT_TRUE(get.status.ok()) << get.status.error_message();
  EXPECT_EQ(get.response.tables(0).hot_rows(), 0u);  // nothing changed
}

// 500,000 ids against the default capacity: 4.5 MB, past the receive limit the port had
// (4 MiB), which answered RESOURCE_EXHAUSTED "Received message larger than max".
TEST_F(HotRowsLimitsE2eTest, ASetFarOverCapacityIsInvalidArgumentNamingTheCapacityAndTheIds) {
  Start(4096);
  ASSERT_NE(server_, nullptr);
  const testing::AdminReply set = admin_->Set({{"item_0", LargeIds(kCapacity)}});
  EXPECT_EQ(set.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << set.status.error_message();
  EXPECT_THAT(set.status.error_message(),
              HasSubstr("table 'item_0': 500000 ids, more than the hot-set capacity"));
  EXPECT_THAT(set.status.error_message(),
              HasSubstr("hot-set capacity 4096 (cache.hot_rows_per_table)"));
  const testing::AdminReply get = admin_->Get({"item_0"});
  ASSERT_TRUE(get.status.ok()) << get.status.error_message();
  EXPECT_EQ(get.response.tables(0).hot_rows(), 0u);  // nothing changed
  EXPECT_TRUE(admin_->Set({{"item_0", LargeIds(4096)}}).status.ok()) << "the port still serves";
}

// Within the largest valid size the request is parsed and the engine answers: an unknown
// table is NOT_FOUND even where it also lists more ids than the capacity (SPEC section 3).
TEST_F(HotRowsLimitsE2eTest, AnUnknownTableOverCapacityIsNotFound) {
  Start(4096);
  ASSERT_NE(server_, nullptr);
  const testing::AdminReply set = admin_->Set({{"nope", LargeIds(5000)}});
  EXPECT_EQ(set.status.error_code(), grpc::StatusCode::NOT_FOUND) << set.status.error_message();
  EXPECT_THAT(set.status.error_message(), HasSubstr("'nope'"));
  const testing::AdminReply item = admin_->Set({{"item_0", LargeIds(5000)}});
  EXPECT_EQ(item.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(item.status.error_message(),
              HasSubstr("table 'item_0': 5000 ids, more than the hot-set capacity 4096"));
}

// Ids within the capacity, but a model name (3 MiB) no valid request has: refused by its
// size before it is parsed, naming the size.
TEST_F(HotRowsLimitsE2eTest, ASetLargerThanAnyValidOneIsInvalidArgumentNamingItsSize) {
  Start(4096);
  ASSERT_NE(server_, nullptr);
  const testing::AdminReply set =
      admin_->Set({{"item_0", LargeIds(10)}}, std::string(size_t{3} << 20, 'm'));
  EXPECT_EQ(set.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << set.status.error_message();
  EXPECT_THAT(set.status.error_message(), HasSubstr("more than the largest the served models"));
}

// Past the port's transport quota (2 x 4 MiB + 32 MiB here) the transport resets the
// stream (RESOURCE_EXHAUSTED) before any handler sees it; the port serves on.
TEST_F(HotRowsLimitsE2eTest, AMessagePastTheTransportQuotaIsResetAndThePortServesOn) {
  Start(4096);
  ASSERT_NE(server_, nullptr);
  const testing::AdminReply set = admin_->Set({{"item_0", LargeIds(5000000)}});  // 45 MB
  EXPECT_FALSE(set.status.ok());
  EXPECT_NE(set.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << "the handler answered (" << set.status.error_message() << "): the transport let "
      << "45 MB through";
  const testing::AdminReply get = admin_->Get({"item_0"});
  ASSERT_TRUE(get.status.ok()) << get.status.error_message();
  EXPECT_EQ(get.response.tables(0).hot_rows(), 0u);
}

}  // namespace
}  // namespace fuserank
