// A server process started by the `recovery` benchmark: fork/exec of the server binary with
// its stderr read line by line, so the bench learns the bound ports from the JSON "startup"
// line and the journal replay time from the "recovered" line. The destructor SIGKILLs a
// child that still runs, so a failed benchmark never leaks a server.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ic::tools::bench {

/// One child server process.
class server_child {
 public:
  /// Forks and execs `binary args...`; nullptr and `*err` when that fails.
  static std::unique_ptr<server_child> start(const std::string& binary,
                                             const std::vector<std::string>& args, std::string* err);
  ~server_child();
  server_child(const server_child&) = delete;
  server_child& operator=(const server_child&) = delete;

  /// Waits until a stderr line contains `needle`; returns that line, or "" on timeout/exit.
  std::string wait_for_line(const std::string& needle, std::chrono::milliseconds timeout);

  /// The "grpc_addr" / "http_addr" fields of the startup line ("" until it was seen).
  std::string grpc_addr() const;
  std::string http_addr() const;
  /// The "snapshot_addr" field: the admin port (/policy, /snapshot, /probe).
  std::string admin_addr() const;

  /// Sends `sig` and waits for the exit; returns the exit code, 128+signal, or -1 on timeout.
  int stop(int sig, std::chrono::milliseconds timeout);

  /// Without waiting: -2 while the child runs, else its exit code as stop() reports it.
  int poll_exit();

  pid_t pid() const { return pid_; }

  /// The last `lines` lines the child wrote (for error messages).
  std::string tail(std::size_t lines = 5) const;

 private:
  server_child() = default;
  void read_loop(int fd);

  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
  std::thread reader_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  bool eof_ = false;
  std::string grpc_addr_, http_addr_, admin_addr_;
};

}  // namespace ic::tools::bench
