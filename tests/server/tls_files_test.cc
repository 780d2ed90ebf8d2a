// server/tls_files: the PEM checks that stop a start with the key, the path and the reason.
#include "server/tls_files.h"

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace fuserank::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kTestData = std::string(FUSERANK_SOURCE_DIR) + "/tests/e2e/testdata/";

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(fuserank::testing::MakeTempDir("tls_files"), "/", name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TlsConfig Good() {
  TlsConfig tls;
  tls.cert_file = kTestData + "server.pem";
  tls.key_file = kTestData + "server.key";
  tls.client_ca_file = kTestData + "ca.pem";
  return tls;
}

TEST(TlsPemFilesTest, ReadsGoodFiles) {
  absl::StatusOr<TlsFiles> files = ReadTlsFiles(Good());
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(files->cert_chain, HasSubstr("BEGIN CERTIFICATE"));
  EXPECT_THAT(files->private_key, HasSubstr("PRIVATE KEY"));
  EXPECT_THAT(files->client_ca, HasSubstr("BEGIN CERTIFICATE"));
  TlsConfig no_ca = Good();
  no_ca.client_ca_file.clear();
  files = ReadTlsFiles(no_ca);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_TRUE(files->client_ca.empty());
}

TEST(TlsPemFilesTest, AMissingFileNamesKeyPathAndReason) {
  TlsConfig tls = Good();
  tls.key_file = "/nonexistent/server.key";
  const absl::Status status = ReadTlsFiles(tls).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("server.tls.key_file"), HasSubstr("/nonexistent/server.key"),
                    HasSubstr("No such file")));
}

TEST(TlsPemFilesTest, GarbageIsNotACertificate) {
  TlsConfig tls = Good();
  tls.cert_file = Write("garbage.pem", "not a certificate\n");
  const absl::Status status = ReadTlsFiles(tls).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("server.tls.cert_file"), HasSubstr(tls.cert_file),
                    HasSubstr("no PEM CERTIFICATE")));
}

TEST(TlsPemFilesTest, FilesInTheWrongPlaceAreRefused) {
  TlsConfig swapped = Good();
  std::swap(swapped.cert_file, swapped.key_file);
  const absl::Status status = ReadTlsFiles(swapped).status();
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("server.tls.cert_file"), HasSubstr("server.key")));
  TlsConfig key_as_ca = Good();
  key_as_ca.client_ca_file = kTestData + "client.key";
  EXPECT_THAT(std::string(ReadTlsFiles(key_as_ca).status().message()),
              HasSubstr("server.tls.client_ca_file"));
}

TEST(TlsPemFilesTest, ACorruptBlockIsRefused) {
  TlsConfig tls = Good();
  tls.cert_file = Write("corrupt.pem",
                        "-----BEGIN CERTIFICATE-----\n!!!! not base64 !!!!\n"
                        "-----END CERTIFICATE-----\n");
  EXPECT_THAT(std::string(ReadTlsFiles(tls).status().message()), HasSubstr("not base64 DER"));
}

TEST(TlsPemFilesTest, AnEncryptedKeyIsRefusedSayingSo) {
  TlsConfig tls = Good();
  tls.key_file = Write("encrypted.key",
                       "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMAA=\n"
                       "-----END ENCRYPTED PRIVATE KEY-----\n");
  EXPECT_THAT(std::string(ReadTlsFiles(tls).status().message()), HasSubstr("encrypted"));
}

}  // namespace
}  // namespace fuserank::server
