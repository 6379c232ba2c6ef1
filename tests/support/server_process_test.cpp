#include "tests/support/server_process.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace ic::test {
namespace {

using namespace std::chrono_literals;

// A test process killed without its destructors (a sanitizer abort, a ctest timeout) must not
// leave its servers behind. A middle process starts a child through server_process and exits
// at once, as such an abort would; this process, made the orphans' subreaper, then reaps the
// child and sees it killed.
TEST(ServerProcess, ChildDiesWhenTheProcessThatStartedItDiesWithoutCleanup) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    ::close(fds[0]);
    auto child = server_process::start("/bin/sleep", {"30"});
    const pid_t pid = child ? child->pid() : -1;
    (void)!::write(fds[1], &pid, sizeof pid);
    ::_exit(0);  // no destructor runs, as in an abort
  }
  ::close(fds[1]);
  pid_t child = -1;
  const bool got = ::read(fds[0], &child, sizeof child) == static_cast<ssize_t>(sizeof child);
  ::close(fds[0]);
  int middle_status = 0;
  ::waitpid(middle, &middle_status, 0);
  ASSERT_TRUE(got && child > 0) << "the middle process could not start /bin/sleep";

  // The orphaned child is re-parented to this process, so waitpid sees how it ended.
  int status = 0;
  pid_t reaped = 0;
  const auto until = std::chrono::steady_clock::now() + 10s;
  while ((reaped = ::waitpid(child, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(10ms);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  if (reaped == 0) {  // still running: stop it, then fail
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  ASSERT_EQ(reaped, child) << "the child outlived the process that started it by 10 s";
  // SIGKILL from the kernel, or exit 127 when the middle died before the child's prctl.
  EXPECT_TRUE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
              (WIFEXITED(status) && WEXITSTATUS(status) == 127))
      << "status " << status;
}

// While the process that started it lives, the child runs until it is stopped.
TEST(ServerProcess, ChildRunsWhileItsParentLives) {
  auto child = server_process::start("/bin/sleep", {"30"});
  ASSERT_NE(child, nullptr);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(::waitpid(child->pid(), nullptr, WNOHANG), 0) << "the child ended by itself";
  EXPECT_EQ(child->terminate(SIGTERM, 5s), 128 + SIGTERM);
}

}  // namespace
}  // namespace ic::test
