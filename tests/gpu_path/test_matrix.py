"""The matrix: model variants x every --variable_update x {fp32, fp16, bf16} on 2 logical CPU
devices, forward-only and --eval once per variant. Each cell trains a step or is refused with
one line that states a documented limitation; nothing else (tests/support/matrix_checks.py runs
them).

A layer's state can break one strategy only: Dropout's seed state, written in every replica's
step, failed the first step of every model with Dropout under the legacy default
--variable_update=parameter_server on several devices, and no test trained such a model there.

The suite runs the representative variants (matrix_checks.REPRESENTATIVE: every kind of layer
state the models hold) over a covering grid of strategies and precisions (matrix_checks says
why it covers the nine pairs). TFBENCH_MATRIX_MODELS=families runs one variant of every family
and TFBENCH_MATRIX_MODELS=all every model name with each dataset it has; both also check that
the representative variants hold every kind of layer state that all of them hold.
TFBENCH_MATRIX_GRID=full steps all nine pairs on every variant.
"""

import os

import pytest

import matrix_checks as mc
from helpers import run_check_script
from tfbench.models import catalog

pytestmark = pytest.mark.slow

MODELS = os.environ.get("TFBENCH_MATRIX_MODELS", "ci")
FULL = os.environ.get("TFBENCH_MATRIX_GRID", "") == "full"
STRATEGIES = {"parameter_server": "SpreadStorageStrategy", "replicated": "MirroredStrategy",
              "independent": "IndependentStrategy"}
# The refusals, each a documented limitation (docs/multi-host.md): horovod runs one device per
# process, started by horovodrun, and needs horovod installed.
HOROVOD_REFUSALS = (
    "--variable_update=horovod needs horovod, which is not importable; use "
    "--variable_update=replicated (MirroredStrategy) or collective_all_reduce instead",
    "--variable_update=horovod runs one device per process (start one process per GPU with "
    "horovodrun); got --num_gpus=2")
AS_REPLICATED_NOTICE = ("--variable_update=%s without a cluster (--worker_hosts or TF_CONFIG): "
                        "running on this host alone as replicated (MirroredStrategy)")
# State no step writes: Keras' Normalization holds the statistics adapt() computes.
NOT_WRITTEN_BY_A_STEP = {"Normalization"}


@pytest.fixture(scope="module")
def matrix():
    return run_check_script("matrix_checks.py", MODELS, *(["full"] if FULL else []),
                            timeout=600 if MODELS == "ci" and not FULL else 12 * 3600)


def _cell(label, mode, vu, precision):
    return "%s/%s/%s/%s" % (label, mode, vu, precision)


def test_every_cell_is_checked(matrix):
    expected = set()
    for label in mc.variants(MODELS):
        expected |= {_cell(label, "train", vu, precision) for vu in mc.VARIABLE_UPDATES
                     for precision in mc.PRECISIONS
                     if vu not in mc.STEPPED or (vu, precision) in mc.stepped(label, FULL)}
        expected |= {_cell(label, "forward", *mc.FORWARD), _cell(label, "eval", *mc.EVALUATE)}
    assert set(matrix["cells"]) == expected


def test_the_grid_holds_every_strategy_and_precision_pair():
    grid = mc.stepped("alexnet")
    assert {vu for vu, _ in grid} == set(mc.STEPPED) == set(STRATEGIES)
    assert {precision for _, precision in grid} == {"fp32", "fp16", "bf16"}
    assert len(mc.stepped(mc.FULL_GRID[0])) == len(mc.stepped("alexnet", full=True)) == 9
    assert set(mc.FULL_GRID) <= set(mc.REPRESENTATIVE)


def _expected_strategy(label, vu):
    """The strategy a cell builds: --variable_update's, except for a model Keras compiles in
    part with XLA (ModelSpec.xla_compiled), whose parameter_server runs replicated."""
    name, _, dataset = label.partition(":")
    if vu == "parameter_server" and catalog.get(name, dataset or None).xla_compiled:
        return STRATEGIES["replicated"]
    return STRATEGIES[vu]


def test_every_strategy_and_precision_trains_a_step(matrix):
    ran, wrong = {}, {}
    for name, cell in matrix["cells"].items():
        label, mode, vu, precision = name.split("/")
        if vu not in mc.STEPPED:
            continue
        if not cell.get("finite"):
            wrong[name] = cell
        else:
            ran[name] = cell["ran"][0]
    assert wrong == {}
    assert {name: strategy for name, strategy in ran.items()
            if strategy != _expected_strategy(name.split("/")[0], name.split("/")[2])} == {}


def test_multi_host_values_run_as_replicated_on_one_host(matrix):
    cells = matrix["cells"]
    for label in mc.variants(MODELS):
        # The strategy replicated builds, whose fp32 step ran. A precision changes the gradients'
        # transfer only (fp16 all-reduces in fp16), checked against the replicated cell of that
        # precision where it ran (matrix_checks.FULL_GRID).
        replicated = cells[_cell(label, "train", "replicated", "fp32")]
        for precision in mc.PRECISIONS:
            same = cells.get(_cell(label, "train", "replicated", precision), {}).get("ran")
            for vu in mc.AS_REPLICATED:
                cell = cells[_cell(label, "train", vu, precision)]
                assert cell["strategy"][:2] == replicated["ran"][:2], (label, vu, precision)
                assert (cell["strategy"][2].split("; gradients")[0]
                        == replicated["ran"][2].split("; gradients")[0]), (label, vu, precision)
                if same:
                    assert cell["strategy"] == same, (label, vu, precision)
                assert AS_REPLICATED_NOTICE % vu in cell["notices"]


def test_horovod_is_refused_with_one_line(matrix):
    refusals = {cell.get("refused") for name, cell in matrix["cells"].items()
                if "/horovod/" in name}
    assert len(refusals) == 1 and refusals <= set(HOROVOD_REFUSALS)


def test_forward_only_and_eval_run_under_the_default_strategy(matrix):
    for label in mc.variants(MODELS):
        for mode, (vu, precision) in (("forward", mc.FORWARD), ("eval", mc.EVALUATE)):
            cell = matrix["cells"][_cell(label, mode, vu, precision)]
            assert cell.get("finite") and cell["ran"][0] == _expected_strategy(label, vu), (
                label, mode, cell)


def test_the_representatives_hold_every_kind_of_layer_state(matrix):
    state = matrix["state"]
    held = {layer for label in mc.REPRESENTATIVE if label in state for layer in state[label]}
    if MODELS == "ci":
        # Dropout's seed state and batch norm's statistics: the state a step writes.
        assert state["alexnet"] == {"Dropout": ["seed_generator_state"]}
        assert state["resnet20"] == {"FusedBatchNorm": ["moving_mean", "moving_variance"]}
        assert state["alexnet:cifar10"] == {}
        return
    every = {layer for kinds in state.values() for layer in kinds}
    assert sorted(every - held - NOT_WRITTEN_BY_A_STEP) == []
