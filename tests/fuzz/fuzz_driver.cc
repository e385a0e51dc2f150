// The fuzz driver for builds without libFuzzer (g++, the ctest in CI): replays a target's
// seeds, then a FIXED NUMBER of inputs mutated from them, so a run does the same work on a
// fast machine and a loaded one and its outcome never depends on speed. Deterministic for
// a given --seed and corpus. Coverage-guided fuzzing is scripts/fuzz.sh (libFuzzer).
//
//   TARGET [--runs N] [--seed S] [--max-len BYTES] [--dict FILE] [CORPUS...]
//
// CORPUS: files and directories (read recursively, in name order). With --runs 0 it only
// replays them, e.g. a crash file found by libFuzzer. Exit 0 when every input passed; a
// failing input aborts the process after its bytes are saved to ./TARGET.crash (replay it
// with `TARGET TARGET.crash --runs 0`).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

// Defined by a sanitizer runtime when one is linked (weak: absent otherwise).
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

namespace fs = std::filesystem;

// ---- saving the failing input (async-signal-safe) -----------------------------------

char g_crash_path[512];
const std::string* g_current = nullptr;

void SaveCurrentInput() {
  if (g_current == nullptr) return;
  const int fd = open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    const char* p = g_current->data();
    size_t left = g_current->size();
    while (left > 0) {
      const ssize_t n = write(fd, p, left);
      if (n <= 0) break;
      p += n;
      left -= static_cast<size_t>(n);
    }
    close(fd);
  }
  const char head[] = "fuzz driver: this input failed; saved to ";
  ssize_t ignored = write(2, head, sizeof head - 1);
  ignored = write(2, g_crash_path, strlen(g_crash_path));
  ignored = write(2, "\n", 1);
  (void)ignored;
  g_current = nullptr;  // once
}

void OnFatalSignal(int sig) {
  SaveCurrentInput();
  signal(sig, SIG_DFL);
  raise(sig);
}

void InstallCrashHandlers() {
  static char alt_stack[1 << 16];  // so a stack overflow can still be reported
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_handler = OnFatalSignal;
  sa.sa_flags = SA_ONSTACK;
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGTRAP}) sigaction(sig, &sa, nullptr);
  // Sanitizers report and exit without a signal; save the input first.
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(SaveCurrentInput);
}

void Run(const std::string& input) {
  // An exact-size heap copy, as libFuzzer does, so a sanitizer sees reads past the end.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[input.size()]);
  if (!input.empty()) std::memcpy(copy.get(), input.data(), input.size());
  g_current = &input;
  LLVMFuzzerTestOneInput(copy.get(), input.size());
  g_current = nullptr;
}

// ---- inputs --------------------------------------------------------------------------

std::string ReadWholeFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool AddCorpus(const std::string& arg, std::vector<std::string>* out) {
  std::error_code ec;
  if (fs::is_directory(arg, ec)) {
    std::vector<fs::path> files;
    for (fs::recursive_directory_iterator it(arg, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file(ec)) files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());  // the iteration order is unspecified
    for (const fs::path& f : files) out->push_back(ReadWholeFile(f));
    return !ec;
  }
  if (fs::is_regular_file(arg, ec)) {
    out->push_back(ReadWholeFile(arg));
    return true;
  }
  return false;
}

// A libFuzzer / AFL dictionary: one entry per line, `name="value"` or `"value"`, with
// \\, \" and \xNN escapes; '#' starts a comment line.
bool ReadDictionary(const std::string& path, std::vector<std::string>* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    const size_t open = line.find('"');
    const size_t close = line.rfind('"');
    if (line.empty() || line[0] == '#' || open == std::string::npos || close <= open) continue;
    std::string value;
    for (size_t i = open + 1; i < close; ++i) {
      if (line[i] != '\\' || i + 1 >= close) {
        value += line[i];
      } else if (line[i + 1] == 'x' && i + 3 < close) {
        value += static_cast<char>(std::strtol(line.substr(i + 2, 2).c_str(), nullptr, 16));
        i += 3;
      } else {
        value += line[++i];
      }
    }
    out->push_back(value);
  }
  return true;
}

// ---- mutation ------------------------------------------------------------------------

using Rng = trace::fuzz::SplitMix64;

const char* const kNumbers[] = {"0",
                                "-1",
                                "1",
                                "255",
                                "65536",
                                "2147483648",
                                "4294967296",
                                "9223372036854775807",
                                "-9223372036854775808",
                                "18446744073709551616",
                                "1e308",
                                "-1e400",
                                "1e-320",
                                "0.5",
                                "-0"};
const char kBytes[] = {'\0', '\xff', '\x7f', '\x80', '\n', '"', '\\', '{', '[', ' '};

class Mutator {
 public:
  Mutator(uint64_t seed, std::vector<std::string> dict, size_t max_len)
      : rng_{seed}, dict_(std::move(dict)), max_len_(max_len) {}

  std::string Mutate(const std::string& input, const std::vector<std::string>& pool) {
    std::string s = input;
    const size_t steps = 1 + rng_.Below(6);
    for (size_t k = 0; k < steps; ++k) Step(&s, pool);
    if (s.size() > max_len_) s.resize(max_len_);
    return s;
  }

 private:
  size_t Pos(const std::string& s) { return rng_.Below(s.size() + 1); }  // insertion point

  const std::string& Token() {
    static const std::string kNone = "\"";
    return dict_.empty() ? kNone : dict_[rng_.Below(dict_.size())];
  }

  void Step(std::string* s, const std::vector<std::string>& pool) {
    const size_t n = s->size();
    switch (rng_.Below(12)) {
      case 0:  // flip a bit
        if (n) (*s)[rng_.Below(n)] ^= static_cast<char>(1u << rng_.Below(8));
        break;
      case 1:  // a random byte
        if (n) (*s)[rng_.Below(n)] = static_cast<char>(rng_.Next());
        break;
      case 2:  // an interesting byte
        if (n) (*s)[rng_.Below(n)] = kBytes[rng_.Below(sizeof kBytes)];
        break;
      case 3:  // insert random bytes
        s->insert(Pos(*s), std::string(1 + rng_.Below(4), static_cast<char>(rng_.Next())));
        break;
      case 4:  // erase a range
        if (n) {
          const size_t at = rng_.Below(n);
          s->erase(at, 1 + rng_.Below(std::min<size_t>(16, n - at)));
        }
        break;
      case 5:  // insert a dictionary token
        s->insert(Pos(*s), Token());
        break;
      case 6:  // overwrite with a dictionary token
        if (n) {
          const std::string& t = Token();
          const size_t at = rng_.Below(n);
          s->replace(at, std::min(t.size(), n - at), t);
        }
        break;
      case 7:  // truncate
        s->resize(rng_.Below(n + 1));
        break;
      case 8:  // duplicate a range
        if (n) {
          const size_t at = rng_.Below(n);
          s->insert(Pos(*s), s->substr(at, 1 + rng_.Below(64)));
        }
        break;
      case 9: {  // splice in a piece of another input
        const std::string& other = pool[rng_.Below(pool.size())];
        if (!other.empty()) {
          const size_t at = rng_.Below(other.size());
          s->insert(Pos(*s), other.substr(at, 1 + rng_.Below(128)));
        }
        break;
      }
      case 10: {  // replace a number by an edge value
        if (!n) break;
        size_t at = rng_.Below(n);
        while (at < n && !std::isdigit(static_cast<unsigned char>((*s)[at]))) ++at;
        size_t end = at;
        while (end < n && std::isdigit(static_cast<unsigned char>((*s)[end]))) ++end;
        s->replace(at, end - at, kNumbers[rng_.Below(std::size(kNumbers))]);
        break;
      }
      default:  // repeat a short range: deep nesting, long runs
        if (n) {
          const size_t at = rng_.Below(n);
          const std::string unit = s->substr(at, 1 + rng_.Below(8));
          std::string run;
          for (size_t r = 1 + rng_.Below(256); r > 0 && run.size() < max_len_; --r) run += unit;
          s->insert(at, run);
        }
        break;
    }
  }

  Rng rng_;
  std::vector<std::string> dict_;
  size_t max_len_;
};

int Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--runs N] [--seed S] [--max-len BYTES] [--dict FILE] [CORPUS...]\n"
               "Replays the target's seeds and CORPUS (files or directories), then N inputs\n"
               "mutated from them (default 1000; 0 replays only).\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = fs::path(argv[0]).filename().string();
  uint64_t runs = 1000;
  uint64_t seed = 1;
  size_t max_len = 0;
  std::vector<std::string> dict;
  std::vector<std::string> corpus = TraceFuzzSeeds();
  const size_t computed_seeds = corpus.size();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--runs" && has_value) {
      runs = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--seed" && has_value) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--max-len" && has_value) {
      max_len = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--dict" && has_value) {
      if (!ReadDictionary(argv[++i], &dict)) {
        std::fprintf(stderr, "%s: cannot read dictionary %s\n", name.c_str(), argv[i]);
        return 2;
      }
    } else if (a.rfind("--", 0) == 0) {
      return Usage(argv[0]);
    } else if (!AddCorpus(a, &corpus)) {
      std::fprintf(stderr, "%s: no such file or directory: %s\n", name.c_str(), a.c_str());
      return 2;
    }
  }
  std::snprintf(g_crash_path, sizeof g_crash_path, "%s.crash", name.c_str());
  InstallCrashHandlers();

  for (const std::string& input : corpus) Run(input);
  if (corpus.empty()) corpus.push_back("");
  if (max_len == 0) {
    max_len = 4096;
    for (const std::string& s : corpus) max_len = std::max(max_len, s.size());
  }
  // Mutants of mutants go deeper than mutants of seeds: keep some of them in the pool.
  std::vector<std::string> pool = corpus;
  const size_t pool_cap = std::max<size_t>(4 * corpus.size(), 1024);
  Mutator mutator(seed, std::move(dict), max_len);
  Rng pick{seed ^ 0x5eedull};
  for (uint64_t r = 0; r < runs; ++r) {
    std::string input = mutator.Mutate(pool[pick.Below(pool.size())], pool);
    Run(input);
    if (pick.Below(8) == 0) {
      if (pool.size() < pool_cap) {
        pool.push_back(std::move(input));
      } else {
        pool[corpus.size() + pick.Below(pool_cap - corpus.size())] = std::move(input);
      }
    }
  }
  std::printf("%s: %zu seeds (%zu computed), %llu mutated inputs (seed %llu), no failure\n",
              name.c_str(), corpus.size(), computed_seeds, static_cast<unsigned long long>(runs),
              static_cast<unsigned long long>(seed));
  return 0;
}
