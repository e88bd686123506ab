"""`tfbench history import`: results CSVs of every schema version, manifests, validate.json and
the directories of sweep, evaluate, validate and launch, on SQLite and PostgreSQL; a line per
file (added, already there, refused and why); idempotent; exit 0, or 2 when a path given could
not be read (the others imported)."""

import csv
import json
import os

import pytest
import sqlalchemy as sa

from csv_headers import HEADERS
from helpers import read_rows, run_cli
from history_stores import store_url  # noqa: F401 - fixture
from tfbench import cli
from tfbench.history import location, schema
from tfbench.history.store import Store
from tfbench.output.csv_out import COLUMN_NAMES, SCHEMA_VERSION

H100 = "NVIDIA H100 80GB HBM3"


def row(run_id, **cells):
    base = {"schema_version": str(SCHEMA_VERSION), "run_id": run_id, "status": "ok",
            "timestamp": "2026-10-01T00:00:00+00:00", "model": "resnet50", "mode": "training",
            "batch_size": "64", "num_devices": "1", "num_workers": "1", "device_kind": "gpu",
            "device_name": H100, "hostname": "node1", "images_per_sec": "1000",
            "command": "tfbench --model=resnet50"}
    base.update(cells)
    return base


def write_csv(path, rows, header=COLUMN_NAMES):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(header), extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({c: r.get(c, "") for c in header})


def write_manifest(folder, run_row, driver="570.86.15", **extra):
    os.makedirs(str(folder), exist_ok=True)
    data = {"run_id": run_row["run_id"], "status": run_row["status"], "csv_row": run_row,
            "extra": dict(extra),
            "environment": {"before": {"hostname": run_row["hostname"],
                                       "nvidia": {"driver_version": driver, "gpus": [
                                           {"nvml_index": 0, "name": H100, "uuid": "GPU-1"}]}}}}
    with open(os.path.join(str(folder), run_row["run_id"] + ".json"), "w") as handle:
        json.dump(data, handle)


def run_import(url, *paths, capsys):
    """(exit code, stdout lines, stderr) of `tfbench history import PATHS --history URL`."""
    code = cli.main(["tfbench", "history", "import"] + [str(p) for p in paths]
                    + ["--history", url])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def stored(url):
    s = Store(url)
    try:
        with s.engine.connect() as conn:
            results = {r["run_id"]: dict(r) for r in conn.execute(
                sa.select(schema.results)).mappings()}
            verdicts = conn.execute(sa.select(schema.validation_checks).order_by(
                schema.validation_checks.c.row)).mappings().all()
        return results, s.environment(), [dict(v) for v in verdicts]
    finally:
        s.close()


@pytest.fixture(autouse=True)
def _here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


# --- results CSVs -----------------------------------------------------------------------------
@pytest.mark.parametrize("version", sorted(HEADERS))
def test_a_csv_of_every_schema_version_imports(tmp_path, version, capsys):
    url = location.url_for(str(tmp_path / "h.sqlite"))
    header = HEADERS[version]
    cells = row("r1", schema_version=str(version), latency_ms_p99="9.5", allreduce_ms="3.5",
                max_grad_rel_diff="0.001")
    write_csv(tmp_path / "old.csv", [cells], header)
    code, lines, err = run_import(url, "old.csv", capsys=capsys)
    assert (code, err) == (0, "")
    assert lines[0] == "old.csv: 1 result added, 0 already there"
    got = stored(url)[0]["r1"]
    assert (got["schema_version"], got["images_per_sec"], got["latency_ms_p99"]) == (
        version, 1000.0, 9.5)
    # A column the version did not have is empty, never 0.
    assert got["allreduce_ms"] == (3.5 if "allreduce_ms" in header else None)
    assert got["max_grad_rel_diff"] == (0.001 if "max_grad_rel_diff" in header else None)


def test_importing_again_adds_nothing(store_url, tmp_path, capsys):
    write_csv(tmp_path / "a.csv", [row("r1"), row("r2", status="oom", images_per_sec="")])
    code, lines, _ = run_import(store_url, "a.csv", capsys=capsys)
    assert code == 0 and lines[0] == "a.csv: 2 results added, 0 already there"
    write_csv(tmp_path / "a.csv", [row("r1"), row("r2", status="oom", images_per_sec=""),
                                   row("r3")])
    code, lines, _ = run_import(store_url, "a.csv", capsys=capsys)
    assert code == 0 and lines[0] == "a.csv: 1 result added, 2 already there"
    assert lines[-1] == "History: 1 result added to %s, 2 already there" % location.describe(
        store_url)
    results = stored(store_url)[0]
    assert sorted(results) == ["r1", "r2", "r3"]
    assert results["r2"]["status"] == "oom" and results["r2"]["images_per_sec"] is None
    assert {r["source"] for r in results.values()} == {"import"}


def test_an_import_keeps_the_levels_the_listing_after_it_reads(store_url, tmp_path, capsys,
                                                                monkeypatch):
    """The first listing after a large import would find every series' change points (2 s on
    1,000 series): the import finds them once, and the listing after it finds none."""
    from tfbench.history import changes
    write_csv(tmp_path / "a.csv", [row("r%d" % i, hostname=host, images_per_sec=str(1000 + i))
                                   for i, host in enumerate(["node1", "node1", "node2"])])
    assert run_import(store_url, "a.csv", capsys=capsys)[0] == 0
    s = Store(store_url)
    try:
        with s.engine.connect() as conn:
            kept = conn.execute(sa.select(schema.series_levels)).mappings().all()
    finally:
        s.close()
    assert sorted(r["figure"] for r in kept) == ["images_per_sec"] * 2   # one per host's series
    calls = []
    found = changes.find_changes
    monkeypatch.setattr(changes, "find_changes", lambda *a, **k: calls.append(1) or found(*a, **k))
    assert cli.main(["tfbench", "history", "--history", store_url]) == 0
    assert calls == []
    assert "2 series of images_per_sec" in capsys.readouterr().out


def test_a_newer_csv_is_refused_and_the_others_import(tmp_path, capsys):
    url = location.url_for(str(tmp_path / "h.sqlite"))
    write_csv(tmp_path / "newer.csv", [row("n1", future_figure="1")],
              list(COLUMN_NAMES) + ["future_figure"])
    write_csv(tmp_path / "ok.csv", [row("r1")])
    code, lines, err = run_import(url, "newer.csv", "ok.csv", capsys=capsys)
    assert lines[0] == ("newer.csv: refused: columns this tfbench does not know (future_figure): "
                        "a newer tfbench wrote it; import it with that one")
    assert lines[1] == "ok.csv: 1 result added, 0 already there"
    assert code == 2
    assert err == "tfbench: error: history import: 1 file could not be read (above): newer.csv\n"
    assert list(stored(url)[0]) == ["r1"]


def test_what_is_not_tfbench_s_is_refused_in_a_line_each(tmp_path, capsys):
    url = location.url_for(str(tmp_path / "h.sqlite"))
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "table.csv").write_text("model,images/sec\nresnet50,100\n")
    (tmp_path / "broken.json").write_text("{\"run_id\": ")
    (tmp_path / "other.json").write_text("{\"a\": 1}")
    (tmp_path / "binary.csv").write_bytes(b"\xff\xfe\x00garbage")
    write_csv(tmp_path / "validate.csv", [{"host": "h"}], ["host", "subject", "check", "status",
                                                           "reason", "figure", "expectation",
                                                           "value", "expected"])
    write_csv(tmp_path / "ok.csv", [row("r1"), {**row(""), "images_per_sec": "5"}])
    code, lines, err = run_import(url, "notes.txt", "table.csv", "broken.json", "other.json",
                                  "binary.csv", "validate.csv", "missing.csv", "ok.csv",
                                  capsys=capsys)
    assert lines[:8] == [
        "notes.txt: refused: not a results CSV or a JSON manifest tfbench writes",
        "table.csv: refused: not a tfbench results CSV (its header does not start "
        "schema_version,run_id)",
        "broken.json: refused: not valid JSON (line 1)",
        "other.json: refused: not a tfbench run manifest (<run_id>.json with its csv_row) or "
        "validate.json",
        "binary.csv: refused: not a text file",
        "validate.csv: refused: a validation's verdicts: import the validate.json beside it",
        "missing.csv: refused: no such file or directory",
        "ok.csv: 1 result added, 0 already there; refused 1: a row without a run_id"]
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("tfbench: error: history import: 7 files could not be read (above): "
                          "notes.txt, table.csv, broken.json, ...")
    assert "Traceback" not in "\n".join(lines) + err


def test_nothing_readable_exits_2(tmp_path, capsys):
    url = location.url_for(str(tmp_path / "h.sqlite"))
    (tmp_path / "empty").mkdir()
    code, lines, err = run_import(url, "empty", capsys=capsys)
    assert code == 2
    assert lines[0] == ("empty: refused: no tfbench results CSV, run manifest or validate.json "
                        "in it")
    assert err.startswith("tfbench: error: history import: 1 file could not be read")


# --- manifests --------------------------------------------------------------------------------
def test_a_manifest_beside_a_row_gives_it_its_environment(store_url, tmp_path, capsys):
    rows = [row("r1"), row("r2")]
    write_csv(tmp_path / "tfbench_results.csv", rows)
    write_manifest(tmp_path / "tfbench_runs", rows[0], driver="580.65.06", latency_ms_min=1.25)
    code, lines, _ = run_import(store_url, "tfbench_results.csv", capsys=capsys)
    assert code == 0
    assert lines[0] == ("tfbench_results.csv: 2 results added, 0 already there (environment "
                        "from 1 manifest)")
    results, facts, _ = stored(store_url)
    assert facts == {"r1": {"NVIDIA driver": "580.65.06", "GPUs on the host (NVML)": H100}}
    assert results["r1"]["latency_ms_min"] == 1.25       # a figure only the manifest keeps
    assert results["r1"]["gpu_uuids"] == "GPU-1" and results["r2"]["gpu_uuids"] is None


def test_a_manifest_alone_is_a_result(tmp_path, capsys):
    url = location.url_for(str(tmp_path / "h.sqlite"))
    write_manifest(tmp_path / "runs", row("r1"))
    write_manifest(tmp_path / "runs", row("w2"))
    worker = json.loads((tmp_path / "runs" / "w2.json").read_text())
    worker["chief"] = False   # another worker's own manifest of a multi-worker run
    (tmp_path / "runs" / "w2.json").write_text(json.dumps(worker))
    code, lines, _ = run_import(url, "runs/r1.json", "runs/w2.json", capsys=capsys)
    assert lines[:2] == ["runs/r1.json: 1 result added, 0 already there",
                         "runs/w2.json: 0 results added, 0 already there; refused 1: a worker's "
                         "own row of a multi-worker run (the run is its chief's result)"]
    assert code == 0
    results, facts, _ = stored(url)
    assert list(results) == ["r1"] and facts["r1"]["NVIDIA driver"] == "570.86.15"


# --- directories ------------------------------------------------------------------------------
def sweep_dir(top, name="sweep.csv"):
    rows = [row("s1", batch_size="32"), row("s2", batch_size="64", status="oom",
                                            images_per_sec="")]
    write_csv(top / name, rows)
    for i, r in enumerate(rows):
        write_csv(top / "points" / ("p%d.csv" % i), [r])
        write_manifest(top / "runs", r)
    write_csv(top / "points.csv", [{"index": "0"}], ["index", "name", "run_id", "status",
                                                     "images_per_sec"])
    (top / "logs").mkdir()
    (top / "logs" / "p0.log").write_text("log\n")
    write_csv(top / "batch_size.csv", [{"model": "resnet50"}], ["model", "images/sec"])
    return rows


def test_a_sweep_directory_is_the_sweep_s(store_url, tmp_path, capsys):
    sweep_dir(tmp_path / "study")
    code, lines, err = run_import(store_url, "study", capsys=capsys)
    assert (code, err) == (0, "")
    assert lines[:-1] == [
        "study/sweep.csv: 2 results added, 0 already there (environment from 2 manifests)",
        "study: 2 more files hold only results read above (points/p0.csv, points/p1.csv)"]
    results, facts, _ = stored(store_url)
    assert {r["source"] for r in results.values()} == {"sweep"}
    assert set(facts) == {"s1", "s2"}
    code, lines, _ = run_import(store_url, "study", capsys=capsys)
    assert lines[0] == ("study/sweep.csv: 0 results added, 2 already there (environment from 2 "
                        "manifests)")


def test_an_evaluation_directory_is_the_evaluation_s(tmp_path, capsys):
    url = location.url_for(str(tmp_path / "h.sqlite"))
    top = tmp_path / "eval"
    sweep_dir(top, "evaluation.csv")
    write_csv(top / "evaluation.csv.replaced", [row("e0", status="error", images_per_sec="")])
    (top / "evaluation.json").write_text(json.dumps({"settings": {}}))
    (top / "report").mkdir()
    (top / "report" / "browser_check.json").write_text(json.dumps({"ok": True}))
    write_csv(top / "report" / "results.csv", [{"Model": "resnet50"}], ["Model", "images/sec"])
    code, lines, _ = run_import(url, "eval", capsys=capsys)
    assert code == 0
    assert lines[:2] == [
        "eval/evaluation.csv: 2 results added, 0 already there (environment from 2 manifests)",
        "eval/evaluation.csv.replaced: 1 result added, 0 already there"]
    assert {r["source"] for r in stored(url)[0].values()} == {"evaluate"}


def test_a_validate_directory_adds_its_runs_and_its_verdicts(store_url, tmp_path, capsys):
    top = tmp_path / "val"
    child = row("v1", hostname="node1")
    write_csv(top / "children.csv", [child])
    write_csv(top / "points" / "figures.csv", [child])
    write_manifest(top / "runs" / "figures", child, driver="580.65.06")
    (top / "runs" / "health.json").write_text(json.dumps({"gpus": []}))
    checks = [{"host": "node1", "subject": "GPU 0", "check": "health", "status": "PASS",
               "reason": "ok", "figure": "temperature 40 C", "expectation": "< 85 C",
               "value": 40.0, "expected": 85.0},
              {"host": "node1", "subject": "host", "check": "figures", "status": "FAIL",
               "reason": "below_range", "figure": "images/sec 900", "expectation": ">= 1000",
               "value": 900.0, "expected": None}]
    (top / "validate.json").write_text(json.dumps({
        "schema": "tfbench.validate", "schema_version": 1, "level": "quick", "host": "node1",
        "started": "2026-10-01T00:00:00Z", "rows": checks}))
    write_csv(top / "validate.csv", checks, list(checks[0]))
    code, lines, _ = run_import(store_url, "val", capsys=capsys)
    assert code == 0
    assert lines[:-1] == [
        "val/children.csv: 1 result added, 0 already there (environment from 1 manifest)",
        "val: 1 more file holds only results read above (points/figures.csv)",
        "val/validate.json: 2 verdicts added, 0 already there"]
    assert lines[-1].endswith(", 0 already there, 2 verdicts added")
    results, facts, verdicts = stored(store_url)
    assert results["v1"]["source"] == "validate"
    assert facts["v1"]["NVIDIA driver"] == "580.65.06"    # from runs/<step>/
    assert [(v["validation_id"], v["status"], v["value"], v["expected"]) for v in verdicts] == [
        ("node1@2026-10-01T00:00:00Z", "PASS", 40.0, 85.0),
        ("node1@2026-10-01T00:00:00Z", "FAIL", 900.0, None)]
    code, lines, _ = run_import(store_url, "val/validate.json", capsys=capsys)
    assert lines[0] == "val/validate.json: 0 verdicts added, 2 already there"


def test_a_launch_directory_keeps_a_multi_worker_run_as_one_result(store_url, tmp_path,
                                                                   capsys):
    launch = "tfbench launch --hosts=node1,node2 -- --model=resnet50"
    chief = row("c1", hostname="node1", num_workers="2", command=launch, power_w_mean="700",
                peak_mem_gb="30", images_per_sec="1900")
    other = row("c2", hostname="node2", num_workers="2", command=launch, power_w_mean="650",
                peak_mem_gb="41", images_per_sec="1800")
    alone = row("a1", hostname="node1", command=launch.replace("node1,node2", "node1"))
    write_csv(tmp_path / "fleet" / "rows.csv", [chief, other, alone])
    code, lines, _ = run_import(store_url, "fleet", capsys=capsys)
    assert code == 0 and lines[0] == "fleet/rows.csv: 2 results added, 0 already there"
    results = stored(store_url)[0]
    assert sorted(results) == ["a1", "c1"]
    run = results["c1"]
    assert (run["source"], run["worker_count"], run["machine"]) == ("launch", 2, "node1,node2")
    assert (run["images_per_sec"], run["power_w_mean"], run["peak_mem_gb"]) == (
        1900.0, 1350.0, 41.0)


# --- a real sweep -----------------------------------------------------------------------------
@pytest.mark.slow
def test_a_real_sweep_s_directory_imports_with_its_environment(tmp_path, capsys):
    """The layout the tests above build, as tfbench sweep writes it (one point: a child each)."""
    code, out = run_cli(["sweep", "--sweep=batch_size=2", "--out_dir=study", "--csv_file=",
                         "--device=cpu", "--model=trivial", "--image_size=16",
                         "--num_batches=2", "--num_warmup_batches=1"], tmp_path)
    assert code == 0, out
    run_id, = [r["run_id"] for r in read_rows(tmp_path / "study" / "sweep.csv")]
    assert os.path.isfile(tmp_path / "study" / "runs" / (run_id + ".json"))
    url = location.url_for(str(tmp_path / "h.sqlite"))
    code, lines, err = run_import(url, "study", capsys=capsys)
    assert (code, err) == (0, "")
    assert lines[:2] == [
        "study/sweep.csv: 1 result added, 0 already there (environment from 1 manifest)",
        "study: 1 more file holds only results read above (points/%s)"
        % os.listdir(tmp_path / "study" / "points")[0]]
    results, facts, _ = stored(url)
    assert list(results) == [run_id]
    assert (results[run_id]["source"], results[run_id]["batch_size"]) == ("sweep", 2)
    assert facts[run_id]["TensorFlow"].startswith("2.")
    code, lines, _ = run_import(url, "study", capsys=capsys)
    assert lines[0].startswith("study/sweep.csv: 0 results added, 1 already there")
