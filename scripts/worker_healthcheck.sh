#!/bin/sh
# Health check of a Celery worker container (docker-compose's `worker` service).
#
# A worker that lost its broker can stay alive without reading its queue again (kombu's
# reconnect race after a Redis restart: issue 19), and Docker does not restart a container
# that is merely "unhealthy". So this check pings the worker through the broker and, after
# WORKER_HEALTH_MAX_FAILURES (3) failed pings in a row, sends SIGQUIT (Celery's cold
# shutdown: unacknowledged tasks go back to the queue) to the worker, PID 1 of the container
# (WORKER_PID), so the container exits and its restart policy starts a fresh worker.
# Exit 0: healthy; 1: not answering.
state="${WORKER_HEALTH_STATE:-/tmp/worker-health-failures}"
celery="${CELERY_BIN:-celery}"
if "$celery" -A config inspect ping -d "celery@${HOSTNAME}" --timeout 10 >/dev/null 2>&1; then
  echo 0 > "$state"
  exit 0
fi
failures=$(( $(cat "$state" 2>/dev/null || echo 0) + 1 ))
echo "$failures" > "$state"
if [ "$failures" -ge "${WORKER_HEALTH_MAX_FAILURES:-3}" ]; then
  echo "worker did not answer $failures pings in a row: stopping it for a restart" >&2
  kill -QUIT "${WORKER_PID:-1}"
fi
exit 1
