"""tfbench.data.fake_imagenet: a small ImageNet in the legacy TFRecord layout (the command:
cli/test_make_fake_imagenet.py)."""

import os

import numpy as np
import tensorflow as tf

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
