// HotRowMetrics: the hot-row caches of the served models in fuserank_embedding_cache_
// lookups_total, fuserank_hot_rows and fuserank_hot_rows_version at every scrape; tables
// of one name in two models summed; counters that never go back across reloads.
#include "server/hot_row_metrics.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model_loader.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_model.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

// Model `name` at `version`: user_0 and `item` (50 rows, width 4).
std::string Write(const std::string& dir, const std::string& name, const std::string& version,
                  const std::string& item = "item_0") {
  engine::ModelSpec spec = testing::SmallSpec(1, 1, 50, 4);
  spec.name = name;
  spec.version = version;
  spec.weights_path = name + ".safetensors";
  spec.tables[1].name = item;
  absl::StatusOr<std::string> path =
      testing::WriteTestModel(testing::MakeRandomModel(spec, 9), dir);
  EXPECT_TRUE(path.ok()) << path.status();
  return path.ok() ? *path : "";
}

VersionLoader Loader() {
  return [](const std::string& name, const std::string& path, const ServedModel* previous) {
    ModelLoaderOptions options;
    options.device = engine::DeviceChoice::kCpu;
    options.backend.workers = 1;
    options.backend.max_batch_candidates = 64;
    options.batcher.max_batch_candidates = 64;
    return LoadModelVersion(name, path, options, previous);
  };
}

// The value of series `series` ("name{labels}") in `text`, or -1.
double Value(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

std::string Lookups(const std::string& table, const std::string& result) {
  return absl::StrCat("fuserank_embedding_cache_lookups_total{result=\"", result, "\",table=\"",
                      table, "\"}");
}

class HotRowMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fuserank::testing::MakeTempDir(absl::StrCat(
        "hot_row_metrics_", ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create("");
    ASSERT_TRUE(metrics.ok());
    metrics_ = std::move(*metrics);
    models_ = std::make_unique<ServedModels>(Loader(), metrics_.get());
  }

  engine::HotRowManager& Manager(const std::string& model) {
    return *(*models_->Acquire(model))->hot_rows->manager();
  }

  void Set(const std::string& model, const std::string& table, std::vector<int64_t> ids) {
    ASSERT_TRUE(models_
                    ->ChangeServingVersion(model,
                                           [&](const ServedModel& v) {
                                             return v.hot_rows->Set({{table, ids}}).status();
                                           })
                    .ok());
  }

  std::string dir_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<ServedModels> models_;
};

TEST_F(HotRowMetricsTest, ExportsTheCountsHotRowsAndVersionAtEveryScrape) {
  ASSERT_TRUE(models_->Load("", Write(dir_ + "/a", "a", "1"), false).ok());
  HotRowMetrics exporter(models_.get(), metrics_.get());
  std::string text = metrics_->Scrape();
  EXPECT_EQ(Value(text, Lookups("item_0", "hit")), 0) << "the warm-up is not counted";
  EXPECT_EQ(Value(text, Lookups("item_0", "miss")), 0);
  EXPECT_EQ(Value(text, "fuserank_hot_rows_version"), 0);

  Set("a", "item_0", {1, 2, 3});
  Manager("a").RecordLookups(1, 30, 70);
  Manager("a").RecordLookups(0, 0, 5);
  text = metrics_->Scrape();
  EXPECT_EQ(Value(text, Lookups("item_0", "hit")), 30);
  EXPECT_EQ(Value(text, Lookups("item_0", "miss")), 70);
  EXPECT_EQ(Value(text, Lookups("user_0", "miss")), 5);
  EXPECT_EQ(Value(text, R"(fuserank_hot_rows{table="item_0"})"), 3);
  EXPECT_EQ(Value(text, R"(fuserank_hot_rows{table="user_0"})"), 0);
  EXPECT_EQ(Value(text, "fuserank_hot_rows_version"), 1);

  Manager("a").RecordLookups(1, 1, 0);
  text = metrics_->Scrape();
  EXPECT_EQ(Value(text, Lookups("item_0", "hit")), 31) << "increments, not totals, are added";
  EXPECT_EQ(Value(text, Lookups("item_0", "miss")), 70);
}

TEST_F(HotRowMetricsTest, ATableNameSharedByTwoModelsIsSummed) {
  ASSERT_TRUE(models_->Load("", Write(dir_ + "/a", "a", "1"), false).ok());
  ASSERT_TRUE(models_->Load("", Write(dir_ + "/b", "b", "1", "item_b"), false).ok());
  HotRowMetrics exporter(models_.get(), metrics_.get());
  Set("a", "user_0", {1, 2});
  Set("b", "user_0", {3});
  Set("b", "item_b", {3, 4, 5, 6});
  Manager("a").RecordLookups(0, 2, 3);
  Manager("b").RecordLookups(0, 10, 20);
  const std::string text = metrics_->Scrape();
  EXPECT_EQ(Value(text, Lookups("user_0", "hit")), 12);
  EXPECT_EQ(Value(text, Lookups("user_0", "miss")), 23);
  EXPECT_EQ(Value(text, R"(fuserank_hot_rows{table="user_0"})"), 3);
  EXPECT_EQ(Value(text, R"(fuserank_hot_rows{table="item_b"})"), 4);
  EXPECT_EQ(Value(text, "fuserank_hot_rows_version"), 1 + 2) << "the models' versions summed";
}

TEST_F(HotRowMetricsTest, CountersNeverGoBackAcrossReloads) {
  const std::string v1 = Write(dir_ + "/v1", "a", "1");
  const std::string v2 = Write(dir_ + "/v2", "a", "2");
  const std::string renamed = Write(dir_ + "/v3", "a", "3", "item_new");
  ASSERT_TRUE(models_->Load("", v1, false).ok());
  HotRowMetrics exporter(models_.get(), metrics_.get());
  Set("a", "item_0", {1, 2, 3});
  ModelHandle old = *models_->Acquire("a");
  old->hot_rows->manager()->RecordLookups(1, 10, 20);
  EXPECT_EQ(Value(metrics_->Scrape(), Lookups("item_0", "hit")), 10);

  ASSERT_TRUE(models_->Reload("a", v2).ok());
  // A request still finishing on the retired version after the swap: counted once, when
  // the retired version is freed.
  old->hot_rows->manager()->RecordLookups(1, 4, 0);
  EXPECT_EQ(Value(metrics_->Scrape(), Lookups("item_0", "hit")), 10);
  old.reset();
  for (int i = 0; i < 10000 && models_->versions_freed() < 1; ++i)
    absl::SleepFor(absl::Milliseconds(1));
  ASSERT_EQ(models_->versions_freed(), 1) << "the retired version was never freed";
  Manager("a").RecordLookups(1, 6, 1);
  std::string text = metrics_->Scrape();
  EXPECT_EQ(Value(text, Lookups("item_0", "hit")), 20);
  EXPECT_EQ(Value(text, Lookups("item_0", "miss")), 21);
  EXPECT_EQ(Value(text, R"(fuserank_hot_rows{table="item_0"})"), 3) << "the set came along";
  EXPECT_EQ(Value(text, "fuserank_hot_rows_version"), 2);

  ASSERT_TRUE(models_->Reload("a", renamed).ok());
  text = metrics_->Scrape();
  EXPECT_EQ(Value(text, Lookups("item_0", "hit")), 20) << "a counter stays when its table goes";
  EXPECT_EQ(Value(text, R"(fuserank_hot_rows{table="item_0"})"), -1)
      << "no model has it now: its series is gone";
  EXPECT_EQ(Value(text, R"(fuserank_hot_rows{table="item_new"})"), 0);
  EXPECT_EQ(Value(text, "fuserank_hot_rows_version"), 2) << "nothing to carry: no swap";

  // item_0 back: its counts start at 0 (the version it replaces has none to carry) and
  // are added to the counter from there.
  ASSERT_TRUE(models_->Reload("a", v1).ok());
  EXPECT_EQ(Value(metrics_->Scrape(), Lookups("item_0", "hit")), 20);
  Manager("a").RecordLookups(1, 5, 2);
  text = metrics_->Scrape();
  EXPECT_EQ(Value(text, Lookups("item_0", "hit")), 25);
  EXPECT_EQ(Value(text, Lookups("item_0", "miss")), 23);
}

TEST_F(HotRowMetricsTest, StopsReadingTheModelsOnceDestroyed) {
  ASSERT_TRUE(models_->Load("", Write(dir_ + "/a", "a", "1"), false).ok());
  {
    HotRowMetrics exporter(models_.get(), metrics_.get());
    metrics_->Scrape();
  }
  Manager("a").RecordLookups(1, 5, 5);
  EXPECT_EQ(Value(metrics_->Scrape(), Lookups("item_0", "hit")), 0);
}

}  // namespace
}  // namespace fuserank::server
