"""Model zoo. Importing this package registers every model (see registry.py)."""

from tfbench.models import trivial  # noqa: F401
from tfbench.models import lenet  # noqa: F401
from tfbench.models import alexnet  # noqa: F401
from tfbench.models import overfeat  # noqa: F401
from tfbench.models import vgg  # noqa: F401
from tfbench.models import googlenet  # noqa: F401
from tfbench.models import inception  # noqa: F401
from tfbench.models import resnet  # noqa: F401
from tfbench.models import official_resnet  # noqa: F401
from tfbench.models import densenet_cifar  # noqa: F401
from tfbench.models import applications  # noqa: F401
from tfbench.models import vit  # noqa: F401
