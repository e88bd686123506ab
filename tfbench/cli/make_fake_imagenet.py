"""`tfbench make_fake_imagenet --out DIR`: write a small ImageNet in the legacy TFRecord layout
(the writer is tfbench.data.fake_imagenet)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from tfbench.cli.guard import Parser
from tfbench.data.fake_imagenet import write_fake_imagenet
from tfbench.errors import UsageError


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="tfbench make_fake_imagenet",
        description="Write a small ImageNet in the legacy TFRecord layout (train-*-of-*, "
                    "validation-*-of-*) for trying the real-data input pipeline.")
    parser.add_argument("--out", required=True, help="output directory (created; must hold no "
                        "ImageNet shards yet)")
    parser.add_argument("--num_images", type=int, default=256, help="training images")
    parser.add_argument("--validation_images", type=int, default=None,
                        help="validation images (default: num_images / 4, at least 1)")
    parser.add_argument("--num_shards", type=int, default=8, help="files per split")
    parser.add_argument("--image_size", type=int, default=128,
                        help="typical image side in pixels (each side varies 75-125%%)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the subcommand; `argv` are the arguments after `make_fake_imagenet`."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    validation = args.validation_images
    if validation is None:
        validation = max(1, args.num_images // 4)
    try:
        paths = write_fake_imagenet(args.out, args.num_images, validation, args.num_shards,
                                    args.seed, args.image_size)
    except OSError as err:
        raise UsageError("cannot write %s: %s" % (args.out, err.strerror or err)) from None
    num_train = sum(1 for p in paths if os.path.basename(p).startswith("train-"))
    print("wrote %d training and %d validation images in %d + %d files to %s"
          % (args.num_images, validation, num_train, len(paths) - num_train, args.out))
    return 0
