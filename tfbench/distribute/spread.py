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
colocates it). The gradient all-reduce that Keras' optimizer asks for in each replica
(ReplicaContext.all_reduce, a batch of SUMs) hands every replica its own gradient back; the
update that follows (StrategyExtended.update, called by the optimizer with the gradient first)
sums the replicas' gradients on the variable's device and updates the variable there. No
gradient crosses a device except to the device of its variable. Every other reduction
(strategy.reduce, a variable's aggregation, a MEAN) is a real reduction to its destination;
code that needs an all-reduced value in replica context (the loss-scale check) asks through
sync.replica_all_reduce_reduces.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.distribute import parameter_server_strategy, ps_values
from tensorflow.python.distribute import values as tf_values
from tensorflow.python.framework import ops


class _SumAtVariables(tf.distribute.CrossDeviceOps):
    """A batch SUM all-reduce returns each replica's value (the update sums it); everything
    else reduces to its destination's device."""

    def __init__(self):
        super().__init__()
        self._to_one = tf.distribute.ReductionToOneDevice()   # to the destination's device

    def reduce_implementation(self, reduce_op, per_replica_value, destinations, options):
        return self._to_one.reduce_implementation(reduce_op, per_replica_value, destinations,
                                                  options)

    def batch_reduce_implementation(self, reduce_op, value_destination_pairs, options):
        if reduce_op == tf.distribute.ReduceOp.SUM and all(
                d is v and isinstance(v, tf_values.PerReplica)
                for v, d in value_destination_pairs):
            return [v for v, _ in value_destination_pairs]
        return self._to_one.batch_reduce_implementation(reduce_op, value_destination_pairs,
                                                        options)

    def broadcast_implementation(self, tensor, destinations):
        return self._to_one.broadcast_implementation(tensor, destinations)


class _SpreadExtended(parameter_server_strategy.ParameterServerStrategyExtended):

    def __init__(self, container, devices):
        super().__init__(container, compute_devices=list(devices), parameter_device=devices[0])
        self._parameter_devices = tuple(self._compute_devices)
        self._cross_device_ops = _SumAtVariables()
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

    def _update(self, var, fn, args, kwargs, group):
        target = var.get() if isinstance(var, ps_values.AggregatingVariable) else var
        if args and _replica_gradients(args[0], target):
            with ops.device(target.device):
                summed = tf.math.add_n(list(args[0].values))
            args = (summed,) + tuple(args[1:])
        elif args and isinstance(args[0], tf_values.PerReplica) and len(args[0].values) > 1:
            # CentralStorageStrategy's _update would apply replica 0's value alone.
            raise RuntimeError("spread parameter server: the replicas' values for %s cannot be "
                               "summed (%s); refusing to apply one replica's value"
                               % (target.name, ", ".join("%s %s" % (type(t).__name__,
                                                                   getattr(t, "shape", "?"))
                                                         for t in args[0].values)))
        return super()._update(var, fn, args, kwargs, group)


def _replica_gradients(value, var) -> bool:
    """Every replica's own gradient of `var` (what _SumAtVariables' all-reduce returned)."""
    return (isinstance(value, tf_values.PerReplica) and len(value.values) > 1
            and all(isinstance(t, tf.Tensor) and t.dtype == var.dtype
                    and t.shape == var.shape for t in value.values))


class SpreadStorageStrategy(tf.distribute.experimental.CentralStorageStrategy):
    """CentralStorageStrategy whose variables and gradient sums are spread over the compute
    devices, each variable on the least-loaded one as it is created (see the module)."""

    def __init__(self, devices):
        # CentralStorageStrategy.__init__ would build TensorFlow's own extended.
        tf.distribute.Strategy.__init__(self, _SpreadExtended(self, list(devices)))

    def held_bytes(self) -> dict[str, int]:
        """Bytes of variables created on each device (slots excepted)."""
        return dict(self.extended.held_bytes)
