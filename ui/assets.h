// The web app's files, embedded in the binary at build time (ui/CMakeLists.txt bundles
// ui/app/ with esbuild and writes them into a generated assets.cc): `trace ui` serves them
// from memory and fetches nothing at run time.
//
// Ownership: static storage. Thread safety: immutable. Errors: none.
#pragma once

#include <span>
#include <string_view>

namespace trace::ui {

struct Asset {
  std::string_view path;          // "/", "/app.js"
  std::string_view content_type;  // "text/html; charset=utf-8"
  std::string_view content;
};

std::span<const Asset> Assets();

}  // namespace trace::ui
