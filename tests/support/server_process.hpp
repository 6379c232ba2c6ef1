// Runs the real inferencecache-server binary as a child process for integration tests.
//
// The child logs JSON to stderr; this class collects every line, finds the "startup" event
// to learn the bound ports (tests pass 127.0.0.1:0 everywhere), and can wait for "ready".
// The destructor SIGKILLs a child that is still running, so tests never leak servers; and
// the child gets SIGKILL from the kernel when the test process dies without running it
// (PR_SET_PDEATHSIG: tied to the thread that called start(), so call it from a thread that
// outlives the child, e.g. the test's main thread).
//
//   auto s = server_process::start(executable("inferencecache-server"), {"--insecure..."});
//   ASSERT_TRUE(s->wait_ready(std::chrono::seconds(20))) << s->logs();
//   ... s->grpc_port() ...
//   EXPECT_EQ(s->terminate(), 0);
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ic::test {

/// One child server process and everything it wrote to stderr and stdout.
class server_process {
 public:
  /// Forks and execs `binary` with `args`; nullptr if the fork/exec failed.
  static std::unique_ptr<server_process> start(const std::string& binary,
                                               const std::vector<std::string>& args);
  ~server_process();
  server_process(const server_process&) = delete;
  server_process& operator=(const server_process&) = delete;

  /// Waits until the server logged "ready"; false on timeout or exit.
  bool wait_ready(std::chrono::milliseconds timeout);

  /// Waits for a log line containing `needle`; false on timeout.
  bool wait_for_log(const std::string& needle, std::chrono::milliseconds timeout);

  /// Ports from the "startup" log line (0 until it was seen).
  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_port_; }
  int snapshot_port() const { return snapshot_port_; }

  /// "127.0.0.1:<grpc port>".
  std::string grpc_target() const { return "127.0.0.1:" + std::to_string(grpc_port_); }

  /// Sends `sig` and waits up to `timeout` for the exit; returns the exit code, 128+signal
  /// when killed by a signal, or -1 on timeout (the child is then SIGKILLed).
  int terminate(int sig = 15, std::chrono::milliseconds timeout = std::chrono::seconds(20));

  /// Waits for the child to exit by itself; same return values as terminate().
  int wait_exit(std::chrono::milliseconds timeout);

  /// Everything the child wrote so far.
  std::string logs() const;

  /// True once the child closed its output: it exited (or closed stdout and stderr).
  bool has_exited() const;

  pid_t pid() const { return pid_; }

 private:
  server_process() = default;
  void read_loop(int fd);
  void parse_line(const std::string& line);

  pid_t pid_ = -1;
  int exit_code_ = -1;
  bool exited_ = false;
  std::thread reader_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string output_;
  bool ready_ = false;
  bool eof_ = false;
  int grpc_port_ = 0;
  int http_port_ = 0;
  int snapshot_port_ = 0;
};

/// Runs `binary args...` to completion (bounded by `timeout`); returns {exit code, output}.
std::pair<int, std::string> run_to_exit(const std::string& binary,
                                        const std::vector<std::string>& args,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(20));

/// Creates a fresh empty directory under /tmp and returns its path.
std::string make_temp_dir(const std::string& prefix = "ic_test");

/// Removes a directory tree (best effort).
void remove_tree(const std::string& path);

}  // namespace ic::test
