"""tfbench.config.argv: benchmark flags read as the CLI reads them, for a run or for the children,
tasks and points a subcommand starts."""

import pytest

from tfbench import errors
from tfbench.config.argv import settings_of_flags, strip_flags


def test_settings_of_flags_parse_flags_as_the_cli_does():
    p = settings_of_flags(["--model=a", "--batch_size", "8", "-xla_compile", "--use_fp16",
                         "--noforward_only"])
    assert (p.workload.model, p.schedule.batch_size, p.runtime.xla_compile,
            p.mode.forward_only) == ("a", 8, True, False)
    assert p.is_explicit("batch_size") and not p.is_explicit("num_gpus")
    with pytest.raises(errors.UsageError, match="--use_fp16 asks for fp16"):
        settings_of_flags(["--use_fp16", "--precision=fp32"])


def test_settings_of_flags_read_a_preset_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = settings_of_flags(["--flagfile=flags/scaling_study.flags", "--batch_size=8"])
    assert (p.workload.model, p.schedule.batch_size,
            p.devices.variable_update) == ("resnet50", 8, "replicated")


def test_strip_flags_drops_every_spelling_of_the_named_flags():
    flags = ["--model=m", "--csv_file=a.csv", "--csv_file", "b.csv", "--xla", "--noxla",
             "--batch_size", "8", "--xla=false"]
    assert strip_flags(flags, ["csv_file", "xla"]) == ["--model=m", "--batch_size", "8"]
    assert strip_flags(flags, []) == flags


# --- what cannot run on the devices asked is refused before any process starts ---------------

NCCL_ON_CPU = ("--all_reduce_spec=nccl needs GPUs (NCCL does not run on CPU); on CPU use "
               "--all_reduce_spec=pscpu or hierarchical_copy")
NCCL_ON_CPU_WORKERS = ("--all_reduce_spec=nccl needs GPUs (NCCL does not run on CPU); on CPU "
                       "use --all_reduce_spec=ring or leave it unset")
SCALING = ["--flagfile=flags/scaling_study.flags", "--device=cpu"]


@pytest.mark.parametrize("flags, message", [
    (["--num_gpus=2", "--all_reduce_spec=nccl"], NCCL_ON_CPU),
    (["--num_gpus=2", "--all_reduce_spec=NCCL#2"], NCCL_ON_CPU),
    (["--num_gpus=4", "--all_reduce_spec=nccl", "--variable_update=parameter_server"],
     NCCL_ON_CPU),
    (["--all_reduce_spec=nccl", "--job_name=worker", "--task_index=0",
      "--worker_hosts=127.0.0.1:1,127.0.0.1:2"], NCCL_ON_CPU_WORKERS),
])
def test_nccl_on_a_cpus_devices_is_refused_with_the_strategys_words(flags, message):
    with pytest.raises(errors.UsageError) as raised:
        settings_of_flags(SCALING + flags)
    assert str(raised.value) == message


@pytest.mark.parametrize("flags", [
    ["--num_gpus=1", "--all_reduce_spec=nccl"],      # one device: nothing to all-reduce
    ["--num_gpus=2"],                                # the preset itself, on a CPU
    ["--num_gpus=2", "--all_reduce_spec=pscpu"],
    ["--device=gpu", "--num_gpus=2", "--all_reduce_spec=nccl"],
    ["--all_reduce_spec=nccl", "--job_name=ps", "--task_index=0", "--ps_hosts=127.0.0.1:1",
     "--worker_hosts=127.0.0.1:2", "--controller_host=127.0.0.1:3"],   # no collectives
])
def test_what_runs_is_not_refused(flags):
    settings_of_flags(SCALING + flags)


def test_the_strategy_refuses_with_the_same_words_once_tensorflow_runs():
    # The devices a run plans (a no-GPU fallback included) go through the same owner,
    # config.params.nccl_refusal, in tfbench.distribute.strategy.
    from tfbench.distribute import strategy
    from tfbench.distribute.devices import DeviceSet
    cpus = DeviceSet("cpu", 2, ("/cpu:0", "/cpu:1"), "NHWC")
    with pytest.raises(errors.UsageError) as raised:
        strategy.cross_device_ops("nccl", cpus, False)
    assert str(raised.value) == NCCL_ON_CPU
    with pytest.raises(errors.UsageError) as raised:
        strategy.collective_implementation("nccl", DeviceSet("cpu", 1, ("/cpu:0",), "NHWC"))
    assert str(raised.value) == NCCL_ON_CPU_WORKERS


@pytest.mark.parametrize("flag, message", [
    ("--precision=fp8", "flag --precision=fp8: value should be one of fp32, fp16 or bf16, or "
                        "empty (the default: fp16 with --use_fp16, else fp32)"),
    ("--trt_mode=fp16", "flag --trt_mode=fp16: value should be one of FP32, FP16 or INT8, or "
                        "empty (the default: no TF-TRT)"),
    ("--optimizer=lamb", "flag --optimizer=lamb: value should be one of momentum, sgd, rmsprop "
                         "or adam"),
])
def test_a_refused_enum_names_its_choices_and_what_empty_means(flag, message):
    """absl's own words show an empty value as an empty choice: '<|fp32|fp16|bf16>'."""
    with pytest.raises(errors.UsageError) as caught:
        settings_of_flags([flag])
    assert str(caught.value) == message


def test_every_enum_that_accepts_empty_says_what_it_means():
    from tfbench.config import flagdefs
    takes_empty = [s.name for s in flagdefs.ALL_FLAGS if "" in (s.enum_values or ())]
    assert {"precision", "trt_mode", "job_name"} <= set(takes_empty)
    # (a spec without it is refused: tests/config/test_flagdefs.py)
    assert all(flagdefs.BY_NAME[name].empty for name in takes_empty)
    assert settings_of_flags(["--precision="]).numerics.precision == ""    # empty is still accepted
