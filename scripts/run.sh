#!/usr/bin/env bash
# make run: the whole system on this machine, no Docker. Starts a redis-server, the planner with
# its embedded NATS server (JetStream), one worker and the example HTTP target, then loads the
# example jobs of schemas/examples over NATS. Deliveries print in this terminal; Ctrl-C stops it
# all.
#
# Addresses (README, "Ports"): REDIS_PORT (6390), NATS_ADDR (127.0.0.1:4222), TARGET_ADDR
# (127.0.0.1:8080), PLANNER_HTTP (127.0.0.1:8081), WORKER_HTTP (127.0.0.1:8082). A default
# port that is busy is replaced by the next free one, and the script says so; a port set in the
# environment is used as given, and the script stops if it is busy. The services' own variables
# (RESCHED_PLANNER_*, RESCHED_WORKER_*) pass through to them. RESCHED_DATA (.data) holds the
# logs and data, and secret-keys, the key that seals job secrets (made at the first run;
# docs/security.md); JOBS="" loads no example job; BIN (bin) is where the binaries are.
set -euo pipefail
# Started in the background by a shell without job control (a script's `make run &`), this
# script inherits SIGINT ignored, and bash cannot trap a signal ignored on entry: Ctrl-C would
# not stop it. It starts itself again with the default, once.
if [ "$(trap -p INT)" = "trap -- '' SIGINT" ] && env --default-signal=INT true 2>/dev/null; then
	exec env --default-signal=INT "$0" "$@"
fi
cd "$(dirname "$0")/.."

BIN=${BIN:-bin}
DATA=${RESCHED_DATA:-.data}
COLLECTION=${COLLECTION:-demo}
JOBS=${JOBS-http-every-10-seconds http-every-minute http-failing-with-error-action}

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
warn() { printf '\033[1;33m==> %s\033[0m\n' "$*" >&2; }
die() {
	printf '\033[1;31m==> %s\033[0m\n' "$*" >&2
	exit 1
}

# ---- ports: checked before anything starts ----------------------------------------------------

# listening HOST PORT: something accepts connections there.
listening() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# holder PORT: the process listening on PORT, when the system says ("nats-server (pid 123)").
holder() {
	local users
	command -v ss >/dev/null || return 0
	users=$(ss -ltnpH "sport = :$1" 2>/dev/null | sed -n 's/.*users:((\("[^"]*"\),pid=\([0-9]*\).*/\1 (pid \2)/p' | head -n 1)
	[ -n "$users" ] && printf ' by %s' "${users//\"/}"
	return 0
}

# pick VAR DEFAULT_HOST DEFAULT_PORT KIND: sets VAR to host:port. A value the user set is kept
# and must be free; a busy default moves to the next port that is free and not picked already
# (nothing listens on a picked port yet: a moved default could land on the next one's default).
picked=" "
pick() {
	local var=$1 host=$2 port=$3 kind=$4 given=${!1:-}
	if [ -n "$given" ]; then
		host=${given%:*}
		port=${given##*:}
		[ "$host" = "$given" ] && host=127.0.0.1 # a bare port (REDIS_PORT)
		if listening "$host" "$port"; then
			die "the $kind port $port ($var=$given) is in use$(holder "$port"): stop that program or set $var to a free port"
		fi
		printf -v "$var" '%s:%s' "$host" "$port"
		picked+="$port "
		return
	fi
	local p=$port
	while listening "$host" "$p" || [[ $picked == *" $p "* ]]; do
		[ "$p" = "$port" ] && warn "the $kind port $port is in use$(holder "$port"): using the next free port (set $var to choose one)"
		p=$((p + 1))
		[ $((p - port)) -lt 100 ] || die "no free port for the $kind between $port and $p: set $var"
	done
	printf -v "$var" '%s:%s' "$host" "$p"
	picked+="$p "
}

pick REDIS_PORT 127.0.0.1 6390 "Redis"
pick NATS_ADDR 127.0.0.1 4222 "NATS"
pick TARGET_ADDR 127.0.0.1 8080 "example target"
pick PLANNER_HTTP 127.0.0.1 8081 "planner's HTTP"
pick WORKER_HTTP 127.0.0.1 8082 "worker's HTTP"
pick GATEWAY_ADDR 127.0.0.1 8090 "Azure REST gateway"
pick GATEWAY_HTTP 127.0.0.1 8084 "gateway's HTTP"
REDIS_ADDR=$REDIS_PORT
REDIS_PORT=${REDIS_ADDR##*:}

# ---- the children ------------------------------------------------------------------------------

names=()
pids=()
logs=()
# start NAME LOG CMD...: runs CMD in the background in a session of its own, so that Ctrl-C
# reaches only this script, which then stops each child once (the services treat a second
# signal as "stop now, without draining"). Out of reach of Ctrl-C, a child would outlive this
# script killed outright (kill -9 of make run's process group): where setpriv can, it is told
# to stop (SIGTERM) when this script ends. LOG is where its last lines are read when it dies.
detach=()
command -v setpriv >/dev/null && setpriv --help 2>&1 | grep -q -- --pdeathsig && detach+=(setpriv --pdeathsig TERM)
command -v setsid >/dev/null && detach+=(setsid)
start() {
	local name=$1 log=$2
	shift 2
	"${detach[@]}" "$@" &
	names+=("$name")
	pids+=($!)
	logs+=("$log")
}
# stop_all stops the children one by one, the last started first: each is stopped before what
# it depends on (the worker and the gateway before the planner's NATS server, the planner
# before Redis, where it gives its partitions back). All at once, Redis was gone before the
# planner had given them back, and it tried each one in vain for 10 s, with a warning each.
stop_all() {
	trap - EXIT INT TERM
	say "stopping"
	local i
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[$i]}" 2>/dev/null || true
		wait "${pids[$i]}" 2>/dev/null || true
	done
}
# A signal ends the script after the stop: without the exit, a signal that came during the
# start-up would let it go on starting services nobody stops.
trap stop_all EXIT
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM

# parent is the process that started this script (make); reparented, this script has lost it.
parent=$PPID
# ppid is this script's parent now, where /proc says.
ppid() {
	local stat
	[ -r /proc/$$/stat ] || return 1
	stat=$(</proc/$$/stat)
	stat=${stat##*) }
	stat=${stat#* }
	printf '%s' "${stat%% *}"
}

# check_children stops everything when a child has died, saying which and its last log lines,
# or when make, which started this script, is gone (killed outright: nobody would stop us).
check_children() {
	local i now
	if now=$(ppid) && [ "$now" != "$parent" ]; then
		warn "make run's make process is gone: stopping"
		exit 1
	fi
	for i in "${!pids[@]}"; do
		kill -0 "${pids[$i]}" 2>/dev/null && continue
		local status=0
		wait "${pids[$i]}" 2>/dev/null || status=$?
		printf '\033[1;31m==> %s exited (status %s); its last log lines (%s):\033[0m\n' "${names[$i]}" "$status" "${logs[$i]}" >&2
		if [ -f "${logs[$i]}" ]; then
			tail -n 8 "${logs[$i]}" | sed 's/^/    /' >&2
		fi
		exit 1
	done
}

# wait_for NAME HOST:PORT: waits until the address accepts connections, stopping everything if a
# child dies meanwhile.
wait_for() {
	for _ in $(seq 1 300); do
		listening "${2%:*}" "${2##*:}" && return 0
		check_children
		sleep 0.1
	done
	die "$1 did not listen on $2 within 30 s"
}

scripts/deps.sh redis
mkdir -p "$DATA/redis" "$DATA/nats"
# Absolute: redis-server changes into --dir before it opens its log file.
DATA=$(cd "$DATA" && pwd)
# One key of 32 random bytes, made once and kept with the data it seals.
if [ ! -s "$DATA/secret-keys" ]; then
	(umask 077 && printf 'k1=%s\n' "$(head -c 32 /dev/urandom | base64)" >"$DATA/secret-keys")
fi
export RESCHED_SECRET_KEYS_FILE="${RESCHED_SECRET_KEYS_FILE:-$DATA/secret-keys}"
# The gateway's access: one random operator token for every subscription, made once.
if [ ! -s "$DATA/gateway-token" ]; then
	(umask 077 && head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n' >"$DATA/gateway-token")
fi
GATEWAY_TOKEN=$(cat "$DATA/gateway-token")
(umask 077 && printf '{"tokens": [{"name": "make-run", "token": "%s", "role": "operator", "scopes": ["*"]}]}\n' \
	"$GATEWAY_TOKEN" >"$DATA/gateway-access.json")

say "redis-server on $REDIS_ADDR (data in $DATA/redis)"
start redis-server "$DATA/redis.log" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$DATA/redis" \
	--appendonly yes --save "" --loglevel warning --logfile "$DATA/redis.log"
wait_for "redis-server" "$REDIS_ADDR"

say "example target on http://$TARGET_ADDR (its lines below are the deliveries)"
start target "$DATA/target.log" "$BIN/target" -addr "$TARGET_ADDR" 2>>"$DATA/target.log"
wait_for "the example target" "$TARGET_ADDR"

say "planner with embedded NATS on nats://$NATS_ADDR (log: $DATA/planner.log)"
RESCHED_PLANNER_EMBEDDED_NATS="$NATS_ADDR" RESCHED_PLANNER_EMBEDDED_NATS_DIR="$DATA/nats" \
	REDIS_URL="redis://$REDIS_ADDR/0" RESCHED_PLANNER_HTTP_ADDR="$PLANNER_HTTP" \
	start planner "$DATA/planner.log" "$BIN/planner" -log-level info >>"$DATA/planner.log" 2>&1
wait_for "the planner's NATS server" "$NATS_ADDR"

say "worker (log: $DATA/worker.log)"
NATS_URL="nats://$NATS_ADDR" RESCHED_WORKER_HTTP_ADDR="$WORKER_HTTP" \
	start worker "$DATA/worker.log" "$BIN/worker" >>"$DATA/worker.log" 2>&1

say "Azure REST gateway on http://$GATEWAY_ADDR (log: $DATA/gateway.log)"
NATS_URL="nats://$NATS_ADDR" RESCHED_GATEWAY_ADDR="$GATEWAY_ADDR" RESCHED_GATEWAY_HTTP_ADDR="$GATEWAY_HTTP" \
	RESCHED_GATEWAY_ACCESS_FILE="$DATA/gateway-access.json" \
	start gateway "$DATA/gateway.log" "$BIN/gateway" >>"$DATA/gateway.log" 2>&1
wait_for "the gateway" "$GATEWAY_ADDR"

export NATS_URL="nats://$NATS_ADDR"
say "collection $COLLECTION and the example jobs, through schedctl"
# The planner answers once it has set its streams up; until then schedctl says no planner answered.
until "$BIN/schedctl" collection get "$COLLECTION" >/dev/null 2>&1 ||
	"$BIN/schedctl" collection create "$COLLECTION" >/dev/null 2>"$DATA/schedctl.err"; do
	check_children
	[ $SECONDS -lt 60 ] || die "the planner did not answer within 60 s: $(cat "$DATA/schedctl.err")"
	sleep 0.2
done
# On a second make run the jobs are there from the first: the put replaces them, so they start
# again from their examples. schedctl's note saying so is for someone who put a job by hand;
# here one line says it, from whether the job could be read before the put.
for j in $JOBS; do
	there=false
	"$BIN/schedctl" job get "$COLLECTION/$j" >/dev/null 2>&1 && there=true
	sed "s#http://localhost:8080#http://$TARGET_ADDR#g" "schemas/examples/$j.json" |
		"$BIN/schedctl" job put "$COLLECTION/$j" -f - >/dev/null 2>"$DATA/schedctl.err" ||
		die "schedctl job put $COLLECTION/$j: $(cat "$DATA/schedctl.err")"
	if $there; then
		echo "    $COLLECTION/$j (there from a previous run: put again from its example)"
	else
		echo "    $COLLECTION/$j"
	fi
done
# The commands below are for pasting into a shell: paths quoted as the shell needs them.
bin_q=$(printf %q "$BIN")
token_q=$(printf %q "$DATA/gateway-token")
cat <<MSG

resched is running. Try, in another terminal:
  export NATS_URL=nats://$NATS_ADDR
  $bin_q/schedctl job list $COLLECTION
  $bin_q/schedctl job history $COLLECTION/http-every-10-seconds
The dashboard (docs/dashboard.md): http://$GATEWAY_ADDR/dashboard/ (sign in with the token in $DATA/gateway-token)
The Azure Scheduler REST API (docs/azure-migration.md), with the same token:
  curl -H "Authorization: Bearer \$(cat $token_q)" \\
    "http://$GATEWAY_ADDR/subscriptions/local/providers/Microsoft.Scheduler/jobCollections?api-version=2016-03-01"
Press Ctrl-C to stop everything.

MSG
while true; do
	check_children
	sleep 0.5
done
