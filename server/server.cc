#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <fstream>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status_macros.h"
#include "grpc/health/v1/health.pb.h"
#include "server/admin_auth.h"
#include "server/admin_auth_interceptor.h"
#include "server/admin_limits.h"
#include "server/admin_requests.h"
#include "server/config_validation.h"
#include "server/listen_probe.h"
#include "server/model_loader.h"
#include "server/serving_limits.h"
#include "server/tls_files.h"
#include "spdlog/spdlog.h"

namespace fuserank::server {
namespace {

constexpr char kRankerServiceName[] = "fuserank.v1.Ranker";
constexpr char kKServeServiceName[] = "inference.GRPCInferenceService";
constexpr char kAdminServiceName[] = "fuserank.v1.Admin";

std::string ModelKey(const Config& config, size_t i) {
  return config.models.size() == 1 && config.models[i].name.empty()
             ? "model.path"
             : absl::StrCat("models[", i, "].path");
}

// "<file>: model.path '<path>'": what a model's errors start with.
std::string ModelContext(const Config& config, size_t i) {
  return absl::StrCat(config.file, ": ", ModelKey(config, i), " '", config.models[i].path, "'");
}

// What the start warns of, each starting with the config file: keys without effect, a
// token file others can read, a token that would travel in clear text.
std::vector<std::string> StartWarnings(const Config& config, const AdminAuth& auth) {
  std::vector<std::string> warnings = ConfigWarnings(config);
  if (!auth.warning().empty()) warnings.push_back(absl::StrCat(config.file, ": ", auth.warning()));
  if (const std::string plaintext = PlaintextAdminTokenWarning(config.server); !plaintext.empty()) {
    warnings.push_back(absl::StrCat(config.file, ": ", plaintext));
  }
  return warnings;
}

// The token file (server.admin_token_file), read once; errors start with the config file.
absl::StatusOr<AdminAuth> ReadAdminAuth(const Config& config) {
  absl::StatusOr<AdminAuth> auth = AdminAuth::FromTokenFile(config.server.admin_token_file);
  if (!auth.ok()) return WithContext(auth.status(), config.file);
  return auth;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const TlsConfig& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  ASSIGN_OR_RETURN(TlsFiles files, ReadTlsFiles(tls));  // names the file and the reason
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  pair.private_key = std::move(files.private_key);
  pair.cert_chain = std::move(files.cert_chain);
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!tls.client_ca_file.empty()) {
    options.pem_root_certs = std::move(files.client_ca);
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

// Why gRPC may have failed to listen: with TLS, a key that does not match the certificate
// also shows up only here (gRPC logs the details).
const char* ListenHint(const TlsConfig& tls) {
  return tls.enabled() ? " (address in use, or server.tls.key_file does not match "
                         "server.tls.cert_file?)"
                       : " (address in use?)";
}

// A gRPC address (`key`: server.listen or server.admin_listen) another socket holds stops
// the start before minutes of model loading; gRPC itself binds only once they have loaded.
absl::Status CheckNotInUse(const Config& config, const char* key, const std::string& address) {
  if (address.empty() || !ListenAddressInUse(address)) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(config.file, ": ", key, ": cannot listen on '", address, "' (address in use?)"));
}

// "1 call" / "3 calls".
std::string Calls(int n) { return absl::StrCat(n, n == 1 ? " call" : " calls"); }

// The most tables of a served model: what the largest SetHotRows is sized for.
size_t MaxTables(const ServedModels& models) {
  size_t tables = 0;
  for (const ModelHandle& version : models.Current()) {
    tables = std::max(tables, version->model->tables().size());
  }
  return tables;
}

// Only `identity` is enabled, so a compressed request is refused (UNIMPLEMENTED,
// "Compression algorithm 'gzip' is disabled.") before gRPC inflates it. gRPC inflates a
// whole message before any size check of its own or ours: 1 MB of gzip on the wire became
// 1 GiB of memory, past server.max_request_bytes and the transport quota, which count the
// wire bytes (docs/security.md).
void RefuseCompressedRequests(grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET,
                              1 << GRPC_COMPRESS_NONE);
}

}  // namespace

absl::Status CheckConfigForStart(const Config& config, std::vector<std::string>* warnings) {
  absl::StatusOr<AdminAuth> auth = ReadAdminAuth(config);
  if (!auth.ok()) return auth.status();
  if (warnings != nullptr) *warnings = StartWarnings(config, *auth);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      Credentials(config.server.tls);
  if (!credentials.ok()) return WithContext(credentials.status(), config.file);
  const ModelLoaderOptions options = LoaderOptionsFrom(config);
  // Held until every model is checked: the models share the budget as they do at start.
  std::vector<MemoryBudget::Reservation> reserved;
  std::vector<std::string> names;  // ServedName of each
  for (size_t i = 0; i < config.models.size(); ++i) {
    const ModelConfig& model = config.models[i];
    absl::StatusOr<LoadedFiles> loaded = LoadModelFiles(model.name, model.path, options, nullptr);
    if (!loaded.ok()) return WithContext(loaded.status(), ModelContext(config, i));
    const std::string name = ServedName(model.name, loaded->model->spec());
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return WithContext(NameTaken(name), ModelContext(config, i));  // as ServedModels::Add
    }
    names.push_back(name);
    if (config.engine.device == engine::DeviceChoice::kCuda) {
      const absl::Status device = engine::CheckCudaCanServe(*loaded->model, config.engine.gpu);
      if (!device.ok()) return WithContext(device, ModelContext(config, i));
    }
    reserved.push_back(std::move(loaded->memory));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ServedModels>> LoadServedModels(
    const Config& config, Metrics* metrics, const ServerHooks& hooks,
    std::function<void()> on_device_failed) {
  ModelLoaderOptions options = LoaderOptionsFrom(config);
  options.metrics = metrics;
  options.create_backend = hooks.create_backend;
  options.on_device_failed = std::move(on_device_failed);
  spdlog::info("model roots: {}; model memory budget: {} bytes",
               absl::StrJoin(options.roots->roots(), ", "), options.budget->limit());
  auto models = std::make_unique<ServedModels>(
      [options](const std::string& name, const std::string& path, const ServedModel* previous) {
        return LoadModelVersion(name, path, options, previous);
      },
      metrics,
      [options](const std::string& name, const std::string& path) {
        return PrepareModelVersion(name, path, options).status();
      });
  for (size_t i = 0; i < config.models.size(); ++i) {
    const ModelConfig& model = config.models[i];
    const absl::Status loaded = models->Load(model.name, model.path, model.is_default);
    if (!loaded.ok()) return WithContext(loaded, ModelContext(config, i));
  }
  return models;
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const Config& config, ServerHooks hooks) {
  std::unique_ptr<Server> server(new Server(config));
  // The token and TLS files first: a bad one refuses to start before anything listens and
  // before minutes of model loading.
  absl::StatusOr<AdminAuth> auth = ReadAdminAuth(config);
  if (!auth.ok()) return auth.status();
  for (const std::string& warning : StartWarnings(config, *auth)) spdlog::warn("{}", warning);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      Credentials(config.server.tls);
  if (!credentials.ok()) return WithContext(credentials.status(), config.file);
  absl::StatusOr<std::unique_ptr<Metrics>> metrics = Metrics::Create(config.server.metrics_listen);
  if (!metrics.ok()) return WithContext(metrics.status(), config.file);
  server->metrics_ = std::move(*metrics);
  RETURN_IF_ERROR(CheckNotInUse(config, "server.listen", config.server.listen));
  RETURN_IF_ERROR(CheckNotInUse(config, "server.admin_listen", config.server.admin_listen));
  const ServingLimits limits = ResolveServingLimits(config, AvailableCores());
  spdlog::info("admission: {}", DescribeServingLimits(config, limits));
  Server* raw = server.get();
  ASSIGN_OR_RETURN(server->models_, LoadServedModels(config, server->metrics_.get(), hooks,
                                                     [raw] { raw->RefreshHealth(); }));
  server->models_->SetPublishHook([raw] { raw->RefreshHealth(); });
  // Read at each scrape: a gauge set per request from many threads could stay stale.
  server->metrics_->SetQueueDepthSource(
      [models = server->models_.get()] { return models->QueueDepth(); });
  server->hot_row_metrics_ =
      std::make_unique<HotRowMetrics>(server->models_.get(), server->metrics_.get());
  RankerOptions ranker_options;
  ranker_options.max_request_bytes = config.server.max_request_bytes;
  ranker_options.max_candidates = config.server.max_candidates;
  ranker_options.max_inflight_requests = limits.max_inflight_requests;
  // One bound for the whole ranking port: Rank and ModelInfer calls together.
  server->call_limiter_ = std::make_unique<CallLimiter>(limits.max_inflight_requests);
  ranker_options.limiter = server->call_limiter_.get();
  server->reply_watch_ =
      std::make_unique<ReplyWatch>(std::chrono::seconds(config.server.reply_timeout_seconds));
  ranker_options.reply_watch = server->reply_watch_.get();
  ranker_options.access_log_sample = config.logging.access_log_sample;
  server->ranker_ = std::make_unique<RankerService>(server->models_.get(), server->metrics_.get(),
                                                    ranker_options);
  KServeOptions kserve_options;
  kserve_options.max_request_bytes = config.server.max_request_bytes;
  kserve_options.limits = {config.server.max_candidates, config.server.max_ids_per_feature,
                           config.engine.max_batch_ids};
  kserve_options.server_version = FUSERANK_VERSION;
  kserve_options.limiter = server->call_limiter_.get();
  kserve_options.reply_watch = server->reply_watch_.get();
  kserve_options.access_log_sample = config.logging.access_log_sample;
  server->kserve_ = std::make_unique<KServeService>(server->models_.get(), server->metrics_.get(),
                                                    kserve_options);
  server->admin_ =
      std::make_unique<AdminService>(server->metrics_.get(), server->models_.get(),
                                     std::move(*auth), config.cache.hot_rows_per_table);
  if (config.model_watch_interval_seconds > 0) {
    server->watcher_ = std::make_unique<ModelWatcher>(
        server->models_.get(), absl::Seconds(config.model_watch_interval_seconds));
  }
  if (hooks.before_listening) hooks.before_listening();
  RETURN_IF_ERROR(server->StartGrpc(limits, *credentials));
  server->started_ = true;
  auto where = [](const std::string& address, int port) {
    return address.empty() ? std::string("off") : absl::StrCat(address, " (port ", port, ")");
  };
  spdlog::info(
      "serving fuserank.v1.Ranker on {} with inference.GRPCInferenceService; admin: {}; "
      "metrics: {}",
      where(config.server.listen, server->port_),
      where(config.server.admin_listen, server->admin_port_),
      where(config.server.metrics_listen, server->metrics_port()));
  return server;
}

absl::Status Server::StartGrpc(const ServingLimits& limits,
                               const std::shared_ptr<grpc::ServerCredentials>& credentials) {
  static std::once_flag once;
  std::call_once(once, [] {
    // Links the health messages' descriptors in (proto/CMakeLists.txt), which reflection
    // serves for the built-in health service.
    static_cast<void>(grpc::health::v1::HealthCheckResponse::descriptor());
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  });
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config_.server.listen, credentials, &port_);
  // No receive limit of gRPC's own: its refusal is RESOURCE_EXHAUSTED, which clients read
  // as "retry"; RankerService refuses every request over server.max_request_bytes with
  // INVALID_ARGUMENT naming the key. The transport's memory is bounded by the quota.
  builder.SetMaxReceiveMessageSize(-1);
  grpc::ResourceQuota quota("fuserank-ranking-port");
  quota.Resize(static_cast<size_t>(limits.transport_memory_bytes));
  builder.SetResourceQuota(quota);
  RefuseCompressedRequests(&builder);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams);
  // Without this, gRPC sets SO_REUSEPORT and a second server on the same port would start
  // and silently share it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(ranker_.get());
  builder.RegisterService(kserve_.get());
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat(config_.file, ": server.listen: cannot listen on '",
                                               config_.server.listen, "'",
                                               ListenHint(config_.server.tls)));
  }
  {
    absl::MutexLock lock(&health_mu_);
    health_ = grpc_server_->GetHealthCheckService();
  }
  RefreshHealth();

  if (!config_.server.admin_listen.empty()) {
    grpc::ServerBuilder admin_builder;
    admin_builder.AddListeningPort(config_.server.admin_listen, credentials, &admin_port_);
    admin_builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    // No receive limit of gRPC's own: its refusal is RESOURCE_EXHAUSTED, which SPEC section
    // 3 does not allow for a SetHotRows over capacity; AdminService refuses what is larger
    // than a valid request needs with INVALID_ARGUMENT (admin_requests.h). The quota and
    // the stream bound keep what peers can make the port hold bounded.
    const size_t tables = MaxTables(*models_);
    const AdminLimits admin_limits = ResolveAdminLimits(config_.cache.hot_rows_per_table, tables);
    admin_builder.SetMaxReceiveMessageSize(-1);
    grpc::ResourceQuota admin_quota("fuserank-admin-port");
    admin_quota.Resize(static_cast<size_t>(admin_limits.transport_memory_bytes));
    admin_builder.SetResourceQuota(admin_quota);
    RefuseCompressedRequests(&admin_builder);
    admin_builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                                     admin_limits.max_concurrent_streams);
    spdlog::info(
        "admin port: SetHotRows up to {} bytes ({} tables x cache.hot_rows_per_table {}), "
        "other requests up to {} bytes, transport memory {} bytes",
        admin_limits.largest_set_hot_rows_bytes, tables, config_.cache.hot_rows_per_table,
        kMaxSmallAdminRequestBytes, admin_limits.transport_memory_bytes);
    RequireAdminTokenForAll(admin_->auth(), &admin_builder);  // reflection behind the token
    admin_builder.RegisterService(admin_.get());
    admin_server_ = admin_builder.BuildAndStart();
    if (admin_server_ == nullptr || admin_port_ == 0) {
      return absl::UnavailableError(
          absl::StrCat(config_.file, ": server.admin_listen: cannot listen on '",
                       config_.server.admin_listen, "'", ListenHint(config_.server.tls)));
    }
    // Its own health service: the admin port serves while the server does (a failed device
    // leaves Admin working), and turns NOT_SERVING when the drain starts refusing Admin calls.
    absl::MutexLock lock(&health_mu_);
    admin_health_ = admin_server_->GetHealthCheckService();
    if (admin_health_ != nullptr) admin_health_->SetServingStatus(kAdminServiceName, true);
  }
  return absl::OkStatus();
}

void Server::RefreshHealth() {
  absl::MutexLock lock(&health_mu_);
  if (health_ == nullptr || health_final_ || models_ == nullptr) return;
  bool serving = true;
  for (const ModelHandle& version : models_->Current()) {
    if (!version->backend->health().ok()) serving = false;
  }
  health_->SetServingStatus(serving);
  health_->SetServingStatus(kRankerServiceName, serving);
  health_->SetServingStatus(kKServeServiceName, serving);
}

void Server::Shutdown() {
  absl::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  const auto start = std::chrono::steady_clock::now();
  // Admin calls first (before health turns NOT_SERVING, which a prober may then rely on):
  // new and queued ones are UNAVAILABLE; the one in progress is waited for below.
  if (admin_ != nullptr) admin_->StartShutdown();
  if (watcher_ != nullptr) watcher_->RequestStop();  // no watch reload starts in the drain
  {
    absl::MutexLock health_lock(&health_mu_);
    health_final_ = true;
    // Every service each port's health knows ("" included).
    if (admin_health_ != nullptr) admin_health_->SetServingStatus(false);
    if (health_ != nullptr) health_->SetServingStatus(false);
  }
  // New Rank calls get UNAVAILABLE; those in flight finish (their batchers still run).
  // gRPC's own Shutdown(deadline) would also wait for idle client connections to go, so
  // wait for our calls here and then stop gRPC at once. (A call that reaches gRPC in
  // that last instant may see gRPC's CANCELLED instead of our UNAVAILABLE.)
  if (ranker_ != nullptr) {
    const absl::Time grace = absl::Now() + absl::Seconds(config_.server.shutdown_grace_seconds);
    ranker_->StartShutdown();
    if (kserve_ != nullptr) kserve_->StartShutdown();
    const bool kserve_idle = kserve_ == nullptr || kserve_->WaitIdle(grace);
    // Rank and ModelInfer calls the port still holds (those the drain waited for, and any
    // refusal being answered in this instant); none when the last ones finished just as
    // the grace ran out: nothing is cut off then.
    const int left = !ranker_->WaitIdle(grace) || !kserve_idle ? call_limiter_->inflight() : 0;
    if (left > 0) {
      spdlog::warn(
          "server.shutdown_grace_seconds ({} s) ran out: cancelling the {} still in flight",
          config_.server.shutdown_grace_seconds, Calls(left));
    }
  }
  if (watcher_ != nullptr) watcher_->Stop();
  if (admin_ != nullptr) admin_->StopWorker();
  const auto now = std::chrono::system_clock::now();
  if (grpc_server_ != nullptr) grpc_server_->Shutdown(now);
  if (admin_server_ != nullptr) admin_server_->Shutdown(now);
  if (models_ != nullptr) models_->ShutdownBatchers();
  if (!started_) return;  // a failed start: its error says what happened
  spdlog::info("shut down in {:.3f} s",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

Server::~Server() {
  Shutdown();
  admin_server_.reset();
  grpc_server_.reset();
  admin_.reset();
  ranker_.reset();
  kserve_.reset();
  watcher_.reset();
  hot_row_metrics_.reset();
  if (metrics_ != nullptr) metrics_->SetQueueDepthSource(nullptr);  // it reads models_
  models_.reset();
  metrics_.reset();
}

}  // namespace fuserank::server
