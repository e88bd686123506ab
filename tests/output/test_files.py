"""tfbench.output.files: what a finished run writes (the CSV row, the JSON manifest), the
manifest's contents and the Results line that says where the row went."""

import json
import os

from helpers import only_row
from tfbench.config.settings import make_settings
from tfbench.history import record as history_record
from tfbench.output import csv_out, files
from tfbench.results import RunResult


def _result(**kw) -> RunResult:
    r = RunResult(run_id="20260301T120000Z-abc123", model="resnet50", mode="training",
                  batch_size=64, images_per_sec=1234.5, step_times=[0.1, 0.1], params=25557032,
                  **kw)
    r.notices.append("--batch_group_size has no effect under TF2 (TF1 graph-only flag); ignored")
    return r


def test_the_results_line_and_the_same_line_naming_another_file():
    line = files.results_line("ok", "out/r.csv", "20260301T120000Z-abc123")
    assert line == "Results: ok row appended to out/r.csv (run 20260301T120000Z-abc123)"
    # A launch task's row travels on to the launcher's CSV, with a path that has spaces.
    assert files.results_line_to(line, "/tmp/all rows.csv") == \
        "Results: ok row appended to /tmp/all rows.csv (run 20260301T120000Z-abc123)"
    assert files.results_line_to("total images/sec: 1.00", "x.csv") is None
    assert files.results_line_to(line + " and more", "x.csv") is None


def test_the_manifest_holds_the_result_the_flags_and_the_csv_row():
    p = make_settings({"model": "resnet50", "batch_size": 64, "num_gpus": 2, "device": "gpu",
                     "xla": True})
    result = _result()
    row = csv_out.row_for(result)
    data = files.manifest(p, result, row)
    fields = result.to_dict()
    assert {k: data[k] for k in fields} == fields
    assert data["csv_row"] is row
    # The flags under their own name: `params` is the CSV's trainable-parameter count.
    assert data["manifest_version"] == 2
    assert data["flags_given"] == ["batch_size", "device", "model", "num_gpus", "xla"]
    assert data["flags"]["batch_size"] == 64 and data["flags"]["num_batches"] is None
    assert data["flags"]["validate_device_checks"] == ("step", "kernels", "numeric")
    assert "explicit" not in data["flags"]
    assert data["params"] == result.params == int(row["params"])  # one name: the CSV's
    assert set(data) == set(fields) | {"manifest_version", "flags", "flags_given", "csv_row"}
    json.dumps(data)   # plain data


def test_the_manifest_path_is_the_run_id_in_json_dir():
    assert files.manifest_path(make_settings({"json_dir": ""}), _result()) is None
    assert files.manifest_path(make_settings({}), _result()) == \
        os.path.join("tfbench_runs", "20260301T120000Z-abc123.json")   # the default
    assert files.manifest_path(make_settings({"json_dir": "j"}), _result()) == \
        os.path.join("j", "20260301T120000Z-abc123.json")


def test_write_all_writes_each_output_asked_for(tmp_path):
    # (--benchmark_log_dir's files: tests/output/test_benchmark_logger.py)
    p = make_settings({"csv_file": str(tmp_path / "r.csv"), "json_dir": str(tmp_path / "j")})
    result = _result()
    written = files.write_all(p, result)
    assert written.lines == [files.results_line("ok", str(tmp_path / "r.csv"), result.run_id)]
    row = only_row(tmp_path / "r.csv")
    assert row == csv_out.row_for(result) == written.row and row["images_per_sec"] == "1234.5"
    assert result.json_file == str(tmp_path / "j" / (result.run_id + ".json"))
    with open(result.json_file) as handle:
        assert json.load(handle) == json.loads(json.dumps(
            files.manifest(p, result, csv_out.row_for(result))))
    # Nothing asked for, nothing written.
    bare = _result()
    assert files.write_all(make_settings({"csv_file": "", "json_dir": ""}), bare).lines == []
    assert bare.json_file in ("", None)


def test_a_parameter_server_task_writes_nothing_and_says_the_controller_reports(tmp_path):
    p = make_settings({"csv_file": str(tmp_path / "r.csv"), "json_dir": str(tmp_path / "j")})
    result = _result(server_task="ps task 0")
    assert files.write_all(p, result) == files.Written(
        ["ps task 0: done serving the cluster; the controller reports the results"], None)
    assert os.listdir(tmp_path) == []
    # A server task that failed still leaves its row.
    result.status = "error"
    files.write_all(p, result)
    assert only_row(tmp_path / "r.csv")["status"] == "error"


def test_the_row_is_built_once_and_the_manifest_keeps_the_one_the_csv_file_gets(
        tmp_path, monkeypatch):
    """write_all builds the run's row once (csv_out.row_for) and hands that row to the JSON
    manifest, the CSV file and the results history: a second build could differ (each build
    here is numbered)."""
    built = []
    row_for = csv_out.row_for

    def numbered(result):
        built.append(result.run_id)
        return dict(row_for(result), notices="build %d" % len(built))
    monkeypatch.setattr(csv_out, "row_for", numbered)
    p = make_settings({"csv_file": str(tmp_path / "r.csv"), "json_dir": str(tmp_path / "j")})
    result = _result()
    written = files.write_all(p, result)
    history_record.add_run(str(tmp_path / "h.sqlite"), result, written.row, [])
    assert len(built) == 1                    # the results history records the same row
    with open(result.json_file) as handle:
        assert json.load(handle)["csv_row"] == only_row(tmp_path / "r.csv")
    assert only_row(tmp_path / "r.csv")["notices"] == "build 1"
