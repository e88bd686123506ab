"""Figures beside images/sec: step statistics, memory, FLOPs and peaks, the training-time
estimate, the environment manifest and the published ranges; and the installed TensorFlow's
TensorRT (tensorrt.py: whether --trt_mode can run, which TensorRT it loads).
"""
