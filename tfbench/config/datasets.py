"""The two label spaces models are built for, and their datasets' sizes (legacy constants).

Shared by models (the logits layer), data (labels and example counts) and the engine, so they
live below all three.
"""

IMAGENET = "imagenet"
CIFAR10 = "cifar10"

NUM_CLASSES = {IMAGENET: 1001, CIFAR10: 11}
# Labels drawn for synthetic data: imagenet 0..999, cifar10 0..9 (legacy: [0, num_classes - 1)).
NUM_TRAIN_EXAMPLES = {IMAGENET: 1281167, CIFAR10: 50000}
NUM_EVAL_EXAMPLES = {IMAGENET: 50000, CIFAR10: 10000}
