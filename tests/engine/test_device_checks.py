"""--validate_devices (tfbench.engine.device_checks): the numeric check's digest and difference
(tfbench.measure.agreement) on hand-made arrays, its batch and inputs, op determinism turned on
and off again, the runs it refuses, and a run on one device (in this process) with a check that
fails and an op without a deterministic kernel. A slow device and a wrong one on logical devices
are found in test_explain_injected.py."""

import dataclasses
import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import config as tf_config

from helpers import run_inprocess
from tfbench.config.argv import parse_settings
from tfbench.engine import actions, device_checks, resolved as resolved_lib
from tfbench.errors import UsageError
from tfbench.measure import agreement, peak


def _f32(*values):
    return np.array(values, np.float32)


# --- the digest and the difference ------------------------------------------------------------
def test_the_digest_changes_with_any_bit_and_the_order():
    a, b = _f32(1.0, 2.0), _f32(3.0)
    one_ulp = _f32(1.0, np.nextafter(np.float32(2.0), np.float32(3.0)))
    assert agreement.digest([a, b]) == agreement.digest([a.copy(), b.copy()])
    assert agreement.digest([a, b]) != agreement.digest([one_ulp, b])
    assert agreement.digest([a, b]) != agreement.digest([b, a])
    # The same bytes as another dtype or shape are another result.
    assert agreement.digest([a]) != agreement.digest([a.view(np.int32)])
    assert agreement.digest([a]) != agreement.digest([a.reshape(2, 1)])
    assert agreement.digest([a, None]) != agreement.digest([a])
    assert len(agreement.digest([a])) == 64


@pytest.mark.parametrize("a, b, expected", [
    (_f32(1, 2, 4), _f32(1, 2, 3), 1 / 3),              # |4 - 3| / max|b| = 1/3
    (_f32(-8, 0), _f32(-4, 0), 1.0),                    # |-8 + 4| / 4
    (_f32(1, 2.5), _f32(1, 2), 0.25),
    (_f32(0, 1e-30), _f32(0, 0), 1.0),                  # b all zeros: relative to max|a|
    (_f32(0.0), _f32(-0.0), 0.0),                       # other bits, no difference
    (_f32(1, np.nan), _f32(1, np.nan), 0.0),            # the same NaN: the same bits
    (_f32(1, np.nan), _f32(1, 2), math.inf),
    (_f32(1, 2), _f32(1, np.inf), math.inf),
])
def test_the_relative_difference_by_hand(a, b, expected):
    assert agreement.rel_diff(a, b) == pytest.approx(expected, rel=1e-6)


def test_one_unit_in_the_last_place():
    b = _f32(1.0, -0.5)
    a = _f32(np.nextafter(np.float32(1.0), np.float32(2.0)), -0.5)
    assert agreement.rel_diff(a, b) == 2.0 ** -23
    assert agreement.max_rel_diff([_f32(3.0), a], [_f32(3.0), b]) == 2.0 ** -23


def test_a_gradient_only_one_device_has_is_an_infinite_difference():
    assert agreement.max_rel_diff([_f32(1.0), None], [_f32(1.0), _f32(0.0)]) == math.inf
    assert agreement.max_rel_diff([_f32(1.0)], [_f32(1.0), None]) == math.inf
    assert agreement.max_rel_diff([_f32(1.0), None], [_f32(1.0), None]) == 0.0


def test_bfloat16_arrays_compare_by_their_own_bits():
    import ml_dtypes
    b = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    a = np.array([1.0, 2.015625], ml_dtypes.bfloat16)   # one bf16 unit above 2 (2^-7 * 2)
    assert agreement.rel_diff(a, b) == 2.0 ** -7
    assert agreement.digest([a]) != agreement.digest([a.astype(np.float16)])


def test_compare_expects_bit_exact_under_determinism_and_the_bound_without():
    b = [_f32(2.5), _f32(1.0, -4.0)]
    ulp = [_f32(2.5), _f32(1.0, np.nextafter(np.float32(-4.0), np.float32(0.0)))]
    far = [_f32(2.5), _f32(1.0, -4.1)]
    assert agreement.compare(b, b, 1e-5, True) == {
        "bit_exact": True, "max_rel_diff": 0.0, "within_bound": True, "agrees": True}
    # -4's neighbour towards 0 is 2^-22 away (the spacing of [2, 4)): 2^-22 / 4
    assert agreement.compare(ulp, b, 1e-5, True) == {
        "bit_exact": False, "max_rel_diff": 2.0 ** -24, "within_bound": True, "agrees": False}
    assert agreement.compare(ulp, b, 1e-5, False)["agrees"] is True
    got = agreement.compare(far, b, 1e-5, False)
    assert got["max_rel_diff"] == pytest.approx(0.1 / 4.0, rel=1e-6)
    assert (got["within_bound"], got["agrees"]) == (False, False)
    nan = agreement.compare([_f32(np.nan), b[1]], b, 1e-2, False)
    assert nan == {"bit_exact": False, "max_rel_diff": None, "within_bound": False,
                   "agrees": False}


def test_the_bounds_per_precision():
    assert agreement.BOUNDS == {"fp32": 1e-5, "fp16": 1e-2, "bf16": 1e-2}


# --- its batch and inputs --------------------------------------------------------------------
@pytest.mark.parametrize("batch, eval_batch, expected", [
    (4, 4, 2), (64, 64, 33),      # 32 is the convolution probe's batch
    (1, 1, 2), (2, 1, 3), (256, 100, 128)])
def test_the_numeric_batch_is_one_no_step_ran_on(batch, eval_batch, expected):
    assert peak.CONV_BATCH == 32
    assert device_checks.numeric_batch(batch, eval_batch) == expected


def test_the_fixed_batch_is_the_same_bytes_for_a_seed():
    images, labels = device_checks.fixed_batch(1234, 3, 8, 10)
    again, again_labels = device_checks.fixed_batch(1234, 3, 8, 10)
    assert images.tobytes() == again.tobytes() and labels.tobytes() == again_labels.tobytes()
    assert images.shape == (3, 8, 8, 3) and images.dtype == np.float32
    assert 0.0 <= images.min() and images.max() < 255.0
    assert labels.dtype == np.int32 and set(labels) <= set(range(10))
    assert device_checks.fixed_batch(1235, 3, 8, 10)[0].tobytes() != images.tobytes()


def test_op_determinism_is_on_inside_and_as_before_after():
    assert not tf_config.is_op_determinism_enabled()
    with device_checks.op_determinism():
        assert tf_config.is_op_determinism_enabled()
    assert not tf_config.is_op_determinism_enabled()
    tf.config.experimental.enable_op_determinism()   # the user's own
    try:
        with device_checks.op_determinism():
            pass
        assert tf_config.is_op_determinism_enabled()
    finally:
        tf_config.disable_op_determinism()


# --- what it refuses ---------------------------------------------------------------------------
@pytest.mark.parametrize("mode, message", [
    (resolved_lib.FORWARD_ONLY, "not in forward-only mode (drop --forward_only)"),
    (resolved_lib.EVAL, "not in eval mode (drop --eval)"),
    (resolved_lib.DATA_ONLY, "not in data-only mode (drop --data_only)")])
def test_only_training_runs_have_device_checks(mode, message):
    p = parse_settings(["tfbench", "--device=cpu", "--validate_devices"])
    facts = dataclasses.replace(resolved_lib.read_facts(p), mode=mode)
    with pytest.raises(UsageError) as caught:
        device_checks.refuse_options(p, facts)
    assert str(caught.value) == ("--validate_devices checks each device's training step and "
                                 "gradients: " + message)


def test_diagnose_input_runs_probes_of_its_own():
    p = parse_settings(["tfbench", "--device=cpu", "--validate_devices", "--diagnose_input"])
    facts = resolved_lib.read_facts(p.with_flags(diagnose_input=False))  # (it needs data)
    with pytest.raises(UsageError, match="^--validate_devices and --diagnose_input each run "
                                         "their own probes after a run: give one of them$"):
        device_checks.refuse_options(p, facts)


def test_the_controller_of_a_parameter_server_run_has_no_steps_to_check():
    p = parse_settings(["tfbench", "--device=cpu", "--validate_devices"])
    facts = dataclasses.replace(resolved_lib.read_facts(p), parameter_server=True)
    with pytest.raises(UsageError, match="^--validate_devices checks the devices of the process "
                                         "that runs the steps: with --ps_hosts"):
        device_checks.refuse_options(p, facts)
    p = parse_settings(["tfbench", "--device=cpu", "--num_gpus=2",
                        "--validate_allreduce_json=ar.json"])
    facts = dataclasses.replace(resolved_lib.read_facts(p), parameter_server=True)
    with pytest.raises(UsageError, match="^--validate_allreduce_json: with --ps_hosts the "
                                         "workers run the steps"):
        actions.check_options(p, facts)


# --- a run on one device ---------------------------------------------------------------------
ONE_DEVICE = ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=4",
              "--num_batches=2", "--num_warmup_batches=1", "--validate_devices",
              "--monitor_interval_ms=0", "--csv_file=", "--json_dir=runs"]


def _manifest(tmp_path):
    (name,) = os.listdir(tmp_path / "runs")
    with open(tmp_path / "runs" / name) as handle:
        return json.load(handle)


def _console(lines):
    """The Device checks line, which must come before the footer's last dashes."""
    (line,) = [l for l in lines if l.startswith("Device checks: ")]
    assert lines.index(line) < len(lines) - 3 and lines[-1] == "-" * 64
    return line


def test_one_device_is_checked_too(tmp_path):
    code, lines = run_inprocess(ONE_DEVICE, tmp_path)
    assert code == 0, lines
    run = _manifest(tmp_path)
    (entry,) = run["extra"]["device_checks"]
    assert entry["device"] == "/cpu:0" and entry["errors"] == {}
    assert entry["alone_ms"] > 0 and entry["together_ms"] is None
    assert entry["matmul_tflops"] > 0 and entry["conv_tflops"] > 0
    assert (entry["bit_exact"], entry["max_rel_diff"], entry["agrees"]) == (True, 0.0, True)
    assert math.isfinite(entry["loss"]) and len(entry["digest"]) == 64
    assert run["extra"]["device_checks_numeric"] == {
        "batch": 2, "seed": 1234, "precision": "fp32", "bound": 1e-5, "deterministic": True,
        "determinism_unavailable": None, "reference": "/cpu:0"}
    extra = run["extra"]
    assert (extra["devices_checked"], extra["slowest_alone_device"],
            extra["slowest_alone_ratio"], extra["slowest_matmul_ratio"],
            extra["devices_differing"], extra["max_grad_rel_diff"]) == (
        1, "/cpu:0", 1.0, 1.0, 0, 0.0)
    line = _console(lines)
    assert line.startswith("Device checks: 1 devices alone; slowest against the median: step "
                           "alone 1.00x (/cpu:0), matmul 1.00x (/cpu:0), conv 1.00x (/cpu:0); ")
    assert line.endswith("; gradients against /cpu:0 (op determinism on, bit-exact expected): "
                         "differing devices 0, largest difference 0 (bound 1e-05)")
    assert not tf_config.is_op_determinism_enabled()   # off again after the run


def test_a_failed_check_and_an_op_without_a_deterministic_kernel(tmp_path, monkeypatch):
    """A check that fails is that device's error, and the others still run; an op without a
    deterministic kernel (TensorFlow raises UnimplementedError under op determinism, as GPU
    kernels do: 'A deterministic GPU implementation of ... is not currently available')
    makes the numeric check compare within the bound, without determinism."""
    def no_memory(*args):
        raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
    monkeypatch.setattr(peak, "matmul_probe", no_memory)
    real = device_checks._pass
    why = "A deterministic GPU implementation of FakeOp is not currently available."

    def without_determinism(*args):
        if tf_config.is_op_determinism_enabled():
            raise tf.errors.UnimplementedError(None, None, why + "\n[[{{node FakeOp}}]]")
        return real(*args)
    monkeypatch.setattr(device_checks, "_pass", without_determinism)
    code, lines = run_inprocess(ONE_DEVICE, tmp_path)
    assert code == 0, lines
    run = _manifest(tmp_path)
    (entry,) = run["extra"]["device_checks"]
    assert entry["errors"] == {"kernels": "out of memory"}
    assert entry["alone_ms"] > 0 and entry["matmul_tflops"] is None
    numeric = run["extra"]["device_checks_numeric"]
    assert (numeric["deterministic"], numeric["determinism_unavailable"]) == (False, why)
    assert (entry["bit_exact"], entry["within_bound"], entry["agrees"]) == (True, True, True)
    assert "slowest_matmul_ratio" not in run["extra"]
    line = _console(lines)
    assert ("; gradients against /cpu:0 (no op determinism: %s; within the bound expected): "
            "differing devices 0, largest difference 0 (bound 1e-05); failed: /cpu:0 (kernels: "
            "out of memory)" % why) in line
    assert run["status"] == "ok"
    assert not tf_config.is_op_determinism_enabled()


def test_a_failure_outside_any_one_device_ends_the_checks_and_keeps_the_run(tmp_path,
                                                                            monkeypatch):
    def failing(*args):
        raise tf.errors.InternalError(None, None, "copy failed\nstack")
    monkeypatch.setattr(device_checks, "_same_state", failing)
    code, lines = run_inprocess(ONE_DEVICE, tmp_path)
    assert code == 0, lines
    run = _manifest(tmp_path)
    assert ("--validate_devices: the checks stopped, InternalError: copy failed; the run's own "
            "figures stand") in run["notices"]
    (entry,) = run["extra"]["device_checks"]
    assert entry["alone_ms"] > 0 and entry["matmul_tflops"] > 0 and entry["digest"] is None
    assert "devices_differing" not in run["extra"] and run["images_per_sec"] > 0
    assert _console(lines).endswith("conv 1.00x (/cpu:0)")
    assert not tf_config.is_op_determinism_enabled()


# --- which checks run, and the all-reduce file (each action refuses its own options) ---------
@pytest.mark.parametrize("flags, message", [
    (["--validate_devices", "--validate_device_checks=kernels,speed"],
     "--validate_device_checks=kernels,speed: give one or more of step,kernels,numeric"),
    (["--validate_device_checks=kernels"],
     "--validate_device_checks chooses --validate_devices' checks: add --validate_devices"),
    (["--validate_allreduce_json=ar.json"],
     "--validate_allreduce_json: one device has no all-reduce to time (give --num_gpus=N, "
     "N > 1)"),
    (["--num_gpus=2", "--forward_only", "--validate_allreduce_json=ar.json"],
     "--validate_allreduce_json times the training run's all-reduce: not in forward-only "
     "mode"),
    (["--num_gpus=2", "--validate_allreduce_json=no/such/ar.json"],
     "--validate_allreduce_json=no/such/ar.json: the folder %s does not exist"
     % os.path.abspath("no/such"))])
def test_the_validate_options_that_cannot_apply_are_refused(flags, message):
    p = parse_settings(["tfbench", "--device=cpu", "--model=trivial"] + flags)
    facts = resolved_lib.read_facts(p)        # what the run is, then what its probes refuse
    with pytest.raises(UsageError) as caught:
        actions.check_options(p, facts)
    assert str(caught.value) == message


def test_the_checks_chosen_run_and_no_others(tmp_path):
    code, lines = run_inprocess(ONE_DEVICE + ["--validate_device_checks=step,numeric"],
                                tmp_path)
    assert code == 0, lines
    extra = _manifest(tmp_path)["extra"]
    assert extra["device_checks_run"] == ["step", "numeric"]
    (entry,) = extra["device_checks"]
    assert entry["alone_ms"] > 0 and entry["agrees"] is True
    assert entry["matmul_tflops"] is None and entry["conv_tflops"] is None
    assert "slowest_matmul_device" not in extra and extra["devices_differing"] == 0
    assert ("Checking each device alone: the training step of trivial and one forward and "
            "backward pass on the same batch from the same weights (op determinism on)"
            ) in lines
    line = _console(lines)
    assert "matmul" not in line and "step alone 1.00x (/cpu:0)" in line
