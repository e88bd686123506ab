"""Devices, tf.distribute strategies and multi-host clusters.
"""
