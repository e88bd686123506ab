"""Bad input matrix: every case ends in one clear error line, a non-zero exit, no traceback."""

import os

import pytest

from tfbench import cli

CASES = [
    # flags and values
    (["--model=nosuchnet"], "Invalid model name 'nosuchnet': did you mean nasnet?"),
    (["--model=resnet20", "--data_name=imagenet"], "for dataset 'imagenet'"),
    (["--batch_size=0"], "--batch_size must be a positive integer"),
    (["--batch_size=-1"], "--batch_size must be a positive integer"),
    (["--batch_size=abc"], "batch_size"),
    (["--num_batches=0"], "--num_batches must be a positive integer"),
    (["--num_gpus=0"], "--num_gpus must be a positive integer"),
    (["--num_epochs=-1"], "--num_epochs must be positive"),
    (["--num_warmup_batches=-2"], "--num_warmup_batches must be >= 0"),
    (["--display_every=0"], "--display_every must be a positive integer"),
    (["--image_size=-5"], "--image_size must be a positive integer"),
    (["--accum_steps=0"], "accum_steps"),
    (["--optimizer=lamb"], "optimizer"),
    (["--device=tpu"], "device"),
    (["--data_format=NCWH"], "data_format"),
    (["--precision=fp8"], "precision"),
    (["--variable_update=magic"], "variable_update"),
    (["--loss_type_to_report=mean_loss"], "loss_type_to_report"),
    (["--resize_method=crop"], "--resize_method=crop is not one of"),
    (["--input_preprocessor=fancy"], "--input_preprocessor=fancy is not one of"),
    (["--display_perf_ewma=2"], "must be <= 1"),
    (["--gradient_clip=-1", "--num_batches=1"], "--gradient_clip must be positive"),
    (["--no_such_flag=1"], "no_such_flag"),
    (["--distortions", "False"], "Received unknown positional arguments: False"),
    # combinations
    (["--num_batches=10", "--num_epochs=1"], "At most one of --num_batches and --num_epochs"),
    (["--forward_only", "--eval", "--train_dir=/tmp/x"], "--forward_only and --eval"),
    (["--eval"], "Trained model directory not specified"),
    (["--use_fp16", "--precision=bf16"], "give only one"),
    (["--device=cpu", "--data_format=NCHW"], "NCHW is not supported on CPU"),
    (["--piecewise_learning_rate_schedule=1;3"], "odd number of parts"),
    (["--piecewise_learning_rate_schedule=1;3;0.1", "--init_learning_rate=0.1"],
     "cannot be combined"),
    (["--learning_rate_decay_factor=0.5"], "must all be set"),
    (["--eval_during_training_every_n_steps=2", "--eval_during_training_every_n_epochs=1"],
     "At most one of"),
    (["--stop_at_top_1_accuracy=0.5"], "--eval_during_training_*"),
    (["--save_model_steps=2", "--save_model_secs=10"], "--save_model_steps and"),
    (["--device=gpu"], "--device=gpu asks for GPUs but none is visible"),
    (["--data_only"], "--data_only needs real data"),
    (["--diagnose_input"], "--diagnose_input needs real data"),
    (["--variable_update=horovod"], "horovod"),
    (["--all_reduce_spec=nccl", "--num_gpus=2", "--variable_update=replicated"], "nccl"),
    (["--validate_devices", "--forward_only"],
     "--validate_devices checks each device's training step and gradients: not in forward-only "
     "mode (drop --forward_only)"),
    (["--validate_devices", "--job_name=controller", "--ps_hosts=127.0.0.1:1",
      "--worker_hosts=127.0.0.1:2", "--controller_host=127.0.0.1:3"],
     "--validate_devices checks the devices of the process that runs the steps: with "
     "--ps_hosts the workers run them, not the controller (nor a ps task); validate each "
     "worker's host in a run of its own"),
    # files and paths
    (["--flagfile=/nonexistent/x.flags"], "x.flags"),
    (["--data_dir=/nonexistent/imagenet", "--data_name=imagenet"], "/nonexistent/imagenet"),
    (["--eval", "--train_dir=/nonexistent/ckpt"], "Checkpoint not found in /nonexistent/ckpt"),
    (["--data_name=tfds:mnist", "--data_dir=/nonexistent/tfds"], "tfds"),
]


@pytest.mark.parametrize("args, message", CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_bad_input(tmp_path, capsys, args, message):
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        device = [] if any(a.startswith("--device=") for a in args) else ["--device=cpu"]
        code = cli.main(["tfbench"] + device + args)
    finally:
        os.chdir(old)
    captured = capsys.readouterr()
    assert code == 2
    # Refused before the first step: no row, no manifest (docs/output.md).
    assert os.listdir(tmp_path) == []
    errors = [l for l in captured.err.splitlines() if l.startswith("tfbench: error: ")]
    assert len(errors) == 1, captured.err
    assert message in errors[0], errors[0]
    assert "Traceback" not in captured.err + captured.out


def test_matrix_is_large_enough():
    assert len(CASES) >= 30


def test_unknown_subcommand(capsys):
    assert cli.main(["tfbench", "benchmark"]) == 2
    assert "unknown subcommand 'benchmark'" in capsys.readouterr().err


def test_the_cli_refuses_with_one_line_and_no_traceback(tmp_path, capsys):
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        code = cli.main(["tfbench", "--model=trivial", "--num_gpus=8", "--csv_file=r.csv",
                         "--json_dir="])
    finally:
        os.chdir(old)
    out = capsys.readouterr()
    assert code == 2
    errors = [l for l in out.err.splitlines() if l.startswith("tfbench: error: ")]
    assert len(errors) == 1 and "--num_gpus=8 asks for GPUs but none is visible" in errors[0]
    assert "Traceback" not in out.err + out.out
    # Refused before any step: a usage error writes no row (docs/output.md).
    assert not (tmp_path / "r.csv").exists()
