"""The verdict table as text (tfbench.validate.table)."""

from tfbench.validate import table
from tfbench.validate.verdicts import Check


def test_columns_are_as_wide_as_their_widest_cell_and_rows_keep_their_order():
    rows = [Check("node7", "GPU 4", "pcie_width", "FAIL", "pcie_width_degraded", "x4 of x16",
                  "x16"),
            Check("node7", "host", "driver", "PASS", "ok", "CUDA 12.4", "CUDA 12.3 or newer")]
    assert table.render(rows) == (
        "host   subject  check       status  reason               figure     expectation\n"
        "-----  -------  ----------  ------  -------------------  ---------  ------------------\n"
        "node7  GPU 4    pcie_width  FAIL    pcie_width_degraded  x4 of x16  x16\n"
        "node7  host     driver      PASS    ok                   CUDA 12.4  CUDA 12.3 or newer\n")
    assert table.render([]) == ""
