#include "recorder/child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "recorder/secrets.h"

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

// argv[0] looked up on the child's PATH as execvp would, but before fork: between fork
// and exec only async-signal-safe calls are allowed. Empty when not found.
std::string FindExecutable(const std::string& name, const std::map<std::string, std::string>& env,
                           int* error) {
  *error = ENOENT;
  auto usable = [&](const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return false;
    if (S_ISDIR(st.st_mode)) {
      *error = EACCES;
      return false;
    }
    if (::access(path.c_str(), X_OK) != 0) {
      *error = errno;
      return false;
    }
    return true;
  };
  if (name.find('/') != std::string::npos) return usable(name) ? name : "";
  auto it = env.find("PATH");
  std::string path = it != env.end() ? it->second : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (usable(candidate)) return candidate;
    start = end + 1;
  }
  return "";
}

// The child side of fork(): async-signal-safe calls only. Never returns.
[[noreturn]] void ExecChild(const char* path, char* const* argv, char* const* envp, int out_fd,
                            int err_fd, int status_fd, pid_t parent) {
  // Signals the recorder handles or ignores get their defaults back (ignored ones would
  // survive exec: SIGXFSZ is ignored by trace so a full store is an error, not a death).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGXFSZ, SIGHUP, SIGQUIT})
    sigaction(sig, &dfl, nullptr);
  // When the recorder dies (even by SIGKILL), the agent gets SIGTERM instead of running on
  // orphaned. PDEATHSIG fires when the *thread* that forked exits; RunChild forks and then
  // waits for the child on that same thread, so that thread outlives the child unless the
  // whole recorder dies.
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(128 + SIGTERM);
  if (dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) {
    int e = errno;
    (void)!write(status_fd, &e, sizeof e);
    _exit(127);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(path, argv, envp);
  int e = errno;
  (void)!write(status_fd, &e, sizeof e);
  _exit(127);
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

  auto close_pipes = [&] {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
  };
  int find_error = 0;
  const std::string exe = FindExecutable(options.argv[0], env, &find_error);
  if (exe.empty()) {
    close_pipes();
    return NotFound("cannot run '" + options.argv[0] + "': " + strerror(find_error));
  }
  // exec's outcome: EOF on success (close-on-exec), the errno otherwise.
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    close_pipes();
    return IOError(std::string("pipe: ") + strerror(errno));
  }

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
  // No signal handler may run in the child between fork and exec: block everything
  // around fork; the child unblocks after resetting the handlers.
  sigset_t all, old_mask;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    ExecChild(exe.c_str(), argv.data(), envp.data(), out_pipe[1], err_pipe[1], status_pipe[1],
              parent);
  }
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(status_pipe[1]);
  int exec_errno = 0;
  if (pid < 0) {
    exec_errno = fork_errno;
  } else {
    ssize_t n;
    while ((n = read(status_pipe[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
    }
    if (n != static_cast<ssize_t>(sizeof exec_errno)) exec_errno = 0;
  }
  close(status_pipe[0]);
  if (pid < 0 || exec_errno != 0) {
    if (pid > 0) {
      while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    close(out_pipe[0]);
    close(err_pipe[0]);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    return NotFound("cannot run '" + options.argv[0] + "': " + strerror(exec_errno));
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
      // OPENAI_BASE_URL and friends may carry user:password@ (docs/recorder.md).
      out[name] = StripUrlCredentials(kv.substr(eq + 1));
    }
  }
  return out;
}

}  // namespace trace::recorder
