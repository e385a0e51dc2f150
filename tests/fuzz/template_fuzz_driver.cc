// A small libFuzzer-compatible driver for g++ builds: runs LLVMFuzzerTestOneInput over a
// seed corpus (files and directories given on the command line, each file's text also
// split into its {% %} / {{ }} tags as extra seeds), then over random mutations of the
// seeds for --seconds seconds. Deterministic for a given --seed. Exit 0 unless the target
// crashes (which aborts the process).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// The input being run, for the crash handler to save.
const std::string* g_current = nullptr;

// On a crash, write the input to template_fuzz_crash.txt (async-signal-safe calls only)
// and re-raise so the test fails.
void OnCrash(int sig) {
  if (g_current) {
    int fd = open("template_fuzz_crash.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t ignored = write(fd, g_current->data(), g_current->size());
      (void)ignored;
      close(fd);
    }
    const char msg[] = "template_fuzz: crash; input saved to template_fuzz_crash.txt\n";
    ssize_t ignored = write(2, msg, sizeof(msg) - 1);
    (void)ignored;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void InstallCrashHandler() {
  static char alt_stack[1 << 16];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof(alt_stack);
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_handler = OnCrash;
  sa.sa_flags = SA_ONSTACK;
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) sigaction(sig, &sa, nullptr);
}

void Run(const std::string& s) {
  g_current = &s;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  g_current = nullptr;
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  // A tokenizer_config.json seeds with its chat_template.
  if (p.extension() == ".json") {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string()) {
      return j["chat_template"].get<std::string>();
    }
  }
  return text;
}

const char* kTokens[] = {"{{",     "}}",
                         "{%",     "%}",
                         "{%-",    "-%}",
                         "{#",     "#}",
                         "if ",    "endif",
                         "for ",   "endfor",
                         " in ",   "set ",
                         "|",      ".",
                         "[",      "]",
                         "(",      ")",
                         "'",      "\"",
                         "\\",     "::-1",
                         "loop.",  "namespace(",
                         "macro ", "endmacro",
                         "tojson", "is ",
                         "not ",   "else",
                         "elif ",  "\n",
                         " ",      "é",
                         "😀",      "raise_exception(",
                         "range(", "1e308",
                         "-",      "*",
                         "**",     "//",
                         "~"};

std::string Mutate(const std::string& in, std::mt19937_64& rng) {
  std::string s = in;
  int edits = 1 + static_cast<int>(rng() % 8);
  for (int e = 0; e < edits; ++e) {
    size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 5) {
      case 0:  // delete a span
        if (!s.empty() && pos < s.size())
          s.erase(pos, 1 + rng() % std::min<size_t>(16, s.size() - pos));
        break;
      case 1:  // insert a token
        s.insert(pos, kTokens[rng() % (sizeof(kTokens) / sizeof(kTokens[0]))]);
        break;
      case 2:  // flip a byte
        if (!s.empty() && pos < s.size()) s[pos] = static_cast<char>(rng() & 0xFF);
        break;
      case 3: {  // duplicate a span
        if (s.empty()) break;
        size_t from = rng() % s.size();
        size_t len = 1 + rng() % std::min<size_t>(64, s.size() - from);
        s.insert(pos, s.substr(from, len));
        break;
      }
      default:  // truncate
        if (pos < s.size()) s.resize(pos);
    }
  }
  if (s.size() > 1 << 16) s.resize(1 << 16);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  InstallCrashHandler();
  double seconds = 5;
  uint64_t seed = 1;
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--corpus") {
      continue;
    } else if (std::filesystem::is_directory(a)) {
      for (const auto& entry : std::filesystem::directory_iterator(a)) {
        if (entry.is_regular_file()) corpus.push_back(ReadFile(entry.path()));
      }
    } else if (std::filesystem::is_regular_file(a)) {
      corpus.push_back(ReadFile(a));
    } else {
      std::fprintf(stderr, "template_fuzz: no such file or directory: %s\n", a.c_str());
      return 2;
    }
  }
  corpus.push_back("{{ x }}");
  corpus.push_back("{\"x\": [1, 2, {\"a\": \"b\"}]}\n{% for i in x %}{{ i | tojson }}{% endfor %}");
  size_t seeds = corpus.size();
  for (size_t i = 0; i < seeds; ++i) {
    // Each tag of a seed on its own is a useful small seed.
    const std::string s = corpus[i];  // a copy: push_back below may reallocate
    for (size_t p = s.find('{'); p != std::string::npos; p = s.find('{', p + 1)) {
      size_t q = s.find('}', p);
      if (q != std::string::npos && q - p < 400) corpus.push_back(s.substr(p, q - p + 2));
    }
  }
  for (const auto& s : corpus) Run(s);
  std::mt19937_64 rng(seed);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t runs = corpus.size();
  while (std::chrono::steady_clock::now() < deadline) {
    std::string input = Mutate(corpus[rng() % corpus.size()], rng);
    Run(input);
    ++runs;
  }
  std::printf("template_fuzz: %llu inputs, %zu seeds, no crash\n",
              static_cast<unsigned long long>(runs), corpus.size());
  return 0;
}
