// kernels/cuda/cublas_loader.h without a GPU: the one-line errors for a library that is
// missing, is not cuBLAS, or is another major version; and the toolkit's own cuBLAS, which
// loads and reports the headers' major version (dlopen and cublasGetProperty need no
// device). Built in CUDA builds only.

#include "kernels/cuda/cublas_loader.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace trace::kernels::cuda {
namespace {

const std::string kMajor = std::to_string(CUBLAS_VER_MAJOR);

TEST(CublasLoader, DefaultNamesAreTheBuildsMajorThenTheUnversionedName) {
  EXPECT_EQ(CublasBuildMajor(), CUBLAS_VER_MAJOR);
  EXPECT_EQ(DefaultCublasLibraries(),
            (std::vector<std::string>{"libcublas.so." + kMajor, "libcublas.so"}));
}

TEST(CublasLoader, AMissingLibraryGivesOneLineThatSaysWhatToDo) {
  const Result<CublasApi> api = LoadCublas({"libcublas-trace-test-absent.so.99"});
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(api.status().message(),
            "cuBLAS " + kMajor +
                " could not be loaded (libcublas-trace-test-absent.so.99: cannot open shared "
                "object file: No such file or directory): install the CUDA " +
                kMajor + " libraries or use --device cpu");
}

TEST(CublasLoader, TheFirstNamesReasonIsQuotedWhenNoneLoads) {
  const Result<CublasApi> api =
      LoadCublas({"/nonexistent/libcublas.so." + kMajor, "libcublas-trace-test-absent.so"});
  ASSERT_FALSE(api.ok());
  const std::string& m = api.status().message();
  EXPECT_NE(m.find("(/nonexistent/libcublas.so." + kMajor + ": cannot open shared object file"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

TEST(CublasLoader, ALibraryThatIsNotCublasNamesTheMissingSymbol) {
  // The C math library loads but has none of cuBLAS's functions.
  const Result<CublasApi> api = LoadCublas({"libm.so.6"});
  ASSERT_FALSE(api.ok());
  const std::string& m = api.status().message();
  EXPECT_NE(m.find("(libm.so.6: no symbol cublasCreate_v2: "), std::string::npos) << m;
  EXPECT_NE(m.find("): install the CUDA " + kMajor + " libraries or use --device cpu"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

TEST(CublasLoader, NoNamesIsAnError) {
  const Result<CublasApi> api = LoadCublas({});
  ASSERT_FALSE(api.ok());
  EXPECT_NE(api.status().message().find("(no library name given)"), std::string::npos);
}

// The toolkit this build used (TRACE_TEST_CUBLAS_LIBRARY, found by CMake) loads by path,
// with every function and the headers' major version.
TEST(CublasLoader, TheToolkitsCublasLoadsWithTheHeadersMajorVersion) {
  const Result<CublasApi> api =
      LoadCublas({"/nonexistent/libcublas.so", TRACE_TEST_CUBLAS_LIBRARY});
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  EXPECT_EQ(api->library, TRACE_TEST_CUBLAS_LIBRARY);
  EXPECT_EQ(api->version.rfind(kMajor + ".", 0), 0u) << api->version;
  for (const void* fn :
       {reinterpret_cast<const void*>(api->Create), reinterpret_cast<const void*>(api->Destroy),
        reinterpret_cast<const void*>(api->SetStream),
        reinterpret_cast<const void*>(api->SetWorkspace),
        reinterpret_cast<const void*>(api->GemmEx), reinterpret_cast<const void*>(api->GetProperty),
        reinterpret_cast<const void*>(api->GetStatusName),
        reinterpret_cast<const void*>(api->GetStatusString)}) {
    EXPECT_NE(fn, nullptr);
  }
  EXPECT_STREQ(api->GetStatusName(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
}

// Cublas() loads once: threads racing to the first call all get the same table.
TEST(CublasLoader, CublasLoadsOnceForEveryThread) {
  std::vector<const CublasApi*> seen(4, nullptr);
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Result<const CublasApi*> api = Cublas();
      if (api.ok()) {
        seen[t] = *api;
      } else {
        errors[t] = api.status().ToString();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    // The toolkit's library is on this machine's search path (the test above loads it by
    // path; Cublas() by name, as `trace` does).
    ASSERT_NE(seen[t], nullptr) << errors[t];
    EXPECT_EQ(seen[t], seen[0]);
  }
  EXPECT_EQ(&LoadedCublas(), seen[0]);
}

}  // namespace
}  // namespace trace::kernels::cuda
