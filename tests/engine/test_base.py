"""Batch norm folded into the convolutions in whole runs (tfbench.engine.base): forward-only and
--eval fold and say so, training never does."""

import pytest

from helpers import run_inprocess


BASE = ["--device=cpu", "--model=resnet20", "--data_name=cifar10", "--batch_size=4",
        "--num_batches=2", "--num_warmup_batches=1", "--csv_file=", "--json_dir="]
NOTICE = ("Batch norm folded into 19 convolutions for inference "
          "(--nofold_batch_norm times the unfolded model)")


def params_reported(lines):
    stats = next(l for l in lines if l.startswith("Model stats"))
    return stats.split(" trainable params")[0]


@pytest.mark.slow
def test_forward_only_folds_by_default_and_says_so(tmp_path):
    code, folded = run_inprocess(BASE + ["--forward_only"], tmp_path)
    assert code == 0
    # With tfbench's own lines after the model stats, so the legacy block stays intact.
    stats = next(i for i, l in enumerate(folded) if l.startswith("Model stats"))
    assert folded[stats + 1] == NOTICE and folded.count(NOTICE) == 1
    assert folded.index(NOTICE) > folded.index("Done warm up")
    code, plain = run_inprocess(BASE + ["--forward_only", "--nofold_batch_norm"], tmp_path)
    assert code == 0 and not any("folded" in l for l in plain)
    # The source model's count, whatever the clone's variables.
    assert params_reported(folded) == params_reported(plain) == "Model stats: 269,787"


@pytest.mark.slow
def test_training_is_never_folded(tmp_path):
    code, lines = run_inprocess(BASE, tmp_path)
    assert code == 0 and not any("folded" in l for l in lines)


@pytest.mark.slow
def test_eval_folds_the_restored_checkpoint_with_the_same_accuracy(tmp_path):
    train_dir = str(tmp_path / "ckpt")
    # A few training steps move the moving statistics away from 0 / 1.
    assert run_inprocess(BASE + ["--train_dir=" + train_dir, "--num_batches=6"], tmp_path)[0] == 0
    accuracy = {}
    for flag in ("--fold_batch_norm", "--nofold_batch_norm"):
        code, lines = run_inprocess(BASE + ["--eval", "--train_dir=" + train_dir,
                                            "--num_eval_batches=3", flag], tmp_path)
        assert code == 0, lines
        assert (NOTICE in lines) == (flag == "--fold_batch_norm")
        accuracy[flag] = next(l for l in lines if l.startswith("Accuracy @ 1"))
    assert accuracy["--fold_batch_norm"] == accuracy["--nofold_batch_norm"]


@pytest.mark.slow
@pytest.mark.parametrize("flags", [[], ["--forward_only"], ["--forward_only", "--saved_model"]],
                         ids=["training", "folded", "served"])
def test_the_parameter_count_is_written_once_where_the_model_is_built(flags):
    """ModeRunner.build_model counts it, before any fold or export: one writer, and the
    published count of ResNet-20 (0.27M) whatever the steps ran."""
    from counted_result import CountedResult
    from tfbench.config.argv import settings_of_flags
    from tfbench.engine import runner
    from tfbench.engine.runlog import SilentLog
    res = CountedResult()
    runner.run(settings_of_flags(BASE + flags), SilentLog(), res)
    assert (res.params, res.writes["params"]) == (269787, 1)
