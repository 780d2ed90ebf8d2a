#include "tests/e2e/hot_rows_util.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace fuserank::testing {

HotRowsAdmin::HotRowsAdmin(int admin_port, std::string token)
    : stub_(v1::Admin::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", admin_port),
                                                   grpc::InsecureChannelCredentials()))),
      token_(std::move(token)) {}

void HotRowsAdmin::Prepare(grpc::ClientContext* context) const {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!token_.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token_));
}

AdminReply HotRowsAdmin::Set(const TableIdList& tables, const std::string& model) {
  v1::SetHotRowsRequest request;
  request.set_model(model);
  for (const auto& [table, ids] : tables) {
    v1::TableHotRows* t = request.add_tables();
    t->set_table(table);
    t->mutable_ids()->Add(ids.begin(), ids.end());
  }
  grpc::ClientContext context;
  Prepare(&context);
  AdminReply reply;
  reply.status = stub_->SetHotRows(&context, request, &reply.response);
  return reply;
}

AdminReply HotRowsAdmin::Get(const std::vector<std::string>& tables, const std::string& model) {
  v1::GetHotRowsRequest request;
  request.set_model(model);
  for (const std::string& table : tables) request.add_tables(table);
  grpc::ClientContext context;
  Prepare(&context);
  AdminReply reply;
  reply.status = stub_->GetHotRows(&context, request, &reply.response);
  return reply;
}

AdminReply HotRowsAdmin::Rebuild(const std::vector<std::string>& tables, const std::string& model) {
  v1::RebuildHotRowsRequest request;
  request.set_model(model);
  for (const std::string& table : tables) request.add_tables(table);
  grpc::ClientContext context;
  Prepare(&context);
  AdminReply reply;
  reply.status = stub_->RebuildHotRows(&context, request, &reply.response);
  return reply;
}

grpc::Status HotRowsAdmin::Reload(const std::string& model, const std::string& path) {
  v1::ReloadModelRequest request;
  request.set_model(model);
  request.set_path(path);
  grpc::ClientContext context;
  Prepare(&context);
  v1::ReloadModelResponse response;
  return stub_->ReloadModel(&context, request, &response);
}

const v1::TableHotRowsStatus* FindTable(const v1::HotRowsStatus& status, const std::string& table) {
  for (const v1::TableHotRowsStatus& t : status.tables()) {
    if (t.table() == table) return &t;
  }
  return nullptr;
}

double SeriesValue(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

std::string CacheLookups(const std::string& table, const std::string& result) {
  return absl::StrCat("fuserank_embedding_cache_lookups_total{result=\"", result, "\",table=\"",
                      table, "\"}");
}

}  // namespace fuserank::testing
