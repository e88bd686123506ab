"""The --remote_cmd of e2e/test_validate_hosts_localhost.py: real tfbench tasks, one host's
collective made slow, and `validate` run by a stand-in until `tfbench validate` exists.

  --version                  tfbench's own answer
  validate [options] FLAGS   STAND_IN_VALIDATE=real: `python -m tfbench validate ...` itself.
                             Otherwise a stand-in of the design's shape: one training child
                             (`python -m tfbench FLAGS --csv_file=...`, a real TensorFlow run)
                             and OUT_DIR/validate.json with one row, training_step: PASS with
                             its images/sec when the child ended ok, else check_failed FAIL;
                             exit code 0 or 8 as a validation's
  FLAGS (a cluster's task)   `python -m tfbench FLAGS`; the task whose own address
                             (--worker_hosts' entry --task_index) is in TFBENCH_TEST_SLOW_HOSTS
                             runs with every collective all-reduce SLOW_SECONDS (default 0.3)
                             late (explain_inject.py collective): a host that drags every ring
                             it is in, and is fine alone (one device, no all-reduce)
"""

import json
import os
import socket
import subprocess
import sys

import paths  # noqa: F401 - the checkout's root first on sys.path

from tfbench.children.rows import read_rows  # noqa: E402
from tfbench.validate import options  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OWN = {"--" + o.name for o in options.OPTIONS} | {"--out_dir"}


def _tfbench(args):
    os.execv(sys.executable, [sys.executable, "-m", "tfbench"] + list(args))


def _value(argv, name):
    return next((a.split("=", 1)[1] for a in argv if a.startswith(name + "=")), None)


def validate(argv):
    if os.environ.get("STAND_IN_VALIDATE") == "real":
        _tfbench(["validate"] + argv)
    out_dir, csv_file = _value(argv, "--out_dir"), _value(argv, "--csv_file")
    flags = [a for a in argv if a.split("=", 1)[0] not in OWN]
    log = os.path.join(out_dir, "training.log")
    os.makedirs(out_dir)
    with open(log, "w") as handle:
        code = subprocess.call([sys.executable, "-m", "tfbench"] + flags, stdout=handle,
                               stderr=subprocess.STDOUT)
    rows = [r for r in read_rows(csv_file) if r["status"] == "ok"]
    host = socket.gethostname()
    if code == 0 and rows:
        check = {"status": "PASS", "reason": "ok",
                 "figure": "%s images/sec" % rows[-1]["images_per_sec"]}
    else:
        check = {"status": "FAIL", "reason": "check_failed",
                 "figure": "the training child ended with exit code %d" % code}
    check.update(host=host, subject="host", check="training_step",
                 expectation="a training step completes", value=None, expected=None)
    with open(os.path.join(out_dir, "validate.json"), "w") as handle:
        json.dump({"schema": "tfbench.validate", "schema_version": 1, "host": host,
                   "level": _value(argv, "--level"), "rows": [check],
                   "status": check["status"], "exit_code": 0 if check["status"] == "PASS"
                   else 8}, handle, indent=1)
    print("stand-in validate: %s %s" % (check["status"], check["figure"]))
    return 0 if check["status"] == "PASS" else 8


def main(argv):
    if argv[:1] == ["validate"]:
        return validate(argv[1:])
    workers, index = _value(argv, "--worker_hosts"), _value(argv, "--task_index")
    slow = set(filter(None, os.environ.get("TFBENCH_TEST_SLOW_HOSTS", "").split(",")))
    if workers and index is not None and workers.split(",")[int(index)] in slow:
        script = os.path.join(HERE, "explain_inject.py")
        os.execv(sys.executable, [sys.executable, script, "collective",
                                  os.environ.get("SLOW_SECONDS", "0.3")] + argv)
    _tfbench(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
