"""`tfbench allreduce` (tfbench.cli.allreduce): its size flags and its table."""

import pytest

from tfbench.cli import allreduce as cli
from tfbench.distribute import allreduce_probe
from tfbench.errors import UsageError


@pytest.mark.parametrize("text,value", [("8", 8), ("1K", 1024), ("64M", 64 << 20),
                                        ("1g", 1 << 30), ("2 KiB", 2048)])
def test_sizes_are_read_as_all_reduce_perf_reads_them(text, value):
    assert cli.parse_bytes(text, "max_bytes") == value


def test_a_bad_size_is_one_error_line(capsys):
    from tfbench.cli import main
    assert main(["tfbench", "allreduce", "--max_bytes=12Q"]) == 2
    err = capsys.readouterr().err
    assert err == ("tfbench: error: --max_bytes=12Q: give a size such as 8, 1K, 64M or 1G\n")
    with pytest.raises(UsageError, match="--min_bytes <= --max_bytes"):
        cli.run(["--min_bytes=1M", "--max_bytes=1K"])


def test_the_table_shows_each_set_and_no_bandwidth_for_sums_at_variables():
    summary = {"median_ms": 2.0, "spread_pct": 12.5}
    probe = type("Probe", (), {"timings": [
        allreduce_probe.Timing("resnet50 gradients", 161, 102228128, "float16", 8, (0.002,),
                               summary),
        allreduce_probe.Timing("m gradients", 4, 92, "float32", 2, (0.002,), summary,
                               at_variables=True)]})()
    lines = cli.table_lines(probe)
    assert lines[0].split()[:3] == ["tensors", "size", "count"]
    assert lines[1].split() == ["resnet50", "gradients", "97.5", "MiB", "161", "float16",
                                "2.000", "51.11", "89.45", "12.5"]
    assert lines[2].split()[-3:] == ["-", "-", "12.5"]


def test_a_flagfile_may_hold_the_probes_own_options(tmp_path):
    # Read before the split, as sweep and evaluate read theirs (tfbench.cli.guard).
    preset = tmp_path / "probe.flags"
    preset.write_text("--model=trivial\n--max_bytes=12Q\n")
    with pytest.raises(UsageError, match=r"^--max_bytes=12Q: give a size"):
        cli.run(["--flagfile=%s" % preset])


def test_the_help_holds_the_probes_own_counts():
    # Kept in the command so that its help and a bad flag need no TensorFlow.
    assert (cli.PER_SYNC, cli.REPEATS, cli.WARMUP) == (
        allreduce_probe.PER_SYNC, allreduce_probe.REPEATS, allreduce_probe.WARMUP)


@pytest.mark.slow
def test_without_max_bytes_the_sizes_are_the_devices():
    from tfbench.config.settings import make_settings
    from tfbench.engine import actions, allreduce_run
    p = make_settings({"device": "cpu", "num_gpus": 2, "model": "trivial"})
    with pytest.raises(UsageError, match=r"^sizes: --min_bytes=2097152 is above the largest "
                                         r"size on CPU devices \(1 MiB\): give --max_bytes too"):
        allreduce_run.allreduce_probe_run(p, actions.checked_facts(p),
                                          allreduce_run.Sizes(2 << 20, None))


@pytest.mark.slow
def test_the_probe_options_of_a_run_are_refused_as_a_run_refuses_them():
    # The benchmark flags are a run's: what a run refuses, the probe refuses before it starts.
    with pytest.raises(UsageError) as caught:
        cli.run(["--device=cpu", "--num_gpus=2", "--model=trivial", "--validate_devices",
                 "--validate_device_checks=bogus"])
    assert str(caught.value) == ("--validate_device_checks=bogus: give one or more of "
                                 "step,kernels,numeric")
