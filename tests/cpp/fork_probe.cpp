// Configure-time probe of the machine the tests run on (tests/cpp/CMakeLists.txt): exits 0 when a
// child forked from a multithreaded process can start a thread. qemu-user 7.2 (Debian 12's) cannot:
// it aborts such a child on an assertion of its own, whatever the program, so
// ParallelFor.WorksInAForkedChild cannot pass under it.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

int main() {
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop.load()) std::this_thread::yield();
  });
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::thread([] {}).join();
    ::_exit(0);
  }
  int status = 0;
  const bool ok = pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  stop = true;
  busy.join();
  return ok ? 0 : 1;
}
