"""Classifiers taken from keras.applications (weights=None: random init, nothing downloads).

Each is built with include_top=True, classes=num_classes (1001 for imagenet) and
classifier_activation=None, so the model outputs logits, followed by a float32 cast layer: under
mixed precision Keras computes the classifier in the compute dtype, and tfbench's contract is
float32 logits.

Preprocessing: MobileNetV3, EfficientNetV2 and ConvNeXt are built with include_preprocessing=False
(inputs go straight into the network, as in every other tfbench model). EfficientNet B0-B7 have
no such switch: their stem always starts with Rescaling(1/255) and an identity Normalization
(mean 0, variance 1 without weights); both are elementwise and cost next to nothing.

Data format: with data_format="NCHW" the model transposes its NHWC input and builds the network
channels_first where Keras supports it. ConvNeXt, DenseNet and NASNet have no channels_first
implementation in Keras; for those (ModelSpec.channels_first=False) NCHW builds the NHWC network.

Batch norm: each Keras BatchNormalization over a feature map runs as tfbench's FusedBatchNorm
(one kernel, as tfbench's own models and the legacy script), with the same weights: Keras' layer
runs as separate ops (MobileNet-V2 training 1.7-1.8x slower on a 2-core CPU).

Legacy names: tf_cnn_benchmarks' TF1-only `mobilenet` was MobileNet V2 (depth multiplier 1,
224), so `mobilenet` here is keras MobileNetV2 as well (`mobilenet_v1` is the original MobileNet);
`nasnet` is NASNet-A Mobile (224) and `nasnetlarge` NASNet-A Large (331), both without the
auxiliary head the legacy models trained with.
"""

from __future__ import annotations

import functools
from typing import Callable

import keras

from tfbench.models import fused_bn
from tfbench.models import layers as L
from tfbench.config.datasets import IMAGENET
from tfbench.models.registry import ModelSpec, register

# Keras' own minimum input sizes (imagenet_utils.obtain_input_shape).
KERAS_MIN_SIZE = 32


def build_application(num_classes: int, image_size: int, data_format: str, factory: Callable,
                      name: str, min_size: int = KERAS_MIN_SIZE, channels_first: bool = True,
                      **kwargs) -> keras.Model:
    L.require_image_size(image_size, min_size, name)
    layout = "NCHW" if data_format == "NCHW" and channels_first else "NHWC"
    inputs, x = L.image_input(image_size, layout)
    # Keras infers the shape from input_tensor; passing input_shape as well trips a
    # channels_first shape check in MobileNetV3 (it compares the wrong axes).
    with L.keras_image_data_format(layout):
        net = factory(include_top=True, weights=None, input_tensor=x,
                      classes=num_classes, classifier_activation=None, **kwargs)
    model = keras.Model(inputs, L.float32_logits(net.output), name=name)
    return fused_bn.with_fused_batch_norm(model)


def _register(name: str, factory: Callable, image_size: int, batch_size: int, family: str,
              description: str, min_size: int = KERAS_MIN_SIZE, channels_first: bool = True,
              display_name=None, xla_compiled: str = "", **kwargs) -> None:
    builder = functools.partial(build_application, factory=factory, name=name, min_size=min_size,
                                channels_first=channels_first, **kwargs)
    register(ModelSpec(name, IMAGENET, builder, image_size, batch_size, 0.005, family=family,
                       display_name=display_name, description=description,
                       min_image_size=min_size, channels_first=channels_first,
                       xla_compiled=xla_compiled))


apps = keras.applications
NO_PREPROCESSING = dict(include_preprocessing=False)

# --- the legacy TF1-only names -----------------------------------------------------------------
_register("mobilenet", apps.MobileNetV2, 224, 32, "mobilenet",
          "MobileNet V2 1.0 (the legacy mobilenet), keras.applications")
_register("nasnet", apps.NASNetMobile, 224, 32, "nasnet",
          "NASNet-A Mobile 4@1056, keras.applications, no auxiliary head", channels_first=False)
_register("nasnetlarge", apps.NASNetLarge, 331, 16, "nasnet",
          "NASNet-A Large 6@4032, keras.applications, no auxiliary head", channels_first=False,
          display_name="nasnet")

# --- modern classifiers ------------------------------------------------------------------------
_register("mobilenet_v1", apps.MobileNet, 224, 32, "mobilenet",
          "MobileNet V1 1.0, keras.applications")
_register("mobilenet_v2", apps.MobileNetV2, 224, 32, "mobilenet",
          "MobileNet V2 1.0, keras.applications")
_register("mobilenet_v3_large", apps.MobileNetV3Large, 224, 32, "mobilenet",
          "MobileNet V3 Large 1.0, keras.applications", **NO_PREPROCESSING)
_register("mobilenet_v3_small", apps.MobileNetV3Small, 224, 32, "mobilenet",
          "MobileNet V3 Small 1.0, keras.applications", **NO_PREPROCESSING)

# Default batch sizes shrink as the default resolution grows.
for _i, (_size, _batch) in enumerate(((224, 32), (240, 32), (260, 32), (300, 32), (380, 16),
                                      (456, 8), (528, 8), (600, 4))):
    _register("efficientnet_b%d" % _i, getattr(apps, "EfficientNetB%d" % _i), _size, _batch,
              "efficientnet", "EfficientNet-B%d, keras.applications" % _i)
for _variant, _size, _batch in (("s", 384, 16), ("m", 480, 8), ("l", 480, 8)):
    _register("efficientnet_v2_" + _variant, getattr(apps, "EfficientNetV2" + _variant.upper()),
              _size, _batch, "efficientnet_v2",
              "EfficientNetV2-%s, keras.applications" % _variant.upper(), **NO_PREPROCESSING)

for _depth in (121, 169, 201):
    _register("densenet%d" % _depth, getattr(apps, "DenseNet%d" % _depth), 224, 32, "densenet",
              "DenseNet-%d, keras.applications" % _depth, channels_first=False)

_register("xception", apps.Xception, 299, 32, "xception", "Xception, keras.applications",
          min_size=71)
_register("inception_resnet_v2", apps.InceptionResNetV2, 299, 32, "inception",
          "Inception-ResNet-v2, keras.applications", min_size=75)

for _variant in ("tiny", "small", "base"):
    _register("convnext_" + _variant, getattr(apps, "ConvNeXt" + _variant.capitalize()), 224, 32,
              "convnext", "ConvNeXt-%s, keras.applications" % _variant.capitalize(),
              channels_first=False, **NO_PREPROCESSING,
              # keras/src/backend/tensorflow/nn.py conv(): grouped convolutions, on every device.
              xla_compiled="Keras compiles its grouped convolutions with XLA")
