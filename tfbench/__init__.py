"""tfbench: a TensorFlow 2 / Keras 3 benchmark suite and drop-in tf_cnn_benchmarks replacement."""

__version__ = "0.1.0"
