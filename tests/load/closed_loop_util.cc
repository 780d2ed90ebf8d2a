#include "tests/load/closed_loop_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>

namespace fuserank::testing {

struct ClosedLoopLoad::Client {
  int id = 0;
  int calls = 0;
  v1::Ranker::Stub* stub = nullptr;
  // The finished call's context is freed one call later, never inside its own callback.
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientContext> previous;
  v1::RankResponse response;
  size_t request = 0;
  Clock::time_point start;
};

ClosedLoopLoad::ClosedLoopLoad(const std::string& target,
                               const std::vector<v1::RankRequest>* requests,
                               const std::vector<std::string>* expected, LoadOptions options)
    : requests_(requests), expected_(expected), options_(options) {
  for (int c = 0; c < std::max(1, options_.channels); ++c) {
    grpc::ChannelArguments args;
    args.SetInt("fuserank.test.channel", c);  // distinct arguments: a connection each
    stubs_.push_back(v1::Ranker::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
  }
  for (int c = 0; c < options_.clients; ++c) {
    auto client = std::make_unique<Client>();
    client->id = c;
    client->stub = stubs_[c % stubs_.size()].get();
    clients_.push_back(std::move(client));
  }
}

ClosedLoopLoad::~ClosedLoopLoad() {
  Stop();
  WaitIdle(absl::Seconds(60));
  if (retry_thread_.joinable()) retry_thread_.join();
}

void ClosedLoopLoad::Start() {
  start_ = Clock::now();
  retry_thread_ = std::thread([this] { RetryLoop(); });
  {
    absl::MutexLock lock(&mu_);
    outstanding_ += static_cast<int>(clients_.size());
  }
  for (auto& client : clients_) Issue(client.get());
}

void ClosedLoopLoad::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

bool ClosedLoopLoad::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return outstanding_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

std::vector<CallSample> ClosedLoopLoad::Samples() const {
  absl::MutexLock lock(&mu_);
  return samples_;
}

double ClosedLoopLoad::Elapsed() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void ClosedLoopLoad::Issue(Client* client) {
  client->previous = std::move(client->context);
  client->context = std::make_unique<grpc::ClientContext>();
  client->context->set_deadline(std::chrono::system_clock::now() +
                                absl::ToChronoNanoseconds(options_.deadline));
  client->request =
      (static_cast<size_t>(client->id) + static_cast<size_t>(client->calls) * clients_.size()) %
      requests_->size();
  ++client->calls;
  client->start = Clock::now();
  client->stub->async()->Rank(client->context.get(), &(*requests_)[client->request],
                              &client->response,
                              [this, client](grpc::Status status) { OnDone(client, status); });
}

void ClosedLoopLoad::OnDone(Client* client, const grpc::Status& status) {
  const Clock::time_point now = Clock::now();
  CallSample sample;
  sample.code = status.error_code();
  sample.start_s = std::chrono::duration<double>(client->start - start_).count();
  sample.seconds = std::chrono::duration<double>(now - client->start).count();
  if (status.ok() && expected_ != nullptr && !expected_->empty()) {
    sample.matched = client->response.SerializeAsString() == (*expected_)[client->request];
  }
  bool again = false;
  {
    absl::MutexLock lock(&mu_);
    samples_.push_back(sample);
    if (!stopping_ && status.ok()) {
      again = true;  // stays counted in outstanding_
    } else {
      --outstanding_;
      if (!stopping_ && status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        retries_.push_back({now + absl::ToChronoNanoseconds(options_.backoff), client});
      }
    }
  }
  if (again) Issue(client);
}

void ClosedLoopLoad::RetryLoop() {
  for (;;) {
    Client* client = nullptr;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !retries_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) {
        retries_.clear();
        return;
      }
      const Clock::time_point at = retries_.front().at;
      auto stopped = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; };
      const Clock::duration wait = at - Clock::now();
      if (wait > Clock::duration::zero()) {
        mu_.AwaitWithTimeout(absl::Condition(&stopped), absl::FromChrono(wait));
      }
      if (stopping_) {
        retries_.clear();
        return;
      }
      client = retries_.front().client;
      retries_.pop_front();
      ++outstanding_;
    }
    Issue(client);
  }
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * values.size()));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double MetricValue(const std::string& scrape, const std::string& name,
                   const std::vector<std::string>& labels) {
  double total = 0;
  std::istringstream lines(scrape);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#' || line.compare(0, name.size(), name) != 0) continue;
    if (line.size() <= name.size() || (line[name.size()] != '{' && line[name.size()] != ' ')) {
      continue;  // a longer name with this prefix
    }
    const bool all = std::all_of(labels.begin(), labels.end(), [&](const std::string& label) {
      return line.find(label) != std::string::npos;
    });
    if (!all) continue;
    const size_t space = line.rfind(' ');
    total += std::strtod(line.c_str() + space + 1, nullptr);
  }
  return total;
}

}  // namespace fuserank::testing
