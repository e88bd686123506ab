"""A validation's rows: every reason documented, statuses add up as the docs say, exit codes."""

import pytest

from tfbench import errors
from tfbench.measure.health_verdicts import Verdict
from tfbench.validate import verdicts
from tfbench.validate.verdicts import Check


def _row(status, reason="ok", subject="GPU 0"):
    return Check("h1", subject, "pcie_width", status, reason, "x16", "x16")


def test_a_row_with_an_undocumented_reason_or_status_is_refused():
    with pytest.raises(ValueError, match="not a documented code"):
        _row("FAIL", reason="pcie_bad")
    with pytest.raises(ValueError, match="status"):
        _row("BAD")


@pytest.mark.parametrize("statuses, status, code", [
    ([], "PASS", 0), (["PASS", "SKIP"], "PASS", 0), (["SKIP"], "PASS", 0),
    (["PASS", "WARN"], "WARN", 7), (["WARN", "FAIL", "PASS"], "FAIL", 8)])
def test_overall_status_and_exit_code(statuses, status, code):
    rows = [_row(s) for s in statuses]
    assert verdicts.overall(rows) == status
    assert verdicts.exit_code(rows) == code
    assert code in (errors.EXIT_OK, errors.EXIT_VALIDATE_WARN, errors.EXIT_VALIDATE_FAIL)


def test_summary_counts_and_names_the_deciding_rows():
    rows = [_row("PASS"), _row("FAIL", "straggler", "GPU 5"), _row("WARN", "unstable"),
            _row("FAIL", "wrong_results", "GPU 3"), _row("SKIP", "no_nvlink")]
    assert verdicts.summary(rows) == \
        "FAIL (2 FAIL, 1 WARN, 1 PASS, 1 SKIP): GPU 5 straggler; GPU 3 wrong_results"
    assert verdicts.summary([_row("PASS")]) == "PASS (1 PASS)"


def test_a_host_row_and_a_check_that_did_not_complete_name_their_check():
    rows = [Check("node7", "host", "allreduce_busbw", "FAIL", "check_failed", "hung", ""),
            Check("node7", "GPU 2", "conv", "FAIL", "check_failed", "out of memory", ""),
            Check("node7", "host", "images_per_sec", "WARN", "unstable", "", "")]
    assert verdicts.summary(rows) == ("FAIL (2 FAIL, 1 WARN): node7 allreduce_busbw "
                                      "check_failed; GPU 2 conv check_failed")
    assert verdicts.summary(rows[2:]) == "WARN (1 WARN): node7 images_per_sec unstable"


def test_a_health_verdict_becomes_a_row_of_its_host():
    gpu = verdicts.from_health(Verdict(4, "pcie_width", "FAIL", "pcie_width_degraded",
                                       "x4 of x16", "x16"), "node7")
    assert (gpu.host, gpu.subject, gpu.label) == ("node7", "GPU 4",
                                                  "pcie_width_degraded: x4 of x16")
    driver = verdicts.from_health(Verdict(None, "driver", "PASS", "ok", "CUDA 12.4", "12.3"),
                                  "node7")
    assert driver.subject == "host"
    assert Check.from_json(gpu.to_json()) == gpu


def test_every_reason_code_is_documented_in_validate_md():
    from helpers import ROOT
    with open("%s/docs/validate.md" % ROOT) as handle:
        text = handle.read()
    missing = [code for code in verdicts.REASONS if "`%s`" % code not in text]
    assert missing == []
