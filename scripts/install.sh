#!/usr/bin/env bash
# The main job from a checkout: build cco's programs into bin/ (cco-install
# finds the shadow and the egress proxy beside itself) and provision this
# machine with them. Arguments go to cco-install (for example --dry-run,
# --root DIR, --bundle FILE, --json).
set -euo pipefail
cd "$(dirname "$0")/.."
# Go builds the programs: say which one is needed rather than fail in go build.
want=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)
if ! command -v go >/dev/null; then
  echo "install.sh: Go is not installed; cco needs Go $want or newer: install it from https://go.dev/dl/ (or your distribution's golang package), then run this again" >&2
  exit 1
fi
have=$(go env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n1)" != "$want" ]; then
  echo "install.sh: Go $have is older than the $want cco needs: install a newer Go from https://go.dev/dl/, then run this again" >&2
  exit 1
fi
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/cco-dev/cco/provision.Version=$version" -o bin/ ./cmd/cco-install ./cmd/shadow ./cmd/egress-proxy
if [ "$(id -u)" -eq 0 ]; then
  exec bin/cco-install "$@"
elif command -v sudo >/dev/null; then
  exec sudo bin/cco-install "$@"
else
  exec bin/cco-install "$@" # refuses with the exact command unless --root or --dry-run
fi
