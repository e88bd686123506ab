"""The plan of each level (tfbench.validate.plan): its steps in order, the flags it adds, its
estimate computed by hand from the stated constants, and the options no plan can run."""

import pytest

from tfbench import errors
from tfbench.validate import estimate, plan

CPU = ["--device=cpu", "--num_gpus=2", "--model=trivial", "--image_size=8", "--batch_size=2"]


def _plan(level, flags=CPU, host=plan.Host("cpu", 2), gpus=0, soak=None):
    every, added = plan.benchmark_flags(level, flags, gpus)
    return plan.build(level, every, host, "out", ["tfbench"], ["health_read"], soak, added)


def test_each_level_is_a_fixed_order_of_steps():
    assert [s.name for s in _plan("quick").steps] == [
        "health", "devices", "allreduce", "figures", "health_after"]
    assert [s.name for s in _plan("standard").steps] == [
        "health", "devices_1", "devices_2", "devices_3", "allreduce", "figures",
        "health_after"]
    assert [s.name for s in _plan("long").steps] == [
        "health", "devices_1", "devices_2", "devices_3", "allreduce", "figures",
        "health_after", "soak", "health_after_soak"]
    one = _plan("quick", CPU[:1] + ["--model=trivial"], plan.Host("cpu", 1))
    assert "allreduce" not in [s.name for s in one.steps]   # nothing to all-reduce


def test_the_children_get_the_levels_flags_and_their_files():
    quick = {s.name: s for s in _plan("quick").steps}
    assert quick["devices"].command == ("tfbench",) + tuple(CPU) + (
        "--variable_update=replicated", "--num_batches=10", "--num_warmup_batches=5",
        "--validate_devices", "--validate_device_checks=kernels,numeric",
        "--validate_allreduce_json=out/runs/allreduce.json",
        "--csv_file=out/points/devices.csv", "--json_dir=out/runs/devices")
    # The all-reduce is timed in the training child: its step runs no child of its own.
    assert quick["allreduce"].command == () and quick["allreduce"].estimate_s == 0
    assert plan.allreduce_source(_plan("quick"))[1] == "out/runs/allreduce.json"
    assert quick["health"].command == ("health_read", "--json=out/runs/health.json")
    standard = {s.name: s for s in _plan("standard").steps}
    for name in ("devices_1", "devices_2", "devices_3"):
        assert "--explain_scaling" in standard[name].command
        assert "--num_batches=100" in standard[name].command
        # every check at standard: the flag's default
        assert not any(a.startswith("--validate_device_checks") for a in standard[name].command)
    assert [n for n in standard if "--validate_allreduce_json=out/runs/allreduce.json"
            in standard[n].command] == ["devices_1"]
    one = {s.name: s for s in _plan("quick", CPU[:1] + ["--model=trivial"],
                                    plan.Host("cpu", 1)).steps}
    assert not any(a.startswith("--validate_allreduce_json") for a in one["devices"].command)
    soak = {s.name: s for s in _plan("long", soak=2.0).steps}["soak"]
    # Its --num_batches comes from the step time measured, when it starts.
    assert not any(a.startswith(("--num_batches", "--validate_devices")) for a in soak.command)
    assert soak.estimate_s == 5.0 + 2 * 4.5 + 120.0


def test_defaults_are_added_only_where_not_given():
    every, added = plan.benchmark_flags("quick", [], 8)
    assert added == ["--model=resnet50", "--variable_update=replicated", "--num_batches=10",
                     "--num_warmup_batches=5", "--num_gpus=8"]
    _, added = plan.benchmark_flags("quick", ["--gpu_indices=0,1", "--num_batches=3",
                                              "--model=vgg16"], 8)
    assert added == ["--variable_update=replicated", "--num_warmup_batches=5"]
    _, added = plan.benchmark_flags("quick", ["--device=cpu"], 8)
    assert "--num_gpus=8" not in added


@pytest.mark.parametrize("flag, message", [
    ("--validate_devices", "--validate_devices: validate adds --validate_devices itself"),
    ("--forward_only", "--forward_only: validate checks the training step"),
    ("--num_runs=3", "--num_runs: validate repeats a run in children of their own"),
    ("--json_dir=x", "--json_dir: validate keeps each child's JSON manifest"),
    ("--worker_hosts=a:1,b:1", "--worker_hosts: validate checks one host")])
def test_flags_validate_decides_are_refused(flag, message):
    with pytest.raises(errors.UsageError, match="^" + message.replace("(", r"\(")):
        plan.benchmark_flags("quick", [flag], 0)


def test_a_flag_the_benchmark_refuses_is_refused_before_anything_runs():
    with pytest.raises(errors.UsageError, match="num_gpus"):
        plan.benchmark_flags("quick", ["--num_gpus=-1"], 0)


@pytest.mark.parametrize("level, tolerance, soak, least, message", [
    ("fast", 5, None, None, "--level=fast: choose one of quick, standard, long"),
    ("quick", 51, None, None, "--tolerance_pct=51: give a percentage from 0 to 50"),
    ("quick", -1, None, None, "--tolerance_pct=-1: give a percentage from 0 to 50"),
    ("standard", 5, 10, None, "--soak_minutes is the soak of --level=long (got "
                              "--level=standard)"),
    ("long", 5, 0, None, "--soak_minutes=0: give minutes > 0"),
    ("quick", 5, None, 0, "--min_efficiency_pct=0: give a percentage in (0, 100]")])
def test_options_no_plan_can_run(level, tolerance, soak, least, message):
    with pytest.raises(errors.UsageError) as info:
        plan.check_options(level, tolerance, soak, least)
    assert str(info.value) == message


def test_the_estimate_by_hand_on_logical_cpu_devices():
    p = _plan("quick")
    # trivial: 8,517,558 FLOPs an image at 227 px, at 8 px x (8/227)^2; a training step of 2
    # images is 3x: 6.3e-8 TFLOP at 0.05 / 2 TFLOP/s per device = 2.5 us, so the 0.03 s floor.
    step = {s.name: s for s in p.steps}
    assert estimate.step_seconds(plan.settings_of_flags(p.flags), p.host) == 0.03
    # start-up 5 + 2 replicas x 4.5 + 15 steps x 0.03; then per device: its model 1, the
    # kernels 0.5, the numeric pass 2.5 + one step 0.03; then the all-reduce's sizes 6
    devices = 5 + 2 * 4.5 + 15 * 0.03 + 2 * (1 + 0.5 + 2.5 + 0.03) + 6
    assert step["devices"].estimate_s == pytest.approx(devices)
    assert step["allreduce"].estimate_s == 0
    assert step["health"].estimate_s == step["health_after"].estimate_s == 3
    assert p.estimate_s == pytest.approx(devices + 6)
    assert step["devices"].timeout_s == pytest.approx(3 * devices + 120)
    assert p.lines()[0] == ("tfbench validate --level=quick: 5 steps, about 35 s on 2 logical "
                            "CPU devices")
    # standard adds the step alone (2 + 13 probe steps) and the explain probes (3 per device
    # + 13 steps); only its first child times the all-reduce
    standard = {s.name: s for s in _plan("standard").steps}
    steps = 5 + 2 * 4.5 + 110 * 0.03 + 2 * (1 + 2 + 13 * 0.03 + 0.5 + 2.5 + 0.03) \
        + 2 * 3 + 13 * 0.03
    assert standard["devices_2"].estimate_s == pytest.approx(steps)
    assert standard["devices_1"].estimate_s == pytest.approx(steps + 6)


def test_quick_fits_in_two_minutes_on_eight_h100s_by_its_own_estimate():
    host = plan.Host("gpu", 8, "NVIDIA H100 80GB HBM3")
    p = _plan("quick", ["--batch_size=64"], host, gpus=8)
    # resnet50: 7.716 GFLOPs an image forward; a step of 64 in fp32 (TF32 on an H100: 494.7
    # TFLOP/s dense, of which 20% achieved): 3 x 7.716 x 64 / 98.94 = 14.97 ms
    step_s = 3 * 7.715950592 * 64 / 1e3 / (494.7 * 0.2)
    assert estimate.step_seconds(plan.settings_of_flags(p.flags), host) == pytest.approx(step_s)
    devices = {s.name: s for s in p.steps}["devices"]
    # start-up 20 + 8 replicas x 3 + 15 steps; per device: its model 1, the kernels 1, the
    # numeric pass 4.5 + a step; the all-reduce's sizes 15
    assert devices.estimate_s == pytest.approx(20 + 8 * 3 + 15 * step_s
                                               + 8 * (1 + 1 + 4.5 + step_s) + 15)
    assert p.estimate_s == pytest.approx(devices.estimate_s + 2 * 3)
    assert p.estimate_s <= 120   # the limit for --level=quick on 8 GPUs
    assert p.lines()[0].endswith("about 117 s on 8 GPUs (NVIDIA H100 80GB HBM3)")
    assert "--num_gpus=8" in p.added
    standard = _plan("standard", ["--batch_size=64"], host, gpus=8)
    assert standard.estimate_s <= 15 * 60   # standard's limit


def test_the_plan_says_which_figures_are_estimates_from_constants():
    host = plan.Host("gpu", 8, "NVIDIA H100 80GB HBM3")
    p = _plan("quick", ["--batch_size=64"], host, gpus=8)
    assert p.lines()[-2:] == [
        "  estimates, not measurements: a step 15.0 ms = resnet50's training FLOPs at batch 64 "
        "over 20% (ACHIEVED_FRACTION, a constant) of the NVIDIA H100 80GB HBM3's datasheet fp32 "
        "peak (494.7 TFLOP/s); start-up 20 s; 3 s a GPU for its replica of the first step; an "
        "allowance per check",
        "  the GPU constants (ACHIEVED_FRACTION, REPLICA_S, start-up, the allowances) are not "
        "yet measured: validate.json keeps each step's seconds beside its estimate, and "
        "scripts/gpu_smoke.sh prints the measured step and first step against them"]
    basis = p.basis()
    assert basis["step_s"] == pytest.approx(3 * 7.715950592 * 64 / 1e3 / (494.7 * 0.2))
    assert (basis["peak_tflops"], basis["achieved_fraction"], basis["replica_s"]) == (
        494.7, 0.2, 3.0)
    # A GPU the peak table lacks: its constant says so
    unknown = _plan("quick", ["--batch_size=64"], plan.Host("gpu", 2, "NVIDIA X1"), gpus=2)
    assert "resnet50's training FLOPs at batch 64 over 20 TFLOP/s, a constant for a GPU " \
           "tfbench's peak table lacks;" in unknown.lines()[-2]
    assert unknown.basis()["achieved_fraction"] is None
    # CPU devices: constants measured on one CPU; a step at its floor says so
    cpu = _plan("quick").lines()
    assert cpu[-2].startswith(
        "  estimates, not measurements: a step 30.0 ms = the floor of a step's host work "
        "(trivial's training FLOPs at batch 2 over 0.025 TFLOP/s, a constant: the CPU's 0.05 "
        "shared by its 2 devices is less); start-up 5 s; 4.5 s a CPU device")
    assert cpu[-1] == ("  the CPU constants were measured on an AMD EPYC (2 cores, TensorFlow "
                       "2.21, resnet50 at 64 px): another CPU differs")


def test_what_a_gpu_measured_against_the_constants():
    basis = _plan("quick", ["--batch_size=64"], plan.Host("gpu", 8, "NVIDIA H100 80GB HBM3"),
                  gpus=8).basis()
    # A step of 50 ms median; the first step 30.05 s: (30.05 - 0.05) / 8 = 3.75 s a GPU
    manifest = {"step_times": [0.052, 0.050, 0.049, 0.050, 0.051],
                "warmup_times": [30.05, 0.2, 0.06]}
    work = 3 * 7.715950592 * 64 / 1e3
    assert estimate.measured_against(basis, manifest) == (
        "step 50.0 ms measured (median of 5), estimate 15.0 ms: %.3g of the datasheet peak "
        "reached, ACHIEVED_FRACTION 0.2; first step 30.05 s on 8 devices, 3.75 s each beyond "
        "a step, REPLICA_S 3 s" % (work / 0.05 / 494.7))
    assert estimate.measured_against(basis, {"step_times": []}) == ""


def test_the_soak_is_sized_from_the_rate_measured():
    # 30 s at 100 images/sec, 8 images a step: 375 steps
    assert plan.soak_batches(0.5, 100.0, 8) == 375
    assert plan.soak_batches(0.001, 1.0, 64) == 1


def test_where_the_checks_run():
    assert plan.host_for(CPU, (8, ""))[0] == plan.Host("cpu", 2)
    host, notice = plan.host_for(["--num_gpus=1"], (0, "no NVIDIA driver"))
    assert host.kind == "cpu" and notice.startswith("no GPU found (no NVIDIA driver)")
    assert plan.host_for(["--num_gpus=4"], (4, ""), "NVIDIA A100-SXM4-80GB")[0] == plan.Host(
        "gpu", 4, "NVIDIA A100-SXM4-80GB")
