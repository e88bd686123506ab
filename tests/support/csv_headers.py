"""The CSV header of each schema version tfbench has written, pinned: tests/test_promises.py
holds the code to them, tests/history/test_importer.py imports a file of each."""

# --- the CSV header of each schema version --------------------------------------------------
# Version 1 as last released (commit b57cb6c); version 2 inserted warmup_peak_mem_gb after
# peak_mem_gb (commit 8b3e717), before columns were promised to be only ever appended. From
# version 2 on, a new version keeps every column of the one before, in place, and appends.
# A change of the columns without a new version here fails test_the_header_is_the_pinned_one.
_V1 = """
schema_version run_id timestamp status error model dataset mode precision xla batch_size
global_batch_size num_devices device_kind device_name num_workers variable_update data_source
data_format image_size num_batches num_warmup_batches accum_steps steps_run images_per_sec
step_images_per_sec step_images_per_sec_plusminus jitter first_step_sec warmup_sec final_loss
top_1_accuracy top_5_accuracy params gflops_per_image tflops_per_sec mfu_pct peak_tflops
latency_ms_p50 latency_ms_p90 latency_ms_p99 latency_ms_mean peak_mem_gb host_peak_rss_gb
images_per_sec_per_gb power_w_mean power_w_max energy_j joules_per_image images_per_sec_per_watt
gpu_util_pct_mean temp_c_max sm_clock_mhz_mean throttled cpu_util_pct_mean num_runs
images_per_sec_median images_per_sec_min images_per_sec_max spread_pct unstable
synthetic_images_per_sec input_only_images_per_sec input_bound estimated_train_hours
expected_range tf_version keras_version tfbench_version hostname notices command
""".split()
_V2 = """
schema_version run_id timestamp status error model dataset mode precision xla batch_size
global_batch_size num_devices device_kind device_name num_workers variable_update data_source
data_format image_size num_batches num_warmup_batches accum_steps steps_run images_per_sec
step_images_per_sec step_images_per_sec_plusminus jitter first_step_sec warmup_sec final_loss
top_1_accuracy top_5_accuracy params gflops_per_image tflops_per_sec mfu_pct peak_tflops
latency_ms_p50 latency_ms_p90 latency_ms_p99 latency_ms_mean peak_mem_gb warmup_peak_mem_gb
host_peak_rss_gb images_per_sec_per_gb power_w_mean power_w_max energy_j joules_per_image
images_per_sec_per_watt gpu_util_pct_mean temp_c_max sm_clock_mhz_mean throttled
cpu_util_pct_mean num_runs images_per_sec_median images_per_sec_min images_per_sec_max
spread_pct unstable synthetic_images_per_sec input_only_images_per_sec input_bound
estimated_train_hours expected_range tf_version keras_version tfbench_version hostname notices
command
""".split()
_V3 = _V2 + ["expected_range_source"]   # where a published range came from
_V4 = _V3 + """
allreduce_ms allreduce_mib allreduce_algbw_gbs allreduce_busbw_gbs one_device_step_ms
slowest_device_step_ms slowest_device slowest_device_ratio input_step_ms link expected_busbw_gbs
""".split()   # --explain_scaling's probes
_V5 = _V4 + ["serving_path", "export_sec", "load_sec", "trt_mode", "trt_precisions",
             "trt_segments", "trt_ops_in_tensorrt", "trt_ops_in_tensorflow", "trt_convert_sec",
             "trt_build_sec", "trt_calibration_batches", "tensorrt_version"]   # --saved_model, TF-TRT
_V6 = _V5 + """
devices_checked slowest_alone_device slowest_alone_ratio slowest_matmul_device slowest_matmul_ratio
slowest_conv_device slowest_conv_ratio devices_differing max_grad_rel_diff
""".split()   # --validate_devices
HEADERS = {1: _V1, 2: _V2, 3: _V3, 4: _V4, 5: _V5, 6: _V6}
