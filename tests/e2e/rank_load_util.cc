#include "tests/e2e/rank_load_util.h"

#include <random>
#include <utility>

#include "tests/e2e/rank_check_util.h"
#include "tests/e2e/remote_table_util.h"

namespace fuserank::testing {

RankLoad::RankLoad(v1::Ranker::Stub* stub, int64_t rows, std::string named, int threads) {
  for (int t = 0; t < threads; ++t) {
    threads_.emplace_back([this, stub, rows, named, t] {
      std::mt19937_64 rng(100 + t);
      while (!stop_.load()) {
        const Reply reply = Rank(stub, RandomSmallSpecRequest(rng, rows, 24));
        if (reply.status.ok()) {
          ++ok;
          ++streak;
          continue;
        }
        streak = 0;
        if (reply.status.error_code() == grpc::StatusCode::UNAVAILABLE) {
          ++unavailable;
          if (reply.status.error_message().find(named) == std::string::npos) ++unnamed;
        } else {
          ++other;
        }
      }
    });
  }
}

void RankLoad::Stop() {
  stop_ = true;
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace fuserank::testing
