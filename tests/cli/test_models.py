"""`tfbench models`: table and CSV output, filters, --image_size, bad input."""

from __future__ import annotations


import pytest

from helpers import csv_rows
from tfbench import cli
from tfbench.cli import models as models_cli
from tfbench.measure import flops
from tfbench.errors import UsageError
from tfbench.models import catalog


def _run(capsys, *argv):
    assert models_cli.main(list(argv)) == 0
    return capsys.readouterr().out


def test_table_lists_every_model_without_flops(capsys):
    out = _run(capsys, "--no_flops")
    lines = out.splitlines()
    assert lines[0].split() == ["name", "dataset", "image_size", "batch_size", "params", "gflops",
                                "family", "lr_schedule"]
    rows = [line.split() for line in lines[2:]]
    assert len(rows) == len(catalog.all_specs())
    assert ["resnet50", "imagenet", "224", "64", "-", "-", "resnet", "resnet"] in rows


@pytest.mark.slow
def test_csv_has_the_documented_columns_and_graph_flops(capsys):
    out = _run(capsys, "--format=csv", "--image_size=64", "--model=resnet20,resnet20_v2")
    rows = csv_rows(out)
    assert list(rows[0])[:7] == ["name", "dataset", "image_size", "default_batch_size", "params",
                                 "gflops", "family"]
    assert [r["name"] for r in rows] == ["resnet20", "resnet20_v2"]
    spec = catalog.get("resnet20", "cifar10")
    params, flop_count = flops.spec_stats(spec, 64)
    assert rows[0]["image_size"] == "64" and rows[0]["dataset"] == "cifar10"
    assert int(rows[0]["params"]) == params
    assert float(rows[0]["gflops"]) == pytest.approx(flop_count / 1e9, abs=1e-4)
    assert rows[0]["default_batch_size"] == "128" and rows[0]["family"] == "resnet_cifar"


def test_table_values_and_footer(capsys):
    out = _run(capsys, "resnet20", "--dataset=cifar10")
    line = [l for l in out.splitlines() if l.startswith("resnet20 ")][0]
    params, flop_count = flops.spec_stats(catalog.get("resnet20", "cifar10"))
    assert "{:,}".format(params) in line and "%.3f" % (flop_count / 1e9) in line
    assert "multiply-add = 2 FLOPs" in out


def test_the_full_table_builds_no_model(capsys, monkeypatch):
    """Every model's figures at its default size come from the shipped table: `tfbench models`
    lists all of them without building one (it took 3 minutes when it built all 71)."""
    def no_build(*args, **kwargs):
        raise AssertionError("a model was built")
    monkeypatch.setattr(flops, "spec_stats", no_build)
    out = _run(capsys)
    rows = [line.split() for line in out.splitlines()[2:] if line and line[0].isalnum()
            and not line.startswith(("note:", "gflops:"))]
    assert len(rows) == len(catalog.all_specs())
    assert all(r[4] != "-" and r[5] != "-" for r in rows)
    resnet50 = [r for r in rows if r[:2] == ["resnet50", "imagenet"]][0]
    # ResNet-50 (v1, tf_cnn_benchmarks' layout) at 224 px: about 25.6 M parameters and
    # 3.8e9 multiply-adds (He et al. 2015, table 1), 7.7 GFLOPs with a multiply-add = 2.
    assert int(resnet50[4].replace(",", "")) == pytest.approx(25.6e6, rel=0.01)
    assert float(resnet50[5]) == pytest.approx(7.7, rel=0.03)


def test_help_names_the_table_columns_and_what_they_are_exact_for(capsys):
    help_text = models_cli._parser().format_help()
    table_part = help_text.split("table columns:\n", 1)[1].split("\n\n", 1)[0]
    named = [line.split()[0] for line in table_part.splitlines() if not line.startswith("    ")]
    header = _run(capsys, "--no_flops").splitlines()[0].split()
    assert named == header
    csv_part = help_text.split("--format=csv:", 1)[1]
    csv_named = [line.split()[0] for line in csv_part.splitlines()[1:]
                 if line.startswith("  ") and not line.startswith("    ")]
    csv_header = _run(capsys, "--no_flops", "--format=csv", "trivial").splitlines()[0]
    in_table = {key for key, _, _, _ in models_cli.TABLE}
    assert sorted(csv_named) == sorted(set(csv_header.split(",")) - in_table)
    text = " ".join(help_text.split())
    assert "params and gflops are exact for the image_size column" in text
    assert "computed with TensorFlow" in text


def test_wildcards_and_too_small_sizes(capsys):
    out = _run(capsys, "--format=table", "--image_size=32", "--model=alex*")
    rows = [l.split() for l in out.splitlines()[2:] if l.startswith("alexnet")]
    assert [r[1] for r in rows] == ["cifar10", "imagenet"]
    assert rows[1][4:6] == ["-", "-"]
    assert "note: alexnet needs --image_size >= 67" in out


def test_help_says_how_flops_are_counted(capsys):
    assert cli.main(["tfbench", "models", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "multiply-add counted as 2 FLOPs" in text
    assert "trainable parameters" in text


@pytest.mark.parametrize("argv,message", [
    (["--format=xml"], "invalid choice: 'xml'"),
    (["--model=nosuchnet"], "no model matches 'nosuchnet'. Valid names: alexnet, "),
    (["--image_size=-1"], "--image_size must be >= 0"),
    (["--dataset=coco"], "invalid choice: 'coco'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_input_is_a_usage_error(argv, message):
    with pytest.raises(UsageError) as info:
        models_cli.main(argv)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_dispatched_by_the_tfbench_cli(capsys):
    assert cli.main(["tfbench", "models", "--no_flops", "--dataset=cifar10"]) == 0
    out = capsys.readouterr().out
    assert "densenet40_k12" in out and "vgg16" not in out
    assert cli.main(["tfbench", "models", "--format=yaml"]) == 2
    assert "tfbench: error: models: argument --format" in capsys.readouterr().err
