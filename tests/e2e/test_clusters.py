"""Several processes on 127.0.0.1: MultiWorkerMirroredStrategy, a parameter-server cluster, and
a missing peer that ends the run in bounded time (the subprocess timeouts are the bound)."""

import json
import os

import pytest

import zygote
from figure_checks import check_run, read_run
from helpers import ROOT, SUPPORT, only_row
from helpers import free_ports as _free_ports

pytestmark = pytest.mark.slow

TINY = ["--device=cpu", "--model=trivial", "--image_size=16", "--batch_size=4",
        "--num_batches=4", "--num_warmup_batches=1", "--display_every=1", "--csv_file=",
        "--monitor_interval_ms=0"]


def _start(args, cwd, **env_extra):
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", **env_extra)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return zygote.start(args, cwd, env)


def _finish(procs, timeout):
    outs = []
    try:
        for proc in procs:
            outs.append(proc.communicate(timeout=timeout)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return [proc.returncode for proc in procs], outs


def _step_losses(out):
    return [line.split("\t")[2] for line in out.splitlines()
            if line[:1].isdigit() and "\timages/sec: " in line]


def _manifest(directory):
    (name,) = os.listdir(directory)
    with open(os.path.join(directory, name)) as handle:
        return json.load(handle)


def _scratch_dirs(tmp):
    return [name for name in os.listdir(tmp) if name.startswith("tfbench-ckpt-")]


def _collective_run(cwd, num_batches, train_dirs, scratch, tf_config_worker_1=False, tag=""):
    """Two collective workers saving to their --train_dir every 2 steps."""
    hosts = ["127.0.0.1:%d" % p for p in _free_ports(2)]
    common = TINY + ["--cluster_timeout_secs=60", "--save_model_steps=2",
                     "--num_batches=%d" % num_batches]
    legacy = ["--job_name=worker", "--worker_hosts=" + ",".join(hosts),
              "--variable_update=collective_all_reduce"]
    procs = []
    for i in range(2):
        own = ["--train_dir=%s" % train_dirs[i],
               "--json_dir=%s" % (cwd / ("json%s%d" % (tag, i)))]
        env = {"TMPDIR": str(scratch[i])}
        if i == 1 and tf_config_worker_1:
            env["TF_CONFIG"] = json.dumps({"cluster": {"worker": hosts},
                                           "task": {"type": "worker", "index": 1}})
            procs.append(_start(common + own, cwd, **env))
        else:
            procs.append(_start(common + legacy + ["--task_index=%d" % i] + own, cwd, **env))
    codes, outs = _finish(procs, timeout=120)
    assert codes == [0, 0], "\n=====\n".join(o[-2500:] for o in outs)
    return outs


@pytest.fixture(scope="module")
def collective_run(tmp_path_factory):
    """Two workers, worker 0 described by the legacy flags and worker 1 by TF_CONFIG, sharing
    one --train_dir (a shared file system); shared by the tests below."""
    tmp_path = tmp_path_factory.mktemp("collective")
    shared = tmp_path / "shared"
    scratch = [tmp_path / "tmp0", tmp_path / "tmp1"]
    for d in scratch:
        d.mkdir()
    outs = _collective_run(tmp_path, 4, [shared, shared], scratch, tf_config_worker_1=True)
    return {"outs": outs, "cwd": tmp_path, "shared": shared, "scratch": scratch,
            "listing": sorted(os.listdir(shared)),
            "scratch_left": [_scratch_dirs(d) for d in scratch]}


def test_two_workers_train_in_lockstep_and_the_total_counts_both(collective_run):
    """Worker 0 is described by the legacy flags, worker 1 by TF_CONFIG."""
    outs, tmp_path = collective_run["outs"], collective_run["cwd"]
    for i, out in enumerate(outs):
        lines = out.splitlines()
        assert "Batch size:  8 global" in lines and "             4 per device" in lines
        assert "Variables:   collective_all_reduce" in lines and "Sync:        True" in lines
        assert "Starting worker %d" % i in lines
        assert lines[-2].startswith("total images/sec: ")
    losses = [_step_losses(out) for out in outs]
    assert len(losses[0]) == 4 and losses[0] == losses[1]
    for i in range(2):
        run = _manifest(tmp_path / ("json%d" % i))
        assert run["num_workers"] == 2 and run["global_batch_size"] == 8
        # Every figure each worker prints, recomputed (tests/support/figure_checks.py): the total
        # counts both workers' images, the Step lines this worker's (legacy collective_all_reduce).
        check_run(read_run(tmp_path, outs[i], csv_name=None, json_dir="json%d" % i),
                  global_batch=8, num_batches=4, display_every=1)


def test_tfbench_allreduce_probes_the_collective_of_two_workers(tmp_path):
    """The probe as a run's MultiWorkerMirroredStrategy reduces: trivial's cifar10 gradients
    (56,332 float32: 220 KiB), n = 2 ranks, so busbw = algbw."""
    hosts = ["127.0.0.1:%d" % p for p in _free_ports(2)]
    procs = [_start(["allreduce", "--device=cpu", "--model=trivial", "--data_name=cifar10",
                     "--min_bytes=1K", "--max_bytes=4K", "--repeats=3", "--warmup=1",
                     "--job_name=worker", "--worker_hosts=" + ",".join(hosts),
                     "--task_index=%d" % i, "--cluster_timeout_secs=60"], tmp_path)
             for i in range(2)]
    codes, outs = _finish(procs, timeout=120)
    assert codes == [0, 0], "\n=====\n".join(o[-2500:] for o in outs)
    for out in outs:
        lines = out.splitlines()
        assert "All-reduce probe: 2 ranks (2 workers); collective all-reduce (auto) over 2 " \
               "workers; gradients as computed, each gradient alone" in lines
        rows = {line.split("  ")[0].strip(): line.split() for line in lines
                if line.startswith(("trivial gradients", "1 KiB", "4 KiB"))}
        assert sorted(rows) == ["1 KiB", "4 KiB", "trivial gradients"]
        gradients = rows["trivial gradients"]
        assert gradients[2:6] == ["220.0", "KiB", "6", "float32"]
        assert float(gradients[7]) == float(gradients[8])   # algbw == busbw for n = 2


def test_only_worker_0_writes_train_dir_and_every_worker_resumes_from_its_state(collective_run):
    """Only worker 0 saves into --train_dir (two workers saving each step into one directory
    collide on its temp files), and every worker resumes from worker 0's state. Run 1 shares
    one directory (a shared file system); in run 2 worker 1's is empty (hosts without one)."""
    outs, tmp_path = collective_run["outs"], collective_run["cwd"]
    shared, scratch = collective_run["shared"], collective_run["scratch"]
    own = tmp_path / "worker1"
    assert ("--train_dir: worker 0 writes the checkpoints and summaries; this process writes "
            "none there and resumes from its state") in outs[1].splitlines()
    # Global steps 1 (warm-up) to 5; saved at 2, 4 and 5.
    assert collective_run["listing"] == ["checkpoint"] + [
        "model.ckpt-%d.%s" % (n, ext) for n in (2, 4, 5) for ext in ("data-00000-of-00001",
                                                                       "index")]
    # Worker 1 saved its copies in a scratch directory of its own and removed them.
    assert collective_run["scratch_left"] == [[], []]
    # Both resume at 5: warm-up to 6, then 3 timed steps.
    outs = _collective_run(tmp_path, 8, [shared, own], scratch, tag="resumed")
    losses = [_step_losses(out) for out in outs]
    assert len(losses[0]) == 3 and losses[0] == losses[1]
    assert "model.ckpt-9.index" in os.listdir(shared) and not own.exists()
    assert [_scratch_dirs(d) for d in scratch] == [[], []]


def test_a_missing_peer_fails_in_bounded_time_naming_it(tmp_path):
    ports = _free_ports(2)
    hosts = ",".join("127.0.0.1:%d" % p for p in ports)
    codes, (out,) = _finish([_start(TINY + ["--job_name=worker", "--worker_hosts=" + hosts,
                                            "--task_index=0", "--cluster_timeout_secs=3",
                                            "--json_dir="], tmp_path)], timeout=60)
    assert codes == [5], out[-2000:]
    assert out.splitlines()[-1] == (
        "tfbench: error: worker 0: the cluster did not form within 3s "
        "(--cluster_timeout_secs); unreachable: worker 1 at 127.0.0.1:%d (connection refused)"
        % ports[1])


def _ps_cluster_run(cwd, extra, controller_extra=()):
    """A parameter server, 2 workers and a controller; returns each task's output."""
    ps, w0, w1, controller = ("127.0.0.1:%d" % p for p in _free_ports(4))
    common = TINY + ["--worker_hosts=%s,%s" % (w0, w1), "--ps_hosts=" + ps,
                     "--controller_host=" + controller, "--cluster_timeout_secs=60",
                     "--json_dir="] + extra
    procs = [_start(common + ["--job_name=%s" % job, "--task_index=%d" % index]
                    + (list(controller_extra) if job == "controller" else []), cwd)
             for job, index in (("ps", 0), ("worker", 0), ("worker", 1), ("controller", 0))]
    codes, outs = _finish(procs, timeout=150)
    assert codes == [0, 0, 0, 0], "\n=====\n".join(o[-2500:] for o in outs)
    return outs


@pytest.fixture(scope="module")
def ps_cluster(tmp_path_factory):
    """One parameter-server cluster run on real data, saving checkpoints, whose controller has
    2 CPU devices, shared by the tests below (each cluster costs four TensorFlow processes)."""
    import multiworker_checks
    tmp_path = tmp_path_factory.mktemp("ps_cluster")
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    multiworker_checks.write_labelled_split(str(data_dir), "train", 2, 8, 1)
    train_dir = tmp_path / "ckpt"
    outs = _ps_cluster_run(tmp_path, ["--data_dir=%s" % data_dir, "--train_dir=%s" % train_dir],
                           ["--num_gpus=2", "--json_dir=%s" % (tmp_path / "json")])
    return {"outs": outs, "train_dir": train_dir, "json": tmp_path / "json", "cwd": tmp_path}


def test_parameter_server_cluster_counts_the_images_the_workers_compute(ps_cluster):
    """images/sec counts the workers' replicas, not the controller's devices: TensorFlow runs one
    replica per worker GPU (here: one CPU replica per worker, while the controller has 2 CPU
    devices)."""
    ps_out, w0_out, w1_out, out = ps_cluster["outs"]
    assert "Running parameter server 0" in ps_out.splitlines()
    assert "Starting worker 1" in w1_out.splitlines()
    lines = out.splitlines()
    assert ("Parameter-server workers run 1 replica(s) each: a step counts 4 images per worker, "
            "not this controller's 2 device(s)") in lines
    # 2 workers x 1 replica x 4 images, not 2 workers x 2 controller devices x 4.
    assert "Variables:   parameter_server" in lines and "Batch size:  8 global" in lines
    assert len(_step_losses(out)) == 4
    assert lines[-2].startswith("total images/sec: ")
    run = _manifest(ps_cluster["json"])
    assert run["num_workers"] == 2 and run["global_batch_size"] == 8
    counted = run["images_per_sec"] * run["wall_time"]
    assert abs(counted - len(run["step_times"]) * 8) < 1e-6 * counted
    # The controller's own (idle) host and devices are not what the steps used.
    row = run["csv_row"]
    assert row["peak_mem_gb"] == "" and row["host_peak_rss_gb"] == ""
    # Nor are its devices the workers': no device name, peak, MFU or published range from them.
    assert (row["device_name"], row["mfu_pct"], row["expected_range"]) == ("", "", "")
    # The workers' devices as TensorFlow counted them (1 CPU replica each), not the controller's 2.
    assert (row["num_devices"], row["device_kind"]) == ("1", "cpu")
    assert float(row["tflops_per_sec"]) > 0
    assert ("MFU and the published range are not judged on a parameter-server controller: the "
            "parameter-server workers run the steps, not this controller") in row["notices"]
    assert ("Memory: device peak not available (the parameter-server workers run the steps, "
            "not this controller)") in lines


def test_parameter_server_cluster_on_real_data(ps_cluster):
    """Each worker builds its part of the data (its index known only on the worker)."""
    lines = ps_cluster["outs"][-1].splitlines()
    assert "Dataset:     imagenet" in lines and "Batch size:  8 global" in lines


def test_parameter_server_resume_counts_each_workers_update_in_the_global_step(ps_cluster):
    """Every worker's update advances the shared step: 2 workers x (1 warm-up + 4 timed). The
    run that resumes trains on synthetic images."""
    train_dir = ps_cluster["train_dir"]
    assert os.path.exists(train_dir / "model.ckpt-10.index")
    # --num_batches=7 resumes at global step 10: legacy runs 7 - 10 // 2 = 2 timed steps.
    (*_, out) = _ps_cluster_run(ps_cluster["cwd"], ["--train_dir=%s" % train_dir,
                                                    "--num_batches=7"])
    assert "Dataset:     imagenet (synthetic)" in out.splitlines()
    assert len(_step_losses(out)) == 2, out[-2500:]
    assert os.path.exists(train_dir / "model.ckpt-16.index")


def _stop_worker_1_mid_run(tmp_path, signum, cluster_timeout_secs):
    """Two workers train until worker 0 prints its third Step line; then worker 1 gets
    `signum`. Returns (worker 0's exit code, its output, seconds it took to stop)."""
    import time
    hosts = ",".join("127.0.0.1:%d" % p for p in _free_ports(2))
    args = [a for a in TINY if not a.startswith("--num_batches")] + [
        "--num_batches=100000", "--job_name=worker", "--worker_hosts=" + hosts,
        "--variable_update=collective_all_reduce",
        "--cluster_timeout_secs=%d" % cluster_timeout_secs, "--json_dir="]
    procs = [_start(args + ["--task_index=%d" % i, "--csv_file=w%d.csv" % i], tmp_path)
             for i in range(2)]
    try:
        deadline = time.time() + 90
        while time.time() < deadline:   # both workers are in the timed loop
            if procs[0].stdout.readline().startswith("3\timages/sec:"):
                break
        procs[1].send_signal(signum)
        started = time.time()
        out = procs[0].communicate(timeout=60)[0]
        elapsed = time.time() - started
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return procs[0].returncode, out, elapsed


def test_a_worker_killed_mid_run_stops_the_other_with_a_clear_error(tmp_path):
    import signal
    code, out, elapsed = _stop_worker_1_mid_run(tmp_path, signal.SIGKILL, 10)
    assert code == 5, out[-2000:]
    last = out.strip().splitlines()[-1]
    assert last.startswith("tfbench: error: ") and "worker" in last, last
    assert "Traceback" not in out
    assert elapsed < 40
    row = only_row(tmp_path / "w0.csv")
    assert row["status"] == "error" and int(row["steps_run"]) >= 3


def test_a_hung_worker_stops_the_other_within_the_heartbeat_timeout(tmp_path):
    """A stopped (not dead) peer still accepts connections: the coordination service's
    heartbeats find it, with no per-collective timeout in the steps."""
    import signal
    code, out, elapsed = _stop_worker_1_mid_run(tmp_path, signal.SIGSTOP, 60)
    assert code == 5, out[-2000:]
    assert out.strip().splitlines()[-1] == (
        "tfbench: error: worker 0: lost the cluster (UnavailableError); no heartbeat from "
        "worker 1 (hung, or cut off from this host)")
    assert "Traceback" not in out
    assert elapsed < 40   # TensorFlow's heartbeat timeout is 10 s; --cluster_timeout_secs 60


def _run_workers(script_args, tmp_path, num_workers=2, timeout=120):
    hosts = ",".join("127.0.0.1:%d" % p for p in _free_ports(num_workers))
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    script = os.path.join(SUPPORT, "multiworker_checks.py")
    procs = [zygote.start([str(i), hosts] + script_args, tmp_path, env, script=script)
             for i in range(num_workers)]
    codes, outs = _finish(procs, timeout)
    results = []
    for code, out in zip(codes, outs):
        lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
        assert code == 0 and lines, "\n=====\n".join(o[-2500:] for o in outs)
        results.append(json.loads(lines[-1][len("RESULT "):]))
    return results


def test_real_data_gives_every_replica_its_batch_and_every_example_to_one_worker(tmp_path):
    """Two workers, 4 training files (sharded by file) and 1 validation file (by record)."""
    import multiworker_checks
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    train = multiworker_checks.write_labelled_split(str(data_dir), "train", 4, 4, 1)
    evaluation = multiworker_checks.write_labelled_split(str(data_dir), "validation", 1, 8, 101)
    # One epoch: each worker reads 8 training examples (2 steps of 4), 4 validation (2 of 2).
    workers = _run_workers([str(data_dir), "4", "2", "2", "2"], tmp_path)
    for i, got in enumerate(workers):
        assert got["worker_devices"] == ["/job:worker/replica:0/task:%d/device:CPU:0" % i]
        (replica,) = got["train"]
        assert replica["batch_sizes"] == [4, 4] == got["synthetic_batch_sizes"] * 2
        (eval_replica,) = got["eval"]
        assert eval_replica["batch_sizes"] == [2, 2]
        assert got["process_shard"] == [i, 2]     # what --data_only reads
    for split, labels in (("train", train), ("eval", evaluation)):
        seen = [w[split][0]["labels"] for w in workers]
        assert all(len(set(s)) == len(s) for s in seen)          # no example twice in an epoch
        assert sorted(seen[0] + seen[1]) == sorted(labels)       # each by exactly one worker


def test_two_workers_on_real_data_count_the_images_synthetic_data_counts(tmp_path):
    import multiworker_checks
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    multiworker_checks.write_labelled_split(str(data_dir), "train", 2, 8, 1)
    multiworker_checks.write_labelled_split(str(data_dir), "validation", 2, 4, 101)
    hosts = ",".join("127.0.0.1:%d" % p for p in _free_ports(2))
    common = TINY + ["--cluster_timeout_secs=60", "--job_name=worker", "--worker_hosts=" + hosts,
                     "--variable_update=collective_all_reduce", "--data_dir=%s" % data_dir,
                     "--eval_during_training_every_n_steps=4", "--num_eval_batches=2",
                     "--eval_batch_size=2"]
    procs = [_start(common + ["--task_index=%d" % i, "--json_dir=%s" % (tmp_path / str(i)),
                              "--benchmark_log_dir=%s" % (tmp_path / ("log%d" % i))],
                    tmp_path) for i in range(2)]
    codes, outs = _finish(procs, timeout=120)
    assert codes == [0, 0], "\n=====\n".join(o[-2500:] for o in outs)
    assert len(_step_losses(outs[0])) == 4
    # Each worker's Step lines show its own loss (legacy), here from its own part of the data.
    runs = [_manifest(tmp_path / str(i)) for i in range(2)]
    assert all(a != b for a, b in zip(runs[0]["losses"], runs[1]["losses"])), runs
    for i, out in enumerate(outs):
        assert "Dataset:     imagenet" in out.splitlines()
        # Legacy benchmark logs: the worker's batch, num_steps = local steps x workers.
        log = tmp_path / ("log%d" % i)
        info = json.load(open(log / "benchmark_run.log"))
        assert {"name": "batch_size", "long_value": 4} in info["run_parameters"]
        metrics = [json.loads(l) for l in open(log / "metric.log")]
        assert metrics[-1]["name"] == "average_examples_per_sec"
        assert metrics[-1]["global_step"] == 8
        # 2 evaluation batches of 2 on each of the 2 workers: the 8 validation images.
        accuracy = [l for l in out.splitlines() if l.startswith("Accuracy @ 1 = ")]
        assert accuracy and all(l.endswith("[8 examples]") for l in accuracy), accuracy
        run = _manifest(tmp_path / str(i))
        assert run["num_workers"] == 2 and run["global_batch_size"] == 8
        counted = run["images_per_sec"] * run["wall_time"]
        assert abs(counted - len(run["step_times"]) * 8) < 1e-6 * counted


def test_parameter_server_workers_keep_synthetic_images_on_their_replica_devices(tmp_path):
    """Parameter-server workers keep synthetic images on the device, as the legacy script does
    (not a per-worker `from_tensors(...).repeat()` dataset on the worker's CPU, copied to the GPU
    every step): each replica's batch is a variable on its worker's replica device, read there
    by the step, with no iterator in the step."""
    ps, w0, w1, controller = ("127.0.0.1:%d" % p for p in _free_ports(4))
    common = ["--device=cpu", "--model=trivial", "--ps_hosts=" + ps, "--worker_hosts=%s,%s" % (
        w0, w1), "--controller_host=" + controller, "--cluster_timeout_secs=60", "--json_dir=",
        "--csv_file="]
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))

    def checks(*args):
        return zygote.start(args, tmp_path, env,
                            script=os.path.join(SUPPORT, "multiworker_checks.py"))
    tasks = [_start(common + ["--job_name=ps", "--task_index=0"], tmp_path)]
    tasks += [checks("serve_worker", str(i), ps, "%s,%s" % (w0, w1), controller) for i in (0, 1)]
    check = checks("ps_images", ps, "%s,%s" % (w0, w1), controller)
    try:
        out = check.communicate(timeout=150)[0]
    finally:
        for proc in tasks + [check]:
            if proc.poll() is None:
                proc.kill()
    lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
    assert check.returncode == 0 and lines, out[-3000:]
    got = json.loads(lines[-1][len("RESULT "):])
    # No input pipeline runs in the step; it reads the images from a variable (trivial's
    # batch: 2 x 8 x 8 x 3).
    assert [t for t in got["op_types"] if t.startswith(("Iterator", "MultiDeviceIterator"))] == []
    assert [2, 8, 8, 3] in got["read_shapes"]
    assert got["traces"] == [1, 1, 1]   # one trace: every step takes the same images
    # CPU workers: one replica each, its images on the worker's CPU:0 (GPU workers:
    # /device:GPU:r); the workers' own, not the parameter server's or the controller's.
    assert got["kind"] == "WorkerImages" and got["worker_devices"] == ["/device:CPU:0"]
    assert got["images"] == [["/job:worker/replica:0/task:0/device:CPU:0",
                              "/job:worker/replica:0/task:1/device:CPU:0"]]
    # Several replicas per worker: replica r's images on the worker's device r.
    assert got["two_devices"] == [
        ["/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0"],
        ["/job:worker/replica:0/task:0/device:CPU:1", "/job:worker/replica:0/task:1/device:CPU:1"]]
    assert got["two_values"] == [0.0, 1.0]
