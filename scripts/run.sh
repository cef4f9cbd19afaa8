#!/usr/bin/env bash
# make run: the whole system on this machine, no Docker. Starts a redis-server, the planner with
# its embedded NATS server (JetStream), one worker and the example HTTP target, then loads the
# example jobs of schemas/examples over NATS. Deliveries print in this terminal; Ctrl-C stops it
# all. Every address can be changed through the environment (the end-to-end test uses free ports
# and binaries it built elsewhere); the services' own variables (RESCHED_PLANNER_*,
# RESCHED_WORKER_*) pass through to them. JOBS="" loads no example job.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin}
DATA=${RESCHED_DATA:-.data}
REDIS_PORT=${REDIS_PORT:-6390}
NATS_ADDR=${NATS_ADDR:-127.0.0.1:4222}
TARGET_ADDR=${TARGET_ADDR:-127.0.0.1:8080}
PLANNER_HTTP=${PLANNER_HTTP:-127.0.0.1:8081}
WORKER_HTTP=${WORKER_HTTP:-127.0.0.1:8082}
COLLECTION=${COLLECTION:-demo}
JOBS=${JOBS-http-every-10-seconds http-every-minute http-failing-with-error-action}

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }


pids=()
# start runs a command in the background in a session of its own, so that Ctrl-C reaches only
# this script, which then stops each child once (the services treat a second signal as "stop
# now, without draining").
start() {
	if command -v setsid >/dev/null; then
		setsid "$@" &
	else
		"$@" &
	fi
	pids+=($!)
}
stop_all() {
	trap - EXIT INT TERM
	say "stopping"
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
# A signal ends the script after the stop: without the exit, a signal that came during the
# start-up would let it go on starting services nobody stops.
trap stop_all EXIT
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM

# wait_tcp waits until host:port accepts connections.
wait_tcp() {
	for _ in $(seq 1 150); do
		if (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; then
			return 0
		fi
		sleep 0.2
	done
	echo "timed out waiting for $1" >&2
	return 1
}

scripts/deps.sh redis
mkdir -p "$DATA/redis" "$DATA/nats"

say "redis-server on 127.0.0.1:$REDIS_PORT (data in $DATA/redis)"
start redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$DATA/redis" --appendonly yes --save "" --loglevel warning --logfile "$DATA/redis.log"

say "example target on http://$TARGET_ADDR (its lines below are the deliveries)"
start "$BIN/target" -addr "$TARGET_ADDR"

say "planner with embedded NATS on nats://$NATS_ADDR (log: $DATA/planner.log)"
RESCHED_PLANNER_EMBEDDED_NATS="$NATS_ADDR" RESCHED_PLANNER_EMBEDDED_NATS_DIR="$DATA/nats" \
	REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" RESCHED_PLANNER_HTTP_ADDR="$PLANNER_HTTP" \
	start "$BIN/planner" -log-level info >>"$DATA/planner.log" 2>&1
wait_tcp "$NATS_ADDR"

say "worker (log: $DATA/worker.log)"
NATS_URL="nats://$NATS_ADDR" RESCHED_WORKER_HTTP_ADDR="$WORKER_HTTP" \
	start "$BIN/worker" >>"$DATA/worker.log" 2>&1

export NATS_URL="nats://$NATS_ADDR"
say "collection $COLLECTION and the example jobs, through schedctl"
for _ in $(seq 1 100); do
	"$BIN/schedctl" collection create "$COLLECTION" >/dev/null 2>&1 && break
	sleep 0.2
done
"$BIN/schedctl" collection get "$COLLECTION" >/dev/null
for j in $JOBS; do
	sed "s#http://localhost:8080#http://$TARGET_ADDR#g" "schemas/examples/$j.json" | "$BIN/schedctl" job put "$COLLECTION/$j" -f - >/dev/null
	echo "    $COLLECTION/$j"
done
cat <<MSG

resched is running. Try, in another terminal:
  export NATS_URL=nats://$NATS_ADDR
  $BIN/schedctl job list $COLLECTION
  $BIN/schedctl job history $COLLECTION/http-every-10-seconds
Press Ctrl-C to stop everything.

MSG
wait
