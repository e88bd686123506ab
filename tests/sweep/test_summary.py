"""The tables at the end of a sweep: which studies its keys call for, the max-batch rows."""

from tfbench.sweep import max_batch, summary


def test_study_kinds_follow_the_swept_keys():
    assert summary.study_kinds(["num_gpus"]) == ["scaling"]
    assert summary.study_kinds(["model", "batch_size", "xla_compile", "image_size"]) == [
        "batch_size", "precision", "resolution"]
    assert summary.study_kinds(["use_fp16", "num_gpus"]) == ["scaling", "precision"]
    assert summary.study_kinds(["optimizer"]) == []


def test_extra_keys_are_swept_flags_without_a_csv_column():
    # num_gpus is recorded as num_devices and use_fp16 as precision; optimizer has no column.
    assert summary.extra_keys(["model", "num_gpus", "use_fp16", "optimizer", "data_dir"]) == [
        "optimizer", "data_dir"]


def test_max_batch_rows_values():
    stopped = max_batch.SearchResult(32, [(32, "ok"), (64, "error")], error="probe failed")
    rows = summary.max_batch_rows([
        max_batch.MaxBatchResult({"model": "m"}, max_batch.SearchResult(48, [(48, "ok")]),
                             {"images_per_sec": "10.5", "peak_mem_gb": ""}),
        max_batch.MaxBatchResult({"model": "m"}, max_batch.SearchResult(None, [(1, "oom")]), None),
        max_batch.MaxBatchResult({"model": "m"}, max_batch.SearchResult(64, [], True), None),
        max_batch.MaxBatchResult({"model": "m"}, stopped, None)])
    assert [r["max_batch_size"] for r in rows] == ["48", "none fits", ">= 64 (limit)",
                                                   ">= 32 (search stopped)"]
    assert rows[0]["images_per_sec"] == 10.5 and rows[0]["peak_mem_gb"] is None
    assert rows[3]["probes"] == "32:ok 64:error" and rows[3]["error"] == "probe failed"
