// FUSERANK_CHECK (engine/check.h): a failed check prints file, line, condition and message
// and aborts; a passing one evaluates no message.
#include "engine/check.h"

#include <csignal>
#include <string>

#include "gtest/gtest.h"

namespace fuserank {
namespace {

class CheckDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(CheckDeathTest, AFailedCheckAbortsWithFileLineConditionAndMessage) {
  const int workers = 4;
  EXPECT_EXIT(FUSERANK_CHECK(workers < 3) << "no worker " << workers,
              ::testing::KilledBySignal(SIGABRT),
              "check_test\\.cc:[0-9]+: check failed: workers < 3: no worker 4");
}

TEST_F(CheckDeathTest, AFailedCheckWithoutAMessageNamesTheCondition) {
  EXPECT_DEATH(FUSERANK_CHECK(1 + 1 == 3), "check_test\\.cc:[0-9]+: check failed: 1 \\+ 1 == 3\n");
}

TEST(CheckTest, APassingCheckEvaluatesNoMessage) {
  int evaluated = 0;
  auto message = [&] { return ++evaluated; };
  FUSERANK_CHECK(evaluated == 0) << message();
  EXPECT_EQ(evaluated, 0);
}

TEST(CheckTest, IsOneStatementInAnUnbracedIfElse) {
  bool else_taken = false;
  const bool condition = false;
  if (condition)
    FUSERANK_CHECK(true) << "never";
  else
    else_taken = true;
  EXPECT_TRUE(else_taken);
}

}  // namespace
}  // namespace fuserank
