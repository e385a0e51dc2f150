#include "recorder/child.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

extern char** environ;

namespace trace::recorder {
namespace {

std::atomic<pid_t> g_child_pid{0};
std::atomic<int> g_forwarded{0};

// Forwards signals sent to us (kill, timeout, a supervisor). A Ctrl-C from the terminal
// (si_code SI_KERNEL) already reached the child: it shares our process group.
void ForwardSignal(int sig, siginfo_t* info, void*) {
  if (info != nullptr && info->si_code == SI_KERNEL) return;
  pid_t pid = g_child_pid.load();
  if (pid > 0) {
    g_forwarded = sig;
    kill(pid, sig);
  }
}

void WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
}

void Pump(int from, int to, int stream, const ChildOptions& options) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(from, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (options.echo) WriteAll(to, buf, static_cast<size_t>(n));
    if (options.on_output) options.on_output(stream, std::string_view(buf, n));
  }
  close(from);
}

bool Contains(const std::string& s, const char* word) {
  return s.find(word) != std::string::npos;
}

}  // namespace

Result<ChildExit> RunChild(const ChildOptions& options) {
  if (options.argv.empty()) return InvalidArgument("no command to run (trace record -- CMD)");
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    return IOError(std::string("pipe: ") + strerror(errno));
  }
  // Environment: ours, with the extra variables set.
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : options.extra_env) env[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t default_signals;
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGINT);
  sigaddset(&default_signals, SIGTERM);
  sigaddset(&default_signals, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  // Install the forwarding handlers before the child exists, so no signal is lost.
  struct sigaction forward {
  }, old_int{}, old_term{};
  forward.sa_sigaction = ForwardSignal;
  forward.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&forward.sa_mask);
  sigaction(SIGINT, &forward, &old_int);
  sigaction(SIGTERM, &forward, &old_term);
  g_forwarded = 0;

  auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    return NotFound("cannot run '" + options.argv[0] + "': " + strerror(rc));
  }
  g_child_pid = pid;
  if (options.on_started) options.on_started(pid);

  std::thread out_thread(Pump, out_pipe[0], 1, 1, std::cref(options));
  std::thread err_thread(Pump, err_pipe[0], 2, 2, std::cref(options));

  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child_pid = 0;
  // The pipes close when the child and anything it left behind have exited.
  out_thread.join();
  err_thread.join();
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);

  ChildExit exit;
  exit.duration_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  exit.forwarded_signal = g_forwarded;
  if (WIFSIGNALED(status)) {
    exit.signalled = true;
    exit.signal = WTERMSIG(status);
  } else {
    exit.exit_code = WEXITSTATUS(status);
  }
  return exit;
}

std::map<std::string, std::string> AllowListedEnvironment(char** envp) {
  static const std::set<std::string> kExact = {"LANG",
                                               "LANGUAGE",
                                               "TZ",
                                               "PYTHONHASHSEED",
                                               "PYTHONPATH",
                                               "PYTHONUNBUFFERED",
                                               "VIRTUAL_ENV",
                                               "CONDA_DEFAULT_ENV",
                                               "OMP_NUM_THREADS",
                                               "MKL_NUM_THREADS",
                                               "CUDA_VISIBLE_DEVICES",
                                               "NODE_ENV",
                                               "SHELL",
                                               "TERM",
                                               "USER",
                                               "HOME",
                                               "PWD",
                                               "OPENAI_BASE_URL",
                                               "OPENAI_MODEL",
                                               "ANTHROPIC_BASE_URL",
                                               "PATH"};
  std::map<std::string, std::string> out;
  for (char** e = envp; e && *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string name = kv.substr(0, eq);
    std::string upper = name;
    for (char& c : upper) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
    if (Contains(upper, "KEY") || Contains(upper, "TOKEN") || Contains(upper, "SECRET") ||
        Contains(upper, "PASSWORD") || Contains(upper, "CREDENTIAL")) {
      continue;
    }
    if (kExact.count(name) || name.rfind("LC_", 0) == 0 || name.rfind("TRACE_", 0) == 0) {
      out[name] = kv.substr(eq + 1);
    }
  }
  return out;
}

}  // namespace trace::recorder
