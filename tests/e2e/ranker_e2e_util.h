// The fixture of the Ranker end-to-end suites (ranker_e2e_test.cc, bad_request_e2e_test.cc):
// six models no other test uses on one real server in-process on 127.0.0.1:0 for the whole
// suite, and a valid request for its dot model. Test helpers; not thread-safe, but the
// suite's channel is shared by its client threads.
#ifndef FUSERANK_TESTS_E2E_RANKER_E2E_UTIL_H_
#define FUSERANK_TESTS_E2E_RANKER_E2E_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "fuserank/v1/ranker.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/testing/test_model.h"

namespace fuserank::testing {

// Six models: every interaction (dcn low and full rank), every dtype, mean and sum
// pooling, oov reject, with and without a bottom MLP, no user tables, no dense features.
// Versions "<name>-v3".
std::vector<TestModel> RankerE2eModels();

// A valid request for dot32 with three candidates.
v1::RankRequest GoodDotRequest();

class RankerE2eTest : public ::testing::Test {
 protected:
  // The six models of RankerE2eModels() on one server for the whole suite: Ranker,
  // admin and metrics on free ports, limits max_request_bytes 65536, max_candidates 64,
  // max_ids_per_feature 8.
  static void SetUpTestSuite();
  static void TearDownTestSuite() {
    delete server_;
    delete channel_;
    delete models_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "the server did not start";
    stub_ = v1::Ranker::NewStub(*channel_);
  }

  static const TestModel& Model(const std::string& name) {
    for (const TestModel& model : *models_) {
      if (model.spec.name == name) return model;
    }
    ADD_FAILURE() << "no model " << name;
    return models_->front();
  }

  static server::Server* server_;
  static std::shared_ptr<grpc::Channel>* channel_;
  static std::vector<TestModel>* models_;
  std::unique_ptr<v1::Ranker::Stub> stub_;
};

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_RANKER_E2E_UTIL_H_
