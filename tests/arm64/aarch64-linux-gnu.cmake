# CMake toolchain file: trace cross-compiled for aarch64 with Debian's g++-aarch64-linux-gnu,
# against the arm64 libraries of Debian's multiarch (dpkg --add-architecture arm64; the -dev
# packages as :arm64, `scripts/setup.sh --with-arm64` installs them). Host tools (protoc, esbuild) stay
# the build machine's. tests/arm64/check.sh --whole-model uses it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Libraries and headers of the target: multiarch keeps them beside the host's (/usr/lib/
# aarch64-linux-gnu, /usr/include); programs are the host's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(Protobuf_PROTOC_EXECUTABLE /usr/bin/protoc CACHE FILEPATH "the host's protoc")
