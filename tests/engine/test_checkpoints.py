"""tfbench.engine.checkpoints: what --train_dir saves and what --eval and a resumed run restore.

In-process, one device: a small functional model (two Dense layers, a float32 head) built
under one precision policy, saved, and restored into a fresh build.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfbench.engine import checkpoints
from tfbench.errors import UsageError


def _model(policy="float32", units=(8, 3), seed=1):
    keras.mixed_precision.set_dtype_policy(policy)
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((4,))
    x = keras.layers.Dense(units[0], activation="relu")(inputs)
    x = keras.layers.Dense(units[1])(x)
    outputs = keras.layers.Activation("linear", dtype="float32")(x)
    return keras.Model(inputs, outputs)


def _weights(model):
    return [w.numpy() for w in model.weights]


def test_the_checkpoint_keys_the_weights_by_layer_in_every_policy(tmp_path):
    """Keras 3.8 (TF 2.17's) keys a functional model by its operations, which gain Cast
    operations under mixed precision; the layers' list is the same in every policy."""
    keys = {}
    for policy in ("float32", "mixed_bfloat16", "mixed_float16"):
        path = checkpoints.checkpoint(_model(policy)).save(str(tmp_path / policy / "c"))
        keys[policy] = sorted((name, tuple(shape)) for name, shape in tf.train.list_variables(path)
                              if name.startswith("layers/"))
    assert keys["float32"] == keys["mixed_bfloat16"] == keys["mixed_float16"]
    assert ("layers/0/_kernel/.ATTRIBUTES/VARIABLE_VALUE", (4, 8)) in keys["float32"]
    assert ("layers/1/_kernel/.ATTRIBUTES/VARIABLE_VALUE", (8, 3)) in keys["float32"]


def test_an_fp32_checkpoint_restores_into_a_mixed_precision_build(tmp_path):
    trained = _model("float32", seed=1)
    path = checkpoints.checkpoint(trained).save(str(tmp_path / "c"))
    evaluated = _model("mixed_bfloat16", seed=2)
    assert not np.array_equal(_weights(evaluated)[0], _weights(trained)[0])
    checkpoints.restore(path, evaluated)
    for got, want in zip(_weights(evaluated), _weights(trained)):
        np.testing.assert_array_equal(got, want)


def test_another_models_checkpoint_is_refused_not_ignored(tmp_path):
    # A head of 5 classes is not this model's 3: a silent partial restore would evaluate
    # untrained weights.
    path = checkpoints.checkpoint(_model(units=(8, 5))).save(str(tmp_path / "c"))
    with pytest.raises(UsageError, match="does not hold this model's weights"):
        checkpoints.restore(path, _model())
    fewer = checkpoints.checkpoint(_small()).save(str(tmp_path / "small"))
    with pytest.raises(UsageError, match="give the --model, --data_name and --image_size"):
        checkpoints.restore(fewer, _model())


def _small():
    keras.mixed_precision.set_dtype_policy("float32")
    inputs = keras.Input((4,))
    return keras.Model(inputs, keras.layers.Dense(8)(inputs))


def test_an_earlier_tfbench_checkpoint_still_restores(tmp_path):
    """tfbench before the layers' list saved the model alone (tf.train.Checkpoint(model=))."""
    trained = _model(seed=1)
    path = tf.train.Checkpoint(model=trained).save(str(tmp_path / "c"))
    evaluated = _model(seed=2)
    checkpoints.restore(path, evaluated)
    for got, want in zip(_weights(evaluated), _weights(trained)):
        np.testing.assert_array_equal(got, want)


def test_the_optimizer_state_comes_back_with_the_weights(tmp_path):
    model = _model()
    optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
    optimizer.build(model.trainable_variables)
    optimizer.iterations.assign(7)
    path = checkpoints.checkpoint(model, optimizer).save(str(tmp_path / "c"))
    fresh, fresh_optimizer = _model(seed=3), keras.optimizers.SGD(0.1, momentum=0.9)
    fresh_optimizer.build(fresh.trainable_variables)
    checkpoints.restore(path, fresh, fresh_optimizer)
    assert int(fresh_optimizer.iterations.numpy()) == 7
