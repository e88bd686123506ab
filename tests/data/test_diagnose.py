"""Input-only timing and the input-bound verdict."""

import tensorflow as tf

from tfbench.data.diagnose import input_bound_verdict, input_only_benchmark


def test_input_only_benchmark_times_each_batch():
    ds = tf.data.Dataset.range(100).batch(2)
    times = input_only_benchmark(ds, num_batches=5, num_warmup=3)
    assert len(times) == 5 and all(t >= 0 for t in times)


def test_input_bound():
    bound, line = input_bound_verdict(1000.0, 600.0, 620.0)
    assert bound
    assert "INPUT-BOUND" in line and "1000.0" in line and "600.0" in line and "620.0" in line
    assert "60%" in line and "/dev/shm" in line and "--datasets_use_caching" in line
    assert "\n" not in line


def test_not_input_bound_when_real_is_close_to_synthetic():
    bound, line = input_bound_verdict(1000.0, 950.0, 5000.0)
    assert not bound and "not input-bound" in line and "95%" in line


def test_slow_real_but_fast_pipeline_is_not_input_bound():
    bound, line = input_bound_verdict(1000.0, 500.0, 2000.0)
    assert not bound and "4.0x" in line and "compete" in line


def test_threshold_and_degenerate_values():
    assert input_bound_verdict(1000.0, 850.0, 860.0, threshold=0.8)[0] is False
    assert input_bound_verdict(1000.0, 850.0, 860.0)[0] is True
    bound, line = input_bound_verdict(0.0, 10.0, 10.0)
    assert not bound and "cannot judge" in line


def test_input_settings_line_names_the_pool_and_the_buffers():
    from tfbench.data.diagnose import input_settings_line
    assert input_settings_line(6, "the legacy default on GPUs: 16 CPUs - 4 GPU threads - 4 for "
                               "monitoring and transfers", True) == (
        "Input settings: a private tf.data thread pool of 6 threads (the legacy default on "
        "GPUs: 16 CPUs - 4 GPU threads - 4 for monitoring and transfers); host buffers pinned "
        "(--force_gpu_compatible)")
    assert input_settings_line(None, "--datasets_num_private_threads=0", False) == (
        "Input settings: TensorFlow's shared threads for tf.data "
        "(--datasets_num_private_threads=0); host buffers pageable (--noforce_gpu_compatible)")
