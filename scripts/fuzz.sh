#!/usr/bin/env bash
# Runs every Fuzz target of the given module directories for FUZZTIME each (default 30s).
# `go test -fuzz` takes one target per run, so targets are listed with `go test -list` first.
# Usage: FUZZTIME=30s scripts/fuzz.sh shared services
set -euo pipefail

fuzztime="${FUZZTIME:-30s}"
ran=0
for mod in "$@"; do
	if [ -z "$(cd "$mod" && go list -e ./... 2>/dev/null)" ]; then
		continue # a module with no Go packages yet
	fi
	# -list prints the matching names of a package, then "ok <package> <time>".
	listing=$(cd "$mod" && go test -list '^Fuzz' ./...)
	targets=()
	while read -r first second _; do
		case "$first" in
		Fuzz*) targets+=("$first") ;;
		ok)
			for target in "${targets[@]}"; do
				echo "==> $second $target ($fuzztime)"
				(cd "$mod" && go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$second")
				ran=$((ran + 1))
			done
			targets=()
			;;
		esac
	done <<<"$listing"
done
echo "fuzzed $ran target(s)"
