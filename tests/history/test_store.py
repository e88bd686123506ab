"""history.store on SQLite and PostgreSQL (tests/support/history_stores.py): a result added once
whatever adds it again, a multi-worker run one result combined as the figure table declares,
its workers kept; the schema follows the figure table; older stores migrated, newer refused."""

import json

import pytest
import sqlalchemy as sa

from history_stores import store, store_url  # noqa: F401 - fixtures
from tfbench import cli, figures
from tfbench.history import record, schema
from tfbench.history import store as store_module
from tfbench.history.store import HistoryVersionError, Store

H100 = "NVIDIA H100 80GB HBM3"


def row(run_id, **cells):
    base = {"run_id": run_id, "status": "ok", "model": "resnet50", "mode": "training",
            "batch_size": "64", "num_devices": "2", "device_kind": "gpu", "device_name": H100,
            "hostname": "node1", "timestamp": "2026-10-01T00:00:00+00:00",
            "images_per_sec": "1000.5"}
    base.update(cells)
    return base


def capture(host, driver="570.86.15", uuids=("GPU-a", "GPU-b"), visible=None):
    """An environment capture (a manifest's environment.before) of a host with two H100s."""
    env = {"hostname": host, "tensorflow": {"version": "2.21.0", "git_version": "v2.21.0"},
           "keras": {"version": "3.15.1"}, "cpu": {"model": "AMD EPYC 9654"},
           "os": {"kernel": "6.8.0"},
           "nvidia": {"driver_version": driver, "cuda_driver_version": "12.8",
                      "gpus": [{"nvml_index": i, "name": H100, "uuid": u}
                               for i, u in enumerate(uuids)]}}
    if visible is not None:   # as tfbench runs: CUDA numbering the GPUs in PCI order
        env["env_vars"] = {"CUDA_VISIBLE_DEVICES": visible, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    return env


def one(s, run_id):
    with s.engine.connect() as conn:
        return conn.execute(sa.select(schema.results).where(
            schema.results.c.run_id == run_id)).mappings().one()


def test_a_new_store_holds_its_version_and_every_table(store):
    with store.engine.connect() as conn:
        version = conn.execute(sa.select(schema.meta.c.value).where(
            schema.meta.c.key == "store_version")).scalar()
        tables = set(sa.inspect(conn).get_table_names())
    assert version == str(schema.STORE_VERSION)
    assert {"history_meta", "results", "result_workers", "environment",
            "validation_checks"} <= tables


def test_a_result_is_added_once(store):
    result = record.from_rows([row("r1")], "import")[0]
    assert store.add(result).outcome == "added"
    assert store.add(result).outcome == "already"
    # Through another door (the run's own record of it): still the one result.
    again = record.from_run(row("r1"), {}, {}, "r1", "run")
    assert store.add(again).outcome == "already"
    assert store.count() == 1
    assert one(store, "r1")["source"] == "import"


def test_many_results_at_once_and_a_run_id_twice(store, monkeypatch):
    monkeypatch.setattr(store_module, "BATCH", 4)   # several transactions of a few results
    results = record.from_rows([row("r%d" % i) for i in range(11)], "import")
    twice = results[:1] + results + results[:3]     # r0 twice in the first transaction's share
    outcomes = store.add_many(twice)
    assert [o.run_id for o in outcomes] == [r.run_id for r in twice]
    assert [o.outcome for o in outcomes] == ["added", "already"] + ["added"] * 10 + \
        ["already"] * 3
    assert store.count() == 11
    assert {o.outcome for o in store.add_many(results)} == {"already"}


def test_a_multi_worker_run_is_one_result_combined_as_the_figures_declare(store):
    # The chief's row and another worker's, as tfbench launch gathers them (its own run id).
    chief = row("run-a", hostname="node1", images_per_sec="3000", power_w_mean="700",
                peak_mem_gb="30", num_workers="2")
    other = row("run-b", hostname="node2", images_per_sec="2900", power_w_mean="650",
                peak_mem_gb="41", num_workers="2")
    envs = {"run-a": {"environment": {"before": capture("node1")}}}
    result, = record.from_rows([chief, other], "launch", envs, one_run=True)
    assert store.add(result).outcome == "added"
    got = one(store, "run-a")
    declared = {n: figures.BY_NAME[n].workers
                for n in ("images_per_sec", "power_w_mean", "peak_mem_gb")}
    assert declared == {"images_per_sec": "same", "power_w_mean": "sum", "peak_mem_gb": "max"}
    assert got["images_per_sec"] == 3000.0          # the chief's: the run's figure
    assert got["power_w_mean"] == 1350.0            # every worker's GPUs draw power
    assert got["peak_mem_gb"] == 41.0               # the fullest worker
    assert got["worker_count"] == 2 and got["machine"] == "node1,node2"
    with store.engine.connect() as conn:
        workers = conn.execute(sa.select(schema.result_workers).order_by(
            schema.result_workers.c.worker)).mappings().all()
    assert [(w["hostname"], w["gpu_uuids"]) for w in workers] == [
        ("node1", "GPU-a,GPU-b"), ("node2", None)]
    assert json.loads(workers[1]["row_json"])["peak_mem_gb"] == "41"
    assert store.count() == 1 and store.add(result).outcome == "already"


def test_a_worker_added_later_joins_the_result(store):
    chief = row("run-a", hostname="node1", power_w_mean="700", num_workers="2")
    other = row("run-b", hostname="node2", power_w_mean="650", num_workers="2")
    assert store.add(record.from_run(chief, {}, {}, "run-a")).outcome == "added"
    assert one(store, "run-a")["power_w_mean"] == 700.0
    both, = record.from_rows([chief, other], "launch", one_run=True)
    assert store.add(both).outcome == "updated"
    got = one(store, "run-a")
    assert (got["power_w_mean"], got["worker_count"], store.count()) == (1350.0, 2, 1)


def test_the_gpus_a_run_used_are_its_identity(store):
    env = capture("node1", uuids=("GPU-a", "GPU-b", "GPU-c"), visible="2,0")
    store.add(record.from_run(row("r1"), {}, {"before": env}, "r1"))
    got = one(store, "r1")
    assert (got["gpu_model"], got["gpu_count"]) == (H100, 2)
    assert got["gpu_uuids"] == "GPU-a,GPU-c" and got["cpu_model"] == "AMD EPYC 9654"


def test_the_environment_facts_are_stored(store):
    store.add(record.from_run(row("r1"), {}, {"before": capture("node1")}, "r1"))
    store.add(record.from_rows([row("r2")], "import")[0])   # a CSV row alone: no facts
    facts = store.environment()
    assert facts["r1"]["NVIDIA driver"] == "570.86.15"
    assert facts["r1"]["TensorFlow"] == "2.21.0 v2.21.0"
    assert facts["r1"]["Keras"] == "3.15.1" and facts["r1"]["Kernel"] == "6.8.0"
    assert facts["r1"]["GPUs on the host (NVML)"] == "2 x " + H100
    assert "Host" not in facts["r1"]       # the machine's identity, not a fact
    assert "r2" not in facts               # not 'no GPUs': nothing is known


def test_empty_cells_are_null_never_zero(store):
    failed = row("r1", status="oom", error="ResourceExhaustedError", images_per_sec="",
                 power_w_mean="", latency_ms_p50="nan", xla="")
    store.add(record.from_rows([failed], "import")[0])
    got = one(store, "r1")
    assert got["status"] == "oom" and got["error"] == "ResourceExhaustedError"
    for name in ("images_per_sec", "power_w_mean", "latency_ms_p50", "xla", "energy_j"):
        assert got[name] is None, name
    with store.engine.connect() as conn:
        zero = conn.execute(sa.text("SELECT count(*) FROM results WHERE images_per_sec = 0 "
                                    "OR power_w_mean = 0")).scalar()
    assert zero == 0


def test_a_figure_added_to_the_table_gets_its_column(store_url):
    # A store made before a figure existed: the column is missing until a tfbench that
    # declares the figure opens it.
    name = "max_grad_rel_diff"
    Store(store_url).close()
    engine = sa.create_engine(store_url, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        conn.exec_driver_sql('ALTER TABLE results DROP COLUMN "%s"' % name)
        assert name not in {c["name"] for c in sa.inspect(conn).get_columns("results")}
    s = Store(store_url)
    try:
        with s.engine.connect() as conn:
            assert name in {c["name"] for c in sa.inspect(conn).get_columns("results")}
        s.add(record.from_rows([row("r1", **{name: "0.25"})], "import")[0])
        assert one(s, "r1")[name] == 0.25
    finally:
        s.close()
        engine.dispose()


def _set_version(url, version):
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        conn.execute(schema.meta.update().where(schema.meta.c.key == "store_version")
                     .values(value=str(version)))
    engine.dispose()


def test_an_older_store_is_migrated_without_loss(store_url):
    s = Store(store_url)
    s.add(record.from_run(row("r1"), {}, {"before": capture("node1")}, "r1"))
    s.close()
    # An older store: an earlier version, without the tables added since.
    _set_version(store_url, schema.STORE_VERSION - 1)
    engine = sa.create_engine(store_url, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE validation_checks")
    engine.dispose()
    s = Store(store_url)
    try:
        with s.engine.connect() as conn:
            version = conn.execute(sa.select(schema.meta.c.value).where(
                schema.meta.c.key == "store_version")).scalar()
            assert "validation_checks" in sa.inspect(conn).get_table_names()
        assert version == str(schema.STORE_VERSION)
        assert s.count() == 1 and one(s, "r1")["images_per_sec"] == 1000.5
        assert s.environment()["r1"]["NVIDIA driver"] == "570.86.15"
    finally:
        s.close()


def test_a_newer_store_is_refused_in_one_line(store_url, capsys):
    Store(store_url).close()
    _set_version(store_url, schema.STORE_VERSION + 1)
    with pytest.raises(HistoryVersionError) as caught:
        Store(store_url)
    message = str(caught.value)
    assert "written by a newer tfbench (store version %d" % (schema.STORE_VERSION + 1) in message
    assert "\n" not in message
    code = cli.main(["tfbench", "history", "--history", store_url])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("tfbench: error: the history at ")
    assert "newer tfbench" in err


def test_frame_reads_some_columns_or_all(store):
    store.add_many(record.from_rows([row("r2", timestamp="2026-10-02T00:00:00+00:00"),
                                     row("r1")], "import"))
    frame = store.frame(columns=["run_id", "images_per_sec"])
    assert list(frame.columns) == ["run_id", "images_per_sec"]
    assert list(frame["run_id"]) == ["r1", "r2"]                # oldest first
    assert len(store.frame().columns) == len(schema.results.columns)
    assert store.frame(where=schema.results.c.run_id == "r2")["run_id"].tolist() == ["r2"]



def test_frame_reads_results_by_id(store):
    store.add_many(record.from_rows([row("r%d" % i, timestamp="2026-10-0%dT00:00:00+00:00"
                                         % (4 - i)) for i in range(1, 4)], "import"))
    ids = dict(zip(store.frame(columns=["run_id"])["run_id"], store.frame(columns=["id"])["id"]))
    frame = store.frame(columns=["id", "run_id"], ids=[ids["r3"], ids["r1"], ids["r3"]])
    assert list(frame.columns) == ["id", "run_id"]
    assert list(frame["run_id"]) == ["r1", "r3"]            # in id order, each once
    assert store.frame(columns=["id"], ids=[]).empty
