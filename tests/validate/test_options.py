"""The options of a validation (tfbench.validate.options), as `tfbench launch -- validate`
reads them: one line and exit code 2 for each bad one, nothing started."""

import re

import pytest

from tfbench import errors
from tfbench.cli import launch as launch_cli
from tfbench.validate import options as validate_options


def _build(args, hosts="h1,h2"):
    return launch_cli.build_validate(["--hosts=" + hosts, "--rsh=sh", "--", "validate"] + args)


def test_validate_options_and_benchmark_flags_mix_and_every_host_gets_the_options(tmp_path):
    baseline = tmp_path / "earlier.json"
    baseline.write_text('{"schema": "tfbench.validate"}\n')
    cfg, opts = _build(["--model=resnet50", "--level=standard", "--baseline=%s" % baseline,
                        "--num_batches=20", "--tolerance_pct=3", "--csv_file=mine.csv"])
    assert cfg.flags == ["--model=resnet50", "--num_batches=20"] and cfg.csv_file == "mine.csv"
    assert opts.host_args == ["--level=standard", "--tolerance_pct=3"]
    assert opts.baseline_text == baseline.read_text() and opts.tolerance_pct == 3.0
    assert opts.host_timeout == 3 * 900.0
    assert cfg.command.startswith("tfbench launch --hosts=h1,h2 --rsh=sh -- validate ")
    _, opts = _build(["--level=long", "--soak_minutes=10", "--host_timeout_secs=99"])
    assert opts.host_args == ["--level=long", "--tolerance_pct=5", "--soak_minutes=10"]
    assert opts.host_timeout == 99.0


@pytest.mark.parametrize("args,needle", [
    (["--level=fast"], "--level=fast: choose one of quick, standard, long"),
    (["--tolerance_pct=51"], "--tolerance_pct=51: give a percentage from 0 to 50"),
    (["--tolerance_pct=-1"], "--tolerance_pct=-1: give a percentage from 0 to 50"),
    (["--min_efficiency_pct=0"], "--min_efficiency_pct=0: give a percentage in (0, 100]"),
    (["--soak_minutes=5"], "--soak_minutes is the soak of --level=long (got --level=quick)"),
    (["--level=long", "--soak_minutes=0"], "--soak_minutes=0: give minutes > 0"),
    (["--step_timeout_sec=0"], "--step_timeout_sec=0: give seconds above 0"),
    (["--baseline=/no/such.json"], "--baseline=/no/such.json: no such file"),
    (["--baseline=history"], "--baseline=history is one host's: run tfbench validate "
                             "--baseline=history on each host"),
    (["--out_dir=x"], "validate --out_dir=x: over several hosts the results go to tfbench "
                      "launch's --out_dir (before --)"),
    (["--host_timeout_secs=0"], "--host_timeout_secs=0: give seconds above 0"),
    (["--task_index=1"], "--task_index is set by tfbench launch"),
    (["--variable_update=replicated"], "runs MultiWorkerMirroredStrategy"),
    (["--num_batches=0"], "--num_batches must be a positive integer"),
    (["stray"], "unexpected argument 'stray'"),
])
def test_bad_options_are_one_usage_error(args, needle):
    with pytest.raises(errors.UsageError, match=re.escape(needle)):
        _build(args)


def test_hosts_named_twice_on_gpus_and_a_scaling_series_are_refused(tmp_path):
    with pytest.raises(errors.UsageError, match="--hosts names h more than once"):
        _build([], hosts="h,h")
    _build(["--device=cpu"], hosts="h,h")     # tasks of one CPU host: the tests' clusters
    with pytest.raises(errors.UsageError, match="--sweep_hosts runs a scaling series"):
        launch_cli.build_validate(["--hosts=a,b", "--rsh=sh", "--sweep_hosts=1,2", "--",
                                   "validate"])
    big = tmp_path / "big.csv"
    big.write_text("x" * (65 * 1024))
    with pytest.raises(errors.UsageError, match=r"big\.csv is 65 KiB: over several hosts it "
                                                r"travels in each host's command"):
        _build(["--baseline=%s" % big])


def test_options_of_one_host_only_are_not_on_launchs_parser():
    import argparse
    one, over = argparse.ArgumentParser(), argparse.ArgumentParser()
    validate_options.add_options(one, over_hosts=False)
    validate_options.add_options(over, over_hosts=True)
    assert "--host_timeout_secs" not in one.format_help()
    assert "--host_timeout_secs" in over.format_help() and "--out_dir" in over.format_help()
