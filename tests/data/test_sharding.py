"""Several input pipelines sharing one dataset: each example is read by exactly one of them per
epoch (ImageNet TFRecords by file or by record, image folders and CIFAR-10 by index)."""

import os
import pickle

import numpy as np
import pytest
import tensorflow as tf

from multiworker_checks import write_labelled_split
from tfbench import data
from tfbench.data import factory, sharding
from tfbench.errors import UsageError
from tfbench.config.settings import make_settings

SIZE = 16


@pytest.fixture(scope="module")
def imagenet_dir(tmp_path_factory):
    """4 files of 3 training examples and 4 files of 2 validation examples."""
    out = str(tmp_path_factory.mktemp("labelled"))
    return out, {True: write_labelled_split(out, "train", 4, 3, 1),
                 False: write_labelled_split(out, "validation", 4, 2, 101)}


@pytest.fixture(scope="module")
def one_file_dir(tmp_path_factory):
    """1 file of 7 training examples and 1 file of 5 validation examples."""
    out = str(tmp_path_factory.mktemp("one_file"))
    return out, {True: write_labelled_split(out, "train", 1, 7, 1),
                 False: write_labelled_split(out, "validation", 1, 5, 101)}


def _label(record):
    return tf.train.Example.FromString(record).features.feature[
        "image/class/label"].int64_list.value[0]


_ID = {"imagenet": lambda e: _label(e[0]),          # (record, file name)
       "folder": lambda e: e[1],                    # (bytes, path, label)
       "cifar10": lambda e: e[0].tobytes()}         # (pixels, label)


def _one_epoch(params, train, shard, kind="imagenet"):
    """Ids of the raw elements one pipeline reads in its first epoch."""
    source = factory.make_source(params, dataset_name="cifar10" if kind == "cifar10"
                                 else "imagenet", image_size=SIZE, train=train, seed=7,
                                 shard=shard)
    return [_ID[kind](e) for e in source.elements.as_numpy_iterator()]


def _check_partition(parts, everything):
    for part in parts:
        assert part and len(set(part)) == len(part)
    assert sorted(sum(parts, [])) == sorted(everything)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("count", [2, 3, 4])
def test_imagenet_files_split_by_file(imagenet_dir, train, count):
    data_dir, labels = imagenet_dir
    params = make_settings({"data_dir": data_dir})
    parts = [_one_epoch(params, train, sharding.Shard(i, count)) for i in range(count)]
    _check_partition(parts, labels[train])
    # Whole files: shard i reads files i, i + count, ...
    per_file = 3 if train else 2
    for i, part in enumerate(parts):
        assert {(label - labels[train][0]) // per_file for label in part} == \
            set(range(i, 4, count))


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("count", [2, 3])
def test_fewer_files_than_pipelines_split_by_record(one_file_dir, train, count):
    data_dir, labels = one_file_dir
    params = make_settings({"data_dir": data_dir,
                          "datasets_sloppy_parallel_interleave": True})   # order kept anyway
    parts = [_one_epoch(params, train, sharding.Shard(i, count)) for i in range(count)]
    _check_partition(parts, labels[train])


def test_whole_data_is_unchanged(one_file_dir):
    data_dir, labels = one_file_dir
    params = make_settings({"data_dir": data_dir})
    assert sorted(_one_epoch(params, True, sharding.WHOLE)) == labels[True]
    assert _one_epoch(params, False, sharding.WHOLE) == labels[False]   # in file order


def test_pipelines_batch_their_own_share(imagenet_dir):
    data_dir, labels = imagenet_dir
    params = make_settings({"data_dir": data_dir})
    seen = []
    for i in range(2):
        ds = data.make_dataset(params, dataset_name="imagenet", image_size=SIZE, batch_size=3,
                               train=True, seed=5, shard=data.Shard(i, 2))
        batches = [y for _, y in ds.take(2).as_numpy_iterator()]
        assert all(b.shape == (3,) for b in batches)
        seen.append(sorted(np.concatenate(batches).tolist()))
    assert sorted(seen[0] + seen[1]) == labels[True]


@pytest.mark.slow
def test_a_worker_index_known_only_as_a_tensor(imagenet_dir):
    """A parameter-server worker: the index is a tensor inside the traced dataset function."""
    data_dir, labels = imagenet_dir
    params = make_settings({"data_dir": data_dir})

    @tf.function
    def first_epoch(index):
        ds = data.make_dataset(params, dataset_name="imagenet", image_size=SIZE, batch_size=6,
                               train=True, seed=5, shard=data.Shard(index, 2))
        return ds.take(1).get_single_element()[1]
    parts = [sorted(first_epoch(tf.constant(i)).numpy().tolist()) for i in range(2)]
    assert sorted(parts[0] + parts[1]) == labels[True]
    assert {(label - 1) // 3 for label in parts[1]} == {1, 3}


def _images(directory, count):
    for i in range(count):
        path = directory / ("c%d" % (i % 2)) / ("%02d.png" % i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(tf.io.encode_png(np.full((4, 4, 3), i, np.uint8)).numpy())


@pytest.mark.parametrize("train", [True, False])
def test_image_folders_split_by_index(tmp_path, train):
    _images(tmp_path, 7)
    params = make_settings({"data_dir": str(tmp_path), "data_name": "folder"})
    everything = _one_epoch(params, train, sharding.WHOLE, "folder")
    parts = [_one_epoch(params, train, sharding.Shard(i, 3), "folder") for i in range(3)]
    _check_partition(parts, everything)
    assert sorted(len(p) for p in parts) == [2, 2, 3]


def _cifar(directory, per_file=3):
    rng = np.random.default_rng(1)
    for name in ["data_batch_%d" % i for i in range(1, 6)] + ["test_batch"]:
        with open(directory / name, "wb") as f:
            pickle.dump({b"data": rng.integers(0, 256, (per_file, 3072)).astype(np.uint8),
                         b"labels": list(rng.integers(0, 10, per_file))}, f)


@pytest.mark.parametrize("train", [True, False])
def test_cifar10_splits_by_index(tmp_path, train):
    _cifar(tmp_path)
    params = make_settings({"data_dir": str(tmp_path), "data_name": "cifar10"})
    everything = _one_epoch(params, train, sharding.WHOLE, "cifar10")
    parts = [_one_epoch(params, train, sharding.Shard(i, 2), "cifar10") for i in range(2)]
    _check_partition(parts, everything)


def test_too_little_data_for_the_pipelines_is_a_usage_error(tmp_path):
    _images(tmp_path, 2)
    params = make_settings({"data_dir": str(tmp_path), "data_name": "folder"})
    with pytest.raises(UsageError) as err:
        data.make_dataset(params, dataset_name="imagenet", image_size=8, batch_size=1,
                          train=True, shard=data.Shard(2, 3))
    assert str(err.value) == (
        "%s holds 2 example(s), fewer than the 3 input pipelines that share it (one per worker "
        "or process): use more data or fewer workers" % tmp_path)


def test_shard_and_seed_rules():
    assert sharding.seed_for(10, sharding.WHOLE) == 10
    assert [sharding.seed_for(10, sharding.Shard(i, 3)) for i in range(3)] == [10, 11, 12]
    assert int(sharding.seed_for(10, sharding.Shard(tf.constant(2), 3))) == 12
    for bad in (dict(index=0, count=0), dict(index=3, count=3), dict(index=-1, count=2)):
        with pytest.raises(ValueError):
            sharding.Shard(**bad)


def test_the_data_package_does_not_import_horovod():
    """Which part a horovod process reads comes from tfbench.distribute.strategy (distribute_inputs)."""
    import ast
    package = os.path.dirname(data.__file__)
    for name in sorted(os.listdir(package)):
        if name.endswith(".py"):
            with open(os.path.join(package, name)) as f:
                tree = ast.parse(f.read())
            imported = [alias.name for node in ast.walk(tree)
                        if isinstance(node, (ast.Import, ast.ImportFrom))
                        for alias in node.names] + [
                node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module]
            assert not [m for m in imported if m.split(".")[0] == "horovod"], name
