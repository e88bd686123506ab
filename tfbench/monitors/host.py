"""Host CPU utilisation and resident memory through psutil."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from tfbench.monitors import aggregate
from tfbench.monitors.base import Monitor


class HostMonitor(Monitor):
    """System-wide CPU utilisation (0-100 %), this process's CPU (100 = one core) and RSS."""

    name = "host"

    def __init__(self, interval_sec: float = 0.25, psutil_module: Any = None,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(interval_sec, clock)
        self._psutil = psutil_module
        self._process = None
        self._first = True
        self._threads: set[int] = set()   # threads whose system-wide origin psutil has set
        if self._psutil is None:
            try:
                import psutil
                self._psutil = psutil
            except ImportError:
                self.available, self.unavailable_reason = False, "psutil is not installed"
                return
        try:
            self._process = self._psutil.Process()
        except Exception as exc:  # noqa: BLE001 - a platform psutil cannot read
            self.available, self.unavailable_reason = False, "psutil: %s" % exc
        self.num_cpus = self._psutil.cpu_count() if self.available else None

    def _read(self) -> list[dict]:
        system = self._psutil.cpu_percent(interval=None)
        process = self._process.cpu_percent(interval=None)
        # psutil's percentages cover the time since the previous call: the first call only
        # sets the origin and returns a meaningless 0.0, so it is no reading. The process's
        # origin is the Process object's; the system-wide one is each thread's (psutil 5.9.6
        # on), so the sampler thread's first tick after start()'s reading reads 0.0 too.
        if self._first:
            self._first = False
            process = None
        if threading.get_ident() not in self._threads:
            self._threads.add(threading.get_ident())
            system = None
        return [{
            "cpu_util_pct": system,
            "proc_cpu_pct": process,
            "rss_bytes": int(self._process.memory_info().rss),
        }]

    def _empty_summary(self) -> dict[str, Any]:
        return dict.fromkeys(aggregate.HOST_COLUMNS)

    def _summarize(self, samples, images, images_per_sec):
        out = aggregate.host_summary(samples)
        out["num_cpus"] = self.num_cpus
        return out
