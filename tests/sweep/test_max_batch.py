"""Max batch size finder: the search itself, and OOM-safe probes in memory-capped children."""

import io
import subprocess
import sys
import textwrap

import pytest

from tfbench.config.argv import parse_settings
from tfbench.cli import sweep as sweep_cli
from tfbench import errors
from tfbench.children import process as child
from tfbench.sweep import max_batch
from tfbench.report import tables
import paths
from helpers import read_rows


@pytest.fixture(autouse=True)
def _in_a_temporary_directory(tmp_path, monkeypatch):
    """A sweep appends its rows to ./tfbench_results.csv as a run does: not in the checkout."""
    monkeypatch.chdir(tmp_path)


REPO = paths.ROOT


def fake_probe(max_fit, fail_at=None):
    calls = []

    def probe(batch):
        calls.append(batch)
        if fail_at is not None and batch == fail_at:
            return "error", "segfault"
        return ("ok", "") if batch <= max_fit else ("oom", "OOM")
    return probe, calls


@pytest.mark.parametrize("max_fit", [1, 2, 3, 7, 8, 100, 1000, 4095])
def test_search_finds_the_largest_fitting_batch(max_fit):
    probe, calls = fake_probe(max_fit)
    result = max_batch.search_max_batch(probe, start=1, limit=65536)
    assert result.max_batch == max_fit and not result.limit_reached and not result.error
    assert [b for b, _ in result.probes] == calls
    assert len(calls) <= 2 * max_fit.bit_length() + 2


def test_search_doubles_then_bisects():
    probe, calls = fake_probe(100)
    max_batch.search_max_batch(probe, start=1)
    assert calls == [1, 2, 4, 8, 16, 32, 64, 128, 96, 112, 104, 100, 102, 101]


def test_search_from_a_start_that_does_not_fit_halves_first():
    probe, calls = fake_probe(20)
    result = max_batch.search_max_batch(probe, start=256)
    assert result.max_batch == 20
    assert calls[:5] == [256, 128, 64, 32, 16]


def test_search_nothing_fits_limit_granularity_and_errors():
    probe, _ = fake_probe(0)
    assert max_batch.search_max_batch(probe, start=4).max_batch is None
    probe, calls = fake_probe(10 ** 6)
    result = max_batch.search_max_batch(probe, start=1, limit=64)
    assert (result.max_batch, result.limit_reached, calls[-1]) == (64, True, 64)
    probe, calls = fake_probe(100)
    result = max_batch.search_max_batch(probe, start=8, granularity=8)
    assert result.max_batch == 96 and all(b % 8 == 0 for b in calls)
    probe, _ = fake_probe(100, fail_at=64)
    result = max_batch.search_max_batch(probe, start=1)
    assert result.max_batch == 32
    assert result.error == "probe at batch 64 ended with status error: segfault"


# A child that really maps batch x 96 MB (48 MB in fp16) of address space, untouched so it costs
# no real memory. Under RLIMIT_AS the mapping fails with MemoryError (OSError from mmap, turned
# into MemoryError as an allocator would): uncaught (the 'die' model) it crashes with a traceback
# and no row; the 'row' model catches it and writes an oom row with exit code 3, as the real
# runner does.
MEMORY_CHILD = textwrap.dedent("""\
    import mmap, sys
    sys.path.insert(0, %r)
    from tfbench.output import csv_out
    from tfbench.results import RunResult
    args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    bs = int(args["batch_size"])
    r = RunResult(model=args["model"], batch_size=bs, global_batch_size=bs,
                  precision=args.get("precision", "fp32"))
    unit = 48 * (2 if r.precision == "fp32" else 1) * 1024 * 1024
    try:
        try:
            block = mmap.mmap(-1, bs * unit)
        except OSError:
            raise MemoryError("cannot map %%d MB" %% (bs * unit >> 20)) from None
    except MemoryError:
        if args["model"] == "die":
            raise
        r.status, r.error = "oom", "MemoryError allocating %%d MB" %% (bs * unit >> 20)
        csv_out.append_row(args["csv_file"], r)
        sys.exit(3)
    r.images_per_sec = 10.0 * bs
    r.extra["peak_mem_gb"] = len(block) / 2 ** 30
    csv_out.append_row(args["csv_file"], r)
""") % REPO

LIMIT_MB = 1024


def fits_directly(script, batch, precision, csv_path):
    """The truth the finder must reproduce: does this batch run under the cap?"""
    cmd = [sys.executable, script, "--model=row", "--batch_size=%d" % batch,
           "--precision=%s" % precision, "--csv_file=%s" % csv_path]
    proc = subprocess.run(cmd, preexec_fn=child.limit_memory(LIMIT_MB), capture_output=True)
    return proc.returncode == 0


@pytest.mark.slow
def test_finder_with_memory_capped_children(tmp_path):
    script = tmp_path / "memory_child.py"
    script.write_text(MEMORY_CHILD)
    out, err = io.StringIO(), io.StringIO()
    code = sweep_cli.run(
        ["--find_max_batch_size", "--sweep=model+precision=row+fp32,row+fp16,die+fp32",
         "--child_memory_limit_mb=%d" % LIMIT_MB, "--batch_size=4",
         "--out_dir=%s" % (tmp_path / "mb")],
        child_cmd=[sys.executable, str(script)], stdout=out, stderr=err)
    assert code == 0
    found = tables.parse_markdown((tmp_path / "mb" / "max_batch.md").read_text())
    got = {(r["Model"], r["Precision"]): int(r["Max batch/device"]) for r in found}
    assert list(got) == [("row", "fp32"), ("row", "fp16"), ("die", "fp32")]
    assert got[("die", "fp32")] == got[("row", "fp32")]
    direct = tmp_path / "direct.csv"
    for precision in ("fp32", "fp16"):
        # Allocation grows with the batch, so fits(n) and not fits(n + 1) makes n the largest.
        largest = got[("row", precision)]
        assert fits_directly(str(script), largest, precision, direct)
        assert not fits_directly(str(script), largest + 1, precision, direct)
    assert 4 < got[("row", "fp32")] < got[("row", "fp16")] < 40
    assert found[0]["Images/sec"] == "%.1f" % (10.0 * got[("row", "fp32")])
    rows = read_rows(tmp_path / "mb" / "sweep.csv")
    died = [r for r in rows if r["model"] == "die" and r["status"] != "ok"]
    assert died and all(r["status"] == "oom" and "MemoryError" in r["error"] for r in died)
    assert "max batch size probes run with --num_batches=2 --num_warmup_batches=1" in \
        err.getvalue()
    assert "probes done" in err.getvalue()


def test_finder_refuses_a_batch_size_sweep():
    with pytest.raises(errors.UsageError, match="searches batch_size itself"):
        sweep_cli.run(["--find_max_batch_size", "--sweep=batch_size=1,2"], child_cmd=["false"])


# A child that fits up to batch 12; above it dies without a row, as a TensorFlow step near a GPU's
# limit ends: a traceback whose error is not ResourceExhaustedError (or, with fail=other, one that
# is no memory failure: the search must stop there).
CUDNN_CHILD = textwrap.dedent("""\
    import sys
    sys.path.insert(0, %r)
    from tfbench.output import csv_out
    from tfbench.results import RunResult
    args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    bs = int(args["batch_size"])
    if bs > 12:
        engine = "UNKNOWN: CUDNN_STATUS_NOT_SUPPORTED" if args["model"] == "other" else \\
            "UNKNOWN: <unknown cudnn status: 4004>"
        sys.stderr.write("Traceback (most recent call last):\\n  File \\"tfbench/steps.py\\"\\n"
                         "tensorflow.python.framework.errors_impl.NotFoundError: Graph execution "
                         "error:\\n\\nNo algorithm worked!  Error messages:\\n  Profiling failure "
                         "on CUDNN engine eng0{}: %%s\\n\\t [[{{node conv1/Conv2D}}]]\\n" %% engine)
        sys.exit(1)
    r = RunResult(model=args["model"], batch_size=bs, global_batch_size=bs, images_per_sec=bs)
    csv_out.append_row(args["csv_file"], r)
""") % REPO


@pytest.mark.slow
@pytest.mark.parametrize("model, found", [("cudnn", "12"), ("other", ">= 8 (search stopped)")])
def test_finder_keeps_searching_past_cudnn_allocation_failures(tmp_path, model, found):
    script = tmp_path / "cudnn_child.py"
    script.write_text(CUDNN_CHILD)
    out, err = io.StringIO(), io.StringIO()
    sweep_cli.run(["--find_max_batch_size", "--model=%s" % model, "--batch_size=1",
                   "--out_dir=%s" % (tmp_path / "mb")],
                  child_cmd=[sys.executable, str(script)], stdout=out, stderr=err)
    found_rows = tables.parse_markdown((tmp_path / "mb" / "max_batch.md").read_text())
    assert found_rows[0]["Max batch/device"] == found
    failed = [r for r in read_rows(tmp_path / "mb" / "sweep.csv") if r["status"] != "ok"]
    assert failed and all(r["status"] == ("oom" if model == "cudnn" else "error")
                          for r in failed)


@pytest.mark.slow
def test_finder_names_the_precision_the_children_ran(tmp_path):
    # --use_fp16 is the legacy spelling of --precision=fp16: the table must say fp16.
    script = tmp_path / "memory_child.py"
    script.write_text(MEMORY_CHILD)
    out, err = io.StringIO(), io.StringIO()
    code = sweep_cli.run(["--find_max_batch_size", "--model=row", "--use_fp16",
                          "--max_batch_size_limit=2", "--out_dir=%s" % (tmp_path / "mb")],
                         child_cmd=[sys.executable, str(script)], stdout=out, stderr=err)
    assert code == 0
    found = tables.parse_markdown((tmp_path / "mb" / "max_batch.md").read_text())
    assert [(r["Model"], r["Precision"], r["Max batch/device"]) for r in found] == [
        ("row", "fp16", ">= 2 (limit)")]


def test_probe_lengths_leave_a_given_num_epochs_alone():
    # --num_epochs and --num_batches exclude each other: a probe adds no --num_batches to a
    # base with --num_epochs, which would make every probe a usage error.
    args, engine = sweep_cli.build(["--find_max_batch_size", "--num_epochs=0.001"])
    sweep_cli._probe_flags(engine.config, io.StringIO())
    p = parse_settings(["tfbench"] + engine.config.base_flags)   # as each probe's child
    assert (p.schedule.num_epochs, p.schedule.num_batches,
            p.schedule.num_warmup_batches) == (0.001, None, 1)


def test_a_search_is_a_point_that_finished_unless_it_found_no_batch_or_stopped():
    # The oom probes of a search are how it finds its answer: a study counts the search.
    found = max_batch.SearchResult(24, [(8, "ok"), (16, "ok"), (32, "oom"), (24, "ok")])
    limit = max_batch.SearchResult(64, [(32, "ok"), (64, "ok")], limit_reached=True)
    nothing = max_batch.SearchResult(None, [(2, "oom"), (1, "oom")])
    stopped = max_batch.SearchResult(8, [(8, "ok"), (16, "nan")],
                                     error="probe at batch 16 ended with status nan: loss")
    results = [max_batch.MaxBatchResult({}, s, None) for s in (found, limit, nothing, stopped)]
    assert max_batch.group_statuses(results) == ["ok", "ok", "oom", "nan"]
