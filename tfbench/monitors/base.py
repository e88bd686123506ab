"""Monitor: samples a device in a background thread beside the timed loop.

Life cycle, driven by the runner:
  start()        before warm-up; takes a "start" sample, then one every interval_sec
  mark_steady()  when the timed steps start; takes a "steady_start" boundary sample and opens
                 the measurement window (a new measurement: earlier windows no longer count)
  pause()        when the timed steps stop (end of a repeat, an evaluation, the final
                 checkpoint); takes a "steady_end" boundary sample and closes the window
  resume()       when the timed steps go on (next repeat, after an evaluation); takes a
                 "steady_resume" boundary sample and opens a window of the same measurement
  stop()         at the end; takes an "end" sample (closing a window still open), joins the thread
  summary(images=N, images_per_sec=X) -> dict keyed by CSV column; samples() -> time series.
  The console lines and warnings made of a summary's figures are tfbench.output.console's.

Subclasses implement _read() (one tick's readings) and the aggregation hooks; aggregation lives
in tfbench.monitors.aggregate as pure functions. A failing reading never stops the benchmark:
the tick is skipped and counted.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional


class Monitor:
    name = "monitor"

    def __init__(self, interval_sec: float, clock: Callable[[], float] = time.monotonic):
        self.interval_sec = float(interval_sec)
        self.available = True
        self.unavailable_reason: Optional[str] = None
        self.read_errors = 0
        self._clock = clock
        self._samples: list[dict] = []
        self._lock = threading.Lock()  # one reading at a time; guards _samples and _phase
        self._stop_event = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._t0 = 0.0
        self._phase = "warmup"
        self._running = False
        self._stopped = False

    # --- hooks --------------------------------------------------------------------------------
    def _read(self) -> list[dict]:
        """The readings of one tick, one dict per device (without t and phase)."""
        raise NotImplementedError

    def _close(self) -> None:
        """Releases what __init__ opened (called once, by stop())."""

    def _summarize(self, samples: list[dict], images: Optional[int],
                   images_per_sec: Optional[float]) -> dict[str, Any]:
        raise NotImplementedError

    def _empty_summary(self) -> dict[str, Any]:
        """The summary's CSV keys, all None (used when not available)."""
        return {}

    # --- life cycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if not self.available or self._running or self._stopped:
            return
        self._t0 = self._clock()
        self._running = True
        self._take("start")
        if self.interval_sec > 0:
            self._thread = threading.Thread(target=self._loop, name="tfbench-%s" % self.name,
                                             daemon=True)
            self._thread.start()

    def mark_steady(self) -> None:
        """The timed steps start: from here a new measurement, in one window or several."""
        if not self._running:
            return
        self._take("steady_start", then="steady")

    def pause(self) -> None:
        """The timed steps stop: readings until resume() count for nothing."""
        if self._running and self._phase == "steady":
            self._take("steady_end", then="paused")

    def resume(self) -> None:
        """The timed steps of the same measurement go on."""
        if self._running and self._phase == "paused":
            self._take("steady_resume", then="steady")

    def stop(self) -> None:
        if not self._running:
            return
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join()
        self._take("end")
        self._running = False
        self._stopped = True
        self._close()

    def __enter__(self) -> "Monitor":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop_event.wait(self.interval_sec):
            self._take(None)

    def _take(self, phase: Optional[str], then: Optional[str] = None) -> None:
        with self._lock:
            try:
                rows = self._read()
            except Exception:  # noqa: BLE001 - a monitor must never break the benchmark
                self.read_errors += 1
                rows = []
            t = round(self._clock() - self._t0, 4)
            label = phase or self._phase
            for row in rows:
                self._samples.append({"t": t, "phase": label, **row})
            if then:
                self._phase = then

    # --- results ------------------------------------------------------------------------------
    def samples(self) -> list[dict]:
        """The time series (a copy), for the JSON manifest."""
        with self._lock:
            return [dict(s) for s in self._samples]

    def status(self) -> str:
        return "ok" if self.available else "not available (%s)" % self.unavailable_reason

    def summary(self, images: Optional[int] = None,
                images_per_sec: Optional[float] = None) -> dict[str, Any]:
        """Figures over the steady state, keyed by CSV column; `<name>_monitor` gives status."""
        if not self.available:
            out = self._empty_summary()
        else:
            out = self._summarize(self.samples(), images, images_per_sec)
        out["%s_monitor" % self.name] = self.status()
        return out
