#!/usr/bin/env bash
# The test command: installs what the tests need on a fresh Debian machine
# (as root), then vets and runs the whole suite. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v ip >/dev/null || need+=(iproute2)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing: ${need[*]}; install them (sudo apt-get install -y ${need[*]}) or run this as root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

go vet ./...
# Tests that need bwrap or root fail instead of skipping when this is set:
# a skipped sandbox test must never pass for a tested one.
export CCO_REQUIRE_BWRAP=1
go test -count=1 -timeout 30m ./...
