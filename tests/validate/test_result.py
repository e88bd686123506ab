"""validate.json and validate.csv (tfbench.validate.result): written whole after every step,
read back by load() into the same rows; a file that is not a validation is refused in one line."""

import csv
import json
import math
import re

import pytest

from tfbench import errors
from tfbench.validate import result
from tfbench.validate.verdicts import Check


def _rows():
    return [Check("h1", "GPU 5", "step_alone", "FAIL", "straggler",
                  "step alone 1.31x the median of 8 devices", "at most 1.05x", 1.31, 1.05),
            Check("h1", "/cpu:2", "gradients", "FAIL", "wrong_results", "max_rel_diff inf",
                  "bit-exact", math.inf, 0.0),
            Check("h1", "host", "health", "SKIP", "not_reported", "no NVIDIA driver", "NVML")]


def _result(tmp_path):
    res = result.Result(str(tmp_path), {"level": "quick", "tolerance_pct": 5.0, "host": "h1",
                                        "plan": [{"name": "health"}]})
    res.add(result.StepRecord("health", result.STEP_OK, 0.5, "python -m x", "logs/health.log"),
            _rows()[2:])
    return res


def test_written_after_a_step_without_an_end_then_finished(tmp_path):
    res = _result(tmp_path)
    res.write()
    data = json.loads((tmp_path / "validate.json").read_text())
    assert (data["schema"], data["schema_version"], data["level"]) == (
        "tfbench.validate", 1, "quick")
    assert data["finished"] is None and data["exit_code"] is None
    assert data["status"] == "PASS"      # a SKIP alone passes
    assert [s["name"] for s in data["steps"]] == ["health"]
    res.add(result.StepRecord("devices", result.STEP_OK, 9.0, "tfbench ...", "logs/d.log"),
            _rows()[:2])
    res.finished = "2026-01-01T00:00:00+00:00"
    res.write()
    data = json.loads((tmp_path / "validate.json").read_text())
    assert (data["status"], data["exit_code"]) == ("FAIL", 8)
    # inf has no JSON: the number is null, the figure says it
    assert data["rows"][2]["value"] is None and data["rows"][2]["figure"] == "max_rel_diff inf"


def test_load_gives_back_the_rows(tmp_path):
    res = _result(tmp_path)
    res.add(result.StepRecord("devices", result.STEP_OK, 9.0, "", ""), _rows()[:2])
    res.measured = {"key": {"model": "trivial"}, "figures": {"images_per_sec": [1.0, 2.0]}}
    res.write()
    for path in (tmp_path, tmp_path / "validate.json"):
        meta, rows = result.load(str(path))
        assert rows[0] == _rows()[2] and rows[1] == _rows()[0]
        assert rows[2].value is None and rows[2].reason == "wrong_results"
        assert meta["measured"]["figures"]["images_per_sec"] == [1.0, 2.0]
        assert "rows" not in meta and meta["host"] == "h1"


def test_one_csv_row_per_check(tmp_path):
    res = _result(tmp_path)
    res.add(result.StepRecord("devices", result.STEP_OK, 9.0, "", ""), _rows()[:2])
    res.write()
    with open(tmp_path / "validate.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["host", "subject", "check", "status", "reason", "figure",
                             "expectation", "value", "expected"]
    assert [(r["subject"], r["reason"], r["value"]) for r in rows] == [
        ("host", "not_reported", ""), ("GPU 5", "straggler", "1.31"),
        ("/cpu:2", "wrong_results", "inf")]


@pytest.mark.parametrize("text, message", [
    (None, "no such file"), ("not json", "not a tfbench validate.json (JSONDecodeError)"),
    ('{"schema": "other"}', 'no "schema": "tfbench.validate"'),
    ('{"schema": "tfbench.validate", "schema_version": 2}', "schema_version 2; this tfbench "
                                                           "reads up to 1"),
    ('{"schema": "tfbench.validate", "schema_version": 1, "rows": [{"host": "h", "subject": '
     '"s", "check": "c", "status": "MAYBE", "reason": "ok", "figure": "", "expectation": ""}]}',
     "a row is not a validate row")])
def test_what_is_not_a_validation_is_refused_in_one_line(tmp_path, text, message):
    path = tmp_path / "validate.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(errors.UsageError, match=re.escape(message)) as info:
        result.load(str(path))
    assert "\n" not in str(info.value)
