// AcceptGate: accepted calls are waited for, and none gets in once the gate refuses.
#include "server/accept_gate.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

using ::testing::HasSubstr;

TEST(AcceptGateTest, AcceptsUntilRefusingThenAnswersUnavailable) {
  AcceptGate gate;
  ASSERT_TRUE(gate.Accept().ok());
  gate.Done();
  gate.Refuse();
  const absl::Status refused = gate.Accept();
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("shutting down"));
}

TEST(AcceptGateTest, WaitIdleWaitsForEveryAcceptedCall) {
  AcceptGate gate;
  EXPECT_TRUE(gate.WaitIdle(absl::Now()));  // nothing accepted
  ASSERT_TRUE(gate.Accept().ok());
  ASSERT_TRUE(gate.Accept().ok());
  gate.Refuse();  // refusing new calls does not cut off the accepted ones
  EXPECT_FALSE(gate.WaitIdle(absl::Now() + absl::Milliseconds(1)));
  gate.Done();
  EXPECT_FALSE(gate.WaitIdle(absl::Now() + absl::Milliseconds(1)));
  std::thread last([&] { gate.Done(); });
  EXPECT_TRUE(gate.WaitIdle(absl::InfiniteFuture()));
  last.join();
}

}  // namespace
}  // namespace fuserank::server
