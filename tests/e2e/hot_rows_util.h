// Admin calls for the end-to-end tests (one blocking call each, 30 s deadline, optional
// bearer token), and lookups of one table in a HotRowsStatus and of one series in
// Prometheus text. Test helpers; thread-safe.
#ifndef FUSERANK_TESTS_E2E_HOT_ROWS_UTIL_H_
#define FUSERANK_TESTS_E2E_HOT_ROWS_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fuserank/v1/admin.grpc.pb.h"

namespace fuserank::testing {

struct AdminReply {
  grpc::Status status;
  v1::HotRowsStatus response;
};

using TableIdList = std::vector<std::pair<std::string, std::vector<int64_t>>>;

class HotRowsAdmin {
 public:
  explicit HotRowsAdmin(int admin_port, std::string token = "");

  AdminReply Set(const TableIdList& tables, const std::string& model = "");
  AdminReply Get(const std::vector<std::string>& tables = {}, const std::string& model = "");
  AdminReply Rebuild(const std::vector<std::string>& tables = {}, const std::string& model = "");
  grpc::Status Reload(const std::string& model, const std::string& path);

 private:
  void Prepare(grpc::ClientContext* context) const;

  std::unique_ptr<v1::Admin::Stub> stub_;
  const std::string token_;
};

// The status of `table` in `status`, or null.
const v1::TableHotRowsStatus* FindTable(const v1::HotRowsStatus& status, const std::string& table);

// The value of the series whose line starts with `series` ("name{labels}") in Prometheus
// text, or -1 when there is none.
double SeriesValue(const std::string& text, const std::string& series);

// fuserank_embedding_cache_lookups_total{result=`result`,table=`table`}.
std::string CacheLookups(const std::string& table, const std::string& result);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_HOT_ROWS_UTIL_H_
