// A CPU backend that can hold one batch: for tests that need a call in flight while the
// server does something else (a shutdown's drain above all). The gate is shared by the
// test and every backend the hooks build; thread-safe.
#ifndef FUSERANK_TESTS_E2E_GATED_BACKEND_UTIL_H_
#define FUSERANK_TESTS_E2E_GATED_BACKEND_UTIL_H_

#include <atomic>
#include <memory>

#include "absl/synchronization/notification.h"
#include "server/server.h"

namespace fuserank::testing {

// Holds the first Run() after `armed` is set until `released`; every other Run() goes
// straight on. `entered` tells that the held batch has reached the backend.
struct Gate {
  std::atomic<bool> armed{false};
  absl::Notification entered, released;
};

// Hooks whose backends are the CPU engine's behind `gate`.
server::ServerHooks GatedCpuHooks(std::shared_ptr<Gate> gate);

}  // namespace fuserank::testing

#endif  // FUSERANK_TESTS_E2E_GATED_BACKEND_UTIL_H_
