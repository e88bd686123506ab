"""sweep.study: the Sweep's paths, the directory it refuses, and the points it stops on before
or at the first child (the whole study through the CLI: tests/cli/test_sweep.py)."""

import os
import sys

import pytest

from tfbench import errors
from tfbench.sweep.grid import Axis, Point
from tfbench.sweep.study import Sweep, SweepConfig

# A child that refuses its flags as tfbench does: exit code 2, no row.
REFUSING_CHILD = (sys.executable, "-c", "import sys; print('tfbench: error: bad'); sys.exit(2)")


def _point(name="001_model-trivial", **flags):
    return Point(index=1, repeat=1, values=dict(flags), flags=dict(flags), name=name)


def test_where_a_study_writes(tmp_path):
    config = SweepConfig(["--device=cpu"], [Axis(("model", "batch_size"), (("a", "1"),)),
                                            Axis(("num_gpus",), (("2",),))], str(tmp_path))
    assert config.runs_dir == str(tmp_path / "runs")
    assert config.rows_path == str(tmp_path / "sweep.csv")
    assert config.keys == ["model", "batch_size", "num_gpus"]
    other = SweepConfig([], [], str(tmp_path), json_dir="/j", rows_file="evaluation.csv")
    assert (other.runs_dir, other.rows_path) == ("/j", str(tmp_path / "evaluation.csv"))


def test_a_directory_that_holds_a_study_is_refused(tmp_path):
    sweep = Sweep(SweepConfig([], [], str(tmp_path)))
    sweep.prepare()
    assert sorted(os.listdir(tmp_path)) == ["logs", "points"]
    (tmp_path / "sweep.csv").write_text("")
    with pytest.raises(errors.UsageError) as caught:
        sweep.prepare()
    assert str(caught.value) == ("%s already holds a sweep (sweep.csv); choose another "
                                 "--out_dir" % tmp_path)


def test_a_point_its_child_would_refuse_stops_the_study_before_anything_runs(tmp_path):
    sweep = Sweep(SweepConfig(["--use_fp16"], [], str(tmp_path / "s")))
    with pytest.raises(errors.UsageError) as caught:
        sweep.run([_point("002_precision-fp32", precision="fp32")])
    assert str(caught.value) == ("point 002_precision-fp32: --use_fp16 asks for fp16 but "
                                 "--precision=fp32: give only one")
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_a_usage_error_in_the_first_point_stops_the_study(tmp_path):
    sweep = Sweep(SweepConfig(["--device=cpu"], [], str(tmp_path), child_cmd=REFUSING_CHILD))
    with pytest.raises(errors.UsageError) as caught:
        sweep.run([_point(), _point("002_model-other", model="trivial")])
    assert str(caught.value).startswith("the first point failed with a usage error: ")
    assert "(log: %s)" % (tmp_path / "logs" / "001_model-trivial.log") in str(caught.value)
    assert [r.point.name for r in sweep.records] == ["001_model-trivial"]   # the second never ran
