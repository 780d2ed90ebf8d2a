#include "tests/e2e/gated_backend_util.h"

#include <string>
#include <utility>

#include "engine/cpu/cpu_backend.h"

namespace fuserank::testing {
namespace {

class GatedBackend final : public engine::Backend {
 public:
  GatedBackend(std::unique_ptr<engine::Backend> cpu, std::shared_ptr<Gate> gate)
      : cpu_(std::move(cpu)), gate_(std::move(gate)) {}
  std::string device() const override { return cpu_->device(); }
  int num_workers() const override { return cpu_->num_workers(); }
  absl::Status Run(int worker, const engine::Batch& batch, engine::BatchResult* result) override {
    if (gate_->armed.exchange(false)) {
      gate_->entered.Notify();
      gate_->released.WaitForNotification();
    }
    return cpu_->Run(worker, batch, result);
  }

 private:
  std::unique_ptr<engine::Backend> cpu_;
  std::shared_ptr<Gate> gate_;
};

}  // namespace

server::ServerHooks GatedCpuHooks(std::shared_ptr<Gate> gate) {
  server::ServerHooks hooks;
  hooks.create_backend = [gate](std::shared_ptr<const engine::Model> model, engine::DeviceChoice,
                                const engine::BackendOptions& options)
      -> absl::StatusOr<std::unique_ptr<engine::Backend>> {
    return std::make_unique<GatedBackend>(engine::CreateCpuBackend(std::move(model), options),
                                          gate);
  };
  return hooks;
}

}  // namespace fuserank::testing
