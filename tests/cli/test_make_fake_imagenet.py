"""`tfbench make_fake_imagenet` (tfbench.cli.make_fake_imagenet): the files it writes, its line,
its refusals."""

import os

from tfbench.cli import make_fake_imagenet


def test_main(tmp_path, capsys):
    out = str(tmp_path / "fake")
    assert make_fake_imagenet.main(["--out", out, "--num_images", "8", "--num_shards", "2",
                               "--image_size", "16"]) == 0
    assert "wrote 8 training and 2 validation images in 2 + 2 files to %s" % out in \
        capsys.readouterr().out
    assert sorted(os.listdir(out)) == ["train-00000-of-00002", "train-00001-of-00002",
                                       "validation-00000-of-00002", "validation-00001-of-00002"]
    # Writing again into the same directory would mix shard sets: refused with exit code 2,
    # in the one error form of every command.
    from tfbench import cli
    assert cli.main(["tfbench", "make_fake_imagenet", "--out", out, "--num_images", "4"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("tfbench: error: ") and \
        "already holds ImageNet shards" in err[0]
    assert cli.main(["tfbench", "make_fake_imagenet", "--out", str(tmp_path / "x"),
                     "--num_images", "0"]) == 2
    assert cli.main(["tfbench", "make_fake_imagenet", "--num_images", "3"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "tfbench: error: make_fake_imagenet: the following arguments are required: --out "
        "(see tfbench make_fake_imagenet --help)")


def test_cli_subcommand(tmp_path, capsys):
    from tfbench import cli
    out = str(tmp_path / "viacli")
    assert cli.main(["tfbench", "make_fake_imagenet", "--out", out, "--num_images", "2",
                     "--validation_images", "0", "--image_size", "16"]) == 0
    assert sorted(os.listdir(out)) == ["train-00000-of-00002", "train-00001-of-00002"]
    assert "wrote 2 training and 0 validation images" in capsys.readouterr().out
