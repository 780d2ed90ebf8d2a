// InputChanges: what a client must send differently to a new version, from the two specs
// alone: tables gone or new (by name and side), ids a table refuses now (oov: reject, fewer
// rows under it), dense widths; nothing for what clients do not see.
#include "server/input_changes.h"

#include "gtest/gtest.h"
#include "tests/testing/test_model.h"

namespace fuserank::server {
namespace {

using engine::ModelSpec;
using engine::Oov;

TEST(InputChangesTest, NothingClientsSeeChangedSaysNothing) {
  const ModelSpec before = testing::SmallSpec(1, 2, 100, 8);
  ModelSpec after = before;
  after.version = "2";
  after.tables[1].dim = 16;     // widths, rows and layers are the model's business
  after.tables[2].rows = 5000;  // more rows under modulo: every id still maps
  after.top_mlp = {32, 1};
  EXPECT_EQ(InputChanges(before, after), "");
}

TEST(InputChangesTest, NamesEveryChangeInOrder) {
  const ModelSpec before = testing::SmallSpec(1, 2, 100, 8);  // user_0, item_0, item_1
  ModelSpec after = before;
  after.tables[1].name = "item_9";             // item_0 gone, item_9 new
  after.tables[0].side = engine::Side::kItem;  // user_0 moved to the item side
  after.tables[2].oov = Oov::kReject;          // item_1: was modulo
  after.dense_user = 4;
  after.dense_item = 1;
  EXPECT_EQ(InputChanges(before, after),
            "tables gone: user_0 (user), item_0 (item); new tables: user_0 (item), item_9 "
            "(item); item_1 refuses ids outside [0, 100) (oov: reject; was modulo); user dense "
            "2 -> 4; item dense 3 -> 1");
}

TEST(InputChangesTest, FewerRowsUnderRejectRefuseIdsThatWereTaken) {
  ModelSpec before = testing::SmallSpec(1, 1, 100, 8);
  before.tables[1].oov = Oov::kReject;
  ModelSpec after = before;
  after.tables[1].rows = 60;
  EXPECT_EQ(InputChanges(before, after), "item_0 refuses ids from 60 (was 100, oov: reject)");
  after.tables[1].rows = 200;  // more rows: every id taken before still is
  EXPECT_EQ(InputChanges(before, after), "");
  after.tables[1].oov = Oov::kModulo;  // laxer: nothing refused now
  EXPECT_EQ(InputChanges(before, after), "");
}

TEST(InputChangesTest, ARedisTableMadeLocalUnderRejectSaysSo) {
  ModelSpec before = testing::SmallSpec(1, 1, 100, 8);
  before.tables[1].storage = engine::Storage::kRedis;  // any int64 id was taken
  before.tables[1].rows = 0;
  ModelSpec after = testing::SmallSpec(1, 1, 100, 8);
  after.tables[1].oov = Oov::kReject;
  EXPECT_EQ(InputChanges(before, after),
            "item_0 refuses ids outside [0, 100) (oov: reject; was storage: redis)");
}

}  // namespace
}  // namespace fuserank::server
