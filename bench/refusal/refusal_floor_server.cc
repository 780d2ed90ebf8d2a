// fuserank-refusal-floor: the least a gRPC C++ server can spend refusing a unary call, to
// set fuserank's own refusal cost against (bench/run_refusal_floor.sh). It serves every
// method as a generic call, reads the request message and answers NOT_FOUND at once, with
// nothing else: no parse, no admission, no metrics. Two ways, as fuserank could be built:
//   callback   the callback API (gRPC's own threads run the handler; fuserank's way);
//   async N    the completion-queue API with N threads, each polling its own queue and
//              handling what it polled, so a call is read and answered on one thread.
// usage: fuserank-refusal-floor callback|async PORT [THREADS]
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

const grpc::Status kRefusal(grpc::StatusCode::NOT_FOUND, "no such model");

class CallbackRefuser final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() { StartRead(&request_); }
      void OnReadDone(bool) override { Finish(kRefusal); }
      void OnDone() override { delete this; }

     private:
      grpc::ByteBuffer request_;
    };
    return new Reactor;
  }
};

// One call on the completion-queue API: requested, then read, then finished.
struct AsyncCall {
  enum class Step { kRequested, kRead, kFinished };
  grpc::GenericServerContext context;
  grpc::GenericServerAsyncReaderWriter stream{&context};
  grpc::ByteBuffer request;
  Step step = Step::kRequested;
};

void Request(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* queue) {
  auto* call = new AsyncCall;
  service->RequestCall(&call->context, &call->stream, queue, queue, call);
}

void Poll(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* queue) {
  for (int i = 0; i < 64; ++i) Request(service, queue);
  void* tag = nullptr;
  bool ok = false;
  while (queue->Next(&tag, &ok)) {
    auto* call = static_cast<AsyncCall*>(tag);
    switch (call->step) {
      case AsyncCall::Step::kRequested:
        Request(service, queue);  // keep 64 requested
        if (!ok) {
          delete call;
          break;
        }
        call->step = AsyncCall::Step::kRead;
        call->stream.Read(&call->request, call);
        break;
      case AsyncCall::Step::kRead:
        call->step = AsyncCall::Step::kFinished;
        call->stream.Finish(kRefusal, call);
        break;
      case AsyncCall::Step::kFinished:
        delete call;
        break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (argc < 3 || (mode != "callback" && mode != "async")) {
    std::fprintf(stderr, "usage: %s callback|async PORT [THREADS]\n", argv[0]);
    return 2;
  }
  const int threads = argc > 3 ? std::max(1, std::atoi(argv[3])) : 1;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(std::string("127.0.0.1:") + argv[2], grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(-1);
  CallbackRefuser callback;
  grpc::AsyncGenericService async;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
  if (mode == "callback") {
    builder.RegisterCallbackGenericService(&callback);
  } else {
    builder.RegisterAsyncGenericService(&async);
    for (int t = 0; t < threads; ++t) queues.push_back(builder.AddCompletionQueue());
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::fprintf(stderr, "cannot listen on 127.0.0.1:%s\n", argv[2]);
    return 1;
  }
  if (mode == "callback") {
    server->Wait();
    return 0;
  }
  std::vector<std::thread> pollers;
  for (auto& queue : queues) pollers.emplace_back(Poll, &async, queue.get());
  for (std::thread& poller : pollers) poller.join();
  return 0;
}
