// The web app's files, embedded in the binary at build time (ui/CMakeLists.txt bundles
// ui/app/ with esbuild and writes them into a generated assets.cc): `trace ui` serves them
// from memory and fetches nothing at run time.
//
// Ownership: static storage. Thread safety: immutable. Errors: none.
#pragma once

#include <span>
#include <string_view>

#include "base/status.h"

namespace trace::ui {

struct Asset {
  std::string_view path;          // "/", "/app.js"
  std::string_view content_type;  // "text/html; charset=utf-8"
  std::string_view content;
};

// Empty in a build configured with -DTRACE_UI=OFF (no esbuild): see AppMissing.
std::span<const Asset> Assets();

// Why the app cannot be served or written, or OK when it was built in.
inline Status AppMissing() {
  if (!Assets().empty()) return Status::Ok();
  return Unsupported(
      "this trace was built without its web app (configured with -DTRACE_UI=OFF); run "
      "scripts/setup.sh, which installs esbuild, and build again");
}

}  // namespace trace::ui
