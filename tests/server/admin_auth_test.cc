// AdminAuth: the token file (newline stripped; empty, unprintable, readable by others,
// oversized or not a regular file refused), the
// `authorization: Bearer <token>` check (missing, malformed, wrong, right) and the
// constant-time comparison it rests on.
#include "server/admin_auth.h"

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace fuserank::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using Metadata = std::multimap<grpc::string_ref, grpc::string_ref>;

std::string WriteTokenFile(const std::string& name, const std::string& contents,
                           mode_t mode = 0600) {
  const std::string path = fuserank::testing::MakeTempDir(name) + "/token";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
  ::chmod(path.c_str(), mode);
  return path;
}

// The metadata strings must outlive the map: keep them in `storage`.
Metadata With(std::initializer_list<std::pair<std::string, std::string>> entries,
              std::vector<std::string>* storage) {
  storage->clear();
  storage->reserve(2 * entries.size());
  Metadata metadata;
  for (const auto& [key, value] : entries) {
    storage->push_back(key);
    const std::string& k = storage->back();
    storage->push_back(value);
    const std::string& v = storage->back();
    metadata.emplace(grpc::string_ref(k), grpc::string_ref(v));
  }
  return metadata;
}

TEST(ConstantTimeEqualsTest, ComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("s3cret", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3creT"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3cre"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3cret!"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", ""));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), "a"));
}

TEST(AdminAuthTest, NoTokenFileAllowsEveryCall) {
  absl::StatusOr<AdminAuth> auth = AdminAuth::FromTokenFile("");
  ASSERT_TRUE(auth.ok());
  EXPECT_FALSE(auth->required());
  EXPECT_TRUE(auth->CheckMetadata({}).ok());
}

TEST(AdminAuthTest, ReadsTheTokenFileStrippingTheTrailingNewline) {
  for (const char* contents : {"tok-123\n", "tok-123\r\n", "tok-123", "tok-123\n\n"}) {
    absl::StatusOr<AdminAuth> auth = AdminAuth::FromTokenFile(WriteTokenFile("token", contents));
    ASSERT_TRUE(auth.ok()) << auth.status();
    ASSERT_TRUE(auth->required());
    std::vector<std::string> storage;
    EXPECT_TRUE(auth->CheckMetadata(With({{"authorization", "Bearer tok-123"}}, &storage)).ok())
        << "file contents '" << contents << "'";
  }
}

TEST(AdminAuthTest, RefusesAnEmptyUnreadableOrUnprintableTokenAtStart) {
  for (const char* contents : {"", "\n", "\r\n"}) {
    absl::StatusOr<AdminAuth> auth = AdminAuth::FromTokenFile(WriteTokenFile("empty", contents));
    ASSERT_FALSE(auth.ok());
    EXPECT_EQ(auth.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(auth.status().message(), HasSubstr("server.admin_token_file: the token is empty"));
  }
  absl::StatusOr<AdminAuth> missing = AdminAuth::FromTokenFile("/nonexistent/token");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(),
              HasSubstr("server.admin_token_file: cannot read '/nonexistent/token'"));
  absl::StatusOr<AdminAuth> spaced = AdminAuth::FromTokenFile(WriteTokenFile("sp", "a b\n"));
  ASSERT_FALSE(spaced.ok());
  EXPECT_THAT(spaced.status().message(), HasSubstr("printable ASCII without spaces"));
}

TEST(AdminAuthTest, WarnsOfATokenFileItsGroupOrOthersCanRead) {
  for (const mode_t mode : {0644, 0640, 0604, 0440}) {
    const std::string path = WriteTokenFile("readable", "tok-123\n", mode);
    absl::StatusOr<AdminAuth> auth = AdminAuth::FromTokenFile(path);
    ASSERT_TRUE(auth.ok()) << std::oct << mode << ": " << auth.status();
    EXPECT_TRUE(auth->required());
    EXPECT_THAT(auth->warning(), AllOf(HasSubstr("server.admin_token_file: '" + path +
                                                 "' can be read by its group or by others"),
                                       HasSubstr("chmod 600"),
                                       HasSubstr("defaultMode: 0440 in a pod with an fsGroup")));
  }
  for (const mode_t mode : {0600, 0400}) {
    absl::StatusOr<AdminAuth> auth =
        AdminAuth::FromTokenFile(WriteTokenFile("private", "tok-123\n", mode));
    ASSERT_TRUE(auth.ok()) << std::oct << mode;
    EXPECT_EQ(auth->warning(), "") << std::oct << mode;
  }
}

// The token file's warning as a process of user and group `id` sees it (a child that drops
// root): 0 no warning, 1 a warning, 2 refused, 3 could not drop root.
int WarningAs(const std::string& path, uid_t id) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(id) != 0 || ::setuid(id) != 0) ::_exit(3);
    absl::StatusOr<AdminAuth> auth = AdminAuth::FromTokenFile(path);
    ::_exit(!auth.ok() ? 2 : auth->warning().empty() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(AdminAuthTest, AcceptsAKubernetesSecretVolumesLayoutWithoutAWarning) {
  // defaultMode 0440 (or 0400) in a pod with an fsGroup: 0440, owned by root, the server's group.
  if (::geteuid() != 0) GTEST_SKIP() << "a process of another user is started from root";
  const uid_t server = 54321;
  const std::string dir = fuserank::testing::MakeTempDir("secret_volume");
  ::chmod(dir.c_str(), 0755);
  const std::string path = dir + "/token";
  std::ofstream(path) << "tok-123\n";
  ASSERT_EQ(::chown(path.c_str(), 0, server), 0);
  ::chmod(path.c_str(), 0440);
  EXPECT_EQ(WarningAs(path, server), 0);
  ::chmod(path.c_str(), 0444);  // others too: warned of
  EXPECT_EQ(WarningAs(path, server), 1);
  ::chmod(path.c_str(), 0640);  // root may write it: not the Secret layout
  EXPECT_EQ(WarningAs(path, server), 1);
  // Root reading a root-owned 0440 file is no Secret layout: the group may be anyone's.
  ASSERT_EQ(::chown(path.c_str(), 0, 0), 0);
  ::chmod(path.c_str(), 0440);
  absl::StatusOr<AdminAuth> auth = AdminAuth::FromTokenFile(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_THAT(auth->warning(), HasSubstr("can be read by its group or by others"));
}

TEST(AdminAuthTest, RefusesAnOversizedTokenFileAndOneThatIsNoRegularFile) {
  absl::StatusOr<AdminAuth> big =
      AdminAuth::FromTokenFile(WriteTokenFile("big", std::string(kMaxTokenFileBytes + 1, 'a')));
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr("a token file holds at most 4096"));
  const std::string fifo = fuserank::testing::MakeTempDir("token_fifo") + "/token";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero"), ::testing::TempDir()}) {
    absl::StatusOr<AdminAuth> auth = AdminAuth::FromTokenFile(path);  // never blocks
    ASSERT_FALSE(auth.ok()) << path;
    EXPECT_THAT(auth.status().message(),
                AllOf(HasSubstr("server.admin_token_file: "), HasSubstr("not a regular file")));
  }
}

class AdminAuthCheckTest : public ::testing::Test {
 protected:
  absl::Status Check(std::initializer_list<std::pair<std::string, std::string>> entries) {
    return auth_.CheckMetadata(With(entries, &storage_));
  }

  AdminAuth auth_ = *AdminAuth::FromToken("tok-123");
  std::vector<std::string> storage_;
};

TEST_F(AdminAuthCheckTest, AcceptsTheRightBearerToken) {
  EXPECT_TRUE(Check({{"authorization", "Bearer tok-123"}}).ok());
  EXPECT_TRUE(Check({{"authorization", "bearer tok-123"}}).ok()) << "the scheme is case-blind";
  EXPECT_TRUE(Check({{"x-other", "1"}, {"authorization", "Bearer tok-123"}}).ok());
}

TEST_F(AdminAuthCheckTest, RefusesAMissingHeader) {
  const absl::Status status = Check({{"x-other", "Bearer tok-123"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(status.message(), HasSubstr("no 'authorization' metadata"));
  EXPECT_THAT(status.message(), HasSubstr("'authorization: Bearer <token>'"));
}

TEST_F(AdminAuthCheckTest, RefusesAWrongToken) {
  for (const char* value : {"Bearer tok-124", "Bearer tok-12", "Bearer tok-1234", "Bearer ",
                            "Bearer  tok-123", "Bearer tok-123 "}) {
    const absl::Status status = Check({{"authorization", value}});
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << value;
    EXPECT_THAT(status.message(), HasSubstr("the admin token is wrong")) << value;
    EXPECT_THAT(status.message(), ::testing::Not(HasSubstr("tok-123"))) << "never the token";
  }
}

TEST_F(AdminAuthCheckTest, RefusesOtherSchemesAndDuplicates) {
  for (const char* value : {"tok-123", "Basic tok-123", "Bearertok-123", ""}) {
    const absl::Status status = Check({{"authorization", value}});
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << value;
    EXPECT_THAT(status.message(), HasSubstr("is not 'Bearer <token>'")) << value;
  }
  const absl::Status twice =
      Check({{"authorization", "Bearer tok-123"}, {"authorization", "Bearer nope"}});
  EXPECT_EQ(twice.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(twice.message(), HasSubstr("more than one"));
}

}  // namespace
}  // namespace fuserank::server
