#include "tests/support/server_process.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace ic::test {
namespace {

// An idle client channel notices a server's GOAWAY only at gRPC's backup poll (5 s by
// default), which would hold every graceful server shutdown in a test for 5 s. Poll faster.
const bool kFastBackupPoll = [] {
  ::setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "100", 0);
  return true;
}();

int port_of(const std::string& addr) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos) return 0;
  return std::atoi(addr.c_str() + colon + 1);
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::unique_ptr<server_process> server_process::start(const std::string& binary,
                                                      const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe(fds) != 0) return nullptr;
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return nullptr;
  if (pid == 0) {
    // Die with the test: a test process killed by a sanitizer abort, a ctest timeout or
    // SIGKILL runs no destructor, and its servers would keep their ports and data dirs. The
    // signal comes when the thread that forked exits (so start servers from a thread that
    // outlives them, as every test does from its main thread). If the parent died before
    // prctl, getppid() already names another process.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(fds[1], STDERR_FILENO);
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(binary.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::unique_ptr<server_process> p(new server_process());
  p->pid_ = pid;
  p->reader_ = std::thread([raw = p.get(), fd = fds[0]] { raw->read_loop(fd); });
  return p;
}

server_process::~server_process() {
  if (!exited_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (reader_.joinable()) reader_.join();
}

void server_process::read_loop(int fd) {
  char buf[4096];
  std::string partial;
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) {
    partial.append(buf, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = partial.find('\n')) != std::string::npos) {
      std::string line = partial.substr(0, nl);
      partial.erase(0, nl + 1);
      std::lock_guard<std::mutex> lock(mu_);
      output_ += line + "\n";
      parse_line(line);
      cv_.notify_all();
    }
  }
  ::close(fd);
  std::lock_guard<std::mutex> lock(mu_);
  if (!partial.empty()) output_ += partial;
  eof_ = true;
  cv_.notify_all();
}

void server_process::parse_line(const std::string& line) {
  if (line.empty() || line.front() != '{') return;
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return;
  std::string msg = j.value("msg", "");
  if (msg == "startup") {
    grpc_port_ = port_of(j.value("grpc_addr", ""));
    http_port_ = port_of(j.value("http_addr", ""));
    snapshot_port_ = port_of(j.value("snapshot_addr", ""));
  } else if (msg == "ready") {
    ready_ = true;
  }
}

bool server_process::wait_ready(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return ready_ || eof_; }) && ready_;
}

bool server_process::wait_for_log(const std::string& needle, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout,
                      [&] { return output_.find(needle) != std::string::npos || eof_; }) &&
         output_.find(needle) != std::string::npos;
}

int server_process::wait_exit(std::chrono::milliseconds timeout) {
  if (exited_) return exit_code_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      exit_code_ = decode_status(status);
      if (reader_.joinable()) reader_.join();
      return exit_code_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  exited_ = true;
  exit_code_ = -1;
  if (reader_.joinable()) reader_.join();
  return -1;
}

int server_process::terminate(int sig, std::chrono::milliseconds timeout) {
  if (exited_) return exit_code_;
  ::kill(pid_, sig);
  return wait_exit(timeout);
}

std::string server_process::logs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return output_;
}

bool server_process::has_exited() const {
  std::lock_guard<std::mutex> lock(mu_);
  return eof_;
}

std::pair<int, std::string> run_to_exit(const std::string& binary,
                                        const std::vector<std::string>& args,
                                        std::chrono::milliseconds timeout) {
  auto p = server_process::start(binary, args);
  if (!p) return {-1, "spawn failed"};
  int code = p->wait_exit(timeout);
  return {code, p->logs()};
}

std::string make_temp_dir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* dir = ::mkdtemp(buf.data());
  return dir ? std::string(dir) : std::string();
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  if (!path.empty()) std::filesystem::remove_all(path, ec);
}

}  // namespace ic::test
