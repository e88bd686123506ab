"""The CUDA an installed TensorFlow was built with (tfbench.measure.tensorflow_build), read from
its build_info module's source: a CUDA build, a CPU build, none installed, and the installed
one's answer matching what TensorFlow itself says."""

import pytest

from tfbench.measure import tensorflow_build


def _tensorflow(root, text):
    folder = root / "tensorflow" / "python" / "platform"
    folder.mkdir(parents=True)
    (root / "tensorflow" / "__init__.py").write_text("raise ImportError('never imported')\n")
    (folder / "build_info.py").write_text(text)
    return [str(root)]


def test_a_cuda_build(tmp_path):
    path = _tensorflow(tmp_path, "import collections\n\nbuild_info = collections.OrderedDict("
                                 "[('cuda_version', '12.5.1'), ('cudnn_version', '9'), "
                                 "('is_cuda_build', True)])\n")
    assert tensorflow_build.tensorflow_cuda(path) == ((12, 5), "")


@pytest.mark.parametrize("text, why", [
    ("import collections\nbuild_info = collections.OrderedDict([('is_cuda_build', False)])\n",
     "TensorFlow is not a CUDA build"),
    ("build_info = {\n", "TensorFlow's build_info module unreadable (SyntaxError)"),
    ("import collections\nbuild_info = collections.OrderedDict([('is_cuda_build', True)])\n",
     "TensorFlow's build names no CUDA version ('')")])
def test_no_cuda_version_says_why(tmp_path, text, why):
    assert tensorflow_build.tensorflow_cuda(_tensorflow(tmp_path, text)) == (None, why)


def test_no_tensorflow(tmp_path):
    assert tensorflow_build.tensorflow_cuda([str(tmp_path)]) == (None, "no TensorFlow installed")


def test_the_installed_one_agrees_with_tensorflow():
    import tensorflow as tf
    build = tf.sysconfig.get_build_info()
    found, why = tensorflow_build.tensorflow_cuda()
    if build.get("is_cuda_build"):
        assert found == tuple(int(x) for x in build["cuda_version"].split(".")[:2])
    else:
        assert found is None and why == "TensorFlow is not a CUDA build"
