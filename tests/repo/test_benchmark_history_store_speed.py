"""benchmarks/history_store_speed.py: the results it writes are what its figures claim (the
benchmark itself runs outside the test suite)."""

import paths  # noqa: F401  (benchmarks/ on sys.path)
import history_store_speed as bench
from tfbench.history import readers, record
from tfbench.output.csv_out import COLUMN_NAMES


def test_the_rows_are_the_series_asked_for_every_column_filled(tmp_path):
    path = tmp_path / "results.csv"
    assert bench.write_csv(str(path), 300, 60) == 300
    rows, refused = readers.read_csv(str(path))
    assert len(rows) == 300 and refused == []
    assert len({r["run_id"] for r in rows}) == 300
    results = record.from_rows(rows, "import")
    series = {(r.workers[0].row["model"], r.workers[0].row["batch_size"], r.workers[0].hostname)
              for r in results}
    assert len(series) == 60                                   # 5 runs of each
    assert all(r[c] != "" for r in rows for c in COLUMN_NAMES if c not in (
        "error", "serving_path", "trt_mode"))                  # as a GPU run fills them
    times = [r["timestamp"] for r in rows]
    assert times == sorted(times)                              # runs in time order
