"""The rows of a validation over hosts (tfbench.launch.hosts_verdicts): names, each host's
images/sec alone, the cluster's flags, the expectation, the efficiency row and its split, the
halving's rows and a host's validate.json; every expectation worked out by hand. End to end:
cli/test_launch_validate.py and e2e/test_validate_hosts_localhost.py."""

import json

import pytest

from tfbench.launch import halving, hosts_verdicts as vh
from tfbench.launch.remote import parse_hosts
from tfbench.launch.tasks import LaunchResult
from tfbench.output import csv_out


def _row(**values):
    row = {c: "" for c in csv_out.COLUMN_NAMES}
    row.update(status="ok", mode="training", num_workers="1")
    row.update({k: str(v) for k, v in values.items()})
    return row


def test_hosts_are_named_without_user_and_port_unless_a_machine_is_named_twice():
    hosts = parse_hosts("me@gpu1,gpu2,GPU1:2300")
    assert vh.host_names(hosts) == ["gpu1:2222", "gpu2", "GPU1:2300"]
    assert vh.host_names(parse_hosts("me@a,b:9")) == ["a", "b"]


def test_a_hosts_images_per_sec_alone_is_the_median_of_its_training_rows():
    rows = [_row(images_per_sec=90), _row(images_per_sec=120), _row(images_per_sec=100),
            _row(images_per_sec=500, status="error"), _row(images_per_sec=700, num_workers=2),
            _row(images_per_sec=900, mode="forward_only"), _row(images_per_sec="")]
    assert vh.alone_images_per_sec(rows) == 100.0
    assert vh.alone_images_per_sec([_row(status="oom")]) is None


def test_the_cluster_runs_what_the_hosts_ran_alone_with_the_probes():
    alone = _row(num_devices=8, num_batches=20, num_warmup_batches=5)
    assert vh.together_flags(["--model=resnet50", "--num_batches=20"], alone) == [
        "--model=resnet50", "--num_batches=20", "--explain_scaling", "--num_gpus=8",
        "--num_warmup_batches=5"]
    # --gpu_indices decides the devices itself; --explain_scaling is not given twice.
    assert vh.together_flags(["--gpu_indices=0,1", "--explain_scaling"], alone) == [
        "--gpu_indices=0,1", "--explain_scaling", "--num_batches=20", "--num_warmup_batches=5"]


def _baseline(value, hosts="a,b,c"):
    return json.dumps({"schema": "tfbench.validate", "rows": [
        {"check": "pcie_width", "subject": "GPU 0", "value": None},
        {"check": "hosts_together", "subject": "hosts " + hosts, "value": value}]})


def test_the_expectation_is_the_baselines_efficiency_less_the_tolerance_else_the_minimum():
    exp = vh.expectation(_baseline(90.0), 5.0, 80.0, 3)
    assert (exp.pct, exp.text) == (85.5, ">= 85.5% (95% of the baseline's 90.0%)")
    assert vh.expectation(_baseline(90.0), 10.0, 80.0, 3).pct == 81.0
    exp = vh.expectation(_baseline(90.0, "a,b,c,d"), 5.0, 80.0, 3)
    assert (exp.pct, exp.text) == (80.0, ">= 80% (--min_efficiency_pct; the baseline's is of "
                                         "4 hosts)")
    exp = vh.expectation("model,images_per_sec\n", 5.0, 70.0, 3)
    assert exp.text == ">= 70% (--min_efficiency_pct; the baseline holds no hosts-together " \
                       "efficiency)"
    assert vh.expectation(None, 5.0, 80.0, 2).text == ">= 80% (--min_efficiency_pct)"


def test_the_efficiency_row_splits_the_points_lost_against_the_hosts_alone():
    # 3 workers x 32: a step of 1000 x 96 / 240 = 400 ms; 48% -> the hosts alone 192 ms.
    # compute: 150 - 192 < 0 -> 0; all-reduce: min(400 - 192, 180) = 180 ms = 45 pts;
    # unexplained 208 - 180 = 28 ms = 7 pts.
    chief = _row(num_workers=3, images_per_sec=240, global_batch_size=96,
                 slowest_device_step_ms=150, allreduce_ms=180)
    result = LaunchResult([], [chief, chief, chief], 0, "", "", 10.0)
    exp = vh.Expectation(80.0, ">= 80%")
    row, efficiency = vh.efficiency_check("hosts_together", ["a", "b", "c"], result,
                                          [100.0, 150.0, 250.0], exp)
    assert efficiency == 48.0
    assert (row.host, row.subject, row.status, row.reason, row.value, row.expected) == (
        "a", "hosts a,b,c", "FAIL", "efficiency_low", 48.0, 80.0)
    assert row.figure == ("48.0%: 240.0 images/sec together, 500.0 the hosts alone "
                          "(all-reduce (not overlapped) 45 pts, unexplained 7 pts)")
    row, _ = vh.efficiency_check("halving", ["a", "b"], result, [100.0, 140.0], exp)
    assert (row.status, row.reason, row.value) == ("PASS", "ok", 100.0)


def test_a_cluster_run_that_failed_is_a_failed_check_with_the_launchs_line():
    failed = LaunchResult([], [_row(status="error", images_per_sec="")], 5,
                          "b:2222 (worker 1): killed by SIGKILL", "", 3.0, "error")
    row, efficiency = vh.efficiency_check("halving", ["a", "b"], failed, [1.0, 1.0],
                                          vh.Expectation(80.0, ">= 80%"))
    assert efficiency is None
    assert (row.status, row.reason, row.figure) == ("FAIL", "check_failed",
                                                    "b:2222 (worker 1): killed by SIGKILL")


def test_each_host_of_a_finding_gets_its_row_with_the_groups_with_and_without_it():
    measured = {("a", "b", "c", "d"): 40.0, ("a", "b"): 90.0, ("c", "d"): 20.0,
                ("a", "c"): 45.0, ("a", "d"): 44.0}
    finding = halving.Finding(halving.HOSTS, ("c", "d"), "each fails in a pair with a")
    rows = vh.finding_rows(finding, measured, vh.Expectation(80.0, ">= 80%"))
    assert [(r.host, r.subject, r.check, r.value) for r in rows] == [
        ("c", "host", "host_drags_ring", 20.0), ("d", "host", "host_drags_ring", 20.0)]
    assert rows[0].figure == ("with c: a,b,c,d 40.0%, c,d 20.0%, a,c 45.0%; without: a,b "
                              "90.0%, a,d 44.0% (each fails in a pair with a)")
    assert vh.finding_rows(halving.Finding(halving.NONE, ("a", "b"), "x"), measured,
                           vh.Expectation(80.0, "")) == []


def test_a_hosts_validate_json_is_read_with_the_hosts_name():
    doc = {"schema": "tfbench.validate", "host": "node7.local", "rows": [
        {"host": "node7.local", "subject": "GPU 1", "check": "straggler", "status": "FAIL",
         "reason": "straggler", "figure": "1.31x", "expectation": "<= 1.05x"}]}
    meta, rows = vh.read_host_json(json.dumps(doc), "node7")
    assert meta["host"] == "node7.local" and [(r.host, r.subject) for r in rows] == [
        ("node7", "GPU 1")]
    with pytest.raises(ValueError, match="not a tfbench.validate document"):
        vh.read_host_json(json.dumps({"rows": []}), "n")
    doc["rows"][0]["reason"] = "made_up"
    with pytest.raises(ValueError, match="a row does not read"):
        vh.read_host_json(json.dumps(doc), "n")
    with pytest.raises(ValueError):
        vh.read_host_json("{", "n")
