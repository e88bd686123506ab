"""--variable_update and friends mapped onto tf.distribute strategies."""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tfbench.devices import DevicePlan
from tfbench.errors import UsageError


@dataclasses.dataclass
class StrategyPlan:
    strategy: tf.distribute.Strategy
    variables_label: str          # the header's `Variables:` line: what ran
    all_reduce_label: str | None  # the header's `AllReduce:` line, when shown
    show_all_reduce: bool
    num_workers: int = 1
    notices: tuple[str, ...] = ()


def _cross_device_ops(spec: str | None, plan: DevicePlan, hierarchical: bool):
    """(cross_device_ops or None for the default, label)."""
    if hierarchical:
        return tf.distribute.HierarchicalCopyAllReduce(), "hierarchical_copy"
    if not spec:
        return None, None
    name = spec.split(":")[0].split("#")[0]
    if name == "nccl":
        if plan.kind != "gpu":
            raise UsageError("--all_reduce_spec=nccl needs GPUs (NCCL does not run on CPU); "
                             "use --all_reduce_spec=pscpu or xring on CPU")
        return tf.distribute.NcclAllReduce(), "nccl"
    if name in ("xring", "hierarchical_copy", "hierarchical"):
        return tf.distribute.HierarchicalCopyAllReduce(), "hierarchical_copy"
    if name in ("pscpu", "psgpu"):
        device = "/cpu:0" if name == "pscpu" else plan.names[0]
        return tf.distribute.ReductionToOneDevice(reduce_to_device=device), \
            "reduction_to_one_device(%s)" % device
    raise UsageError("--all_reduce_spec=%s cannot be honoured under TF2: use nccl, xring "
                     "(hierarchical copy), pscpu or psgpu (reduction to one device)" % spec)


def make_strategy(p, plan: DevicePlan) -> StrategyPlan:
    """One device: OneDeviceStrategy. Several: mirrored or central storage, per the flags."""
    vu = p.variable_update
    if vu in ("distributed_replicated", "distributed_all_reduce", "collective_all_reduce") \
            and (p.worker_hosts or p.job_name):
        raise UsageError("multi-worker --variable_update=%s is not built yet" % vu)
    if vu == "horovod":
        try:
            import horovod.tensorflow  # noqa: F401
        except ImportError:
            raise UsageError("--variable_update=horovod needs horovod, which is not "
                             "importable; use --variable_update=replicated (MirroredStrategy) "
                             "or collective_all_reduce instead") from None
        raise UsageError("--variable_update=horovod is not built yet")
    if plan.num_devices == 1:
        strategy = tf.distribute.OneDeviceStrategy(plan.names[0])
        return StrategyPlan(strategy, vu, p.all_reduce_spec,
                            show_all_reduce=vu in ("replicated", "distributed_all_reduce",
                                                   "collective_all_reduce"))
    if vu == "parameter_server":
        ps_device = "/cpu:0" if p.local_parameter_device.lower() == "cpu" else None
        if ps_device or plan.kind == "cpu":
            strategy = tf.distribute.experimental.CentralStorageStrategy(
                compute_devices=list(plan.names), parameter_device=ps_device or "/cpu:0")
            return StrategyPlan(strategy, "parameter_server", None, False)
        ops = tf.distribute.ReductionToOneDevice(reduce_to_device=plan.names[0])
        strategy = tf.distribute.MirroredStrategy(list(plan.names), cross_device_ops=ops)
        return StrategyPlan(strategy, "parameter_server", None, False)
    ops, label = _cross_device_ops(p.all_reduce_spec, plan, p.hierarchical_copy)
    strategy = tf.distribute.MirroredStrategy(list(plan.names), cross_device_ops=ops)
    return StrategyPlan(strategy, vu, label or p.all_reduce_spec,
                        show_all_reduce=vu in ("replicated", "collective_all_reduce",
                                               "distributed_all_reduce"))
