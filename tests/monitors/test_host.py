import itertools
import types

import pytest

from tfbench.monitors.host import HostMonitor
from tfbench.output import console


class FakePsutil:
    def __init__(self, system, process, rss):
        self._system = iter(system)
        self._process = iter(process)
        self._rss = iter(rss)
        outer = self

        class Process:
            def cpu_percent(self, interval=None):
                return next(outer._process)

            def memory_info(self):
                return types.SimpleNamespace(rss=next(outer._rss))

        self.Process = Process

    def cpu_percent(self, interval=None):
        assert interval is None  # never block the sampler
        return next(self._system)

    def cpu_count(self, logical=True):
        return 8


def test_host_monitor_with_fake_psutil():
    counter = itertools.count()
    fake = FakePsutil(system=[0.0, 5.0, 90.0], process=[0.0, 10.0, 170.0],
                      rss=[1 << 30, 2 << 30, 3 << 30])
    mon = HostMonitor(interval_sec=0, psutil_module=fake, clock=lambda: float(next(counter)))
    mon.start()
    mon.mark_steady()
    mon.stop()
    samples = mon.samples()
    assert [s["phase"] for s in samples] == ["start", "steady_start", "end"]
    assert samples[-1] == {"t": 3.0, "phase": "end", "cpu_util_pct": 90.0,
                           "proc_cpu_pct": 170.0, "rss_bytes": 3 << 30}
    s = mon.summary()
    assert s["host_monitor"] == "ok"
    assert s["cpu_util_pct_mean"] == 90.0
    assert s["process_cpu_pct_mean"] == 170.0
    assert s["host_rss_gb_max"] == pytest.approx(3.0)
    assert s["num_cpus"] == 8
    assert console.host_cpu_lines(s) == [
        "Host CPU: 90% busy (system, 8 cores), process 170% (100% = one core), RSS max 3.00 GiB"]
    assert console.monitor_warnings(s) == []


def test_the_first_cpu_reading_has_no_interval_and_is_discarded():
    """psutil's first cpu_percent(interval=None) measures nothing and returns 0.0: it must not
    show as a 0% start in the time series (the report plots it) nor count in a mean."""
    counter = itertools.count()
    fake = FakePsutil(system=[0.0, 60.0, 80.0], process=[0.0, 120.0, 160.0],
                      rss=[1 << 30] * 3)
    mon = HostMonitor(interval_sec=0, psutil_module=fake, clock=lambda: float(next(counter)))
    mon.start()
    mon._take(None)   # one background tick, without a thread
    mon.stop()        # never marked steady: the whole run counts
    samples = mon.samples()
    assert samples[0]["cpu_util_pct"] is None and samples[0]["proc_cpu_pct"] is None
    assert samples[0]["rss_bytes"] == 1 << 30
    assert [s["cpu_util_pct"] for s in samples[1:]] == [60.0, 80.0]
    s = mon.summary()
    assert s["cpu_util_pct_mean"] == pytest.approx(70.0)
    assert s["process_cpu_pct_mean"] == pytest.approx(140.0)


def test_the_first_system_reading_of_each_thread_is_discarded():
    """psutil keeps cpu_percent's origin per thread (5.9.6 on): the sampler thread's first tick
    after start()'s reading in the main thread reads a meaningless 0.0, which a report plotted
    as the host CPU line's 0% start."""
    import threading

    class PerThread(FakePsutil):
        def __init__(self):
            super().__init__(system=[], process=itertools.repeat(40.0),
                             rss=itertools.repeat(1 << 30))
            self.origins = set()

        def cpu_percent(self, interval=None):
            first = threading.get_ident() not in self.origins
            self.origins.add(threading.get_ident())
            return 0.0 if first else 75.0

    counter = itertools.count()
    mon = HostMonitor(interval_sec=0, psutil_module=PerThread(),
                      clock=lambda: float(next(counter)))
    mon.start()
    sampler = threading.Thread(target=lambda: [mon._take(None) for _ in range(2)])
    sampler.start()
    sampler.join()
    mon.mark_steady()
    mon.stop()
    assert [(s["phase"], s["cpu_util_pct"], s["proc_cpu_pct"]) for s in mon.samples()] == [
        ("start", None, None), ("warmup", None, 40.0), ("warmup", 75.0, 40.0),
        ("steady_start", 75.0, 40.0), ("end", 75.0, 40.0)]


def test_cpu_mean_weights_each_reading_by_the_time_it_covers():
    """A reading taken just after another (a window boundary) covers a few ms and reads 0% or
    100% by psutil's tick granularity; weighted by its interval it cannot move the mean."""
    from tfbench.monitors import aggregate
    samples = [{"t": 0.0, "phase": "start", "cpu_util_pct": None},
               {"t": 0.25, "phase": "warmup", "cpu_util_pct": 50.0},
               {"t": 0.3, "phase": "steady_start", "cpu_util_pct": 40.0},
               {"t": 0.55, "phase": "steady", "cpu_util_pct": 50.0},
               {"t": 0.8, "phase": "steady", "cpu_util_pct": 50.0},
               {"t": 0.801, "phase": "end", "cpu_util_pct": 0.0}]
    s = aggregate.host_summary(samples)
    assert s["cpu_util_pct_mean"] == pytest.approx((0.25 * 50 + 0.25 * 50) / 0.501)
    assert s["cpu_util_pct_max"] == 50.0


def test_host_monitor_real_psutil():
    mon = HostMonitor(interval_sec=0)
    assert mon.available
    mon.start()
    sum(i * i for i in range(20000))
    mon.mark_steady()
    mon.stop()
    s = mon.summary()
    assert 0.0 <= s["cpu_util_pct_mean"] <= 100.0
    assert s["host_rss_gb_max"] > 0


def test_host_monitor_without_psutil_process():
    class Broken:
        def Process(self):
            raise OSError("no /proc")

        def cpu_count(self):
            return 1

    mon = HostMonitor(psutil_module=Broken())
    assert not mon.available
    mon.start()
    mon.stop()
    assert mon.summary() == {"cpu_util_pct_mean": None,
                             "host_monitor": "not available (psutil: no /proc)"}
    assert console.host_cpu_lines(mon.summary()) == [
        "Host CPU: not available (psutil: no /proc)"]
