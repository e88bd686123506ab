"""--variable_update=parameter_server on several devices, as the legacy script runs it.

The legacy script (variable_mgr.VariableMgrLocalFetchFromPS with the default
--local_parameter_device=gpu) puts each variable, as it is created, on the compute device that
holds the fewest elements so far (variable_mgr_util.ParamServerDeviceSetter), sums the
replicas' gradients of a variable on that variable's device
(aggregate_gradients_using_copy_with_variable_colocation), updates it there, and every replica
reads every variable from where it lives. TensorFlow's CentralStorageStrategy keeps every
variable, and every gradient sum, on one device: with 8 GPUs, GPU 0 receives and sends 8 times
what any GPU does under the legacy script.

SpreadStorageStrategy is CentralStorageStrategy (one copy of each variable, an
AggregatingVariable, read by every replica) whose variables are spread as the legacy script
spreads them, counted in bytes (an optimizer slot goes with its variable, as TensorFlow
colocates it). The step sums each gradient on its variable's device
(tfbench.distribute.sync.reduce_gradients: a batch reduction with the variables as destinations)
and the update runs there. No gradient crosses a device except to the device of its variable.
Every reduction goes to its destination's device, so an all-reduce is a real one (summed on the
first device, then copied to every replica).
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.distribute import parameter_server_strategy
from tensorflow.python.framework import ops


class _SpreadExtended(parameter_server_strategy.ParameterServerStrategyExtended):

    def __init__(self, container, devices):
        super().__init__(container, compute_devices=list(devices), parameter_device=devices[0])
        self._parameter_devices = tuple(self._compute_devices)
        # Reductions go to their destination's device: a gradient to its variable's.
        self._cross_device_ops = tf.distribute.ReductionToOneDevice()
        self.held_bytes = {d: 0 for d in self._compute_devices}

    def _least_loaded(self) -> str:
        # The first of the devices holding the fewest bytes, as ParamServerDeviceSetter picks.
        return min(self._compute_devices, key=lambda d: self.held_bytes[d])

    def _create_variable(self, next_creator, **kwargs):
        if "colocate_with" in kwargs:       # an optimizer slot: with its variable
            return super()._create_variable(next_creator, **kwargs)
        value = kwargs["initial_value"]
        if callable(value):
            with ops.init_scope():
                value = value()
            kwargs["initial_value"] = value
        value = tf.convert_to_tensor(value, dtype=kwargs.get("dtype"))
        device = self._least_loaded()
        self.held_bytes[device] += value.shape.num_elements() * value.dtype.size
        var_creator = self._create_var_creator(next_creator, **kwargs)
        with ops.colocate_with(None, ignore_existing=True), ops.device(device):
            return var_creator(**kwargs)


class SpreadStorageStrategy(tf.distribute.experimental.CentralStorageStrategy):
    """CentralStorageStrategy whose variables and gradient sums are spread over the compute
    devices, each variable on the least-loaded one as it is created (see the module)."""

    def __init__(self, devices):
        # CentralStorageStrategy.__init__ would build TensorFlow's own extended.
        tf.distribute.Strategy.__init__(self, _SpreadExtended(self, list(devices)))

    def held_bytes(self) -> dict[str, int]:
        """Bytes of variables created on each device (slots excepted)."""
        return dict(self.extended.held_bytes)
