"""The rows a study keeps for a child (tfbench.children.rows): the failure row written from its
flags, its own rows and how an abnormal end marks them, appending to the study's file and to
--csv_file."""


import pytest

from tfbench.children import rows
from tfbench.children.process import ChildOutcome
from helpers import read_rows


def test_failure_row_describes_the_configuration():
    row = rows.failure_row(["--model=vgg16", "--batch_size=16", "--num_gpus=2",
                            "--use_fp16", "--forward_only=true"], "oom", "boom", "cmd")
    assert (row["model"], row["batch_size"], row["global_batch_size"], row["num_devices"],
            row["num_workers"], row["accum_steps"], row["precision"], row["mode"],
            row["status"], row["error"], row["steps_run"]) == \
        ("vgg16", "16", "32", "2", "1", "1", "fp16", "forward_only", "oom", "boom", "0")
    assert row["run_id"] and row["images_per_sec"] == "" and row["command"] == "cmd"


def test_failure_row_reads_the_flags_as_the_child_does():
    # The child's parser (absl) takes -flag too; the row says what the child would have run.
    row = rows.failure_row(["-model=vgg16", "-use_fp16", "-xla_compile", "--batch_size", "8"],
                           "oom", "boom", "cmd")
    assert (row["model"], row["precision"], row["xla"], row["batch_size"]) == \
        ("vgg16", "fp16", "1", "8")
    row = rows.failure_row(["--model=vgg16", "--xla=false", "--xla_compile"], "oom", "", "c")
    assert row["xla"] == "1"   # --xla or its legacy spelling --xla_compile


def test_a_failure_row_leaves_empty_what_only_the_run_decides():
    # The model's default batch and image size need the registry; contradicting device flags
    # are the child's error to report, not a count to guess.
    row = rows.failure_row(["--model=resnet50"], "error", "x", "c")
    assert (row["batch_size"], row["global_batch_size"], row["image_size"],
            row["device_kind"]) == ("", "", "", "")
    assert row["num_devices"] == "1"
    row = rows.failure_row(["--batch_size=8", "--gpu_indices=0,1", "--num_gpus=3"], "error",
                           "x", "c")
    assert (row["batch_size"], row["num_devices"], row["global_batch_size"]) == ("8", "", "")


def test_a_failure_row_of_another_host_names_it_and_counts_the_workers():
    row = rows.failure_row(["--batch_size=8", "--num_gpus=2"], "error", "x", "c",
                           hostname="node7", workers=4)
    assert (row["hostname"], row["num_workers"], row["global_batch_size"]) == \
        ("node7", "4", "64")   # 8 x 2 devices x 4 workers


def test_a_child_that_wrote_its_row_and_then_failed_keeps_it_marked(tmp_path):
    path, log = tmp_path / "p.csv", tmp_path / "p.log"
    own = rows.failure_row(["--batch_size=8"], "ok", "", "c")
    rows.save_rows([own], str(path), None, print)
    log.write_text("Traceback\nRuntimeError: late\n")
    got = rows.child_rows(["--batch_size=8"], ChildOutcome(1, 2.0), str(path), str(log), "c")
    assert [(r["run_id"], r["status"]) for r in got] == [(own["run_id"], "error")]
    assert got[0]["error"] == ("exited abnormally after writing its row: RuntimeError: late "
                               "(exit code 1)")
    assert rows.rows_status(got) == "error"


def test_a_child_without_a_row_gets_one_classified_from_its_end(tmp_path):
    log = tmp_path / "p.log"
    log.write_text("loss is NaN\n")
    (row,) = rows.child_rows(["--batch_size=8"], ChildOutcome(4, 2.0),
                             str(tmp_path / "none.csv"), str(log), "the command")
    assert (row["status"], row["error"], row["command"]) == \
        ("nan", "loss is NaN (exit code 4)", "the command")


def test_rows_go_to_the_study_file_and_to_the_csv_file(tmp_path):
    study, mine = tmp_path / "study.csv", tmp_path / "mine.csv"
    said = []
    one = rows.failure_row(["--batch_size=8"], "error", "x", "c")
    rows.save_rows([one], str(study), str(mine), said.append)
    rows.save_rows([dict(one, run_id="r2")], str(study), "", said.append)
    assert [r["run_id"] for r in read_rows(study)] == [one["run_id"], "r2"]
    assert [r["run_id"] for r in read_rows(mine)] == [one["run_id"]]
    assert said == []


def test_a_file_of_an_older_schema_is_migrated_and_said(tmp_path):
    mine = tmp_path / "mine.csv"
    mine.write_text("schema_version,run_id,status\n1,old,ok\n")
    said = []
    rows.save_rows([rows.failure_row([], "error", "x", "c")], str(tmp_path / "s.csv"),
                   str(mine), said.append)
    assert len(said) == 1 and str(mine) in said[0]
    assert [r["run_id"] for r in rows.read_rows(str(mine))][0] == "old"


@pytest.mark.parametrize("statuses, status", [
    (["ok", "ok"], "ok"), (["ok", "oom", "error"], "oom"), ([], "error")])
def test_a_points_status_is_its_first_row_not_ok(statuses, status):
    assert rows.rows_status([{"status": s} for s in statuses]) == status
