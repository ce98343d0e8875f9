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
#   strace python3: the workloads that must still run under the jail's seccomp program
#     (strace follows a child with ptrace; python3 starts threads and a subprocess)
#   mercurial: the host's hg, which runs a planted .hg/hgrc's hooks (the audit's host verdict)
want=(bubblewrap iproute2 curl git mmdebstrap zstd ansible-core ansible rpm createrepo-c apt-utils gpgv nodejs strace python3 mercurial)
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

# Tests that need bwrap or root fail instead of skipping when this is set:
# a skipped sandbox test must never pass for a tested one.
export CCO_REQUIRE_BWRAP=1
# The tests that run the vendors' real agents offline (codex's login through
# the jail, the real Gemini CLI blocked unwrapped and gated in the jail, all
# seven installed from an npm registry and run through the shadow).
# internal/realagents pins the packs and fetches each once with npm pack into
# /var/cache/cco-npm-packs (Pi's whole tree too).
export CCO_REAL_AGENTS=1
go test -count=1 -timeout 30m ./...
# The jail suites again on the fallback engine, bubblewrap, built from the
# same operations (docs/adr/0145-cco-jail-engine.md): the jail, egress,
# terminal, host-apart and adversarial tests hold on both engines. One
# package at a time: bwrap fails on a mount point that vanished after the
# plan (another package's test home, removed meanwhile), where cco's engine
# leaves an absent cover out.
CCO_JAIL_ENGINE=bwrap go test -p 1 -count=1 -timeout 30m ./cmd/shadow/ ./sandbox/attack/

# The fuzz targets, each for a short budget. The budget is a count of
# executions, not a duration: Go 1.26's coordinator can report a bare
# "context deadline exceeded" when a -fuzztime duration ends while a worker
# is mid-call (go.dev/issue/75804, fixed in Go 1.27), and a count has no
# deadline to race. Each count is about ten seconds here. A short
# -fuzzminimizetime keeps a find from eating the budget. The extractor's
# targets are seeded with hostile archives. The others check the rules that
# keep an agent in its jail: the agents' argument rewriters, the egress
# policy and its host rules, the app-server's argument rules, and the
# rc-file block finder.
fuzz() {
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$3" -fuzzminimizetime 5s "$1"
}
fuzz ./vendorfetch/extract/ FuzzExtractTar 10000x
fuzz ./vendorfetch/extract/ FuzzExtract 20000x
fuzz ./agent/ FuzzClaudeArgs 200000x
fuzz ./agent/ FuzzCodexArgs 200000x
fuzz ./agent/ FuzzGeminiArgs 200000x
fuzz ./agent/ FuzzOpencodeArgs 100000x
fuzz ./agent/ FuzzCopilotArgs 100000x
fuzz ./sandbox/egress/policy/ FuzzParse 100000x
fuzz ./sandbox/appserver/ FuzzArgs 200000x
fuzz ./rcfile/ FuzzFind 200000x
fuzz ./internal/safetext/ FuzzEscape 200000x
fuzz ./internal/safetext/ FuzzJSON 100000x
fuzz ./sandbox/hostview/ FuzzClean 100000x

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
