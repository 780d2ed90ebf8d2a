#include "server/process_signals.h"

#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "spdlog/spdlog.h"

namespace fuserank::server {
namespace {

sigset_t TakenSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  return signals;
}

enum class Phase { kStarting, kServing, kDraining };

}  // namespace

struct ProcessSignals::State {
  absl::Mutex mu;
  Phase phase ABSL_GUARDED_BY(mu) = Phase::kStarting;
  int stop_signal ABSL_GUARDED_BY(mu) = 0;  // the signal that started the drain
};

void ProcessSignals::Block() {
  const sigset_t signals = TakenSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

std::unique_ptr<ProcessSignals> ProcessSignals::Start(std::string sighup_note) {
  auto state = std::make_shared<State>();
  // The logger is held here: main() drops the default one on its way out.
  std::thread([state, note = std::move(sighup_note), logger = spdlog::default_logger()] {
    const sigset_t signals = TakenSignals();
    for (;;) {
      int signal = 0;
      if (sigwait(&signals, &signal) != 0) continue;
      if (signal == SIGHUP) {
        logger->warn("{} (SIGHUP): ignored; {}", strsignal(signal), note);
        continue;
      }
      absl::MutexLock lock(&state->mu);
      switch (state->phase) {
        case Phase::kStarting:
          // Nothing listens yet and no call was accepted: the loading thread's files and
          // memory go with the process. A start of minutes must not make the signal wait.
          logger->warn("{} during start: exiting", strsignal(signal));
          logger->flush();
          std::_Exit(1);
        case Phase::kServing:
          state->phase = Phase::kDraining;
          state->stop_signal = signal;
          break;
        case Phase::kDraining:
          // A drain that cannot end (a batch stuck in the backend keeps its call from
          // finishing) would otherwise leave only SIGKILL.
          logger->warn("{} during the drain: exiting without waiting for it", strsignal(signal));
          logger->flush();
          std::_Exit(1);
      }
    }
  }).detach();
  return std::unique_ptr<ProcessSignals>(new ProcessSignals(std::move(state)));
}

void ProcessSignals::Serving() {
  absl::MutexLock lock(&state_->mu);
  if (state_->phase == Phase::kStarting) state_->phase = Phase::kServing;
}

int ProcessSignals::WaitForStop() {
  absl::MutexLock lock(&state_->mu);
  State* state = state_.get();
  auto stopped = [state]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return state->stop_signal != 0; };
  state_->mu.Await(absl::Condition(&stopped));
  return state_->stop_signal;
}

}  // namespace fuserank::server
