"""The history under load and faults (issue 44, section 4), on SQLite and PostgreSQL: 8 processes
writing at once lose no result; a writer killed (kill -9) inside its transaction leaves the store
as it was; a store that is locked, full, read-only or unreachable never costs the run: its CSV
row and manifest are written, one line says the history was not, with the exact `tfbench history
import` command that adds it later, and the run's exit status stays its own."""

import os
import shlex
import signal
import sqlite3
import threading
import time

import pytest
import sqlalchemy as sa

import zygote
from helpers import SUPPORT, free_ports, only_row, run_cli
from history_stores import backend, read_only, sqlite_path, store_url  # noqa: F401 - fixture
from tfbench import cli
from tfbench.history import errors as history_errors, location, record, schema
from tfbench.history import store as store_module
from tfbench.history.store import Store

pytestmark = pytest.mark.slow

WRITER = os.path.join(SUPPORT, "history_writer.py")
EXCEPTION_TEXT = ("Error", "Exception", "Traceback", "sqlite3", "psycopg", "sqlalchemy",
                  "errno", "[SQL")


def writer(url, index, count, path, mode="add"):
    """A writer process (a fork of the tests' server, tests/support/zygote.py)."""
    return zygote.start([url, str(index), str(count), str(path), mode], os.getcwd(),
                        dict(os.environ), script=WRITER)


def contents(url):
    """(results run ids, result_workers (run id, worker) pairs, the shared run's row)."""
    s = Store(url)
    try:
        with s.engine.connect() as conn:
            ids = sorted(conn.execute(sa.select(schema.results.c.run_id)).scalars())
            workers = sorted(tuple(r) for r in conn.execute(sa.select(
                schema.result_workers.c.run_id, schema.result_workers.c.worker)))
            shared = conn.execute(sa.select(schema.results).where(
                schema.results.c.run_id == "shared")).mappings().first()
        return ids, workers, shared
    finally:
        s.close()


def test_eight_processes_writing_at_once_lose_nothing(store_url, tmp_path):
    """A new store (its tables made by whichever writer comes first), 8 writers started at
    once, each adding its worker's row of one shared run and 10 results."""
    start, count = tmp_path / "start", 10
    procs = [writer(store_url, i, count, start) for i in range(8)]
    time.sleep(3.0)   # every writer up and waiting
    start.write_text("go")
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, outs
    lines = [ln for out in outs for ln in out.splitlines()]
    assert len(lines) == 8 * (count + 1)
    assert all(ln.startswith(("History: result added to ", "History: workers' rows added "))
               for ln in lines), lines
    ids, workers, shared = contents(store_url)
    assert ids == sorted(["w%d-%d" % (i, j) for i in range(8) for j in range(count)]
                         + ["shared"])
    assert [w for w in workers if w[0] == "shared"] == [
        ("shared", "host%d#shared-%d" % (i, i)) for i in range(8)]
    # Every worker's row combined into the one result, as the figure table declares.
    assert shared["worker_count"] == 8 and shared["power_w_mean"] == 800.0


def test_a_new_store_opened_by_eight_at_once_is_made_once(store_url):
    """Its tables made by one opener, the others waiting for them (threads: they meet the
    database within a millisecond, which processes started together on 2 cores rarely do)."""
    barrier, failed = threading.Barrier(8), []

    def open_it():
        barrier.wait()
        try:
            Store(store_url).close()
        except Exception as exc:  # noqa: BLE001 - collected and shown
            failed.append(type(exc).__name__)
    threads = [threading.Thread(target=open_it) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert failed == []
    assert contents(store_url)[0] == []


def test_a_writer_killed_inside_its_transaction_leaves_the_store_as_it_was(store_url, tmp_path):
    s = Store(store_url)
    s.add(record.from_rows([{"run_id": "before", "status": "ok"}], "run")[0])
    s.close()
    marker = tmp_path / "inside"
    proc = writer(store_url, 0, 1, marker, "hang")
    deadline = time.time() + 120
    while not marker.exists():
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[0]
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    ids, workers, _ = contents(store_url)
    assert ids == ["before"]
    assert [w[0] for w in workers] == ["before"]      # its worker row went with it
    if backend(store_url) == "sqlite":
        with sqlite3.connect(sqlite_path(store_url)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    # Nothing of it holds the store: the same result adds now (a lock left behind would wait).
    assert record.write(store_url, record.from_rows(
        [{"run_id": "killed", "status": "ok"}], "run")).startswith("History: result added")
    assert contents(store_url)[0] == ["before", "killed"]


# --- a store that cannot be written ------------------------------------------------------------
def check_line(line, where, files):
    assert line.startswith("History: not written to %s (" % where), line
    command = line.split("add it later with `", 1)[1].rstrip("`")
    assert command == "tfbench history import " + " ".join(
        shlex.quote(os.path.abspath(f)) for f in files)
    assert not any(t in line for t in EXCEPTION_TEXT), line
    return line[len("History: not written to %s (" % where):].split("): add it later")[0]


def result_for(run_id="r1"):
    """A result whose row takes pages of its own (a long command line)."""
    return record.from_rows([{"run_id": run_id, "status": "ok", "images_per_sec": "5",
                              "command": "tfbench " + "--flag=value " * 2000}], "run")


def test_a_locked_store_costs_one_line(store_url, tmp_path, monkeypatch):
    Store(store_url).close()
    monkeypatch.setattr(history_errors, "LOCK_WAIT_S", 0.3)
    files = [str(tmp_path / "tfbench_results.csv")]
    if backend(store_url) == "sqlite":
        holder = sqlite3.connect(sqlite_path(store_url), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")          # another writer, holding the lock
        release = holder.close
    else:   # another writer of the same run, holding its lock
        engine = sa.create_engine(store_url, poolclass=sa.pool.NullPool)
        holder = engine.connect()
        holder.execute(sa.text("SELECT pg_advisory_lock(:k)"),
                       {"k": store_module._lock_key("r1")})
        release = lambda: (holder.close(), engine.dispose())  # noqa: E731
    try:
        started = time.monotonic()
        line = record.write(store_url, result_for(), files)
        waited = time.monotonic() - started
    finally:
        release()
    assert check_line(line, location.describe(store_url), files) == \
        "another process held it locked for over 0.3 s"
    assert waited < 30
    assert record.write(store_url, result_for()).startswith("History: result added")


def test_a_full_store_costs_one_line(tmp_path, monkeypatch):
    url = location.url_for(str(tmp_path / "h.sqlite"))
    Store(url).close()
    with sqlite3.connect(sqlite_path(url)) as conn:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    connect = store_module._sqlite_connect

    def no_room(dbapi_connection, record_):   # as a disk with no page left
        connect(dbapi_connection, record_)
        dbapi_connection.execute("PRAGMA max_page_count = %d" % pages)
    monkeypatch.setattr(store_module, "_sqlite_connect", no_room)
    files = [str(tmp_path / "tfbench_results.csv"), str(tmp_path / "runs" / "r1.json")]
    line = record.write(url, result_for(), files)
    assert check_line(line, sqlite_path(url), files) == "the disk is full"
    monkeypatch.setattr(store_module, "_sqlite_connect", connect)
    assert contents(url)[0] == []
    assert record.write(url, result_for()).startswith("History: result added")


# --- a run whose store is read-only or unreachable ------------------------------------------------
RUN = ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=2",
       "--num_batches=2", "--num_warmup_batches=1"]


def run_and_check(tmp_path, history, where):
    """Runs with --history=`history`; the run's files and exit status are its own, one line
    before the footer gives the import command; returns that command's arguments."""
    code, out = run_cli(RUN + ["--history=" + history], tmp_path)
    assert code == 0, out
    row = only_row(tmp_path / "tfbench_results.csv")
    manifest = tmp_path / "tfbench_runs" / (row["run_id"] + ".json")
    assert manifest.is_file()
    lines = out.rstrip("\n").split("\n")
    said = [ln for ln in lines if ln.startswith("History:")]
    assert len(said) == 1 and lines.index(said[0]) < len(lines) - 3
    assert lines[-3:] == ["-" * 64, lines[-2], "-" * 64]
    reason = check_line(said[0], where, [str(tmp_path / "tfbench_results.csv"), str(manifest)])
    command = shlex.split(said[0].split("add it later with `", 1)[1].rstrip("`"))
    assert command[:3] == ["tfbench", "history", "import"]
    return reason, command[3:], row["run_id"]


def test_a_read_only_store_costs_the_run_nothing(tmp_path, capsys):
    path = tmp_path / "store" / "history.sqlite"
    url = location.url_for(str(path))
    Store(url).close()
    with read_only(str(path)):
        reason, paths, run_id = run_and_check(tmp_path, str(path), str(path))
        assert contents(url)[0] == []
    assert reason in ("the file is read-only for this user", "this user may not write there",
                      "the file cannot be opened or created")
    # The command it gave adds the run, once the store can be written.
    assert cli.main(["tfbench", "history", "import"] + paths + ["--history", url]) == 0
    assert "1 result added" in capsys.readouterr().out
    assert contents(url)[0] == [run_id]


def test_an_unreachable_server_costs_the_run_nothing(tmp_path):
    port, = free_ports(1)   # nothing listens there
    url = "postgresql://tfbench@127.0.0.1:%d/history" % port
    reason, _, _ = run_and_check(tmp_path, url, "postgresql://tfbench@127.0.0.1:%d/history"
                                 % port)
    assert reason == "the server refused the connection: is it running?"
