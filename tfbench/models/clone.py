"""A functional Keras model cloned with some layers replaced, and its weights copied across.

Batch-norm folding (fold_bn) and the fused batch norm for keras.applications models (fused_bn)
both rebuild a model around a few substituted layers; this holds what they share.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

import keras

Layer = keras.layers.Layer


def clone_with(source: keras.Model, replace: Callable[[Layer], Optional[Layer]]) -> keras.Model:
    """A clone of functional `source` in which `replace(layer)`, when not None, stands for
    `layer`. Every other layer is rebuilt from its config with zero initial weights: the caller
    copies the weights in (`copy_weights`), which skips drawing random kernels twice."""
    def clone(layer):
        substitute = replace(layer)
        return rebuilt(layer) if substitute is None else substitute

    # Each node is called again with the arguments it recorded: a substitute for a layer whose
    # call takes a mask (BatchNormalization) must take one too.
    return keras.models.clone_model(source, clone_function=clone)


def rebuilt(layer: Layer, **changes) -> Layer:
    """A new layer from `layer`'s config with `changes`, all its weights initialised to zeros."""
    config = {key: "zeros" if key.endswith("_initializer") else value
              for key, value in layer.get_config().items()}
    config.update(changes)
    return layer.__class__.from_config(config)


def copy_weights(source: keras.Model, target: keras.Model, skip: Iterable[str] = ()) -> None:
    """Assigns each weight of `source`'s layers to the same-named layer of `target` (a clone),
    except the layers named in `skip`."""
    skipped = set(skip)
    by_name = {layer.name: layer for layer in source.layers}
    for layer in target.layers:
        if layer.name in skipped or not layer.weights:   # input layers are renamed
            continue
        src = by_name[layer.name].weights
        if len(src) != len(layer.weights):
            raise ValueError("layer %s has %d weights in the source, %d in the clone"
                             % (layer.name, len(src), len(layer.weights)))
        for dst, value in zip(layer.weights, src):
            dst.assign(value)
