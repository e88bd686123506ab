"""The installed TensorFlow's TensorRT (tfbench.measure.tensorrt): what is missing, read as
TensorFlow reads it."""

import pytest
import tensorflow as tf

from tfbench.measure import tensorrt


TRT_10 = tensorrt.TensorRT("2.17.0", True, (10, 8, 0), True, (10, 8, 0))


class _FakePywrap:
    """TensorFlow's tf2tensorrt readers; the loaded version may only be read once enabled."""

    def __init__(self, linked, enabled, loaded):
        self.linked, self.enabled, self.loaded = linked, enabled, loaded

    def get_linked_tensorrt_version(self):
        return self.linked

    def is_tensorrt_enabled(self):
        return self.enabled

    def get_loaded_tensorrt_version(self):
        assert self.enabled, "read before TensorRT's libraries were opened"
        return self.loaded


@pytest.mark.parametrize("trt, kind, why", [
    (tensorrt.TensorRT("2.21.0", False, None, False, None), "gpu",
     ["TensorFlow 2.21.0 has no TF-TRT module"]),
    (tensorrt.TensorRT("2.17.0", True, (10, 8, 0), False, None), "gpu",
     ["TensorFlow 2.17.0 is built with TensorRT 10.8.0 but cannot load TensorRT's libraries "
      "(libnvinfer)"]),
    (TRT_10, "cpu", ["TensorRT runs on NVIDIA GPUs and this run is on the CPU"]),
    (TRT_10, "gpu", []),
])
def test_each_missing_piece_is_named(trt, kind, why):
    assert tensorrt.unavailable_reasons(trt, kind) == why


@pytest.mark.parametrize("fake, linked, loaded", [
    (_FakePywrap((10, 8, 0), True, (10, 8, 1)), (10, 8, 0), (10, 8, 1)),
    (_FakePywrap((10, 8, 0), False, None), (10, 8, 0), None),
    (_FakePywrap((0, 0, 0), False, None), (0, 0, 0), None),
])
def test_read_takes_tensorflows_own_readers(fake, linked, loaded, monkeypatch):
    monkeypatch.setattr(tensorrt, "_pywrap", lambda: fake)
    got = tensorrt.read()
    assert (got.module, got.linked, got.enabled, got.loaded) == (True, linked, fake.enabled,
                                                                  loaded)
    assert tensorrt.version_text(got.loaded) == ("10.8.1" if loaded else "")


def test_read_here_matches_tensorflow():
    from tensorflow.compiler.tf2tensorrt import _pywrap_py_utils as utils
    got = tensorrt.read()
    assert got.tf_version == tf.__version__ and got.module
    assert got.linked == tuple(utils.get_linked_tensorrt_version())
    assert got.enabled == utils.is_tensorrt_enabled()
