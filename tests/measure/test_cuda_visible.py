"""CUDA_VISIBLE_DEVICES, pinned: which GPUs the CUDA driver makes visible, in which order, for
each case below, written out by hand from the sources (not from tfbench's code), and every reader
of the variable in tfbench agreeing with it.

Sources:
* [guide] NVIDIA CUDA Programming Guide, 5.2 "CUDA Environment Variables", 5.2.1.1
  CUDA_VISIBLE_DEVICES, https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/
  environment-variables.html : unset = all GPUs; empty = none; "2,1" enumerates device 2 before
  device 1; "0,2,-1,1" shows 0 and 2, not 1 ("if an invalid index is encountered, only devices
  with indices that appear before the invalid index in the list are visible"); GPU UUIDs as
  `nvidia-smi -L` prints them, or enough leading characters to name one GPU; MIG slices as
  MIG-<GPU-UUID>/<GPU instance ID>/<compute instance ID> (driver R450) and MIG-<UUID> (R470+).
* [torch] PyTorch's reading of the driver, torch/cuda/__init__.py, _parse_visible_devices and
  _transform_uuid_to_ordinals (pytorch/pytorch#84879 "Return device count using nvml",
  #92315 "Fix NVML visible device parsing"): ordinals are read like strtoul ("`1gpu2,2ampere` is
  equivalent to `1,2`", leading blanks skipped); "Repeated ordinal results in empty set", and a
  UUID naming an already-listed GPU too; "Negative value aborts the sequence"; the first entry's
  prefix (GPU-, MIG-) sets the form and "Anything other but prefix is ignored" (ends the list);
  an ambiguous UUID prefix is invalid.
The readers: tfbench.measure.nvml's GPU count (cuda_gpus: the evaluation's, and
`python -m tfbench.measure.nvml`'s) and NVML mapping, and scripts/scaling_test.sh
(repo/test_script_scaling_test.py runs the script over these rules).
"""

import pytest

from helpers import FakeNvml
from tfbench.measure import cuda_visible, nvml

A = "GPU-aaaa0000-1111-2222-3333-444444444444"
B = "GPU-bbbb1111-1111-2222-3333-444444444444"
C = "GPU-cccc2222-1111-2222-3333-444444444444"
D = "GPU-dddd3333-1111-2222-3333-444444444444"
# Four GPUs whose NVML order is not their PCI bus order (CUDA numbers them by bus id here).
FOUR = [{"uuid": C, "bus": 0x30}, {"uuid": A, "bus": 0x10}, {"uuid": D, "bus": 0x40},
        {"uuid": B, "bus": 0x20}]

# (CUDA_VISIBLE_DEVICES, the GPUs CUDA shows, in CUDA's order; source)
RULES = [
    (None, [A, B, C, D], "guide: unset, every GPU"),
    ("", [], "guide: empty, none"),
    ("2,1", [C, B], "guide: listed order"),
    ("0,2,-1,1", [A, C], "guide: -1 ends the list"),
    ("-1", [], "guide/torch: negative ends the list"),
    ("0,7,1", [A], "guide: an index past the last GPU ends the list, 1 stays hidden"),
    ("3,x,0", [D], "torch: an entry without an ordinal ends the list (not skipped)"),
    ("1,,2", [B], "torch: an empty entry ends the list"),
    ("1gpu,0", [B, A], "torch: strtoul reads the leading digits"),
    (" 2, 0", [C, A], "torch: strtoul skips leading blanks"),
    ("+1", [B], "strtoul takes a sign"),
    ("0,0", [], "torch: a repeat leaves none"),
    ("1,2,01", [], "torch: 01 is 1 again, a repeat"),
    ("3,7,3", [D], "guide: the list ended at 7, before the repeat"),
    ("%s,%s" % (B[:12], A), [B, A], "guide: a UUID prefix names one GPU"),
    ("%s,0" % A, [A], "torch: the first entry sets the form, 0 is not a UUID"),
    ("0,%s" % B, [A], "torch: ... and a UUID is not an ordinal"),
    ("%s,GPU-ffff,%s" % (A, B), [A], "guide: a UUID naming no GPU ends the list"),
    ("GPU-,%s" % A, [], "guide: a prefix naming several GPUs names none"),
    ("%s,%s" % (C, C[:8]), [], "torch: the same GPU twice, full and by prefix"),
]


def _env(value):
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    if value is not None:
        env["CUDA_VISIBLE_DEVICES"] = value
    return env


@pytest.mark.parametrize("value, shown, source", RULES, ids=[str(r[0]) for r in RULES])
def test_every_reader_follows_the_drivers_rules(value, shown, source):
    fake = FakeNvml(FOUR)
    env = _env(value)
    assert nvml.cuda_device_count(fake, env) == len(shown), source
    mapped = nvml.resolve_handles(fake, None, env)
    assert [(i, h["uuid"]) for i, h in mapped] == list(enumerate(shown)), source
    count, why = nvml.cuda_gpus(env, fake)
    assert count == len(shown) and (why == "") == bool(shown), (source, why)


def test_the_monitor_maps_tfbench_gpu_indices_through_the_list():
    fake = FakeNvml(FOUR)
    # The list ends at x: CUDA numbers one GPU, so tfbench's GPU 1 does not exist.
    for value, why in [("3,x,0", "entry 'x' is not an ordinal"),
                       ("3,-1", "entry '-1' is not an ordinal"),
                       ("3,7", "entry 7: CUDA numbers 4 GPU(s)"),
                       ("3,4", "entry 4: CUDA numbers 4 GPU(s)"),
                       ("%s,3" % D, "entry '3' is not a GPU id"),
                       ("3,3", "entry 3 names a device listed before it: CUDA then shows none"),
                       ("%s,GPU-ffff" % D, "entry 'GPU-ffff': matches no device NVML sees")]:
        with pytest.raises(nvml.UnmappedGpu) as info:
            nvml.resolve_handles(fake, [1], _env(value))
        shown = 0 if value == "3,3" else 1
        assert str(info.value) == "GPU 1: CUDA sees %d GPU(s) (CUDA_VISIBLE_DEVICES=%r; %s)" % (
            shown, value, why)
    with pytest.raises(nvml.UnmappedGpu) as info:
        nvml.resolve_handles(FakeNvml(MIG_HOST), [1], _env("%s,0" % MIG_A))
    assert str(info.value).endswith("entry '0' is not a MIG id)")
    with pytest.raises(nvml.UnmappedGpu) as info:
        nvml.resolve_handles(fake, [4], _env(None))
    assert str(info.value) == "GPU 4: CUDA sees 4 GPU(s) (CUDA_VISIBLE_DEVICES=None)"
    assert [(i, h["uuid"]) for i, h in nvml.resolve_handles(fake, [1], _env("2,1"))] == [(1, B)]


MIG_A = "MIG-aaaa9999-1111-2222-3333-444444444444"
MIG_B = "MIG-bbbb9999-1111-2222-3333-444444444444"
# One whole GPU, one in MIG mode with two slices (GPU instances 1 and 2).
MIG_HOST = [{"uuid": A, "bus": 0x10},
            {"uuid": D, "bus": 0x40, "mig": [{"uuid": MIG_A, "gi": 1, "ci": 0},
                                             {"uuid": MIG_B, "gi": 2, "ci": 0}]}]
MIG_RULES = [
    ("%s,%s" % (MIG_B, MIG_A[:8]), [MIG_B, MIG_A], "guide: MIG-<UUID> (R470+), a prefix too"),
    ("MIG-%s/2/0" % D, [MIG_B], "guide: MIG-<GPU-UUID>/<gi>/<ci> (R450)"),
    ("%s,0" % MIG_A, [MIG_A], "torch: a MIG list ends at an entry of another form"),
    ("%s,%s" % (MIG_A, A), [MIG_A], "torch: ... a GPU UUID too"),
    ("%s,%s" % (MIG_A, MIG_A), [], "torch: a repeat leaves none"),
    ("MIG-%s/3/0,%s" % (D, MIG_A), [], "guide: no slice with GPU instance 3 ends the list"),
]


@pytest.mark.parametrize("value, shown, source", MIG_RULES, ids=[r[0] for r in MIG_RULES])
def test_mig_slices(value, shown, source):
    fake = FakeNvml(MIG_HOST)
    assert nvml.cuda_device_count(fake, _env(value)) == len(shown), source
    mapped = nvml.resolve_handles(fake, None, _env(value))
    assert [(i, h["uuid"]) for i, h in mapped] == list(enumerate(shown)), source


def test_a_gpu_in_mig_mode_counts_once_but_is_not_mapped_to_a_guessed_slice():
    fake = FakeNvml(MIG_HOST)
    assert nvml.cuda_device_count(fake, _env("1,0")) == 2
    assert nvml.cuda_device_count(fake, _env(D)) == 1
    with pytest.raises(nvml.UnmappedGpu, match="GPU 0 is in MIG mode with 2 slices"):
        nvml.resolve_handles(fake, [0], _env("1"))


@pytest.mark.parametrize("value, listed", [
    (None, None), ("", []), ("0,2,-1,1", [0, 2]), ("1gpu, 2", [1, 2]), ("3,x,0", [3]),
    ("GPU-ab,GPU-cd,0", ["GPU-ab", "GPU-cd"]), ("MIG-ab, MIG-cd", ["MIG-ab"]),
])
def test_entries_before_any_device_is_looked_up(value, listed):
    assert cuda_visible.entries(value) == listed


def test_the_process_environment_is_read_when_none_is_given(monkeypatch):
    fake = FakeNvml(FOUR)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0,x")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert nvml.cuda_device_count(fake) == 2
    assert [(i, h["uuid"]) for i, h in nvml.resolve_handles(fake)] == [(0, C), (1, A)]


@pytest.mark.parametrize("order", [None, "FASTEST_FIRST"])
def test_two_gpus_numbered_fastest_first_cannot_be_mapped(order):
    env = {} if order is None else {"CUDA_DEVICE_ORDER": order}
    with pytest.raises(nvml.UnmappedGpu) as info:
        nvml.resolve_handles(FakeNvml(FOUR[:2]), [0], env)
    assert str(info.value) == (
        "CUDA numbers GPUs fastest first (CUDA_DEVICE_ORDER=%s), an order NVML cannot tell; "
        "set CUDA_DEVICE_ORDER=PCI_BUS_ID or name the GPUs by UUID in CUDA_VISIBLE_DEVICES"
        % (order or "unset"))
    assert nvml.cuda_device_count(FakeNvml(FOUR[:2]), dict(env, CUDA_VISIBLE_DEVICES="1,0")) == 2
