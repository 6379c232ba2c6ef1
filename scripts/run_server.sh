#!/usr/bin/env bash
# Installs what is missing, builds, and runs inferencecache-server in the foreground with
# the embedded journal under ./data and local-dev auth on :9090 (gRPC), :8080, :8081.
# Extra arguments are passed to the server.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
BUILD_TARGETS=inferencecache-server "$root/scripts/build.sh"
cd "$root"
exec "${BUILD_DIR:-$root/build}/server/inferencecache-server" \
  --data-dir=./data --insecure-disable-auth \
  --grpc-bind-address=:9090 --http-bind-address=:8080 --snapshot-bind-address=:8081 "$@"
