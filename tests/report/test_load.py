"""Results CSV files read into tables (tfbench.report.load)."""

from tfbench.output import csv_out
from tfbench.report import load


def test_every_text_column_of_the_schema_stays_text():
    """A text column read as a number became NaN in every table (expected_range_source did)."""
    row = {name: "" for name in csv_out.COLUMN_NAMES}
    row.update(run_id="r1", status="ok", model="resnet50", images_per_sec="10.5",
               expected_range_source="MLCommons v4.0, batch 256 per GPU", link="PCIe 4.0 x16")
    df = load.rows_frame([row])
    assert df.loc[0, "expected_range_source"] == "MLCommons v4.0, batch 256 per GPU"
    assert df.loc[0, "link"] == "PCIe 4.0 x16"
    assert df.loc[0, "images_per_sec"] == 10.5
