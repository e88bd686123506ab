"""benchmarks/side_by_side.py: log parsing, pairing and medians, config selection, output tables,
and the alternation loop against fake programs (no TensorFlow runs here)."""

import importlib.util
import os
import sys
import textwrap

import pytest
import paths
from helpers import csv_rows, only_row

_PATH = os.path.join(paths.BENCHMARKS, "side_by_side.py")
_spec = importlib.util.spec_from_file_location("side_by_side", _PATH)
sbs = importlib.util.module_from_spec(_spec)
sys.modules["side_by_side"] = sbs  # dataclasses needs the module registered
_spec.loader.exec_module(sbs)

DASHES = "-" * 64

# Tail of a real legacy run (trivial, bs32, nb20) merged with stderr, unbuffered.
LEGACY_TAIL = textwrap.dedent("""\
    I0000 00:00:1795988735.139968    5830 port.cc:153] oneDNN custom operations are on.
    TensorFlow:  2.21
    Model:       trivial
    ==========
    Generating training model
    Initializing graph
    INFO:tensorflow:Running local_init_op.
    Running warm up
    Done warm up
    Step\tImg/sec\ttotal_loss
    1\timages/sec: 2925.7 +/- 0.0 (jitter = 0.0)\t9.704
    20\timages/sec: 2849.1 +/- 42.4 (jitter = 97.1)\t9.704
    ----------------------------------------------------------------
    total images/sec: 2745.66
    ----------------------------------------------------------------
    """)


def test_parse_total_from_real_legacy_tail():
    assert sbs.parse_total_images_per_sec(LEGACY_TAIL) == pytest.approx(2745.66)


def test_parse_total_tolerates_missing_final_newline_and_crlf():
    assert sbs.parse_total_images_per_sec(LEGACY_TAIL.rstrip("\n")) == pytest.approx(2745.66)
    crlf = LEGACY_TAIL.replace("\n", "\r\n")
    assert sbs.parse_total_images_per_sec(crlf) == pytest.approx(2745.66)


def test_parse_total_rejects_anything_after_the_footer():
    with pytest.raises(sbs.LogParseError, match="second-to-last line"):
        sbs.parse_total_images_per_sec(LEGACY_TAIL + "W shutdown message\n")


def test_parse_total_rejects_truncated_or_empty_output():
    with pytest.raises(sbs.LogParseError):
        sbs.parse_total_images_per_sec("")
    with pytest.raises(sbs.LogParseError):
        sbs.parse_total_images_per_sec("Done warm up\nStep\tImg/sec\ttotal_loss\n")
    # footer text present but the closing dashes line missing
    with pytest.raises(sbs.LogParseError):
        sbs.parse_total_images_per_sec(DASHES + "\ntotal images/sec: 5.00\nTraceback\n")


def test_parse_tf_version():
    assert sbs.parse_tf_version(LEGACY_TAIL) == "2.21"
    assert sbs.parse_tf_version("no header here") is None


def test_pair_ratios_skip_failed_runs():
    assert sbs.pair_ratios([2.0, None, 3.0, 4.0], [1.0, 1.0, None, 2.0]) == [2.0, 2.0]
    assert sbs.pair_ratios([1.0], [0.0]) == []


def test_median_ratio_is_median_of_pair_ratios_not_ratio_of_medians():
    config = sbs.BenchConfig("m/train", "m", 4, 3, 1)

    def run(program, repeat, ips):
        return sbs.RunOutcome("m/train", program, repeat, 0, ips, 1.0 + repeat, 2.0)

    outcomes = [run(sbs.TFBENCH, 0, 10.0), run(sbs.LEGACY, 0, 10.0),
                run(sbs.TFBENCH, 1, 30.0), run(sbs.LEGACY, 1, 10.0),
                run(sbs.TFBENCH, 2, 12.0), run(sbs.LEGACY, 2, 4.0)]
    s = sbs.summarize(config, outcomes)
    assert s.tfbench_median == 12.0
    assert s.legacy_median == 10.0
    assert s.median_ratio == 3.0  # ratios 1, 3, 3 (ratio of medians would be 1.2)
    assert s.pairs == 3
    assert s.tfbench_ready_s == 2.0
    assert s.failures == 0


def test_summarize_counts_failures_and_keeps_pairs_by_repeat():
    config = sbs.BenchConfig("m/train", "m", 4, 3, 1)
    outcomes = [
        sbs.RunOutcome("m/train", sbs.TFBENCH, 0, 1, None, None, 1.0, error="exit 1; last line: x"),
        sbs.RunOutcome("m/train", sbs.LEGACY, 0, 0, 5.0, 1.0, 1.0),
        sbs.RunOutcome("m/train", sbs.LEGACY, 1, 0, 4.0, 1.0, 1.0),
        sbs.RunOutcome("m/train", sbs.TFBENCH, 1, 0, 8.0, 1.0, 1.0),
        sbs.RunOutcome("other", sbs.TFBENCH, 0, 0, 99.0, 1.0, 1.0),
    ]
    s = sbs.summarize(config, outcomes)
    assert (s.tfbench_median, s.legacy_median, s.median_ratio, s.pairs) == (8.0, 4.5, 2.0, 1)
    assert s.failures == 1
    assert s.errors == ["tfbench #0: exit 1; last line: x"]


def test_summarize_with_no_successful_pair_gives_none():
    config = sbs.BenchConfig("m/train", "m", 4, 3, 1)
    s = sbs.summarize(config, [sbs.RunOutcome("m/train", sbs.LEGACY, 0, 0, 5.0, None, 1.0)])
    assert s.median_ratio is None and s.tfbench_median is None and s.pairs == 0
    assert "n/a" in sbs.format_table([s])


def test_outcome_from_output_classifies_exit_timeout_and_parse_errors():
    ok = sbs.outcome_from_output("c", sbs.LEGACY, 0, 0, LEGACY_TAIL, 3.5, 4.0)
    assert ok.ok and ok.images_per_sec == pytest.approx(2745.66) and ok.tf_version == "2.21"
    failed = sbs.outcome_from_output("c", sbs.LEGACY, 0, 1, "Traceback\nValueError: bad\n", None,
                                     1.0)
    assert not failed.ok and failed.error == "exit 1; last line: ValueError: bad"
    timeout = sbs.outcome_from_output("c", sbs.TFBENCH, 0, None, "Running warm up\n", None, 9.0)
    assert timeout.error.startswith("timed out")
    trailing = sbs.outcome_from_output("c", sbs.TFBENCH, 0, 0, LEGACY_TAIL + "extra\n", 1.0, 2.0)
    assert not trailing.ok and "second-to-last line" in trailing.error


def test_config_args_are_the_shared_flags():
    c = sbs.BenchConfig("resnet50/forward", "resnet50", 2, 3, 1, forward_only=True)
    assert c.args() == ["--model=resnet50", "--batch_size=2", "--num_batches=3",
                        "--num_warmup_batches=1", "--device=cpu", "--data_format=NHWC",
                        "--forward_only"]
    assert c.mode == "forward"
    lr = sbs.BenchConfig("lenet/train", "lenet", 32, 200, 10, init_learning_rate=1e-6)
    assert lr.args()[-1] == "--init_learning_rate=1e-06"


def test_models_without_batch_norm_train_at_the_no_divergence_lr():
    by_name = {c.name: c for c in sbs.DEFAULT_CONFIGS}
    for name in ("lenet/train", "vgg16/train"):
        assert by_name[name].init_learning_rate == sbs.NO_DIVERGENCE_LR
    assert by_name["resnet50/train"].init_learning_rate is None
    assert sbs.quick_variant(by_name["vgg16/train"]).init_learning_rate == sbs.NO_DIVERGENCE_LR


def test_programs_command_gives_tfbench_an_empty_csv_file_only():
    c = sbs.BenchConfig("trivial/train", "trivial", 8, 3, 1)
    p = sbs.Programs(("py", "-m", "tfbench"), ("lpy", "legacy.py"), ("--precision=bf16",))
    assert p.command(sbs.TFBENCH, c) == ["py", "-m", "tfbench"] + c.args() + [
        "--csv_file=", "--precision=bf16"]
    assert p.command(sbs.LEGACY, c) == ["lpy", "legacy.py"] + c.args()


def test_program_env():
    base = {"PYTHONPATH": "/x", "HOME": "/h"}
    tfb = sbs.program_env(sbs.TFBENCH, base)
    assert tfb["PYTHONPATH"] == sbs.REPO_ROOT + os.pathsep + "/x"
    assert tfb["PYTHONUNBUFFERED"] == "1" and "TF_USE_LEGACY_KERAS" not in tfb
    legacy = sbs.program_env(sbs.LEGACY, base)
    assert legacy["TF_USE_LEGACY_KERAS"] == "1" and legacy["PYTHONPATH"] == "/x"
    assert base == {"PYTHONPATH": "/x", "HOME": "/h"}  # not mutated


def test_default_configs_cover_the_issue_models_in_both_modes():
    pairs = {(c.model, c.mode) for c in sbs.DEFAULT_CONFIGS}
    for model in ("trivial", "lenet", "resnet50", "vgg16", "inception3"):
        assert {(model, "train"), (model, "forward")} <= pairs
    assert len({c.name for c in sbs.DEFAULT_CONFIGS}) == len(sbs.DEFAULT_CONFIGS)
    assert any(c.batch_size == 1 and c.forward_only for c in sbs.DEFAULT_CONFIGS)


def test_select_configs_by_model_or_name_keeps_table_order():
    chosen = sbs.select_configs(sbs.DEFAULT_CONFIGS, "vgg16, trivial/forward")
    assert [c.name for c in chosen] == ["trivial/forward", "vgg16/train", "vgg16/forward"]
    assert sbs.select_configs(sbs.DEFAULT_CONFIGS, "") == list(sbs.DEFAULT_CONFIGS)
    with pytest.raises(ValueError, match="unknown config nope.*choose from models"):
        sbs.select_configs(sbs.DEFAULT_CONFIGS, "trivial,nope")


def test_quick_variant_and_overrides():
    big = sbs.BenchConfig("resnet50/train", "resnet50", 32, 20, 5)
    q = sbs.quick_variant(big)
    assert (q.batch_size, q.num_batches, q.num_warmup_batches) == (2, 3, 1)
    assert sbs.quick_variant(sbs.BenchConfig("t", "trivial", 32, 200, 10)).batch_size == 8
    assert sbs.quick_variant(sbs.BenchConfig("r", "resnet50", 1, 100, 10)).batch_size == 1
    o = sbs.override_config(big, num_batches=7)
    assert (o.batch_size, o.num_batches, o.num_warmup_batches) == (32, 7, 5)
    assert o.target == big.target and sbs.override_config(big, target=2.0).target == 2.0


def test_default_targets_are_the_issues():
    targets = {c.name: c.target for c in sbs.DEFAULT_CONFIGS}
    for name in ("trivial/train", "trivial/forward", "lenet/train", "lenet/forward",
                 "resnet50/forward_bs1"):
        assert targets.pop(name) == 1.10
    # resnet50, vgg16, inception3 at batch > 1, and resnet20 on CIFAR-10's shapes
    assert set(targets.values()) == {1.05}
    assert len(targets) == 7
    (resnet20,) = [c for c in sbs.DEFAULT_CONFIGS if c.name == "resnet20/train"]
    assert "--data_name=cifar10" in resnet20.args()


def test_median_interval_order_statistics():
    assert sbs.median_interval([]) is None and sbs.median_interval([1.0]) is None
    # 6 pairs: [min, max] holds the median unless all 6 fall on one side: 1 - 2/64.
    six = sbs.median_interval([1.3, 0.9, 1.1, 1.0, 1.2, 1.05])
    assert (six.low, six.high) == (0.9, 1.3) and six.confidence == 1 - 2 / 64
    # 10 pairs: P(X <= 1) = 11/1024 leaves 97.9% for [x2, x9]; [x3, x8] would be 89%.
    ten = sbs.median_interval([float(v) for v in range(10, 0, -1)])
    assert (ten.low, ten.high) == (2.0, 9.0) and ten.confidence == 1 - 2 * 11 / 1024
    assert sbs.median_interval([float(v) for v in range(10)], confidence=0.8).low == 2.0
    # Too few pairs for 95%: [min, max] with the confidence it has.
    three = sbs.median_interval([1.0, 3.0, 2.0])
    assert (three.low, three.high, three.confidence) == (1.0, 3.0, 0.75)


def test_verdict_needs_the_whole_interval_on_one_side_of_the_target():
    interval = sbs.MedianInterval(1.02, 1.12, 0.97)
    assert sbs.verdict(interval, 1.0) == "met"
    assert sbs.verdict(interval, 1.02) == "met"
    assert sbs.verdict(interval, 1.05) == "unclear"
    assert sbs.verdict(interval, 1.13) == "not met"
    assert sbs.verdict(None, 1.0) == "unclear"


def test_summarize_gives_interval_and_verdict():
    config = sbs.BenchConfig("m/train", "m", 4, 3, 1, target=1.5)
    outcomes = []
    for repeat, (t, l) in enumerate([(20.0, 10.0), (18.0, 10.0), (16.0, 10.0), (21.0, 10.0),
                                     (17.0, 10.0), (19.0, 10.0)]):
        outcomes += [sbs.RunOutcome("m/train", sbs.TFBENCH, repeat, 0, t, 1.0, 1.0),
                     sbs.RunOutcome("m/train", sbs.LEGACY, repeat, 0, l, 1.0, 1.0)]
    s = sbs.summarize(config, outcomes)
    assert (s.ratio_interval.low, s.ratio_interval.high) == (1.6, 2.1)
    assert s.verdict == "met"
    assert sbs.summarize(config, outcomes[:2]).verdict == "unclear"  # one pair: no interval
    assert sbs.verdict_counts([s, sbs.summarize(config, outcomes[:2])]) == \
        "targets: 1 met, 1 unclear"


def test_run_order_alternates():
    assert sbs.run_order(0) == (sbs.TFBENCH, sbs.LEGACY)
    assert sbs.run_order(1) == (sbs.LEGACY, sbs.TFBENCH)
    assert sbs.run_order(2) == sbs.run_order(0)


def _summary(ratio=1.25):
    c = sbs.BenchConfig("trivial/train", "trivial", 32, 200, 10, target=1.1)
    interval = None if ratio is None else sbs.MedianInterval(1.0, 1.5, 0.75)
    return sbs.Summary(c, 2500.0, 2000.0, ratio, 3, 9.5, 7.25, 0, [], interval)


def test_format_table_text():
    lines = sbs.format_table([_summary()]).splitlines()
    assert lines[0].split("  ")[0].strip() == "config"
    assert lines[1].split() == ["trivial/train", "32", "200", "2500.00", "2000.00", "1.250",
                                "1.000-1.500", "(75%)", "1.10", "unclear", "3", "9.5", "7.2", "0"]


def test_format_csv_and_markdown():
    rows = csv_rows(sbs.format_csv([_summary(), _summary(None)]))
    assert rows[0]["median_ratio"] == "1.25" and rows[0]["mode"] == "train"
    assert (rows[0]["ratio_low"], rows[0]["ratio_high"], rows[0]["interval_confidence"]) == \
        ("1.0", "1.5", "0.75")
    assert (rows[0]["target"], rows[0]["verdict"]) == ("1.1", "unclear")
    assert rows[1]["median_ratio"] == "" and rows[1]["ratio_low"] == ""
    md = sbs.format_markdown([_summary()], {"date": "2026-01-01", "machine": "m"})
    assert md.startswith("- date: 2026-01-01\n- machine: m\n\n| config |")
    assert ("| trivial/train | 32 | 200 | 2500.00 | 2000.00 | 1.250 | 1.000-1.500 (75%) | 1.10 "
            "| unclear | 3 | 9.5 | 7.2 | 0 |") in md


FAKE = textwrap.dedent("""\
    import sys
    rate = sys.argv[1]
    print("TensorFlow:  9.9")
    print("Done warm up", flush=True)
    print("noise", file=sys.stderr, flush=True)
    if rate == "fail":
        sys.exit(3)
    print("-" * 64)
    print("total images/sec: " + rate)
    print("-" * 64)
    """)


@pytest.mark.slow
def test_run_side_by_side_alternates_real_subprocesses(tmp_path):
    fake = tmp_path / "fake.py"
    fake.write_text(FAKE)
    programs = sbs.Programs((sys.executable, str(fake), "200.0"),
                            (sys.executable, str(fake), "100.0"))
    configs = [sbs.BenchConfig("a/train", "a", 2, 3, 1)]
    messages = []
    outcomes = sbs.run_side_by_side(configs, programs, repeats=3, timeout=60,
                                    log=messages.append)
    assert [(o.program, o.repeat) for o in outcomes] == [
        (sbs.TFBENCH, 0), (sbs.LEGACY, 0), (sbs.LEGACY, 1), (sbs.TFBENCH, 1),
        (sbs.TFBENCH, 2), (sbs.LEGACY, 2)]
    assert all(o.ok and o.ready_s is not None and o.tf_version == "9.9" for o in outcomes)
    s = sbs.summarize(configs[0], outcomes)
    assert (s.tfbench_median, s.legacy_median, s.median_ratio) == (200.0, 100.0, 2.0)
    assert messages[0].startswith("[1/6] a/train tfbench #0: 200.00 images/sec")


@pytest.mark.slow
def test_main_prints_interval_verdict_and_writes_tables(tmp_path, capsys):
    fake = tmp_path / "fake.py"
    fake.write_text(FAKE)
    legacy = tmp_path / "legacy.py"  # the shared flags come first: a fixed rate instead
    legacy.write_text(FAKE.replace("rate = sys.argv[1]", "rate = '100.0'"))
    md, table = tmp_path / "t.md", tmp_path / "t.csv"
    argv = ["--configs=trivial/train", "--repeats=3", "--tfbench_cmd=%s %s 121.0" % (
        sys.executable, fake), "--legacy_python=" + sys.executable, "--legacy_script=%s" % legacy,
        "--markdown=%s" % md, "--csv=%s" % table]
    assert sbs.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[5:10] == ["1.210", "1.210-1.210", "(75%)", "1.10", "met"]
    assert out[2] == "targets: 1 met"
    assert "- ratio interval: order-statistic interval for the median ratio, holding it with " \
        "at least 95%" in md.read_text()
    assert sbs.main(argv + ["--target=1.5"]) == 0
    assert capsys.readouterr().out.splitlines()[2] == "targets: 1 not met"
    row = only_row(table)
    assert (row["target"], row["verdict"], row["pairs"]) == ("1.5", "not met", "3")


@pytest.mark.slow
def test_run_command_reports_failures_and_unstartable_programs(tmp_path):
    fake = tmp_path / "fake.py"
    fake.write_text(FAKE)
    code, output, ready, _ = sbs.run_command([sys.executable, str(fake), "fail"], dict(os.environ),
                                             str(tmp_path), 60)
    assert code == 3 and "noise" in output and ready is not None
    code, output, _, _ = sbs.run_command([str(tmp_path / "missing")], dict(os.environ),
                                         str(tmp_path), 60)
    assert code == 127 and output.startswith("cannot start")


@pytest.mark.slow
def test_run_command_timeout(tmp_path):
    code, _, _, _ = sbs.run_command([sys.executable, "-c", "import time; time.sleep(30)"],
                                    dict(os.environ), str(tmp_path), 0.5)
    assert code is None


def test_main_rejects_bad_input(capsys):
    assert sbs.main(["--configs=nope", "--dry_run"]) == 2
    assert "unknown config nope" in capsys.readouterr().err
    assert sbs.main(["--repeats=0", "--dry_run"]) == 2
    assert sbs.main(["--confidence=1", "--dry_run"]) == 2
    assert "--confidence must be between 0 and 1, got 1" in capsys.readouterr().err
    assert sbs.main(["--target=0", "--dry_run"]) == 2
    assert "--target must be positive, got 0" in capsys.readouterr().err
    assert sbs.main(["--legacy_python=" + sys.executable, "--legacy_script=/nonexistent/x.py",
                     "--configs=trivial/train"]) == 2
    assert "/nonexistent/x.py does not exist" in capsys.readouterr().err


def test_main_dry_run_prints_both_commands(capsys, monkeypatch):
    monkeypatch.setenv("TFBENCH_LEGACY_PYTHON", "/opt/legacy/bin/python")
    monkeypatch.setenv("TFBENCH_LEGACY_SCRIPT", "/opt/benchmarks/tf_cnn_benchmarks.py")
    assert sbs.main(["--quick", "--configs=lenet/forward", "--dry_run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    assert "-m tfbench --model=lenet --batch_size=8 --num_batches=3" in out[0]
    assert out[0].endswith("--forward_only --csv_file=")
    assert out[1].startswith("TF_USE_LEGACY_KERAS=1 /opt/legacy/bin/python "
                             "/opt/benchmarks/tf_cnn_benchmarks.py --model=lenet")
    # A flag beats its environment variable.
    assert sbs.main(["--quick", "--configs=lenet/forward", "--dry_run",
                     "--legacy_script=/srv/tf_cnn_benchmarks.py"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith(
        "TF_USE_LEGACY_KERAS=1 /opt/legacy/bin/python /srv/tf_cnn_benchmarks.py ")


def test_main_without_the_legacy_side_names_the_flag_and_the_variable(capsys, monkeypatch):
    monkeypatch.delenv("TFBENCH_LEGACY_PYTHON", raising=False)
    monkeypatch.delenv("TFBENCH_LEGACY_SCRIPT", raising=False)
    assert sbs.main(["--configs=trivial/train", "--dry_run"]) == 2
    err = capsys.readouterr()
    assert err.out == "" and err.err.count("\n") == 1
    assert err.err.startswith("side_by_side.py: error: the legacy side is not set: give "
                              "--legacy_python=PATH or set TFBENCH_LEGACY_PYTHON, and "
                              "--legacy_script=PATH or set TFBENCH_LEGACY_SCRIPT")
    monkeypatch.setenv("TFBENCH_LEGACY_PYTHON", sys.executable)
    assert sbs.main(["--configs=trivial/train"]) == 2
    err = capsys.readouterr().err
    assert "give --legacy_script=PATH or set TFBENCH_LEGACY_SCRIPT (" in err
    assert "TFBENCH_LEGACY_PYTHON" not in err
    # --list needs no legacy side.
    assert sbs.main(["--list", "--configs=trivial/train"]) == 0
