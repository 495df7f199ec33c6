"""Scheduled upkeep: periodic reconcile, compaction, idle model unload.

APScheduler 3.x ``BackgroundScheduler`` (4.x is pre-release only).  Every job
is coalesced and runs one instance at a time; its errors are logged and
counted, never fatal.  Jobs that touch the index do not touch it themselves:
they put a request in the writer's queue, because LanceDB wants one writer
per table and ``optimize()`` fails under a concurrent writer.  APScheduler's
"skipped: maximum number of running instances reached" warning is silenced
(``logs.configure``) and counted here instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobEvent,
    JobExecutionEvent,
)
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from codechunkd import logs

log = logs.get_logger("codechunkd.jobs")


@dataclass(slots=True)
class JobStats:
    runs: int = 0
    errors: int = 0
    skipped: int = 0
    last_error: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "runs": self.runs,
            "errors": self.errors,
            "skipped": self.skipped,
            "last_error": self.last_error,
        }


class Upkeep:
    """The daemon's periodic jobs, each ``(name, every_seconds, callable)``."""

    def __init__(self) -> None:
        self._scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=2)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 60},
            timezone="UTC",
        )
        self._scheduler.add_listener(
            self._on_event,
            EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES,
        )
        self._lock = threading.Lock()
        self.stats: dict[str, JobStats] = {}
        self._recorded: set[str] = set()
        """Jobs that only hand work to the writer: their runs are counted by ``record``."""

    def add(
        self, name: str, every: float, func: Callable[[], object], *, recorded: bool = False
    ) -> None:
        """Schedule ``func``; ``recorded``: it only queues work, and the writer counts the
        run (``record``) when it is done, so each run is counted once."""
        self.stats.setdefault(name, JobStats())
        if recorded:
            self._recorded.add(name)
        self._scheduler.add_job(
            func, "interval", seconds=every, id=name, name=name, replace_existing=True
        )

    def run_soon(self, name: str) -> None:
        """Run a job now (then on its interval again), if it is scheduled."""
        from datetime import UTC, datetime

        if self._scheduler.get_job(name) is not None:
            self._scheduler.modify_job(name, next_run_time=datetime.now(UTC))

    def reschedule(self, name: str, every: float) -> None:
        self._scheduler.reschedule_job(name, trigger="interval", seconds=every)

    def record(self, name: str, error: BaseException | None) -> None:
        """Count a run of a job whose work happened elsewhere (in the writer)."""
        with self._lock:
            st = self.stats.setdefault(name, JobStats())
            st.runs += 1
            if error is not None:
                st.errors += 1
                st.last_error = str(error) or type(error).__name__

    def _on_event(self, event: JobEvent) -> None:
        with self._lock:
            st = self.stats.setdefault(event.job_id, JobStats())
            if event.code == EVENT_JOB_EXECUTED:
                if event.job_id not in self._recorded:
                    st.runs += 1
            elif event.code == EVENT_JOB_ERROR:
                st.runs += 1
                st.errors += 1
                exc = event.exception if isinstance(event, JobExecutionEvent) else None
                st.last_error = repr(exc)
                log.error("job_failed", job=event.job_id, error=repr(exc))
            else:
                st.skipped += 1

    def start(self) -> None:
        self._scheduler.start()

    def shutdown(self) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)

    def as_dict(self) -> dict[str, object]:
        with self._lock:
            return {name: st.as_dict() for name, st in self.stats.items()}
