"""`tfbench launch --hosts=... -- validate`: every host alone, together, the halving, and hosts
that are unreachable, crash, hang or refuse, end to end through scripts/local_rsh.sh with the
stand-in tfbench (tests/support/launch_fake_tfbench.py: its validate writes a validate.json
and a row of 100 images/sec; its clusters reach 90% on 2 workers, 80% on 3, half that with a
FAKE_SLOW_HOSTS host among them). The options: validate/test_options.py; real TensorFlow
clusters: e2e/test_validate_hosts_localhost.py."""

import csv
import json
import os
import subprocess
import sys
import time

import pytest

from helpers import ROOT, SUPPORT
from tfbench import errors

pytestmark = pytest.mark.slow

LOCAL_RSH = os.path.join(ROOT, "scripts", "local_rsh.sh")
FAKE = "%s %s" % (sys.executable, os.path.join(SUPPORT, "launch_fake_tfbench.py"))
H1, H2, H3 = "127.0.0.1", "127.0.0.2", "127.0.0.3"


def _validate(tmp_path, hosts, args=(), launch_args=(), timeout=120, **env_extra):
    """tfbench launch -- validate, the remote shell telling each command its host."""
    rsh = tmp_path / "rsh.sh"
    rsh.write_text('#!/bin/sh\nexport FAKE_HOST="$1"\nexec %s "$@"\n' % LOCAL_RSH)
    rsh.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp_path), **env_extra)
    env.pop("TF_CONFIG", None)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tfbench", "launch", "--rsh=%s" % rsh, "--remote_cmd=" + FAKE,
         "--out_dir=out", "--hosts=" + ",".join(hosts)] + list(launch_args)
        + ["--", "validate"] + list(args) + ["--json_dir="],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - started


def _doc(tmp_path):
    with open(tmp_path / "out" / "validate.json") as handle:
        return json.load(handle)


def _rows(doc, check=None):
    return [(r["host"], r["subject"], r["check"], r["status"], r["reason"])
            for r in doc["rows"] if check is None or r["check"] == check]


def _csv(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _leftovers(tmp_path):
    return [n for n in os.listdir(tmp_path) if n.startswith("tfbench-launch.")]


def test_three_hosts_one_slow_in_a_ring_the_halving_names_it(tmp_path):
    proc, _ = _validate(tmp_path, [H1, H2, H3], ["--level=quick"], FAKE_SLOW_HOSTS=H3)
    assert proc.returncode == errors.EXIT_VALIDATE_FAIL, proc.stderr
    doc = _doc(tmp_path)
    assert doc["schema"] == "tfbench.validate" and doc["hosts"] == [H1, H2, H3]
    assert (doc["status"], doc["exit_code"], doc["level"]) == ("FAIL", 8, "quick")
    # Every host's own rows, under its name (the stand-in's hostname is this machine's).
    assert _rows(doc, "pcie_width") == [(h, "GPU 0", "pcie_width", "PASS", "ok")
                                        for h in (H1, H2, H3)]
    # Together 3 x 100 x 0.8 x 0.5 = 120 of 300 alone: 40%; the pairs with 127.0.0.3
    # 2 x 100 x 0.9 x 0.5 = 90 of 200: 45%; the pair without it 180 of 200: 90%.
    together = [r for r in doc["rows"] if r["check"] == "hosts_together"]
    assert [(r["status"], r["reason"], r["value"], r["expected"]) for r in together] == [
        ("FAIL", "efficiency_low", 40.0, 80.0)]
    assert together[0]["figure"] == "40.0%: 120.0 images/sec together, 300.0 the hosts alone"
    assert together[0]["expectation"] == ">= 80% (--min_efficiency_pct)"
    assert [(r["subject"], r["status"], r["value"]) for r in doc["rows"]
            if r["check"] == "halving"] == [
        ("hosts %s,%s" % (H1, H2), "PASS", 90.0), ("hosts %s,%s" % (H1, H3), "FAIL", 45.0),
        ("hosts %s,%s" % (H2, H3), "FAIL", 45.0)]
    (drags,) = [r for r in doc["rows"] if r["check"] == "host_drags_ring"]
    assert (drags["host"], drags["subject"], drags["status"]) == (H3, "host", "FAIL")
    assert drags["figure"] == (
        "with %s: %s,%s,%s 40.0%%, %s,%s 45.0%%, %s,%s 45.0%%; without: %s,%s 90.0%% (both pairs "
        "with it fail, the pair without it passes)" % (H3, H1, H2, H3, H1, H3, H2, H3, H1, H2))
    assert doc["halving"] == {"finding": "host", "hosts": [H3], "why": "both pairs with it "
                              "fail, the pair without it passes"}
    out = proc.stdout.splitlines()
    assert out[-1] == ("validate: FAIL (4 FAIL, 4 PASS): hosts %s,%s,%s efficiency_low; %s "
                       "host_drags_ring; hosts %s,%s efficiency_low; hosts %s,%s "
                       "efficiency_low" % (H1, H2, H3, H3, H1, H3, H2, H3))
    assert "[halving] %s drags the ring: with %s" % (H3, H3) in proc.stdout
    header = [line for line in out if line.startswith("host ")]
    assert header and header[0].split() == ["host", "subject", "check", "status", "reason",
                                            "figure", "[expected]"]
    # The benchmark rows: 3 hosts alone, the 3 tasks together, 2 tasks of each of 3 pairs.
    rows = _csv(tmp_path / "tfbench_results.csv")
    assert [r["num_workers"] for r in rows] == ["1"] * 3 + ["3"] * 3 + ["2"] * 6
    assert _csv(tmp_path / "out" / "rows.csv") == rows
    assert {r["status"] for r in rows} == {"ok"}
    # The cluster runs took the alone runs' devices and steps, and --explain_scaling.
    together_step = next(s for s in doc["steps"] if s["name"] == "together")
    assert together_step["command"].endswith("--json_dir= --explain_scaling --num_gpus=1 "
                                             "--num_batches=10 --num_warmup_batches=5")
    # validate.csv: the same rows.
    assert [(r["host"], r["check"], r["status"]) for r in _csv(tmp_path / "out" /
                                                               "validate.csv")] == \
        [(r["host"], r["check"], r["status"]) for r in doc["rows"]]
    host_json = tmp_path / "out" / "hosts" / H2 / "validate.json"
    assert json.loads(host_json.read_text())["host"] == H2
    assert _leftovers(tmp_path) == []


def test_two_hosts_slow_together_are_named_as_their_link(tmp_path):
    """Two hosts each fine alone and slow together: nothing can tell which of the two (or
    their link) it is; the pair is named."""
    proc, _ = _validate(tmp_path, [H1, H2], FAKE_SLOW_HOSTS=H2)
    assert proc.returncode == errors.EXIT_VALIDATE_FAIL, proc.stderr
    doc = _doc(tmp_path)
    pair = "hosts %s,%s" % (H1, H2)
    assert [r for r in _rows(doc) if r[2] != "pcie_width"] == [
        (H1, pair, "hosts_together", "FAIL", "efficiency_low"),
        (H1, pair, "host_drags_ring", "FAIL", "host_drags_ring")]
    assert doc["rows"][-1]["figure"] == (
        "with %s and %s: %s,%s 45.0%%; without: each host alone passes (the pair fails and no "
        "third host is known to be fine in a ring: the link between them, or one of the two)"
        % (H1, H2, H1, H2))
    assert doc["halving"]["finding"] == "link"


def test_hosts_fine_together_pass_and_no_halving_runs(tmp_path):
    # 3 hosts together: 240 of 300, 80%: at the expectation, which passes.
    proc, _ = _validate(tmp_path, [H1, H2, H3])
    assert proc.returncode == errors.EXIT_OK, proc.stderr
    doc = _doc(tmp_path)
    assert _rows(doc, "hosts_together") == [
        (H1, "hosts %s,%s,%s" % (H1, H2, H3), "hosts_together", "PASS", "ok")]
    # The hosts' steps in the order they ended, then the one together.
    assert sorted(s["name"] for s in doc["steps"][:3]) == ["alone %s" % h for h in (H1, H2, H3)]
    assert doc["steps"][3]["name"] == "together" and len(doc["steps"]) == 4
    assert doc["halving"] is None
    assert proc.stdout.splitlines()[-1] == "validate: PASS (4 PASS)"


def test_a_baseline_goes_to_every_host_and_its_efficiency_is_the_expectation(tmp_path):
    baseline = tmp_path / "earlier.json"
    baseline.write_text(json.dumps({"schema": "tfbench.validate", "rows": [
        {"host": "a", "subject": "hosts a,b,c", "check": "hosts_together", "status": "PASS",
         "reason": "ok", "figure": "42%", "expectation": ">= 80%", "value": 42.0}]}) + "\n")
    proc, _ = _validate(tmp_path, [H1, H2, H3], ["--baseline=%s" % baseline],
                        FAKE_SLOW_HOSTS=H3)
    # 40% against 42% x 95% = 39.9%: it passes.
    assert proc.returncode == errors.EXIT_OK, proc.stderr
    (row,) = [r for r in _doc(tmp_path)["rows"] if r["check"] == "hosts_together"]
    assert (row["status"], row["expected"]) == ("PASS", 39.9)
    assert row["expectation"] == ">= 39.9% (95% of the baseline's 42.0%)"
    for host in (H1, H2, H3):
        got = json.loads((tmp_path / "out" / "hosts" / host / "validate.json").read_text())
        assert got["baseline_text"] == baseline.read_text()
        assert "--level=quick" in got["argv"] and "--tolerance_pct=5" in got["argv"]


def test_unreachable_crashed_and_hung_hosts_fail_in_bounded_time_the_others_are_kept(tmp_path):
    hosts = [H1, H2, H3, "gpu-node9"]
    proc, seconds = _validate(tmp_path, hosts, ["--host_timeout_secs=4"],
                              FAKE_VALIDATE="%s=hang,%s=crash" % (H2, H3))
    assert proc.returncode == errors.EXIT_VALIDATE_FAIL, proc.stderr
    assert seconds < 40 and "Traceback" not in proc.stderr
    doc = _doc(tmp_path)
    fails = {(r["host"], r["check"]): r["figure"] for r in doc["rows"] if r["status"] == "FAIL"}
    assert fails[("gpu-node9", "reachable")] == (
        "unreachable over `%s`: ssh: Could not resolve hostname gpu-node9: Name or service not "
        "known" % (tmp_path / "rsh.sh"))
    assert fails[(H2, "validate")].startswith("hung: no end after 4 s (--host_timeout_secs); "
                                              "stopped: ")
    assert fails[(H3, "validate")] == "internal error: the fake validate crashed"
    assert set(fails) == {("gpu-node9", "reachable"), (H2, "validate"), (H3, "validate")}
    # The hung host's validate wrote what it had run when it was stopped.
    assert (H2, "pcie_width") in {(r["host"], r["check"]) for r in doc["rows"]}
    # One host measured alone: no ring to run.
    (together,) = [s for s in doc["steps"] if s["name"] == "together"]
    assert together["status"] == "skipped"
    rows = _csv(tmp_path / "tfbench_results.csv")
    by_host = sorted((r["hostname"], r["status"]) for r in rows)
    assert ("gpu-node9", "error") in by_host and ("127.0.0.3", "error") in by_host
    assert _leftovers(tmp_path) == []


def test_halving_waits_for_hosts_that_fail_alone(tmp_path):
    proc, _ = _validate(tmp_path, [H1, H2, H3], FAKE_SLOW_HOSTS=H3,
                        FAKE_VALIDATE="%s=fail" % H2)
    assert proc.returncode == errors.EXIT_VALIDATE_FAIL, proc.stderr
    doc = _doc(tmp_path)
    assert [r[2:] for r in _rows(doc) if r[3] == "FAIL"] == [
        ("straggler", "FAIL", "straggler"), ("hosts_together", "FAIL", "efficiency_low")]
    assert doc["halving"] == {"finding": None, "hosts": [], "why": "not every host passes "
                              "alone (%s): look at those first" % H2}


def test_options_every_host_refuses_end_with_its_line_and_exit_2(tmp_path):
    proc, _ = _validate(tmp_path, [H1, H2], FAKE_VALIDATE="%s=refuse,%s=refuse" % (H1, H2))
    assert proc.returncode == errors.EXIT_USAGE, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "tfbench: error: %s: --baseline=-: of another model (resnet50, not trivial)" % H1)


def test_sigterm_stops_every_host_and_what_was_measured_is_written(tmp_path):
    import signal
    rsh = tmp_path / "rsh.sh"
    rsh.write_text('#!/bin/sh\nexport FAKE_HOST="$1"\nexec %s "$@"\n' % LOCAL_RSH)
    rsh.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp_path),
               FAKE_VALIDATE="%s=hang" % H2)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfbench", "launch", "--rsh=%s" % rsh, "--remote_cmd=" + FAKE,
         "--out_dir=out", "--hosts=%s,%s" % (H1, H2), "--", "validate", "--json_dir="],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:            # the host that does not hang has ended
            if line.startswith("[alone] %s:" % H1):
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == errors.EXIT_SIGTERM, err
    assert err.strip().splitlines()[-1] == ("tfbench: error: interrupted by SIGTERM; every check "
                                            "that ended is in out/validate.json")
    doc = _doc(tmp_path)
    assert doc["exit_code"] == 143
    # Both hosts' rows: the one that ended, and what the stopped one wrote when stopped.
    assert _rows(doc, "pcie_width") == [(h, "GPU 0", "pcie_width", "PASS", "ok")
                                        for h in (H1, H2)]
    assert {s["name"]: s["status"] for s in doc["steps"]} == {
        "alone %s" % H1: "ok", "alone %s" % H2: "interrupted"}
    assert "validate: PASS (2 PASS)" in out and _leftovers(tmp_path) == []
