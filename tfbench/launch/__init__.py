"""Several hosts in one command: `tfbench launch` starts one task per host over a remote shell,
streams each host's log, prints the chief's classic log, gathers every host's row (its own, or one
tfbench.children writes for it), and runs the scaling series over host counts.
"""
