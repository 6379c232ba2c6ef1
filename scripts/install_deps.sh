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
  libmicrohttpd-dev
  clang-16 libclang-rt-16-dev libfuzzer-16-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
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
