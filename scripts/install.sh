#!/usr/bin/env bash
# The main job from a checkout: build cco's programs into bin/ (cco-install
# finds the shadow and the egress proxy beside itself) and provision this
# machine with them. Arguments go to cco-install (for example --dry-run,
# --root DIR, --bundle FILE, --json).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/cco-dev/cco/provision.Version=$version" -o bin/ ./cmd/cco-install ./cmd/shadow ./cmd/egress-proxy
if [ "$(id -u)" -eq 0 ]; then
  exec bin/cco-install "$@"
elif command -v sudo >/dev/null; then
  exec sudo bin/cco-install "$@"
else
  exec bin/cco-install "$@" # refuses with the exact command unless --root or --dry-run
fi
