"""Sweep grid: axes, point names, strong scaling, the child's flags, flagfiles."""

import pytest

from tfbench import errors
from tfbench.sweep import grid


def test_parse_axis_values_and_zipped_keys():
    axis = grid.parse_axis("num_gpus=1,2,4")
    assert axis.keys == ("num_gpus",) and axis.values == (("1",), ("2",), ("4",))
    zipped = grid.parse_axis("precision+xla=fp32+0,fp16+1")
    assert zipped.keys == ("precision", "xla")
    assert zipped.values == (("fp32", "false"), ("fp16", "true"))
    assert grid.parse_axis("data_dir=,/data/imagenet").values == (("",), ("/data/imagenet",))


@pytest.mark.parametrize("text, message", [
    ("num_gpus", "expected KEY=V1,V2"),
    ("no_such_flag=1,2", "unknown flag 'no_such_flag'"),
    ("num_gpus=1,two", "'two' is not an int"),
    ("precision=fp32,fp8", "'fp8' is not one of fp32, fp16 or bf16, or empty"),
    ("xla=maybe", "'maybe' is not true/false"),
    ("csv_file=a.csv", "csv_file is set by the sweep itself"),
    ("precision+xla=fp32", "needs 2 '+'-separated values"),
])
def test_parse_axis_errors(text, message):
    with pytest.raises(errors.UsageError, match=message.replace("+", r"\+")):
        grid.parse_axis(text)


def test_grid_order_names_and_repeats():
    axes = [grid.parse_axis("model=trivial,resnet50"), grid.parse_axis("batch_size=32,64")]
    points = grid.expand_grid(axes)
    assert [p.name for p in points] == [
        "000_model-trivial_batch_size-32", "001_model-trivial_batch_size-64",
        "002_model-resnet50_batch_size-32", "003_model-resnet50_batch_size-64"]
    assert points[3].flags == {"model": "resnet50", "batch_size": "64"}
    repeated = grid.expand_grid(axes[:1], repeats=2)
    # Interleaved: every point once, then every point again.
    assert [(p.index, p.repeat, p.name) for p in repeated] == [
        (0, 1, "000_model-trivial_r1"), (1, 1, "001_model-resnet50_r1"),
        (0, 2, "000_model-trivial_r2"), (1, 2, "001_model-resnet50_r2")]


def test_point_name_slugs_paths_and_empty_values():
    assert grid.point_name(7, {"data_dir": "/data/imagenet/"}) == "007_data_dir-imagenet"
    assert grid.point_name(1, {"data_dir": ""}) == "001_data_dir-default"
    assert grid.point_name(2, {"data_name": "tfds:cifar10"}) == "002_data_name-tfds-cifar10"


def test_swept_twice_is_an_error():
    axes = [grid.parse_axis("model=a,b"), grid.parse_axis("model+batch_size=c+1")]
    with pytest.raises(errors.UsageError, match="model swept more than once"):
        grid.expand_grid(axes)


def test_strong_scaling_divides_the_global_batch():
    axes = [grid.parse_axis("num_gpus=1,2,4")]
    points = grid.expand_grid(axes, scaling="strong", base_flags=["--batch_size=256"])
    assert [p.flags["batch_size"] for p in points] == ["256", "128", "64"]
    weak = grid.expand_grid(axes, base_flags=["--batch_size=256"])
    assert all("batch_size" not in p.flags for p in weak)


def test_strong_scaling_global_batch_is_the_parsed_batch_size():
    # absl takes -flag as well as --flag; the child would run batch 256 / num_gpus.
    axes = [grid.parse_axis("num_gpus=1,2,4")]
    points = grid.expand_grid(axes, scaling="strong", base_flags=["-batch_size=256"])
    assert [p.flags["batch_size"] for p in points] == ["256", "128", "64"]


def test_strong_scaling_errors():
    axes = [grid.parse_axis("num_gpus=1,3")]
    with pytest.raises(errors.UsageError, match=r"^--scaling=strong: global batch 64 is not "
                       r"divisible by 3 \(1 micro-batch\(es\) x 3 device\(s\)"):
        grid.expand_grid(axes, scaling="strong", base_flags=["--batch_size=64"])
    with pytest.raises(errors.UsageError, match="needs --batch_size"):
        grid.expand_grid(axes, scaling="strong")
    with pytest.raises(errors.UsageError, match="needs --sweep=num_gpus"):
        grid.expand_grid([grid.parse_axis("batch_size=1,2")], scaling="strong")


def test_child_args_replace_swept_flags_and_set_outputs():
    point = grid.expand_grid([grid.parse_axis("batch_size=64"),
                               grid.parse_axis("xla=false")])[0]
    base = ["--model=resnet50", "--batch_size", "32", "--xla", "--csv_file=mine.csv",
            "--device=cpu"]
    args = grid.child_args(point, base, "/o/points/x.csv", "/o/runs")
    assert args == ["--model=resnet50", "--device=cpu", "--batch_size=64", "--xla=false",
                    "--csv_file=/o/points/x.csv", "--json_dir=/o/runs"]
