"""The model registry: a model is one ModelSpec entry.

A builder takes (num_classes, image_size, data_format) and returns a Keras model whose input is a
float batch of NHWC images [B, S, S, 3] and whose output is float32 logits [B, num_classes]. With
data_format="NCHW" the model transposes its input itself (synthetic data is generated NHWC, as in
the legacy script). Builders build under the global Keras dtype policy, so mixed precision works
by setting the policy first; the logits layer is always float32.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Callable, Optional, Sequence

from tfbench.config.datasets import NUM_CLASSES

Builder = Callable[[int, int, str], "object"]


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str                 # the --model name
    dataset: str              # imagenet | cifar10
    builder: Builder
    image_size: int           # default input size
    batch_size: int           # default per-device batch
    learning_rate: float      # default (base) learning rate
    family: str               # e.g. resnet, vgg, efficientnet
    lr_schedule: str = "constant"  # constant | resnet | cifar_resnet | alexnet_cifar | official_resnet
    display_name: Optional[str] = None  # the legacy internal name shown in the header
    description: str = ""
    min_image_size: int = 1   # the smallest --image_size the architecture can take
    # False: no channels_first implementation; the builder builds NHWC even for NCHW (the runner
    # should say so in one line and record the layout actually used).
    channels_first: bool = True
    # What of the model's step Keras compiles with XLA whatever --xla ('' for nothing): XLA reads
    # only variables on its own device, so such a model cannot keep its variables on another
    # device (tfbench.distribute.strategy gives each device its own copy).
    xla_compiled: str = ""

    @property
    def num_classes(self) -> int:
        return NUM_CLASSES[self.dataset]

    @property
    def header_name(self) -> str:
        return self.display_name or self.name

    def build(self, image_size: Optional[int] = None, data_format: str = "NHWC"):
        return self.builder(self.num_classes, image_size or self.image_size, data_format)


_REGISTRY: dict[tuple[str, str], ModelSpec] = {}


def register(spec: ModelSpec) -> ModelSpec:
    key = (spec.name, spec.dataset)
    if key in _REGISTRY:
        raise ValueError("model %s for %s registered twice" % key)
    _REGISTRY[key] = spec
    return spec


def unknown_model(name: str, known: Sequence[str]) -> str:
    """The one line that refuses a --model no model has: the closest names (difflib, any case)
    and where the whole list is, never the list itself."""
    by_lower = {k.lower(): k for k in known}
    close = [by_lower[c] for c in difflib.get_close_matches(name.lower(), list(by_lower), n=3)]
    hint = ": did you mean %s?" % (" or ".join([", ".join(close[:-1]), close[-1]])
                                   if len(close) > 1 else close[0]) if close else "."
    return "Invalid model name '%s'%s `tfbench models` lists all %d models" % (
        name, hint, len(set(known)))
