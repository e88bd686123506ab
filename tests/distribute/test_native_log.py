"""tfbench.distribute.native_log: a known TensorFlow C++ line kept off stderr, the rest kept in
order, nothing left in $TMPDIR."""

import os

from tfbench.distribute import native_log


def test_only_the_named_lines_are_dropped(capfd, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)   # read TMPDIR again
    with native_log.without_lines(native_log.PER_DEVICE_BUFFER_NOT_OPTIMIZED):
        os.write(2, b"first\n")
        os.write(2, b"W0000 dataset.cc:997] Input of GeneratorDatasetOp::Dataset will not be "
                    b"optimized because ...\n")
        os.write(2, b"last, no newline")
        assert os.listdir(tmp_path) == []
    assert capfd.readouterr().err == "first\nlast, no newline"
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"
