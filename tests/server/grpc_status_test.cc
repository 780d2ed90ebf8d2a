#include "server/grpc_status.h"

#include <string>

#include "gtest/gtest.h"

namespace fuserank::server {
namespace {

TEST(GrpcStatusTest, OkStaysOk) { EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok()); }

TEST(GrpcStatusTest, EveryCodeMapsToTheSameGrpcCode) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status status(static_cast<absl::StatusCode>(code), "why");
    const grpc::Status converted = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(converted.error_code()), code);
    EXPECT_EQ(converted.error_message(), "why");
  }
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError("x")).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("x")).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpcStatus(absl::ResourceExhaustedError("x")).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(ToGrpcStatus(absl::UnavailableError("x")).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(GrpcStatusTest, LongMessagesAreTruncated) {
  const std::string long_message(5000, 'a');
  const grpc::Status converted = ToGrpcStatus(absl::InvalidArgumentError(long_message));
  EXPECT_LE(converted.error_message().size(), kMaxStatusMessageBytes);
  EXPECT_EQ(converted.error_message().substr(0, 10), "aaaaaaaaaa");
  EXPECT_NE(converted.error_message().find("(truncated)"), std::string::npos);
}

TEST(GrpcStatusTest, TruncationNeverSplitsAUtf8Character) {
  std::string message;
  while (message.size() < 3000) message += "\xc3\xa9";  // U+00E9, two bytes
  message = "x" + message;  // shift so the cut point falls inside a character
  const std::string out = ToGrpcStatus(absl::InternalError(message)).error_message();
  const std::string body = out.substr(0, out.find("..."));
  ASSERT_GE(body.size(), 2u);
  EXPECT_EQ(body.size() % 2, 1u) << "cut inside a two-byte character";
}

TEST(GrpcStatusTest, CodeNamesAreTheGrpcNames) {
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::OK), "OK");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::INVALID_ARGUMENT), "INVALID_ARGUMENT");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
}

}  // namespace
}  // namespace fuserank::server
