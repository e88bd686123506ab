"""`tfbench launch -- validate` over TensorFlow tasks on 127.0.0.x, through scripts/local_rsh.sh:
three hosts each fine alone, one of which makes every gradient all-reduce it takes part in
0.6 s late (tests/support/validate_hosts_stand_in.py: explain_inject.py's collective wait on
that host's task); the real MultiWorkerMirroredStrategy clusters together and in pairs, and the
halving names that host (about 3 minutes on 2 cores: a run with that host waits 0.6 s on each
of its --explain_scaling probe's 25 all-reduces too). Until `tfbench validate` exists, each
host's validation is the stand-in's (a real training child and a validate.json); the test of
the real one runs once it does.

The figures, on 2 shared CPU cores (two runs: the pair without the slow host 28.6% and 64.5% of
its two hosts alone, the pairs with it 6.1% to 8.3%): the hosts alone train at the same time, as
their cores allow; a pair of workers without the slow host loses part of its step to the gRPC
ring and the cores it shares, one with it waits 0.6 s on every step, several times its whole
step. --min_efficiency_pct=15 sits between the two, about 1.8x from each.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT, SUPPORT, free_ports
from tfbench import errors

pytestmark = pytest.mark.slow

LOCAL_RSH = os.path.join(ROOT, "scripts", "local_rsh.sh")
STAND_IN = "%s %s" % (sys.executable, os.path.join(SUPPORT, "validate_hosts_stand_in.py"))
FLAGS = ["--device=cpu", "--model=trivial", "--batch_size=32", "--image_size=32",
         "--num_batches=6", "--num_warmup_batches=2", "--display_every=2",
         "--monitor_interval_ms=0", "--cluster_timeout_secs=60"]


def _validate(tmp_path, hosts, slow, env_extra=None, timeout=480):
    env = dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp_path), TF_CPP_MIN_LOG_LEVEL="2",
               TFBENCH_TEST_SLOW_HOSTS=slow, SLOW_SECONDS="0.6", **(env_extra or {}))
    env.pop("TF_CONFIG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "tfbench", "launch", "--rsh=" + LOCAL_RSH,
         "--remote_cmd=" + STAND_IN, "--out_dir=out", "--hosts=" + ",".join(hosts), "--",
         "validate", "--min_efficiency_pct=15", "--host_timeout_secs=300"] + FLAGS,
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)
    with open(tmp_path / "out" / "validate.json") as handle:
        return proc, json.load(handle)


def _hosts(n):
    return ["127.0.0.%d:%d" % (i + 1, port) for i, port in enumerate(free_ports(n))]


def _check_the_halving_names_the_slow_host(tmp_path, proc, doc, names):
    assert proc.returncode == errors.EXIT_VALIDATE_FAIL, proc.stdout[-3000:] + proc.stderr
    assert "Traceback" not in proc.stderr
    together = [r for r in doc["rows"] if r["check"] == "hosts_together"]
    assert [(r["status"], r["reason"]) for r in together] == [("FAIL", "efficiency_low")], \
        proc.stdout
    # Where the points went, from the chief's --explain_scaling probes.
    assert "all-reduce (not overlapped)" in together[0]["figure"]
    halving = {r["subject"]: r["status"] for r in doc["rows"] if r["check"] == "halving"}
    pairs = {"hosts %s,%s" % (names[0], names[1]): "PASS",
             "hosts %s,%s" % (names[0], names[2]): "FAIL",
             "hosts %s,%s" % (names[1], names[2]): "FAIL"}
    assert halving == pairs, proc.stdout
    (drags,) = [r for r in doc["rows"] if r["check"] == "host_drags_ring"]
    assert (drags["host"], drags["subject"], drags["status"]) == (names[2], "host", "FAIL")
    # Every host's own rows carry its name.
    assert {r["host"] for r in doc["rows"]} == set(names)
    rows = (tmp_path / "tfbench_results.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 + 3 + 3 * 2        # header; alone; together; three pairs
    assert [n for n in os.listdir(tmp_path) if n.startswith("tfbench-launch.")] == []


# The same clusters and halving as the real-validate test below, with the stand-in's validate
# alone: 160 s of CI for no path that test does not take; TFBENCH_FULL_VALIDATE_TESTS=1 runs it.
@pytest.mark.skipif(os.environ.get("TFBENCH_FULL_VALIDATE_TESTS") != "1",
                    reason="the real-validate test runs the same clusters; "
                           "TFBENCH_FULL_VALIDATE_TESTS=1 runs this one too")
def test_three_hosts_one_dragging_every_ring_it_is_in_the_halving_names_it(tmp_path):
    hosts = _hosts(3)
    proc, doc = _validate(tmp_path, hosts, slow=hosts[2])
    names = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    _check_the_halving_names_the_slow_host(tmp_path, proc, doc, names)
    assert [(r["host"], r["status"]) for r in doc["rows"] if r["check"] == "training_step"] \
        == [(n, "PASS") for n in names]


@pytest.mark.skipif(importlib.util.find_spec("tfbench.cli.validate") is None,
                    reason="needs `tfbench validate` (tfbench/cli/validate.py)")
def test_with_the_real_validate_the_halving_names_the_slow_host(tmp_path):
    """As above, each host running `tfbench validate --level=quick` itself."""
    hosts = _hosts(3)
    proc, doc = _validate(tmp_path, hosts, slow=hosts[2],
                          env_extra={"STAND_IN_VALIDATE": "real"})
    _check_the_halving_names_the_slow_host(tmp_path, proc, doc,
                                           ["127.0.0.1", "127.0.0.2", "127.0.0.3"])
    for name in ("127.0.0.1", "127.0.0.2", "127.0.0.3"):
        host = json.loads((tmp_path / "out" / "hosts" / name / "validate.json").read_text())
        assert host["schema"] == "tfbench.validate" and host["exit_code"] in (0, 7)
