"""make_fake_imagenet: a small ImageNet in the legacy TFRecord layout."""

import os

import numpy as np
import tensorflow as tf

from tfbench.cli import make_fake_imagenet
from tfbench.data import fake_imagenet


def _examples(path):
    return [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]


def test_layout_keys_and_values(tmp_path):
    paths = fake_imagenet.write_fake_imagenet(str(tmp_path), 10, 3, 4, seed=1, image_size=32)
    names = [os.path.basename(p) for p in paths]
    assert names == ["train-%05d-of-00004" % i for i in range(4)] + \
        ["validation-%05d-of-00003" % i for i in range(3)]
    counts = [len(_examples(p)) for p in paths]
    assert counts == [3, 3, 2, 2, 1, 1, 1]
    for example in _examples(paths[0]):
        f = example.features.feature
        label = f["image/class/label"].int64_list.value[0]
        assert 1 <= label <= 1000
        assert f["image/class/text"].bytes_list.value[0] == b"fake class %d" % label
        image = tf.io.decode_jpeg(f["image/encoded"].bytes_list.value[0]).numpy()
        assert image.shape == (f["image/height"].int64_list.value[0],
                               f["image/width"].int64_list.value[0], 3)
        assert 24 <= image.shape[0] <= 40 and 24 <= image.shape[1] <= 40
        boxes = np.array([f["image/object/bbox/" + k].float_list.value
                          for k in ("ymin", "xmin", "ymax", "xmax")])
        assert boxes.shape[1] in (1, 2)
        assert (boxes >= 0).all() and (boxes <= 1).all()
        assert (boxes[0] < boxes[2]).all() and (boxes[1] < boxes[3]).all()


def test_same_seed_same_files(tmp_path):
    a = fake_imagenet.write_fake_imagenet(str(tmp_path / "a"), 3, 1, 1, seed=7, image_size=16)
    b = fake_imagenet.write_fake_imagenet(str(tmp_path / "b"), 3, 1, 1, seed=7, image_size=16)
    for pa, pb in zip(a, b):
        assert open(pa, "rb").read() == open(pb, "rb").read()


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
