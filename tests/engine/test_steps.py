"""ConcreteAfterFirstCall: same results as the tf.function, without its per-call lookup."""

import tensorflow as tf

from tfbench.engine import steps


def test_calls_the_concrete_function_after_the_first_call():
    traces = []

    @tf.function
    def double(x):
        traces.append(1)
        return x * 2.0

    step = steps.ConcreteAfterFirstCall(double)
    x = tf.constant([1.0, 2.0])
    assert step._concrete is None
    assert step(x).numpy().tolist() == [2.0, 4.0]
    assert isinstance(step._concrete, type(double.get_concrete_function(x)))
    for _ in range(3):
        assert step(x).numpy().tolist() == [2.0, 4.0]
    assert len(traces) == 1


def test_iterator_inputs_advance_on_every_call():
    @tf.function
    def take(iterator):
        return next(iterator)

    step = steps.ConcreteAfterFirstCall(take)
    iterator = iter(tf.data.Dataset.range(5))
    assert [int(step(iterator)) for _ in range(5)] == [0, 1, 2, 3, 4]


def test_variables_update_through_the_concrete_function():
    v = tf.Variable(0.0)

    @tf.function
    def bump(x):
        v.assign_add(x)
        return v.read_value()

    step = steps.ConcreteAfterFirstCall(bump)
    assert [float(step(tf.constant(1.5))) for _ in range(3)] == [1.5, 3.0, 4.5]
