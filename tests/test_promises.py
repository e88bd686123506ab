"""tfbench's compatibility promises, pinned as literal expectations written out here, not read
from the code they check: the CSV header of each schema version, the legacy flag defaults (from
the legacy script's source, cited by line), and the exit code of each error class. When one of
these tests fails, a promise to users (their parsers, their command lines, their scripts) is
being broken: change the code back, or make the change a documented new version.
"""

import csv
import functools
import re
import signal

import pytest

from csv_headers import HEADERS
from helpers import ROOT, only_row
from tfbench import errors
from tfbench.config import flagdefs
from tfbench.config.argv import parse_settings
from tfbench.output import csv_out

# --- the CSV header of each schema version (tests/support/csv_headers.py) -------------------


def test_the_header_is_the_pinned_one():
    version = csv_out.SCHEMA_VERSION
    assert version in HEADERS, (
        "schema version %d has no pinned header: add it to HEADERS" % version)
    assert list(csv_out.COLUMN_NAMES) == HEADERS[version], (
        "the CSV columns changed without a new schema version (csv_out.SCHEMA_VERSION)")
    assert version == max(HEADERS), "the newest pinned header is the one written"


def test_versions_only_ever_append_columns():
    assert len(HEADERS[1]) == 72 and len(HEADERS[2]) == 73
    assert [c for c in HEADERS[2] if c != "warmup_peak_mem_gb"] == HEADERS[1]
    for version in sorted(HEADERS)[1:-1]:
        assert HEADERS[version + 1][:len(HEADERS[version])] == HEADERS[version], version
    for header in HEADERS.values():
        assert len(set(header)) == len(header)


@pytest.mark.parametrize("version", sorted(HEADERS)[:-1])
def test_a_file_of_an_older_version_is_migrated_by_name(tmp_path, version):
    path = tmp_path / "old.csv"
    old = dict.fromkeys(HEADERS[version], "")
    old.update(schema_version=str(version), run_id="r1", images_per_sec="123.5",
               latency_ms_p99="9.5")
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=HEADERS[version])
        writer.writeheader()
        writer.writerow(old)
    notice = csv_out.append_rows(str(path), [])
    assert "migrated it to schema %d (1 rows kept)" % csv_out.SCHEMA_VERSION in notice
    row = only_row(path)
    assert list(row) == HEADERS[max(HEADERS)]
    assert (row["run_id"], row["images_per_sec"], row["latency_ms_p99"]) == ("r1", "123.5", "9.5")


# --- legacy flag defaults ---------------------------------------------------------------------
# tensorflow/benchmarks, commit 8fb79079265933ad39bea628b777af662f5bf15d (2023-10-05, the last),
# scripts/tf_cnn_benchmarks/benchmark_cnn.py: (line of the flags.DEFINE_* call, flag, default).
# Two defaults there are expressions: network_topology = constants.NetworkTopology.DGX1, which
# constants.py line 49 defines as "dgx1"; trt_max_workspace_size_bytes = 4 << 30.
LEGACY_DEFAULTS = [
    (105, "model", "trivial"),
    (117, "eval", False),
    (118, "eval_interval_secs", 0),
    (122, "eval_during_training_every_n_steps", None),
    (131, "eval_during_training_every_n_epochs", None),
    (135, "eval_during_training_at_specified_steps", []),
    (139, "eval_during_training_at_specified_epochs", []),
    (144, "forward_only", False),
    (146, "freeze_when_forward_only", False),
    (148, "print_training_accuracy", False),
    (151, "batch_size", 0),
    (152, "eval_batch_size", 0),
    (153, "batch_group_size", 1),
    (156, "num_batches", None),
    (158, "num_eval_batches", None),
    (161, "num_epochs", None),
    (164, "num_eval_epochs", None),
    (167, "stop_at_top_1_accuracy", None),
    (171, "collect_eval_results_async", False),
    (175, "num_warmup_batches", None),
    (177, "autotune_threshold", None),
    (180, "num_gpus", 1),
    (181, "gpu_indices", ""),
    (182, "display_every", 10),
    (185, "display_perf_ewma", None),
    (192, "data_dir", None),
    (196, "data_name", None),
    (199, "resize_method", "bilinear"),
    (208, "distortions", False),
    (211, "use_datasets", True),
    (213, "input_preprocessor", "default"),
    (216, "gpu_thread_mode", "gpu_private"),
    (221, "per_gpu_thread_count", 0),
    (224, "hierarchical_copy", False),
    (231, "network_topology", "dgx1"),
    (237, "gradient_repacking", 0),
    (243, "compact_gradient_transfer", True),
    (246, "variable_consistency", "strong"),
    (252, "datasets_repeat_cached_sample", False),
    (259, "local_parameter_device", "gpu"),
    (263, "device", "gpu"),
    (265, "data_format", "NCHW"),
    (268, "num_intra_threads", None),
    (273, "num_inter_threads", 0),
    (276, "use_numa_affinity", False),
    (279, "trace_file", ""),
    (281, "use_chrome_trace_format", True),
    (287, "tfprof_file", None),
    (299, "graph_file", None),
    (302, "partitioned_graph_file_prefix", None),
    (306, "optimizer", "sgd"),
    (308, "init_learning_rate", None),
    (310, "piecewise_learning_rate_schedule", None),
    (319, "num_epochs_per_decay", 0),
    (322, "learning_rate_decay_factor", 0),
    (326, "num_learning_rate_warmup_epochs", 0),
    (329, "minimum_learning_rate", 0),
    (334, "resnet_base_lr", None),
    (337, "momentum", 0.9),
    (338, "rmsprop_decay", 0.9),
    (339, "rmsprop_momentum", 0.9),
    (340, "rmsprop_epsilon", 1.0),
    (341, "adam_beta1", 0.9),
    (342, "adam_beta2", 0.999),
    (343, "adam_epsilon", 1e-08),
    (344, "gradient_clip", None),
    (346, "weight_decay", 4e-05),
    (348, "gpu_memory_frac_for_testing", 0),
    (357, "use_unified_memory", None),
    (360, "timestamped_allocator", False),
    (364, "gpu_kt_max_interval", 0),
    (367, "gpu_kt_max_bytes", 0),
    (371, "gpu_kt_max_pending", 0),
    (376, "use_tf_layers", True),
    (379, "tf_random_seed", 1234),
    (383, "debugger", None),
    (388, "use_python32_barrier", False),
    (391, "ml_perf", False),
    (402, "datasets_use_prefetch", True),
    (405, "datasets_prefetch_buffer_size", 1),
    (407, "datasets_num_private_threads", None),
    (412, "datasets_use_caching", False),
    (416, "datasets_parallel_interleave_cycle_length", None),
    (418, "datasets_sloppy_parallel_interleave", False),
    (423, "datasets_parallel_interleave_prefetch", None),
    (427, "multi_device_iterator_max_buffer_size", 1),
    (433, "winograd_nonfused", True),
    (435, "batchnorm_persistent", True),
    (439, "sync_on_finish", False),
    (442, "staged_vars", False),
    (445, "force_gpu_compatible", False),
    (447, "allow_growth", None),
    (449, "xla", False),
    (450, "xla_compile", False),
    (453, "fuse_decode_and_crop", True),
    (455, "distort_color_in_yiq", True),
    (457, "enable_optimizations", True),
    (459, "rewriter_config", None),
    (462, "loss_type_to_report", "total_loss"),
    (470, "single_l2_loss_op", False),
    (474, "use_resource_vars", False),
    (478, "compute_lr_on_cpu", False),
    (482, "sparse_to_dense_grads", False),
    (488, "mkl", False),
    (489, "kmp_blocktime", 0),
    (493, "kmp_affinity", "granularity=fine,verbose,compact,1,0"),
    (497, "kmp_settings", 1),
    (501, "use_fp16", False),
    (508, "fp16_loss_scale", None),
    (514, "fp16_vars", False),
    (518, "fp16_enable_auto_loss_scale", False),
    (521, "fp16_inc_loss_scale_every_n", 1000),
    (558, "variable_update", "parameter_server"),
    (565, "all_reduce_spec", None),
    (591, "agg_small_grads_max_bytes", 0),
    (594, "agg_small_grads_max_group", 10),
    (597, "allreduce_merge_scope", 1),
    (604, "job_name", ""),
    (607, "ps_hosts", ""),
    (608, "worker_hosts", ""),
    (609, "controller_host", None),
    (610, "task_index", 0),
    (611, "server_protocol", "grpc"),
    (612, "cross_replica_sync", True),
    (613, "horovod_device", ""),
    (619, "summary_verbosity", 0),
    (627, "save_summaries_steps", 0),
    (630, "save_model_secs", 0),
    (635, "save_model_steps", None),
    (638, "max_ckpts_to_keep", 5),
    (640, "train_dir", None),
    (643, "eval_dir", "/tmp/tf_cnn_benchmarks/eval"),
    (645, "backbone_model_path", None),
    (648, "trt_mode", ""),
    (652, "trt_max_workspace_size_bytes", 4294967296),
    (656, "benchmark_log_dir", None),
    (661, "benchmark_test_id", None),
]
# scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py line 36 (same commit).
LEGACY_DEFAULTS.append((36, "ml_perf_compliance_logging", False))


def test_the_table_is_the_legacy_scripts_whole_flag_list():
    names = [name for _, name, _ in LEGACY_DEFAULTS]
    assert len(names) == 138 == len(set(names))
    assert sorted(names) == sorted(f.name for f in flagdefs.LEGACY_FLAGS)


@functools.lru_cache(maxsize=None)
def _defaults():
    return parse_settings(["tfbench"])


@pytest.mark.parametrize("line, name, default", LEGACY_DEFAULTS,
                         ids=[name for _, name, _ in LEGACY_DEFAULTS])
def test_legacy_flag_default(line, name, default):
    del line   # the citation
    assert flagdefs.BY_NAME[name].default == default
    value = _defaults().flag_values()[name]
    assert (list(value) if isinstance(value, tuple) else value) == default


# --- exit codes -------------------------------------------------------------------------------
# docs/output.md's table; the status each writes in the CSV row.
EXIT_CODES = [
    (errors.TfbenchError("x"), 1, "error"),
    (errors.InstallError("x"), 1, "error"),
    (errors.UsageError("x"), 2, "error"),
    (errors.OutOfMemory("x"), 3, "oom"),
    (errors.NanLoss("x"), 4, "nan"),
    (errors.DistributedError("x"), 5, "error"),
    (errors.Interrupted(signal.SIGINT), 130, "interrupted"),
    (errors.Interrupted(signal.SIGTERM), 143, "interrupted"),
]


@pytest.mark.parametrize("error, code, status", EXIT_CODES,
                         ids=[type(e).__name__ + str(c) for e, c, _ in EXIT_CODES])
def test_exit_code_of_each_error_class(error, code, status):
    assert (error.exit_code, error.status) == (code, status)


@pytest.fixture(scope="module")
def run_benchmark():
    from tfbench.cli import run
    return run.run_benchmark


@pytest.mark.slow
@pytest.mark.parametrize("raised, code, status", EXIT_CODES + [
    (KeyboardInterrupt(), 130, "interrupted"), (RuntimeError("x"), 1, "error")],
    ids=[type(e).__name__ + str(c) for e, c, _ in EXIT_CODES] + ["ctrl_c", "unexpected"])
def test_the_command_ends_with_the_code_and_writes_the_status(run_benchmark, monkeypatch,
                                                               tmp_path, raised, code, status):
    from tfbench.engine import runner

    def fail(*args, **kwargs):
        raise raised
    monkeypatch.setattr(runner, "run", fail)
    path = tmp_path / "r.csv"
    lines = []
    assert run_benchmark(["tfbench", "--device=cpu", "--csv_file=%s" % path, "--json_dir="],
                         emit=lines.append) == code
    if code == 2:   # refused before any step: no row (docs/output.md, "When a row is written")
        assert not path.exists()
        return
    row = only_row(path)
    assert row["status"] == status


@pytest.mark.slow
def test_a_bad_flag_ends_with_2(run_benchmark):
    assert run_benchmark(["tfbench", "--num_batches=many"]) == 2


def test_the_docs_table_lists_the_same_codes():
    with open("%s/docs/output.md" % ROOT) as handle:
        text = handle.read()
    table = dict(re.findall(r"^\| ([0-9 /]+) \| (.+) \|$", text, re.M))
    assert sorted(table) == ["0", "1", "130 / 143", "2", "3", "4", "5", "6", "7", "8", "9"]
    assert table["2"].startswith("usage error") and table["3"].startswith("out of memory")
    assert table["4"].startswith("NaN or Inf loss") and "SIGINT / SIGTERM" in table["130 / 143"]
    assert table["5"].startswith("distributed runtime failure")
    assert table["6"].startswith("a study whose points did not all finish ok")
    assert errors.EXIT_INCOMPLETE == 6
    assert table["7"].startswith("`tfbench validate`: a check warns and none fails")
    assert table["8"].startswith("`tfbench validate`: a check fails")
    assert (errors.EXIT_VALIDATE_WARN, errors.EXIT_VALIDATE_FAIL) == (7, 8)
    assert table["9"].startswith("a regression: `tfbench compare --threshold_pct=P`")
    assert "`tfbench history changes --since=...`" in table["9"]
    assert errors.EXIT_REGRESSION == 9
