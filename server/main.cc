// fuserank-server: serves the Ranker until SIGTERM or SIGINT, then drains and exits 0
// (a stop signal during the start exits 1 at once; SIGHUP is logged and ignored).
//   fuserank-server --config FILE        serve
//   fuserank-server --check-config FILE  validate the config and what start would refuse
//                                        (token and TLS files, model roots, the memory
//                                        budget, the models); print OK or the problems;
//                                        exit 0 or 1
//   fuserank-server --print-reference-config
//                                        print the reference config (every key, its
//                                        default and doc: config/fuserank.yaml)
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "engine/cpu/cpu_fma_probe.h"
#include "engine/cpu/cpu_simd.h"
#include "engine/cpu/sgemm_bf16.h"
#include "server/config.h"
#include "server/logging.h"
#include "server/process_signals.h"
#include "server/server.h"
#include "spdlog/spdlog.h"

namespace {

constexpr char kUsage[] =
    "usage: fuserank-server --config FILE            serve with the config FILE (YAML)\n"
    "       fuserank-server --check-config FILE      check FILE and its models, then exit:\n"
    "                                                0 when it would start, 1 with the reason\n"
    "       fuserank-server --print-reference-config print every config key, its default\n"
    "                                                and what it does\n"
    "       fuserank-server --help\n";

struct Args {
  std::string config;
  bool check_only = false;
  bool print_reference = false;
  bool help = false;
};

// Accepts "--flag VALUE" and "--flag=VALUE". "" when the arguments make one command, else
// what is wrong with them.
std::string ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (arg == "--config" || arg == "--check-config") {
      if (i + 1 >= argc) return arg + " needs a file";
      value = argv[++i];
    }
    if (arg == "--config") {
      args->config = value;
    } else if (arg == "--check-config") {
      args->config = value;
      args->check_only = true;
    } else if (arg == "--print-reference-config" && eq == std::string::npos) {
      args->print_reference = true;
    } else if ((arg == "--help" || arg == "-h") && eq == std::string::npos) {
      args->help = true;
    } else {
      return "unknown argument '" + std::string(argv[i]) + "'";
    }
  }
  if (args->help) return "";
  if (args->print_reference == !args->config.empty()) {
    return args->print_reference ? "--print-reference-config takes no config"
                                 : "no command: give --config FILE";
  }
  return "";
}

int CheckConfig(const std::string& path) {
  absl::StatusOr<fuserank::server::Config> config = fuserank::server::LoadConfigFile(path);
  absl::Status status = config.status();
  if (status.ok()) status = fuserank::engine::GetCpuDispatch().status;  // FUSERANK_CPU_ISA
  std::vector<std::string> warnings;
  if (status.ok()) status = fuserank::server::CheckConfigForStart(*config, &warnings);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
    return 1;
  }
  for (const std::string& warning : warnings)
    std::fprintf(stderr, "warning: %s\n", warning.c_str());
  std::printf("OK: %s\n", path.c_str());
  return 0;
}

// bf16 pays only where the core's dot instructions outrun its fp32 FMAs (not on every CPU
// that has them: docs/cpu-engine.md); a few milliseconds to say which.
void LogBf16Peaks(const fuserank::engine::CpuDispatch& cpu) {
  const double bf16 = fuserank::engine::MeasureBf16DotGflops(20000, 5);
  // The fp32 peak of the ISA in use: the start-up probe's figure where it ran (it runs
  // only to choose between AVX-512 and AVX2), else measured now.
  double fp32 = cpu.isa == fuserank::engine::CpuIsa::kAvx512 ? cpu.fma512_gflops
                : cpu.isa == fuserank::engine::CpuIsa::kAvx2 ? cpu.fma256_gflops
                                                             : 0.0;
  if (fp32 <= 0) fp32 = fuserank::engine::MeasureFmaGflops(cpu.isa, 20000, 5);
  const std::string line = absl::StrFormat(
      "engine.cpu_precision: bf16: bf16 dot peak %.0f GFLOP/s against the fp32 FMA peak "
      "%.0f GFLOP/s of this core",
      bf16, fp32);
  if (bf16 < fp32) {
    spdlog::warn("{}: bf16 is likely slower than fp32 here", line);
  } else {
    spdlog::info("{}", line);
  }
}

// Ends the SIGHUP warning: how this server reloads instead.
std::string SighupNote(const fuserank::server::Config& config) {
  const int watch = config.model_watch_interval_seconds;
  return absl::StrFormat(
      "fuserank reloads a model through Admin ReloadModel or the model file watch "
      "(model.watch_interval_seconds: %d%s), not on a signal",
      watch, watch > 0 ? "" : ", off");
}

int Serve(const std::string& path) {
  // Before any thread starts, so that every thread inherits the blocked signals and only
  // ProcessSignals' thread takes them.
  fuserank::server::ProcessSignals::Block();
  absl::StatusOr<fuserank::server::Config> config = fuserank::server::LoadConfigFile(path);
  if (!config.ok()) {
    std::fprintf(stderr, "fuserank-server: bad config:\n%s\n",
                 std::string(config.status().message()).c_str());
    return 1;
  }
  fuserank::server::ConfigureLogging(config->logging);
  // From here a stop signal ends the start at once (models may take minutes to load).
  std::unique_ptr<fuserank::server::ProcessSignals> signals =
      fuserank::server::ProcessSignals::Start(SighupNote(*config));
  // The CPU engine's code path, chosen (and probed) once, before any model loads.
  const fuserank::engine::CpuDispatch& cpu = fuserank::engine::GetCpuDispatch();
  if (!cpu.status.ok()) {
    spdlog::critical("cannot start: {}", std::string(cpu.status.message()));
    return 1;
  }
  spdlog::info("{}", cpu.Describe());
  if (config->engine.cpu_precision == fuserank::engine::CpuPrecision::kBf16) LogBf16Peaks(cpu);
  fuserank::server::LogInfoLines("effective config (" + path + "):",
                                 fuserank::server::EffectiveConfigYaml(*config));

  fuserank::server::ServerHooks hooks;
  hooks.before_listening = [&signals] { signals->Serving(); };
  absl::StatusOr<std::unique_ptr<fuserank::server::Server>> server =
      fuserank::server::Server::Start(*config, hooks);
  if (!server.ok()) {
    spdlog::critical("cannot start: {}", std::string(server.status().message()));
    return 1;
  }
  const int signal = signals->WaitForStop();  // a second one exits at once
  spdlog::info("{}: shutting down (grace {} s; a second signal exits at once)", strsignal(signal),
               config->server.shutdown_grace_seconds);
  (*server)->Shutdown();
  server->reset();
  spdlog::info("bye");
  spdlog::shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil keeps its debug default of checking every Mutex acquisition against a
  // lock-order graph (a graph update per lock: 1-3% of the server's time in profiles of
  // the ranking path). The server binary runs without it; in-process tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  Args args;
  const std::string wrong = ParseArgs(argc, argv, &args);
  if (!wrong.empty()) {
    std::fprintf(stderr, "fuserank-server: %s\n%s", wrong.c_str(), kUsage);
    return 2;
  }
  if (args.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args.print_reference) {
    std::fputs(fuserank::server::ReferenceConfigYaml().c_str(), stdout);
    return 0;
  }
  return args.check_only ? CheckConfig(args.config) : Serve(args.config);
}
