#!/usr/bin/env bash
# Installs what running or testing resched needs beyond Go, when it is missing, so that
# `make run` and `make test` work on a fresh machine with nothing done by hand:
#   redis    redis-server on PATH (through the system's package manager)
#   emulators  the Node packages of scripts/emulators (Azurite, rhea), from its lockfile
#   shells   zsh and fish, whose completion scripts schedctl's tests run, curl, for the
#            gateway call make run prints, which the first-hour test pastes into bash, and
#            openssl, whose PKCS #12 exports the client-certificate tests open
#   browser  Debian's chromium and playwright-core (scripts/browser, from its lockfile), for the
#            dashboard's browser test; no browser is ever downloaded
#   python   Debian's python3-azure, whose azure-mgmt-scheduler is the Python client the
#            gateway's tests drive
# Usage: scripts/deps.sh redis [emulators] [shells] [browser] [python]
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '==> %s\n' "$*" >&2; }

# pkg_install installs Debian packages as root, or through sudo; elsewhere it says how.
pkg_install() {
	if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
		# A policy-rc.d answering 101 keeps the packages' install scripts from starting services
		# (redis on 6379): resched starts its own servers on its own ports.
		local policy=/usr/sbin/policy-rc.d made=""
		if [ ! -e "$policy" ]; then
			printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made=1
		fi
		local status=0
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" </dev/null >/dev/null || status=$?
		[ -n "$made" ] && rm -f "$policy"
		return "$status"
	elif command -v apt-get >/dev/null && command -v sudo >/dev/null; then
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
	else
		return 1
	fi
}

redis() {
	command -v redis-server >/dev/null && return
	say "redis-server is not installed: installing it with the system's package manager"
	if pkg_install redis-server; then
		# Debian starts it as a service; resched starts its own, on its own ports.
		if command -v systemctl >/dev/null && systemctl is-active --quiet redis-server 2>/dev/null; then
			systemctl stop redis-server || true
		fi
		return
	fi
	if command -v brew >/dev/null; then
		brew install redis
		return
	fi
	echo "redis-server is needed on PATH. Install it with your package manager:" >&2
	echo "  Debian/Ubuntu: sudo apt-get install redis-server   Fedora: sudo dnf install redis   macOS: brew install redis" >&2
	exit 1
}

emulators() {
	if ! command -v npm >/dev/null; then
		say "npm is not installed: installing nodejs and npm with the system's package manager"
		pkg_install nodejs npm || {
			echo "the tests need Node.js and npm (for Azurite and the fake Service Bus broker): install them" >&2
			exit 1
		}
	fi
	local stamp=scripts/emulators/node_modules/.resched-installed-lock.json
	if cmp -s scripts/emulators/package-lock.json "$stamp"; then
		return
	fi
	say "installing the test emulators (npm ci --prefix scripts/emulators)"
	npm ci --prefix scripts/emulators --no-audit --no-fund >&2
	cp scripts/emulators/package-lock.json "$stamp"
}

browser() {
	if ! command -v chromium >/dev/null; then
		say "chromium is not installed: installing it with the system's package manager"
		pkg_install chromium || echo "could not install chromium: the dashboard's browser test will fail" >&2
	fi
	command -v npm >/dev/null || pkg_install nodejs npm || true
	local stamp=scripts/browser/node_modules/.resched-installed-lock.json
	if cmp -s scripts/browser/package-lock.json "$stamp"; then
		return
	fi
	say "installing playwright-core (npm ci --prefix scripts/browser)"
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix scripts/browser --no-audit --no-fund >&2
	cp scripts/browser/package-lock.json "$stamp"
}

shells() {
	local missing=()
	for sh in zsh fish curl openssl; do
		command -v "$sh" >/dev/null || missing+=("$sh")
	done
	[ ${#missing[@]} -eq 0 ] && return
	say "installing ${missing[*]} (schedctl's completion tests, the first-hour test and the PFX tests run them)"
	pkg_install "${missing[@]}" || echo "could not install ${missing[*]}: the tests that run them will fail" >&2
}

python() {
	# Debian's python3, where python3-azure installs; another python3 first on PATH (pyenv's)
	# does not see Debian's packages, so the test looks for this one.
	if /usr/bin/python3 -c 'import azure.mgmt.scheduler' 2>/dev/null; then
		return
	fi
	say "installing python3-azure (the gateway's tests drive its azure-mgmt-scheduler)"
	pkg_install python3-azure || echo "could not install python3-azure: the gateway's Python client test will fail" >&2
}

for dep in "$@"; do
	"$dep"
done
