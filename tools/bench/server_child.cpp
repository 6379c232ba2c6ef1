#include "tools/bench/server_child.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <nlohmann/json.hpp>

namespace ic::tools::bench {

std::unique_ptr<server_child> server_child::start(const std::string& binary,
                                                  const std::vector<std::string>& args,
                                                  std::string* err) {
  int fds[2];
  if (::pipe(fds) != 0) {
    *err = std::string("pipe: ") + std::strerror(errno);
    return nullptr;
  }
  std::vector<std::string> argv_store{binary};
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    *err = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return nullptr;
  }
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::unique_ptr<server_child> c(new server_child());
  c->pid_ = pid;
  c->reader_ = std::thread([p = c.get(), fd = fds[0]] { p->read_loop(fd); });
  return c;
}

server_child::~server_child() {
  if (!exited_ && pid_ > 0) stop(SIGKILL, std::chrono::seconds(10));
  if (reader_.joinable()) reader_.join();
}

void server_child::read_loop(int fd) {
  std::string partial;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    partial.append(buf, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = partial.find('\n')) != std::string::npos) {
      std::string line = partial.substr(0, nl);
      partial.erase(0, nl + 1);
      std::lock_guard<std::mutex> lock(mu_);
      if (line.find("\"startup\"") != std::string::npos) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object()) {
          grpc_addr_ = j.value("grpc_addr", "");
          http_addr_ = j.value("http_addr", "");
          admin_addr_ = j.value("snapshot_addr", "");
        }
      }
      lines_.push_back(std::move(line));
      if (lines_.size() > 2000) lines_.erase(lines_.begin(), lines_.begin() + 1000);
      cv_.notify_all();
    }
  }
  ::close(fd);
  std::lock_guard<std::mutex> lock(mu_);
  eof_ = true;
  cv_.notify_all();
}

std::string server_child::wait_for_line(const std::string& needle, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  std::string found;
  cv_.wait_for(lock, timeout, [&] {
    for (const auto& l : lines_)
      if (l.find(needle) != std::string::npos) {
        found = l;
        return true;
      }
    return eof_;
  });
  return found;
}

std::string server_child::grpc_addr() const {
  std::lock_guard<std::mutex> lock(mu_);
  return grpc_addr_;
}

std::string server_child::http_addr() const {
  std::lock_guard<std::mutex> lock(mu_);
  return http_addr_;
}

std::string server_child::admin_addr() const {
  std::lock_guard<std::mutex> lock(mu_);
  return admin_addr_;
}

std::string server_child::tail(std::size_t lines) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  std::size_t from = lines_.size() > lines ? lines_.size() - lines : 0;
  for (std::size_t i = from; i < lines_.size(); ++i) out += lines_[i] + "\n";
  return out;
}

namespace {
int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}
}  // namespace

int server_child::poll_exit() {
  if (pid_ <= 0) return -1;
  if (exited_) return exit_code_;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return -2;
  exited_ = true;
  exit_code_ = exit_code_of(status);
  return exit_code_;
}

int server_child::stop(int sig, std::chrono::milliseconds timeout) {
  if (exited_ || pid_ <= 0) return -1;
  ::kill(pid_, sig);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (true) {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      exited_ = true;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  exited_ = true;
  exit_code_ = exit_code_of(status);
  return exit_code_;
}

}  // namespace ic::tools::bench
