"""Step functions: one compiled function per training / forward / eval step.

Each step returns one small float32 vector [base_loss, total_loss, top_1, top_5], so the timed
loop needs exactly one host round trip per step (the one that the per-step timing needs anyway).
Training and forward steps average this worker's replicas: legacy Step lines show each worker's
own loss and accuracy, and no collective joins the timed step to fetch them. Evaluation steps
average every worker's replicas, so all workers see one accuracy and take the same
--stop_at_top_1_accuracy decision.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import keras
import tensorflow as tf

from tfbench.config import fast_paths as fast_paths_lib
from tfbench.distribute import pipelines, strategies, sync
from tfbench.engine import update_kernels
from tfbench.models.fused_bn import FusedBatchNorm

NORM_LAYERS = (keras.layers.BatchNormalization, keras.layers.LayerNormalization,
               keras.layers.GroupNormalization, FusedBatchNorm)


def _all_layers(layer) -> list:
    found = []
    for child in getattr(layer, "layers", []) or []:
        found.append(child)
        found.extend(_all_layers(child))
    return found


def weight_decay_variables(model) -> list:
    """Trainable variables that weight decay applies to: all but normalisation parameters."""
    excluded = {id(v) for layer in _all_layers(model) if isinstance(layer, NORM_LAYERS)
                for v in layer.trainable_variables}
    return [v for v in model.trainable_variables if id(v) not in excluded]


def l2_loss(variables) -> tf.Tensor:
    if not variables:
        return tf.constant(0.0, tf.float32)
    return tf.add_n([tf.nn.l2_loss(tf.cast(v, tf.float32)) for v in variables])


def accuracy(logits, labels) -> tuple[tf.Tensor, tf.Tensor]:
    logits = tf.cast(logits, tf.float32)
    top_1 = tf.reduce_mean(tf.cast(tf.math.in_top_k(labels, logits, 1), tf.float32))
    top_5 = tf.reduce_mean(tf.cast(tf.math.in_top_k(labels, logits, 5), tf.float32))
    return top_1, top_5


def cross_entropy(logits, labels) -> tf.Tensor:
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=tf.cast(logits, tf.float32)))


@dataclasses.dataclass
class StepConfig:
    num_label_classes: int        # synthetic labels are drawn from [0, num_label_classes)
    weight_decay: float
    loss_scaling: str = "none"    # none | static | dynamic
    loss_scale: float = 1.0
    accum_steps: int = 1          # micro-batches per update; a step's batch holds all of them
    compute_accuracy: bool = False
    jit_compile: bool = False
    # CPU-only rewrites; the default is the standard path every device can run.
    fast_paths: fast_paths_lib.FastPaths = fast_paths_lib.STANDARD


class Steps:
    """Builds the per-step tf.functions for a model, optimizer and strategy."""

    def __init__(self, model, optimizer, strategy: tf.distribute.Strategy, config: StepConfig):
        self.model = model
        self.optimizer = optimizer
        self.strategy = strategy
        self.config = config
        self.decay_vars = weight_decay_variables(model)
        inner = getattr(optimizer, "inner_optimizer", optimizer)
        if strategy.num_replicas_in_sync > 1 and optimizer is not None and \
                not isinstance(inner, update_kernels.ReducedByTheStep):
            # It would all-reduce the gradients the step has already summed.
            raise TypeError("%s on %d replicas must take reduced gradients "
                            "(update_kernels.ReducedByTheStep)"
                            % (type(inner).__name__, strategy.num_replicas_in_sync))
        self._accum = None
        self._grad_fn = self._gradients
        self._predict_fn = self._predict
        sync.sync_initial_state(
            strategy, list(model.variables) + (list(optimizer.variables) if optimizer else []))

    # -- per replica -------------------------------------------------------------------
    def _labels(self, images):
        batch = tf.shape(images)[0]
        return tf.random.uniform([batch], 0, self.config.num_label_classes, dtype=tf.int32)

    def _call_model(self, images, training: bool):
        with fast_paths_lib.using(self.config.fast_paths):
            return self.model(images, training=training)

    def _losses(self, images, labels, training: bool, tape=None):
        logits = self._call_model(images, training)
        base = cross_entropy(logits, labels)
        if not self.config.weight_decay:
            return logits, base, base
        if tape is not None and self._decay_in_update():
            # The update applies the decay itself (see _apply); the loss only reports it.
            with tape.stop_recording():
                decay = l2_loss(self.decay_vars)
        else:
            decay = l2_loss(self.decay_vars)
        return logits, base, base + self.config.weight_decay * decay

    def _gradients(self, images, labels):
        cfg = self.config
        replicas = sync.gradient_divisor(self.strategy)
        with tf.GradientTape() as tape:
            logits, base, total = self._losses(images, labels, training=True, tape=tape)
            # Gradients are summed across replicas, so each replica's loss is divided.
            objective = total / replicas
            if cfg.loss_scaling == "static":
                objective = objective * cfg.loss_scale
            elif cfg.loss_scaling == "dynamic":
                objective = self.optimizer.scale_loss(objective)
        variables = self.model.trainable_variables
        grads = tape.gradient(objective, variables)
        if cfg.loss_scaling == "static":
            grads = [g / cfg.loss_scale if g is not None else None for g in grads]
        return logits, base, total, grads

    def loss_and_gradients(self, images, labels):
        """One forward and backward pass on this replica, no update: (the total loss, each
        trainable variable's gradient, dense), as the training step computes them (scaled by
        the dynamic loss scale where there is one)."""
        _, _, total, grads = self._gradients(images, labels)
        return total, [tf.convert_to_tensor(g) if g is not None else None for g in grads]

    def _decay_in_update(self) -> bool:
        """Plain SGD on one CPU replica with weight decay and nothing Keras adds to the update
        (clipping, EMA, decoupled decay, accumulation): the decay can be applied inside the
        update (ResourceApplyProximalGradientDescent, a CPU kernel only) instead of being
        differentiated. Every other update is the optimizer's own, one TensorFlow training
        kernel per variable on every device (tfbench.engine.update_kernels)."""
        opt = self.optimizer
        return (self.config.fast_paths.sgd_decay_in_update and self.config.weight_decay > 0
                and isinstance(opt, keras.optimizers.SGD) and not opt.momentum
                and opt.clipvalue is None and opt.clipnorm is None
                and opt.global_clipnorm is None and not opt.use_ema and not opt.weight_decay
                and not opt.gradient_accumulation_steps
                and self.strategy.num_replicas_in_sync == 1)

    def _apply(self, grads, variables):
        reduced = sync.reduce_gradients(self.strategy, grads, variables)
        # The updates wait for every gradient of this replica; the all-reduce above does not.
        # The backward pass's reads of a variable share its buffer, and an in-place update while
        # one is still pending copies the whole variable first (copy-on-write): 2.7 instead of
        # 0.8 ms per step for trivial's 4M weights. Around the all-reduce the same dependency
        # would hold every pack until the whole backward pass ended: TensorFlow runs a merge
        # call under the union of every replica's control dependencies (mirrored_run.py,
        # mtt_captured_control_deps, TF 2.17 to 2.21). Inside XLA it orders nothing either way
        # (tf2xla builds ops from data edges only).
        with tf.control_dependencies([g for g in grads if g is not None]):
            if not self._decay_in_update():
                self.optimizer.apply(reduced, variables)
                return
            self._apply_decayed_sgd(reduced, variables)
        self.optimizer.iterations.assign_add(1)

    def _apply_decayed_sgd(self, grads, variables):
        # var -= lr * (grad + wd * var), the gradient of the L2 term included, in one kernel
        # instead of the autodiff's multiply, add and update (2.3 -> 1.1 ms for trivial's 4M
        # weights). ApplyProximalGradientDescent with l1 = 0 computes
        # var = (var - a * grad) / (1 + a * l2); a = lr / (1 - lr * wd) and l2 = wd make that
        # exactly var * (1 - lr * wd) - lr * grad (for lr * wd != 1; at 1 the rate is infinite
        # and the loss becomes NaN, a run that would not train either way).
        lr = tf.cast(self.optimizer.learning_rate, tf.float32)
        decayed = {id(v) for v in self.decay_vars}
        wd = tf.constant(self.config.weight_decay, tf.float32)
        prox_lr = lr / (1.0 - lr * wd)
        for grad, var in zip(grads, variables):
            if grad is None and id(var) in decayed:
                grad = tf.zeros_like(var)   # unused by the loss, but still decayed
            if grad is None:
                continue
            if id(var) in decayed:
                tf.raw_ops.ResourceApplyProximalGradientDescent(
                    var=var.handle, alpha=tf.cast(prox_lr, var.dtype),
                    l1=tf.zeros([], var.dtype), l2=tf.cast(wd, var.dtype), delta=grad)
            else:
                tf.raw_ops.ResourceApplyGradientDescent(
                    var=var.handle, alpha=tf.cast(lr, var.dtype), delta=grad)

    def _metrics(self, logits, labels, base, total):
        if self.config.compute_accuracy:
            top_1, top_5 = accuracy(logits, labels)
        else:
            top_1 = top_5 = tf.constant(0.0)
        return tf.stack([base, total, top_1, top_5])

    def _train_replica(self, images, labels=None):
        cfg = self.config
        variables = self.model.trainable_variables
        if cfg.accum_steps == 1:
            if labels is None:
                labels = self._labels(images)
            logits, base, total, grads = self._grad_fn(images, labels)
            self._apply(grads, variables)
            return self._metrics(logits, labels, base, total)
        # Gradient accumulation: the step's batch (K micro-batches per replica) is split, and
        # one update with the mean gradient equals one step on the K-times larger batch.
        micro_images = tf.split(images, cfg.accum_steps)
        micro_labels = tf.split(labels, cfg.accum_steps) if labels is not None else \
            [self._labels(m) for m in micro_images]
        summed = None
        sums = tf.zeros([4])
        for k in range(cfg.accum_steps):
            logits, base, total, grads = self._grad_fn(micro_images[k], micro_labels[k])
            summed = grads if summed is None else [a + b for a, b in zip(summed, grads)]
            sums += self._metrics(logits, micro_labels[k], base, total)
        self._apply([g / cfg.accum_steps for g in summed], variables)
        return sums / cfg.accum_steps

    def _predict(self, images):
        return self._call_model(images, training=False)

    def _forward_replica(self, images, labels=None):
        if labels is None:
            labels = self._labels(images)
        logits = self._predict_fn(images)
        top_1, top_5 = accuracy(logits, labels)
        zero = tf.constant(0.0)
        return tf.stack([zero, zero, top_1, top_5])

    # -- compiled steps ----------------------------------------------------------------
    def _compile(self, replica_fn: Callable, from_iterator: bool, all_workers: bool = False):
        strategy = self.strategy
        jit = self.config.jit_compile
        single = strategy.num_replicas_in_sync == 1
        # Asked of the strategy, not a plan: Steps are built from a model, an optimizer and a
        # strategy (tests, benchmarks/, a probe's one-device strategy), and how a step is
        # driven is the strategy object's (a ParameterServerStrategy's steps are scheduled
        # through its coordinator). Runners ask their plan (Resolved.parameter_server).
        parameter_server = strategies.is_parameter_server(strategy)
        # Parameter-server workers read real data from their own per-worker iterator.
        from_iterator = from_iterator or parameter_server
        horovod = isinstance(strategy, strategies.HorovodStrategy)
        # XLA compiles the whole step: on one device (an input iterator's next() stays outside,
        # in the step that feeds the compiled body), and each replica's step on several GPUs
        # (TensorFlow then all-reduces inside the compiled function:
        # strategies.replica_step_compilation).
        # Elsewhere it compiles each replica's forward (and backward) pass only: horovod (its
        # allreduce has no XLA kernel), several CPU devices, independent replicas, a
        # parameter-server cluster.
        whole_body = bool(jit and single and not horovod and not parameter_server)
        replica_steps, _ = strategies.replica_step_compilation(strategy, xla=jit)
        per_replica_jit = bool(jit and not whole_body and not replica_steps)
        # autograph=False: the step's control flow is plain Python (over flags and layers), and
        # converting the step and every Keras call it makes cost 0.5-0.7 s of the first step.
        self._grad_fn = tf.function(self._gradients, jit_compile=True, autograph=False) \
            if per_replica_jit else self._gradients
        self._predict_fn = tf.function(self._predict, jit_compile=True, autograph=False) \
            if per_replica_jit else self._predict
        run_fn = tf.function(replica_fn, jit_compile=True, autograph=False) \
            if replica_steps else replica_fn

        def body(*args):
            out = strategy.run(run_fn, args=args)
            if all_workers:
                return strategy.reduce(tf.distribute.ReduceOp.MEAN, out, axis=None)
            return local_mean(strategy, out)

        compiled_body = tf.function(body, jit_compile=True, autograph=False) \
            if whole_body and from_iterator else body

        def step(inputs):
            if isinstance(inputs, pipelines.WorkerImages):   # read on each worker's devices
                return body(inputs.per_replica())
            if from_iterator:
                element = next(inputs)   # (images, labels), or images alone (synthetic)
                args = tuple(element) if isinstance(element, (tuple, list)) else (element,)
                return compiled_body(*args)
            return body(inputs)

        compiled = tf.function(step, jit_compile=whole_body and not from_iterator,
                               autograph=False)
        if parameter_server:
            return strategies.ScheduledStep(compiled, strategy)
        return ConcreteAfterFirstCall(compiled)

    def train_step(self, from_iterator: bool = False):
        return self._compile(self._train_replica, from_iterator)

    def forward_step(self, from_iterator: bool = False):
        return self._compile(self._forward_replica, from_iterator)

    def eval_step(self, from_iterator: bool = False):
        """A forward step whose accuracy is every worker's mean."""
        return self._compile(self._forward_replica, from_iterator, all_workers=True)


def local_mean(strategy: tf.distribute.Strategy, out) -> tf.Tensor:
    """The mean of this worker's replicas' outputs (every replica's on a single host)."""
    local = strategy.experimental_local_results(out)
    if len(local) == 1:
        return local[0]
    return tf.add_n(list(local)) / len(local)


class ConcreteAfterFirstCall:
    """A step that calls its traced concrete function from the second call on.

    A tf.function derives the type of its arguments on every call to find the trace to run,
    ~0.2 ms of host time per step; for small models (lenet at batch 1: ~1 ms per step) that is
    a large share of the step. The timed loop always passes the same inputs (the same tensors or
    the same iterator), so the trace found on the first call is the one every later call needs.
    """

    def __init__(self, function):
        self.function = function
        self._concrete = None

    def __call__(self, inputs):
        if self._concrete is None:
            out = self.function(inputs)
            self._concrete = self.function.get_concrete_function(inputs)
            return out
        return self._concrete(inputs)


def synthetic_images(strategy: tf.distribute.Strategy, batch_size: int, image_size: int,
                     dtype: str, seed: Optional[int] = None):
    """Per-replica images generated once on each compute device and reused every step.

    truncated_normal(mean 127, stddev 60), values in (7, 247), unnormalised, as the legacy
    script's synthetic inputs. On a parameter-server cluster they are kept on every worker's
    replica devices (pipelines.WorkerImages), which its scheduled steps read.
    """
    def make(_context):
        return tf.cast(tf.random.truncated_normal(
            [batch_size, image_size, image_size, 3], mean=127.0, stddev=60.0, seed=seed), dtype)
    if strategies.is_parameter_server(strategy):   # how values live on this strategy (no plan)
        return pipelines.WorkerImages(strategy, make)

    def make_on_replica_device(context):
        # TensorFlow calls this without a device scope: unplaced, every replica's batch would
        # live on the first device and be copied to its replica on every step.
        with tf.device(replica_device(strategy, context)):
            return make(context)
    return strategy.experimental_distribute_values_from_function(make_on_replica_device)


def replica_device(strategy: tf.distribute.Strategy,
                   context: tf.distribute.experimental.ValueContext) -> str:
    """This worker's compute device for the replica `context` describes.

    Replica ids count every worker's replicas (MultiWorkerMirroredStrategy numbers them worker by
    worker), and each worker creates values for its own local replicas only.
    """
    local = strategy.extended.worker_devices
    return local[context.replica_id_in_sync_group % len(local)]
