"""history.record: what a run, a CSV's rows or a manifest add to the history, and the one line
the console prints about it (a CLI run: before the footer, nothing after it)."""

import os

import pytest
import sqlalchemy as sa

from helpers import only_row, run_cli
from tfbench.history import location, record, schema
from tfbench.history.store import Store


def row(run_id, **cells):
    base = {"run_id": run_id, "status": "ok", "model": "resnet50", "hostname": "node1",
            "device_kind": "gpu", "device_name": "NVIDIA H100 80GB HBM3", "num_devices": "1",
            "images_per_sec": "1000"}
    base.update(cells)
    return base


def test_no_environment_capture_means_no_facts():
    assert record.facts(None) == {} and record.facts({}) == {}
    # A capture without NVML's part says nothing about GPUs either.
    assert record.facts({"keras": {"version": "3.15.1"}}) == {"Keras": "3.15.1"}
    assert record.facts({"nvidia": {"reason": "NVML library not found"}}) == {
        "GPUs on the host (NVML)": "none (NVML library not found)"}


def test_rows_of_one_run_id_are_one_result_and_repeated_rows_one_worker():
    rows = [row("r1"), row("r2"), row("r1")]
    results = record.from_rows(rows, "import")
    assert [r.run_id for r in results] == ["r1", "r2"]
    assert len({w.key for w in results[0].workers}) == 1


def test_a_launch_s_rows_are_one_result_under_the_chief_s_run_id():
    rows = [row("chief", hostname="node1"), row("other", hostname="node2")]
    result, = record.from_rows(rows, "launch", one_run=True)
    assert result.run_id == "chief"
    assert [w.key for w in result.workers] == ["node1#chief", "node2#other"]


def test_a_manifest_gives_a_single_row_its_figures_and_environment():
    manifest = {"extra": {"latency_ms_min": 1.5, "samples": [1, 2]},
                "environment": {"before": {"nvidia": {"driver_version": "580.65.06"}}}}
    result, = record.from_rows([row("r1")], "import", {"r1": manifest})
    assert result.workers[0].row["latency_ms_min"] == 1.5
    assert "samples" not in result.workers[0].row         # a structure, not a figure
    assert result.environment["NVIDIA driver"] == "580.65.06"


def test_the_console_line_says_where_the_result_went(tmp_path):
    url = location.url_for(str(tmp_path / "h.sqlite"))
    result = record.from_rows([row("r1")], "run")
    assert record.write(None, result) is None              # the history is off
    where = str(tmp_path / "h.sqlite")
    assert record.write(url, result, ["x.csv"]) == "History: result added to %s (run r1)" % where
    assert record.write(url, result) == "History: result already in %s (run r1)" % where
    assert record.write(url, result, quiet_when_already=True) is None
    many = record.from_rows([row("r1"), row("r2"), row("r3")], "sweep")
    assert record.write(url, many) == "History: 2 result(s) added to %s, 1 already there" % where


def test_a_store_that_cannot_be_opened_costs_one_line_with_the_import_command(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    url = location.url_for(str(blocker / "h.sqlite"))     # its directory cannot be made
    line = record.write(url, record.from_rows([row("r1")], "run"),
                        [str(tmp_path / "my results.csv"), str(tmp_path / "runs" / "r1.json")])
    assert line.startswith("History: not written to %s (its directory cannot be created (%s: "
                           "file exists)): " % (blocker / "h.sqlite", blocker))
    assert line.endswith("add it later with `tfbench history import '%s' %s`" % (
        tmp_path / "my results.csv", tmp_path / "runs" / "r1.json"))
    assert "\n" not in line and "Error" not in line and "errno" not in line.lower()


def test_the_import_command_quotes_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert record.import_command(["a b.csv", "runs/x.json"]) == (
        "tfbench history import '%s' %s" % (tmp_path / "a b.csv", tmp_path / "runs" / "x.json"))


# --- which GPUs a run used ---------------------------------------------------------------
def host_capture(visible=None, order="PCI_BUS_ID", uuids=("GPU-a", "GPU-b", "GPU-c", "GPU-d")):
    """An environment capture of a host with four H100s, NVML listing them in PCI order."""
    env_vars = {k: v for k, v in (("CUDA_VISIBLE_DEVICES", visible),
                                  ("CUDA_DEVICE_ORDER", order)) if v is not None}
    return {"hostname": "node1", "env_vars": env_vars, "nvidia": {"gpus": [
        {"nvml_index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": u}
        for i, u in enumerate(uuids)]}}


def used_uuids(env, num_devices, extra=None):
    return record.from_run(row("r1", num_devices=str(num_devices)), extra or {},
                           {"before": env}, "r1").workers[0].gpu_uuids


def test_a_run_s_own_gpu_list_names_the_gpus_it_used():
    # --gpu_indices=3 (or horovod's local rank 3): the NVML monitor's list, which
    # measure.nvml.resolve_handles matched to CUDA's numbering, not the host's first GPU.
    own = {"gpus": [{"gpu": 3, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-d"}]}
    assert used_uuids(host_capture(), 1, own) == ("GPU-d",)
    # A MIG slice is the run's GPU, by its own UUID.
    mig = {"gpus": [{"gpu": 0, "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "uuid": "MIG-9"}]}
    worker = record.from_run(row("r1"), mig, {"before": host_capture()}, "r1").workers[0]
    assert (worker.gpu_uuids, worker.gpu_model) == (("MIG-9",), "NVIDIA H100 80GB HBM3 MIG "
                                                                "1g.10gb")
    # An imported manifest's own list likewise.
    manifest = {"extra": own, "environment": {"before": host_capture()}}
    result, = record.from_rows([row("r1")], "import", {"r1": manifest})
    assert result.workers[0].gpu_uuids == ("GPU-d",)


@pytest.mark.parametrize("visible,order,devices,uuids", [
    (None, "PCI_BUS_ID", 4, ("GPU-a", "GPU-b", "GPU-c", "GPU-d")),
    ("2,0", "PCI_BUS_ID", 2, ("GPU-c", "GPU-a")),
    (" 1,3gpu", "PCI_BUS_ID", 2, ("GPU-b", "GPU-d")),      # strtoul's reading
    ("GPU-c,GPU-a", None, 2, ("GPU-c", "GPU-a")),          # UUIDs: no order needed
    ("1,7,2", "PCI_BUS_ID", 1, ("GPU-b",)),                # the list ends at a missing GPU
    ("1,1", "PCI_BUS_ID", 2, ()),                          # a repeat hides every GPU
    ("MIG-x", "PCI_BUS_ID", 1, ()),                        # slices: not in the capture
    ("2,0", None, 2, ()),                                  # fastest first: NVML cannot tell
    ("2,0", "FASTEST_FIRST", 2, ()),
    (None, "PCI_BUS_ID", 1, ()),                           # which of four: not recorded
    ("2,0", "PCI_BUS_ID", 1, ()),
])
def test_without_its_own_list_the_capture_names_the_gpus_only_where_certain(
        visible, order, devices, uuids):
    assert used_uuids(host_capture(visible, order), devices) == uuids


# --- a run through the command line ---------------------------------------------------------
RUN = ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=2",
       "--num_batches=2", "--num_warmup_batches=1"]


@pytest.mark.slow
def test_a_run_adds_itself_and_says_so_before_the_footer(tmp_path):
    path = tmp_path / "data" / "history.sqlite"
    code, out = run_cli(RUN, tmp_path, env_extra={"TFBENCH_HISTORY": str(path)})
    assert code == 0, out
    lines = out.rstrip("\n").split("\n")
    run_id = only_row(tmp_path / "tfbench_results.csv")["run_id"]
    line = "History: result added to %s (run %s)" % (path, run_id)
    assert line in lines
    footer = len(lines) - 3
    assert lines[footer:] == ["-" * 64, lines[-2], "-" * 64]
    assert lines[-2].startswith("total images/sec: ")
    assert lines.index(line) < footer and "Traceback" not in out
    s = Store(location.url_for(str(path)))
    try:
        with s.engine.connect() as conn:
            got = conn.execute(sa.select(schema.results)).mappings().one()
        assert (got["run_id"], got["source"], got["model"]) == (run_id, "run", "trivial")
        assert got["images_per_sec"] > 0
        assert s.environment()[run_id]["TensorFlow"].startswith("2.")
    finally:
        s.close()
    # --history wins over the variable; empty turns it off.
    code, out = run_cli(RUN + ["--history="], tmp_path, env_extra={"TFBENCH_HISTORY": str(path)})
    assert code == 0 and "History:" not in out


@pytest.mark.slow
@pytest.mark.parametrize("how", ["flag", "variable"])
def test_a_malformed_history_is_refused_before_the_run(tmp_path, how):
    value = "mysql://db.example/tfb"
    args, env = (RUN + ["--history=" + value], {}) if how == "flag" else \
        (RUN, {"TFBENCH_HISTORY": value})
    code, out = run_cli(args, tmp_path, env_extra=env)
    assert code == 2
    assert out.count("\n") == 1 and out.startswith("tfbench: error: ")
    assert value in out and "TensorFlow:" not in out
    assert not os.path.exists(tmp_path / "tfbench_results.csv")
