// A `trace` built with the CUDA backend loads CUDA's libraries only when a command uses
// CUDA (docs/cuda.md, "Loading CUDA"): the executable has no DT_NEEDED on libcudart,
// libcublas or libcublasLt (the runtime is linked statically, cuBLAS is dlopen'ed by
// kernels/cuda/cublas_loader.h), and commands that stay on the CPU map none of them. In a
// CUDA build `trace doctor` still opens cuBLAS and names its version. Needs no GPU.
//
// The dynamic section is read here from the ELF file (no binutils needed); what a command
// maps is what glibc's loader reports with LD_DEBUG=libs, which lists every library it
// looks for, at start-up and through dlopen alike.

#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "store/store.h"
#include "testkit/shell.h"
#include "testkit/temp_dir.h"
#include "tests/common/trace_cli.h"

namespace trace {
namespace {

const std::string kTrace = std::string(TRACE_BINARY_DIR) + "/bin/trace";

// The DT_NEEDED names of a 64-bit little-endian ELF file, through its section headers (the
// dynamic section and the string table it links to). Fails the test on a malformed file.
std::vector<std::string> NeededLibraries(const std::string& path) {
  const std::string bytes = testing::ReadWholeFile(path);
  std::vector<std::string> needed;
  Elf64_Ehdr eh;
  if (bytes.size() < sizeof(eh)) {
    ADD_FAILURE() << path << ": too short for an ELF header";
    return needed;
  }
  std::memcpy(&eh, bytes.data(), sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr) ||
      eh.e_shoff + uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > bytes.size()) {
    ADD_FAILURE() << path << ": not a 64-bit little-endian ELF file with section headers";
    return needed;
  }
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof(sh));
    return sh;
  };
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr dyn = section(i);
    if (dyn.sh_type != SHT_DYNAMIC) continue;
    if (dyn.sh_link >= eh.e_shnum || dyn.sh_offset + dyn.sh_size > bytes.size()) {
      ADD_FAILURE() << path << ": bad dynamic section";
      return needed;
    }
    const Elf64_Shdr str = section(dyn.sh_link);
    if (str.sh_offset + str.sh_size > bytes.size()) {
      ADD_FAILURE() << path << ": bad dynamic string table";
      return needed;
    }
    for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= dyn.sh_size; off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d;
      std::memcpy(&d, bytes.data() + dyn.sh_offset + off, sizeof(d));
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag != DT_NEEDED) continue;
      if (d.d_un.d_val >= str.sh_size) {
        ADD_FAILURE() << path << ": DT_NEEDED outside the string table";
        continue;
      }
      const char* name = bytes.data() + str.sh_offset + d.d_un.d_val;
      needed.emplace_back(name, strnlen(name, str.sh_size - d.d_un.d_val));
    }
  }
  return needed;
}

// The CUDA libraries a CPU-only command must not load: the runtime, cuBLAS, the driver's
// libcuda and NVML.
bool IsCudaLibrary(const std::string& name) {
  for (const char* prefix : {"libcudart", "libcublas", "libcuda.", "libnvidia-ml"}) {
    if (name.find(prefix) != std::string::npos) return true;
  }
  return false;
}

// The lines of glibc's LD_DEBUG=libs report (in `err`) that name a CUDA library.
std::string CudaLibraryLines(const std::string& err) {
  std::string hits;
  size_t start = 0;
  while (start < err.size()) {
    size_t end = err.find('\n', start);
    if (end == std::string::npos) end = err.size();
    const std::string line = err.substr(start, end - start);
    if ((line.find("find library=") != std::string::npos ||
         line.find("calling init:") != std::string::npos) &&
        IsCudaLibrary(line)) {
      hits += line + "\n";
    }
    start = end + 1;
  }
  return hits;
}

TEST(CudaLazyLoad, TraceHasNoDtNeededOnCudaLibraries) {
  const std::vector<std::string> needed = NeededLibraries(kTrace);
  std::string all;
  for (const auto& n : needed) all += n + " ";
  // The reader works: the C library is there in every build.
  EXPECT_NE(all.find("libc.so.6"), std::string::npos) << all;
  for (const auto& n : needed) {
    EXPECT_FALSE(IsCudaLibrary(n)) << kTrace << " needs " << n << " at start-up; all: " << all;
  }
}

// `trace ARGS...` with glibc's loader reporting every library it looks for on stderr.
testing::CliResult RunWithLoaderReport(const testing::TempDir& dir,
                                       const std::vector<std::string>& args) {
  const std::string prefix = "LD_DEBUG=libs ";
  return testing::RunTrace(dir, args, prefix);
}

// Each command's LD_DEBUG report must list the libraries it loads (libc at least) and no
// CUDA library.
void ExpectNoCudaLoaded(const testing::TempDir& dir, const std::vector<std::string>& args) {
  const testing::CliResult r = RunWithLoaderReport(dir, args);
  std::string cmd;
  for (const auto& a : args) cmd += " " + a;
  ASSERT_EQ(r.exit_code, 0) << "trace" << cmd << ": "
                            << r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0);
  EXPECT_NE(r.err.find("find library=libc.so.6"), std::string::npos)
      << "trace" << cmd << ": no LD_DEBUG report from the loader";
  EXPECT_EQ(CudaLibraryLines(r.err), "") << "trace" << cmd << " loaded CUDA libraries";
}

TEST(CudaLazyLoad, VersionLoadsNoCudaLibrary) {
  testing::TempDir dir;
  ExpectNoCudaLoaded(dir, {"--version"});
}

TEST(CudaLazyLoad, LsOnAnEmptyStoreLoadsNoCudaLibrary) {
  testing::TempDir dir;
  const std::string store = dir.file("traces.db");
  ASSERT_TRUE(store::Store::Open(store).ok());
  ExpectNoCudaLoaded(dir, {"--store", store, "ls"});
}

#ifdef TRACE_TEST_HAVE_CUDA
// The other side: a command that asks for CUDA's versions opens cuBLAS at run time, from
// the executable (its RUNPATH or the loader's path), and shows the version it reports.
TEST(CudaLazyLoad, DoctorOpensCublasAtRunTimeAndShowsItsVersion) {
  testing::TempDir dir;
  const testing::CliResult r = RunWithLoaderReport(dir, {"doctor", "--no-model"});
  EXPECT_NE(r.err.find("find library=libcublas.so." + std::to_string(TRACE_TEST_CUBLAS_MAJOR)),
            std::string::npos)
      << "cuBLAS was not dlopen'ed";
  EXPECT_NE(r.out.find(", cuBLAS " + std::to_string(TRACE_TEST_CUBLAS_MAJOR) + "."),
            std::string::npos)
      << r.out;
}
#endif

}  // namespace
}  // namespace trace
