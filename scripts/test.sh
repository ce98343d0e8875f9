#!/usr/bin/env bash
# The test command: installs what the tests need on a fresh Debian machine
# (as root), then vets and runs the whole suite. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Debian packages the tests use, by name: a command on PATH is not the
# package (ansible-core has ansible-playbook, but the ansible.posix.json
# callback and the community.general.chroot connection the vm-tests use come
# with the ansible package).
#   bubblewrap iproute2 curl: the jail and its network tests
#   git: the adversarial suite's host verdict and its git-http-backend
#   mmdebstrap zstd: the vm-tests' Debian root
#   ansible-core ansible: the collection's scenarios and ansible-test sanity
#   rpm createrepo-c: the rpm's layout and signature, the rpm repository
#   apt-utils gpgv: the apt repository (apt-ftparchive) and its signatures
#   nodejs: Gemini CLI's Node (20 or later) and npm, which fetches the real agents' packs
want=(bubblewrap iproute2 curl git mmdebstrap zstd ansible-core ansible rpm createrepo-c apt-utils gpgv nodejs)
need=()
for p in "${want[@]}"; do
  dpkg-query -W -f '${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || need+=("$p")
done
# Debian's nodejs comes without npm (NodeSource's carries it).
command -v npm >/dev/null || need+=(npm)
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
# staticcheck and goimports, at the versions tools/go.mod pins.
./scripts/lint.sh

# The real agents' npm packs (pinned in cmd/cco-install/testdata/real-packs.txt)
# for the offline end-to-end install, fetched once with npm pack from the npm
# registry into the cache, keyed name@version: later runs fetch nothing.
packs=/var/cache/cco-npm-packs
while read -r spec; do
  case "$spec" in ''|'#'*) continue ;; esac
  f="$packs/$spec.tgz"
  [ -s "$f" ] && continue
  mkdir -p "$(dirname "$f")"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$spec" </dev/null >/dev/null)
  mv "$tmp"/*.tgz "$f.partial" && mv "$f.partial" "$f"
  rm -rf "$tmp"
done < cmd/cco-install/testdata/real-packs.txt
export CCO_TEST_REAL_AGENTS=1 CCO_TEST_NPM_PACKS="$packs"

# Tests that need bwrap or root fail instead of skipping when this is set:
# a skipped sandbox test must never pass for a tested one.
export CCO_REQUIRE_BWRAP=1
# The tests that run the vendors' real agents (internal/realagents), offline;
# their npm packs are cached in /var/cache/cco-npm-packs.
export CCO_REAL_AGENTS=1
go test -count=1 -timeout 30m ./...

# The real Gemini CLI, offline, from a pack cached between runs: unwrapped,
# the guard blocks it (guard), and through the shadow it reaches the model
# call, which the jail's network stops (cmd/shadow). Unpacked under /var/lib:
# the jail's /tmp is its own. Gemini CLI needs Node 20 or later, which
# Debian 12's nodejs (18) is not: without it the step says so and is left out.
gemini_pack_version=0.61.0
gemini_cache=/var/cache/cco-packs
if command -v node >/dev/null && command -v npm >/dev/null &&
  [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ]; then
  pack="$gemini_cache/google-gemini-cli-$gemini_pack_version.tgz"
  if [ ! -f "$pack" ]; then
    mkdir -p "$gemini_cache"
    (cd "$gemini_cache" && npm pack --silent "@google/gemini-cli@$gemini_pack_version" >/dev/null)
  fi
  gemini_pkg=$(mktemp -d /var/lib/cco-gemini-XXXXXX)
  chmod 755 "$gemini_pkg"
  tar -xzf "$pack" -C "$gemini_pkg"
  CCO_GEMINI_PACKAGE="$gemini_pkg/package" go test -count=1 -run '^TestRealGemini' ./guard/ ./cmd/shadow/
  rm -rf "$gemini_pkg"
else
  echo "NOTE: the real Gemini CLI tests did not run: they need node 20 or later and npm (NodeSource's nodejs)" >&2
fi

# The fuzz targets, each for a short budget (a short -fuzzminimizetime
# keeps a find from eating the budget). The extractor's are seeded with
# hostile archives. The others check the rules that keep an agent in its
# jail: the agents' argument rewriters, the egress policy and its host
# rules, the app-server's argument rules, and the rc-file block finder.
fuzz() {
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$3" -fuzzminimizetime 5s "$1"
}
fuzz ./vendorfetch/extract/ FuzzExtractTar 20s
fuzz ./vendorfetch/extract/ FuzzExtract 20s
fuzz ./agent/ FuzzClaudeArgs 10s
fuzz ./agent/ FuzzCodexArgs 15s
fuzz ./sandbox/egress/policy/ FuzzParse 15s
fuzz ./sandbox/appserver/ FuzzArgs 10s
fuzz ./rcfile/ FuzzFind 10s

# --- shipping: packages, repositories, vm-tests, the Ansible collection (packaging/, vm-tests/, ansible/, examples/) ---
# The vm-tests start a fresh Debian root (built once by mmdebstrap and cached
# in /var/cache/cco-vm-tests: the only step here that reaches the Debian
# archive) in its own namespaces and install the real .deb in it.
go run ./vm-tests/cmd/mkroot >/dev/null
CCO_VM_TESTS=1 go test -count=1 -timeout 20m ./packaging/... ./vm-tests/... ./bench/...
# goreleaser's own check, where a goreleaser v2 is installed (its latest
# release needs a newer Go than this machine's, so CI does not fetch it).
if command -v goreleaser >/dev/null; then
  goreleaser check -f goreleaser.yaml
fi
# --- end shipping ---
