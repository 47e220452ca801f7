"""Celery's own CPU per delivered task: one worker drains messages whose step finds no job.

    .venv/bin/python -m bench.celerycost                       # 3000 tasks, -P threads -c 16
    .venv/bin/python -m bench.celerycost --setting CELERY_WORKER_SEND_TASK_EVENTS=true

The messages are published while the worker is paused (SIGSTOP), then the worker's CPU time is
read from its resumption until the queue and Redis' unacknowledged set are empty. Each task is
the real `provisionWorkspace` step with an unknown job id: its claim is one `UPDATE` that matches
nothing, so what is left is what Celery, kombu and the broker cost per task (receive, prefetch
bookkeeping, the thread pool, the trace, the acknowledgement, task events when on).
`--setting NAME=JSON` overrides a setting of the worker (repeatable).
"""

from __future__ import annotations

import argparse
import json
import time
import uuid

import redis
from celery import Celery

from bench.stack import BenchStack, WorkerSetup, _cpu_seconds, _tree, cpu_probe_ms

# `jobs.services.task_name_for(JobStep.PROVISION_WORKSPACE)`, without loading Django here.
TASK = "serenity.step.provisionWorkspace"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.celerycost", description=__doc__)
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--pool", default="threads", choices=("threads", "prefork", "solo"))
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--setting", action="append", default=[], help="NAME=JSON, a setting of the worker"
    )
    args = parser.parse_args(argv)
    settings = {
        name: json.loads(value) for name, value in (item.split("=", 1) for item in args.setting)
    }
    stack = BenchStack(
        workers=WorkerSetup(processes=1, pool=args.pool, concurrency=args.concurrency),
        settle_seconds=5.0,
        beat=False,
        settings=settings,
    )
    stack.config.api = False
    with stack:
        stack.pause_workers()
        app = Celery("celerycost", set_as_current=False)
        try:
            with app.connection_for_write(stack.broker_url) as connection:
                for _ in range(args.tasks):
                    app.send_task(
                        TASK,
                        args=[str(uuid.uuid4())],
                        queue=stack.queue,
                        connection=connection,
                    )
        finally:
            app.close()
        broker = redis.Redis(port=stack.redis_port)
        pids = [pid for worker in stack.workers if worker.pid for pid in _tree(worker.pid)]
        probe = cpu_probe_ms()
        cpu_before = sum(_cpu_seconds(pid) for pid in pids)
        began = time.monotonic()
        stack.resume_workers()
        while broker.llen(stack.queue) or broker.hlen("unacked"):
            time.sleep(0.05)
        wall = time.monotonic() - began
        cpu = sum(_cpu_seconds(pid) for pid in pids) - cpu_before
    print(
        json.dumps(
            {
                "tasks": args.tasks,
                "workers": WorkerSetup(1, args.pool, args.concurrency).describe(),
                "settings": settings,
                "probe_ms": probe,
                "wall_s": round(wall, 2),
                "worker_cpu_s": round(cpu, 2),
                "cpu_ms_per_task": round(cpu * 1000 / args.tasks, 2),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
