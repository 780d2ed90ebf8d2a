#include "bench/loadgen/rate_schedule.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fuserank::bench {
namespace {

TEST(ParseScheduleTest, ReadsPhasesInOrder) {
  absl::StatusOr<std::vector<RatePhase>> phases = ParseSchedule("200:0.4,800:0.2,200:1");
  ASSERT_TRUE(phases.ok()) << phases.status();
  ASSERT_EQ(phases->size(), 3u);
  EXPECT_DOUBLE_EQ((*phases)[1].rate, 800);
  EXPECT_DOUBLE_EQ((*phases)[1].duration_s, 0.2);
  EXPECT_DOUBLE_EQ(ScheduleSeconds(*phases), 1.6);
  EXPECT_TRUE(ParseSchedule("")->empty());
}

struct BadEntry {
  const char* text;
  const char* message;  // a part of the error
};

class ParseScheduleRefusesTest : public ::testing::TestWithParam<BadEntry> {};

// Each error names the entry and what is wrong with it (a rate of 0 was refused as "give
// exactly one of --concurrency and --rate"; inf and nan were taken).
TEST_P(ParseScheduleRefusesTest, NamingTheEntry) {
  absl::StatusOr<std::vector<RatePhase>> phases = ParseSchedule(GetParam().text);
  ASSERT_FALSE(phases.ok()) << GetParam().text;
  EXPECT_EQ(phases.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(phases.status().message().find(GetParam().message), std::string::npos)
      << phases.status();
}

INSTANTIATE_TEST_SUITE_P(
    Entries, ParseScheduleRefusesTest,
    ::testing::Values(BadEntry{"0:5", "--schedule entry 1 '0:5': the rate must be finite and > 0"},
                      BadEntry{"100:1,inf:1",
                               "--schedule entry 2 'inf:1': the rate must be finite"},
                      BadEntry{"nan:1", "entry 1 'nan:1': the rate must be finite and > 0"},
                      BadEntry{"-5:1", "entry 1 '-5:1': the rate must be"},
                      BadEntry{"100:0", "entry 1 '100:0': the duration must be finite and > 0"},
                      BadEntry{"100:1,100:inf", "entry 2 '100:inf': the duration must be finite"},
                      BadEntry{"100:nan", "entry 1 '100:nan': the duration must be"},
                      BadEntry{"100", "entry 1 '100': not RATE:SECONDS"},
                      BadEntry{"100:1:2", "entry 1 '100:1:2': not RATE:SECONDS"},
                      BadEntry{"100:1,,100:1", "entry 2 '': not RATE:SECONDS"},
                      BadEntry{"fast:1", "entry 1 'fast:1': not RATE:SECONDS"}));

TEST(ValidateScheduleTest, NamesThePhase) {
  EXPECT_TRUE(ValidateSchedule({{100, 1}, {5, 0.5}}).ok());
  EXPECT_TRUE(ValidateSchedule({}).ok());
  const absl::Status status = ValidateSchedule({{100, 1}, {0, 1}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--schedule phase 2 of 2: the rate must be finite and > 0"),
            std::string::npos)
      << status;
  EXPECT_FALSE(ValidateSchedule({{1.0 / 0.0, 1}}).ok());
  EXPECT_FALSE(ValidateSchedule({{100, 0.0 / 0.0}}).ok());
}

TEST(RateScheduleTest, OneRateNeverChanges) {
  const RateSchedule schedule(250, {}, 1000);
  EXPECT_EQ(schedule.PhaseAt(0), std::make_pair(250.0, RateSchedule::kNever));
  EXPECT_EQ(schedule.PhaseAt(5000000000), std::make_pair(250.0, RateSchedule::kNever));
}

TEST(RateScheduleTest, PhasesFollowTheWindowStart) {
  const int64_t start = 1000000000;  // 1 s of warm-up before the window
  const RateSchedule schedule(200, {{200, 0.4}, {800, 0.2}, {100, 0.4}}, start);
  // The warm-up runs at the first rate until the window starts.
  EXPECT_EQ(schedule.PhaseAt(0), std::make_pair(200.0, start));
  EXPECT_EQ(schedule.PhaseAt(start), std::make_pair(200.0, start + 400000000));
  EXPECT_EQ(schedule.PhaseAt(start + 399999999), std::make_pair(200.0, start + 400000000));
  EXPECT_EQ(schedule.PhaseAt(start + 400000000), std::make_pair(800.0, start + 600000000));
  EXPECT_EQ(schedule.PhaseAt(start + 600000000), std::make_pair(100.0, start + 1000000000));
  // After the window the last rate holds.
  EXPECT_EQ(schedule.PhaseAt(start + 1000000000), std::make_pair(100.0, RateSchedule::kNever));
}

}  // namespace
}  // namespace fuserank::bench
