"""Runs of the CLI with the TF-TRT stand-in (tftrt_stand_in.StandInConverter) taken for TF-TRT:
the `stand_in` fixture, a run that records its lines, its row and manifest, and a converted
GraphDef; shared by tests/engine/test_tftrt.py and tests/repo/test_script_gpu_smoke.py."""

import json
import os
import tempfile

import pytest
from tensorflow.core.framework import graph_pb2

from helpers import only_row
from tfbench.cli import run
from tfbench.engine import tftrt
from tfbench.measure import tensorrt
from tftrt_stand_in import StandInConverter

TRT_10 = tensorrt.TensorRT("2.17.0", True, (10, 8, 0), True, (10, 8, 0))
TINY = ["--model=trivial", "--data_name=cifar10", "--device=cpu", "--batch_size=4",
        "--num_batches=2", "--num_warmup_batches=1", "--forward_only"]


def converted_graph(precisions=("FP16", "FP16"), sizes=(5, 7)):
    """A converted GraphDef: a placeholder, one TRTEngineOp per precision with a native segment
    of `sizes` nodes, two outputs; and a library function that is no segment."""
    graph = graph_pb2.GraphDef()
    names = ["images"] + ["TRTEngineOp_000_%03d" % i for i in range(len(precisions))] + \
        ["Identity", "logits"]
    for name in names:
        node = graph.node.add()
        node.name, node.op = name, ("Placeholder" if name == "images" else
                                    "TRTEngineOp" if name.startswith("TRT") else "Identity")
    for node, precision in zip(graph.node[1:], precisions):
        node.attr["precision_mode"].s = precision.encode()
    for i, size in enumerate(sizes):
        func = graph.library.function.add()
        func.signature.name = "TRTEngineOp_000_%03d_native_segment" % i
        func.node_def.extend(graph_pb2.GraphDef().node.add() for _ in range(size))
    other = graph.library.function.add()
    other.signature.name = "some_other_function"
    other.node_def.extend(graph_pb2.GraphDef().node.add() for _ in range(4))
    return graph


@pytest.fixture
def stand_in(monkeypatch, tmp_path):
    """TF-TRT available (the stand-in converter, TensorRT 10.8.0, the CPU taken for a GPU);
    temporary directories in tmp_path/tmp; returns the list the stand-in records its calls in."""
    events = []
    monkeypatch.setattr(StandInConverter, "EVENTS", events)
    monkeypatch.setattr(StandInConverter, "GRAPH_DEF", converted_graph())
    monkeypatch.setattr(StandInConverter, "FAIL_IN", None)
    monkeypatch.setattr(StandInConverter, "FAILED_ENGINES", frozenset())
    monkeypatch.setattr(tftrt, "converter_class", lambda: StandInConverter)
    monkeypatch.setattr(tensorrt, "read", lambda: TRT_10)
    reasons = tensorrt.unavailable_reasons
    monkeypatch.setattr(tensorrt, "unavailable_reasons", lambda trt, kind: reasons(trt, "gpu"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.chdir(tmp_path)
    return events


def run_logged(args, events):
    """Runs the CLI in-process; its printed lines go to `events` as ('line', text)."""
    return run.run_benchmark(["tfbench"] + TINY + args + ["--csv_file=r.csv", "--json_dir=j"],
                             emit=lambda line: events.append(("line", line)))


def row_and_manifest(tmp_path):
    row = only_row(tmp_path / "r.csv")
    (name,) = os.listdir(tmp_path / "j")
    with open(tmp_path / "j" / name) as handle:
        return row, json.load(handle)
