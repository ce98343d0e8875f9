#!/usr/bin/env bash
# Runs every benchmark of the repository, each beside its baseline in the
# same run, and prints one table of ratios (bench/ratios explains how a
# benchmark names its baseline).
#
#   bench/run.sh                 all packages, -benchtime 1s
#   BENCHTIME=5x bench/run.sh    fewer or more rounds
#   bench/run.sh ./guard/...     only these packages
#
# The raw go test output is kept (its path is printed; BENCH_RAW=FILE picks
# it) for benchstat.
# Benchmarks that need root or bwrap skip without them; run as root on the
# test machine for the full table.
set -euo pipefail
cd "$(dirname "$0")/.."

benchtime=${BENCHTIME:-1s}
count=${COUNT:-1}
patterns=("$@")
[ ${#patterns[@]} -gt 0 ] || patterns=(./...)

# Discover: go test -list prints a package's matching names, then its
# "ok <pkg>" line. A package that does not build is reported, not hidden.
pkgs=()
list=$(go test -run '^$' -list '^Benchmark' "${patterns[@]}" 2>&1) || true
pending=0
while IFS= read -r line; do
	case "$line" in
	Benchmark*) pending=1 ;;
	ok*)
		pkg=$(awk '{print $2}' <<<"$line")
		[ "$pending" = 1 ] && pkgs+=("$pkg")
		pending=0
		;;
	FAIL* | "# "*) echo "bench: $line" >&2 ;;
	*) ;;
	esac
done <<<"$list"

if [ ${#pkgs[@]} -eq 0 ]; then
	echo "bench: no benchmarks found under ${patterns[*]}" >&2
	exit 1
fi

raw=${BENCH_RAW:-$(mktemp -t cco-bench.XXXXXX)}
: >"$raw"
status=0
for pkg in "${pkgs[@]}"; do
	echo "bench: $pkg" >&2
	if ! go test -run '^$' -bench . -benchtime "$benchtime" -count "$count" -timeout 30m "$pkg" >>"$raw" 2>&1; then
		echo "bench: $pkg failed (see $raw)" >&2
		status=1
	fi
done
go run ./bench/ratios <"$raw"
echo "bench: raw results in $raw" >&2
exit $status
