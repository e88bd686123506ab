"""`tfbench models`: the registered models with their defaults, parameters and forward FLOPs.

    tfbench models [--format=table|csv] [--image_size=N] [--dataset=imagenet|cifar10]
                   [--model=NAME[,NAME...]] [--no_flops] [NAME ...]

Parameters and FLOPs at each model's default image size come from the table shipped with tfbench
(tfbench.measure.model_table), so the full list prints in seconds; at another --image_size each
model is built and its graph traced (tfbench.measure.flops), 2-3 CPU-seconds per model, and rows
print as they are computed. --model narrows the list and --no_flops skips the figures.
"""

from __future__ import annotations

import argparse
import fnmatch
from typing import Callable, Iterable, Optional, Sequence

from tfbench.cli.guard import Parser
from tfbench.errors import UsageError

COLUMNS = ("name", "dataset", "image_size", "default_batch_size", "params", "gflops", "family",
           "lr_schedule", "learning_rate", "display_name", "min_image_size", "channels_first",
           "description")
# Table columns: (key, header, width, alignment); the CSV has all COLUMNS.
TABLE = (("name", "name", 19, "<"), ("dataset", "dataset", 8, "<"),
         ("image_size", "image_size", 10, ">"), ("default_batch_size", "batch_size", 10, ">"),
         ("params", "params", 11, ">"), ("gflops", "gflops", 8, ">"),
         ("family", "family", 15, "<"), ("lr_schedule", "lr_schedule", 15, "<"))

# What each column means (the CSV has every one, the table TABLE's, under its headers).
MEANINGS = {
    "name": "the --model name",
    "dataset": "imagenet or cifar10: the label space and default image size",
    "image_size": "input height and width that params and gflops are for",
    "default_batch_size": "per-device batch when --batch_size is not given",
    "params": "trainable parameters (batch-norm moving statistics not counted)",
    "gflops": "forward FLOPs per image, in GFLOPs, with a multiply-add counted as 2 FLOPs. "
              "Counted from the built model's TensorFlow graph: convolutions (depthwise and "
              "grouped too), dense layers and matrix products (attention included); batch "
              "norm, activations, pooling and other elementwise ops are not counted, as in "
              "published figures. Training is about 3x forward.",
    "family": "the model family, e.g. resnet, vgg, efficientnet",
    "lr_schedule": "the default learning-rate schedule (constant, resnet, cifar_resnet, "
                   "alexnet_cifar, official_resnet, densenet_cifar)",
    "learning_rate": "the default initial learning rate",
    "display_name": "the name the classic log's Model: line shows",
    "min_image_size": "the smallest --image_size the model accepts",
    "channels_first": "whether the model has a channels-first (NCHW) build; False: it runs "
                      "NHWC whatever --data_format asks, and says so",
    "description": "what the model is",
}


def help_epilog() -> str:
    """The columns of the table and the CSV, and which image size params and gflops are
    exact for."""
    import textwrap
    from tfbench.measure import model_table
    try:
        versions = model_table.load()[1] or "an earlier TensorFlow"
    except OSError:
        versions = ""
    exact = ("params and gflops are exact for the image_size column. At each model's default "
             "size they come from the table shipped with tfbench (%s; the test suite recomputes "
             "a sample), so the whole list prints in seconds; --image_size=N builds every "
             "listed model at N (2-3 CPU-seconds each, rows print as they are computed). "
             "--no_flops leaves them out." % (
                 "computed with %s" % versions if versions else "not shipped here: computed"))
    lines = textwrap.wrap(exact, 96) + ["", "table columns:"]
    table_keys = [key for key, _, _, _ in TABLE]

    def describe(name: str, key: str) -> None:
        text = textwrap.wrap(MEANINGS[key], 74)
        lines.append("  %-20s%s" % (name, text[0]))
        lines.extend(" " * 22 + more for more in text[1:])
    for key, header, _, _ in TABLE:
        describe(header, key)
    lines += ["", "--format=csv: every table column (batch_size as default_batch_size), and:"]
    for key in COLUMNS:
        if key not in table_keys:
            describe(key, key)
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="tfbench models",
                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=help_epilog(),
                description="List the registered models: defaults, parameters and forward "
                            "GFLOPs per image (a multiply-add counts as 2 FLOPs).")
    p.add_argument("--format", choices=("table", "csv"), default="table",
                   help="table (default) or csv")
    p.add_argument("--image_size", type=int, default=0,
                   help="compute params and gflops at this input size instead of each "
                        "model's default (0 = default, from the shipped table)")
    p.add_argument("--dataset", choices=("imagenet", "cifar10"), default=None,
                   help="only the models for this dataset")
    p.add_argument("--model", action="append", default=[], metavar="NAME[,NAME...]",
                   help="only these models; shell-style wildcards allowed (resnet*); repeatable")
    p.add_argument("--no_flops", action="store_true",
                   help="leave out params and gflops")
    p.add_argument("names", nargs="*", metavar="NAME", help="same as --model")
    return p


def select(patterns: Sequence[str], dataset: Optional[str]) -> list:
    """The registered specs matching any pattern (all when none), in name order."""
    from tfbench.models import catalog

    specs = [s for s in catalog.all_specs() if dataset is None or s.dataset == dataset]
    if not patterns:
        return specs
    chosen = []
    for pattern in patterns:
        matched = [s for s in specs if fnmatch.fnmatchcase(s.name, pattern)]
        if not matched:
            raise UsageError("no model matches '%s'%s. Valid names: %s" % (
                pattern, " for dataset %s" % dataset if dataset else "",
                ", ".join(catalog.names())))
        chosen.extend(s for s in matched if s not in chosen)
    return sorted(chosen, key=lambda s: (s.name, s.dataset))


def row(spec, image_size: int = 0, with_flops: bool = True) -> dict:
    """One model's row; params/gflops are None when skipped or the size is below the minimum."""
    from tfbench.measure import model_table

    size = image_size or spec.image_size
    params = gflops = None
    if with_flops and size >= spec.min_image_size:
        params, flop_count = model_table.stats(spec, size)
        gflops = flop_count / 1e9
    return {"name": spec.name, "dataset": spec.dataset, "image_size": size,
            "default_batch_size": spec.batch_size, "params": params, "gflops": gflops,
            "family": spec.family, "lr_schedule": spec.lr_schedule,
            "learning_rate": spec.learning_rate, "display_name": spec.header_name,
            "min_image_size": spec.min_image_size, "channels_first": spec.channels_first,
            "description": spec.description}


def _cell(key: str, value) -> str:
    if value is None:
        return "-"
    if key == "params":
        return "{:,}".format(value)
    if key == "gflops":
        return "%.3f" % value
    return str(value)


def _csv_cell(key: str, value) -> str:
    if value is None:
        return ""
    if key == "gflops":
        return "%.4f" % value
    return str(value)


def write_table(rows: Iterable[dict], out: Callable[[str], None], name_width: int = 0
                ) -> list[str]:
    """Prints a header then each row as it arrives; returns notes for the footer."""
    widths = [max(width, name_width) if key == "name" else width for key, _, width, _ in TABLE]

    def line(cells) -> str:
        return "  ".join("{:{}{}}".format(cell, align, width)
                         for cell, width, (_, _, _, align) in zip(cells, widths, TABLE)).rstrip()

    out(line(header for _, header, _, _ in TABLE))
    out(line("-" * width for width in widths))
    notes = []
    for r in rows:
        out(line(_cell(key, r[key]) for key, _, _, _ in TABLE))
        if r["image_size"] < r["min_image_size"]:
            notes.append("%s needs --image_size >= %d" % (r["name"], r["min_image_size"]))
    return notes


def write_csv(rows: Iterable[dict], out: Callable[[str], None]) -> None:
    import csv
    import io

    def line(values) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="").writerow(values)
        return buf.getvalue()

    out(line(COLUMNS))
    for r in rows:
        out(line(_csv_cell(key, r[key]) for key in COLUMNS))


def main(argv: Sequence[str]) -> int:
    """`tfbench models ARGS` (argv without the subcommand). UsageError on bad input."""
    args = _parser().parse_args(list(argv))
    if args.image_size < 0:
        raise UsageError("models: --image_size must be >= 0, got %d" % args.image_size)
    patterns = [p for value in args.model + args.names for p in value.split(",") if p]
    specs = select(patterns, args.dataset)

    def out(text: str) -> None:
        print(text, flush=True)

    rows = (row(s, args.image_size, not args.no_flops) for s in specs)
    if args.format == "csv":
        write_csv(rows, out)
        return 0
    for note in write_table(rows, out, max((len(s.name) for s in specs), default=0)):
        out("note: " + note)
    if not args.no_flops:
        out("gflops: forward FLOPs per image, multiply-add = 2 FLOPs (training is about 3x); "
            "params: trainable parameters.")
    return 0

