// server.tls: TLS and mutual TLS on server.listen, with the test certificates in testdata/.
#include <grpcpp/grpcpp.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "fuserank/v1/ranker.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/server.h"
#include "tests/e2e/reference_util.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_model.h"

namespace fuserank {
namespace {

const std::string kTestData = FUSERANK_SOURCE_DIR "/tests/e2e/testdata/";

std::string Read(const std::string& name) {
  std::ifstream in(kTestData + name);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class TlsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::MakeTempDir("tls_e2e");
    model_ = testing::MakeRandomModel(testing::SmallSpec(1, 1, 100, 4), 31);
    absl::StatusOr<std::string> path = testing::WriteTestModel(model_, dir);
    ASSERT_TRUE(path.ok()) << path.status();
    model_path_ = *path;
  }

  std::unique_ptr<server::Server> Start(bool require_client_certificate) {
    const std::string yaml = absl::StrCat(
        "server:\n  listen: \"127.0.0.1:0\"\n  admin_listen: \"\"\n  metrics_listen: \"\"\n",
        "  tls: {cert_file: \"", kTestData, "server.pem\", key_file: \"", kTestData,
        "server.key\", client_ca_file: \"", require_client_certificate ? kTestData + "ca.pem" : "",
        "\"}\n", "model: {path: \"", model_path_, "\"}\n");
    absl::StatusOr<server::Config> config = server::ParseConfig(yaml, "tls.yaml");
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) return nullptr;
    absl::StatusOr<std::unique_ptr<server::Server>> server = server::Server::Start(*config);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? std::move(*server) : nullptr;
  }

  grpc::Status Call(int port, const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
    auto stub =
        v1::Ranker::NewStub(grpc::CreateChannel(absl::StrCat("localhost:", port), credentials));
    const v1::RankRequest request = testing::RandomRequest(model_, 2, 10);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::RankResponse response;
    grpc::Status status = stub->Rank(&context, request, &response);
    if (status.ok()) {
      const std::vector<double> reference = testing::ReferenceScores(model_, request);
      EXPECT_GT(response.items_size(), 0);
      for (const v1::ScoredItem& item : response.items()) {
        EXPECT_NEAR(item.score(), reference[item.index()], 5e-5);
      }
    }
    return status;
  }

  static grpc::SslCredentialsOptions TrustingTheCa() {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = Read("ca.pem");
    return options;
  }

  testing::TestModel model_;
  std::string model_path_;
};

TEST_F(TlsE2eTest, ServesTlsClientsAndRefusesPlaintext) {
  std::unique_ptr<server::Server> server = Start(/*require_client_certificate=*/false);
  ASSERT_NE(server, nullptr);
  const grpc::Status tls = Call(server->port(), grpc::SslCredentials(TrustingTheCa()));
  EXPECT_TRUE(tls.ok()) << tls.error_message();
  const grpc::Status plaintext = Call(server->port(), grpc::InsecureChannelCredentials());
  EXPECT_EQ(plaintext.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsE2eTest, MutualTlsRequiresAClientCertificateFromTheCa) {
  std::unique_ptr<server::Server> server = Start(/*require_client_certificate=*/true);
  ASSERT_NE(server, nullptr);
  grpc::SslCredentialsOptions with_certificate = TrustingTheCa();
  with_certificate.pem_cert_chain = Read("client.pem");
  with_certificate.pem_private_key = Read("client.key");
  const grpc::Status mutual = Call(server->port(), grpc::SslCredentials(with_certificate));
  EXPECT_TRUE(mutual.ok()) << mutual.error_message();
  const grpc::Status anonymous = Call(server->port(), grpc::SslCredentials(TrustingTheCa()));
  EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::UNAVAILABLE) << anonymous.error_message();
  // The same subject, issued by another CA: refused too (the chain is verified).
  grpc::SslCredentialsOptions stranger = TrustingTheCa();
  stranger.pem_cert_chain = Read("stranger.pem");
  stranger.pem_private_key = Read("stranger.key");
  const grpc::Status other_ca = Call(server->port(), grpc::SslCredentials(stranger));
  EXPECT_EQ(other_ca.error_code(), grpc::StatusCode::UNAVAILABLE) << other_ca.error_message();
}

}  // namespace
}  // namespace fuserank
