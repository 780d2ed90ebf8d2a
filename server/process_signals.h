// fuserank-server's signals: SIGTERM and SIGINT stop it, SIGHUP is logged and ignored.
// One thread takes them all with sigwait(), so no handler runs inside another thread's
// work. What a stop signal does depends on the phase: while the server starts (config,
// models, warm-up) it exits the process at once (status 1: no gRPC port listens yet, nothing
// to drain); while it serves it wakes WaitForStop() and the drain follows; during the
// drain it exits at once (status 1), for a drain that cannot end. Used by main() only;
// thread-safe; one per process (its thread shares the state and runs until the process
// ends, also after the object is gone).
#ifndef FUSERANK_SERVER_PROCESS_SIGNALS_H_
#define FUSERANK_SERVER_PROCESS_SIGNALS_H_

#include <memory>
#include <string>

namespace fuserank::server {

class ProcessSignals {
 public:
  // Blocks SIGTERM, SIGINT and SIGHUP in the calling thread, and so in every thread it
  // starts afterwards. REQUIRES: no other thread of the process runs yet (one that did
  // could take a signal with its default action: the process killed, no log).
  static void Block();

  // Starts the thread that takes the signals Block() blocked, logging with the default
  // logger of this moment (call after ConfigureLogging). `sighup_note` ends the SIGHUP
  // warning: how this server reloads models instead.
  static std::unique_ptr<ProcessSignals> Start(std::string sighup_note);

  // The start is over (the server is about to listen): from now on a stop signal starts
  // a drain instead of exiting.
  void Serving();

  // Waits for SIGTERM or SIGINT after Serving(); returns the signal. A second one exits
  // the process at once.
  int WaitForStop();

 private:
  struct State;
  explicit ProcessSignals(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_PROCESS_SIGNALS_H_
