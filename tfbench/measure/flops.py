"""Forward FLOPs and parameter counts, read from a built model's TensorFlow graph.

forward_flops traces the model's inference call at batch 1 into a graph (a registered ModelSpec is
built inside a private tf.Graph, so its weights are never initialised) and sums, over its ops:
  Conv2D                 2 * output elements * kh * kw * (input channels per group)
  DepthwiseConv2dNative  2 * output elements * kh * kw
  MatMul, BatchMatMul*   2 * output elements * contracted size
  Einsum (two operands)  2 * product of the sizes of all its indices
so a multiply-add counts as 2 FLOPs. Batch norm, activations, pooling, additions, softmax and
other elementwise ops are not counted: the published GFLOPs/GMACs of classifiers (ResNet-50
4.1 GMACs, VGG-16 15.5, ...) count only convolutions and matrix products, and so does this.
"""

from __future__ import annotations

import functools
import math
from typing import Optional, Union

from tfbench.models.registry import ModelSpec

_CONV = "Conv2D"
_DEPTHWISE = "DepthwiseConv2dNative"
_MATMUL = "MatMul"
_BATCH_MATMUL = ("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
_EINSUM = "Einsum"
# Ops holding a nested function whose body must be walked too.
_CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")


def _shape(tensor) -> list[int]:
    dims = tensor.shape.as_list()
    if any(d is None for d in dims):
        raise ValueError("FLOP count needs static shapes; %s has %s" % (tensor.name, dims))
    return dims


def _einsum_macs(equation: str, shapes: list[list[int]]) -> int:
    inputs = equation.replace(" ", "").split("->")[0].split(",")
    if len(inputs) != 2:
        return 0  # one operand: a transpose or a reduction, no multiplies
    sizes: dict[str, int] = {}
    for labels, shape in zip(inputs, shapes):
        if "..." in labels:
            head, tail = labels.split("...")
            n_ellipsis = len(shape) - len(head) - len(tail)
            # Ellipsis dims broadcast from the right; name them by distance from the end.
            labels = head + "".join(chr(0x100 + n_ellipsis - i) for i in range(n_ellipsis)) + tail
        for label, size in zip(labels, shape):
            sizes[label] = max(sizes.get(label, 1), size)
    return math.prod(sizes.values())


def graph_macs(graph, ops=None) -> int:
    """Multiply-adds of the conv / matmul / einsum ops of a tf.Graph (default: all its ops), and
    of the functions they call."""
    macs = 0
    for op in graph.get_operations() if ops is None else ops:
        kind = op.type
        if kind == _CONV:
            kh, kw, cin_per_group, _ = _shape(op.inputs[1])
            macs += math.prod(_shape(op.outputs[0])) * kh * kw * cin_per_group
        elif kind == _DEPTHWISE:
            kh, kw = _shape(op.inputs[1])[:2]
            macs += math.prod(_shape(op.outputs[0])) * kh * kw
        elif kind == _MATMUL:
            a = _shape(op.inputs[0])
            k = a[0] if op.get_attr("transpose_a") else a[1]
            macs += math.prod(_shape(op.outputs[0])) * k
        elif kind in _BATCH_MATMUL:
            a = _shape(op.inputs[0])
            k = a[-2] if op.get_attr("adj_x") else a[-1]
            macs += math.prod(_shape(op.outputs[0])) * k
        elif kind == _EINSUM:
            equation = op.get_attr("equation").decode()
            macs += _einsum_macs(equation, [_shape(t) for t in op.inputs])
        elif kind in _CALL_OPS:
            fn = graph._get_function(op.get_attr("f").name)  # noqa: SLF001 (no public lookup)
            if fn is not None:
                macs += graph_macs(fn.graph)
    return macs


def model_forward_flops(model, image_size: int) -> int:
    """FLOPs per image of one inference forward pass of a built model (multiply-add = 2)."""
    import tensorflow as tf

    channels = model.inputs[0].shape[-1] or 3  # tfbench models take NHWC images
    fn = tf.function(lambda images: model(images, training=False))
    concrete = fn.get_concrete_function(
        tf.TensorSpec([1, image_size, image_size, channels], tf.float32))
    return 2 * graph_macs(concrete.graph)


def _graph_mode_stats(spec: ModelSpec, image_size: int) -> tuple[int, int]:
    """(params, FLOPs) of a spec built inside a private tf.Graph.

    Same graph ops as model_forward_flops, but the weights are never initialised (their
    initialisers are graph ops that never run) and the call is traced once, which makes listing
    every model several times cheaper. Only the ops of the call are counted.
    """
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        model = spec.build(image_size, "NHWC")
        first_call_op = len(graph.get_operations())
        images = tf.compat.v1.placeholder(tf.float32, [1, image_size, image_size, 3])
        model(images, training=False)
    call_ops = graph.get_operations()[first_call_op:]
    return count_params(model), 2 * graph_macs(graph, call_ops)


def count_params(model) -> int:
    """Trainable parameters (batch-norm moving statistics and other non-trainable state excluded,
    as in the published parameter counts)."""
    return int(sum(math.prod(w.shape) for w in model.trainable_weights))


@functools.lru_cache(maxsize=None)
def _spec_stats(name: str, dataset: str, image_size: int) -> tuple[int, int]:
    from tfbench.models import catalog

    return _graph_mode_stats(catalog.get(name, dataset), image_size)


def spec_stats(spec: ModelSpec, image_size: Optional[int] = None) -> tuple[int, int]:
    """(params, forward FLOPs per image) of a registered model, cached per (model, image size)."""
    return _spec_stats(spec.name, spec.dataset, image_size or spec.image_size)


def forward_flops(model_or_spec: Union[ModelSpec, object], image_size: Optional[int] = None) -> int:
    """Forward FLOPs per image (multiply-add = 2) of a ModelSpec or a built Keras model.

    A ModelSpec is built at image_size (default: its own) and cached; a model is traced as is
    (image_size is then required unless the model's input shape is static).
    """
    if isinstance(model_or_spec, ModelSpec):
        return spec_stats(model_or_spec, image_size)[1]
    model = model_or_spec
    if image_size is None:
        image_size = model.inputs[0].shape[1]
    return model_forward_flops(model, image_size)
