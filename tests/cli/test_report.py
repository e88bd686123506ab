"""`tfbench report` (tfbench.cli.report): a missing or foreign results file is one error."""

import pytest

from tfbench import errors
from tfbench.report import load


def test_report_errors(tmp_path, capsys):
    from tfbench import cli as dispatcher
    assert dispatcher.main(["tfbench", "report", str(tmp_path / "nope.csv"), "--out",
                            str(tmp_path / "o")]) == errors.EXIT_USAGE
    assert capsys.readouterr().err.startswith("tfbench: error: results file not found")
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(errors.UsageError, match="not a tfbench results CSV"):
        load.read_results([str(other)])
