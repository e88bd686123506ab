"""`tfbench validate`: is every GPU and every host healthy, and which one is not.

A validation runs a fixed plan of checks for its level (the health facts, each device alone,
the devices together, against a baseline), each TensorFlow check in a child process of its own
(tfbench.children), so a crashed or hung probe is one failed check, never a lost table. Every
check ends in rows of one kind (verdicts.Check: PASS, WARN, FAIL or SKIP with a stable reason
code, the figure against its expectation); docs/validate.md documents each check, its rule and
its codes.

Nothing here imports TensorFlow or the engine: what a child measured is read from its rows and
its JSON manifest. `tfbench launch --hosts=... -- validate` (tfbench.launch) runs it on many
hosts and uses these rows, so this package sits between children and launch.
"""
