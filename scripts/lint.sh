#!/usr/bin/env bash
# The linters: staticcheck, and goimports with this module's imports grouped
# last. tools/go.mod pins both, and go.sum there checks what the module
# proxy serves, so every machine runs the same versions.
set -euo pipefail
cd "$(dirname "$0")/.."

tool() { go tool -modfile=tools/go.mod "$@"; }

tool staticcheck ./...

# goimports -l names each file whose imports or layout differ from its
# output. The fix is the command below, on the files it names.
unformatted=$(tool goimports -l -local github.com/cco-dev/cco .)
if [ -n "$unformatted" ]; then
  echo "goimports: these files need formatting; run" >&2
  echo "  go tool -modfile=tools/go.mod goimports -w -local github.com/cco-dev/cco $(echo $unformatted)" >&2
  exit 1
fi
