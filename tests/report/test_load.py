"""Results CSV files read into tables (tfbench.report.load)."""

import pytest

from tfbench import cli, errors
from tfbench.output import csv_out
from tfbench.report import build as _build  # noqa: F401 - `tfbench report` imports it, once
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


PASSWD = "".join("user%d:x:%d:%d:User %d:/home/user%d:/bin/sh\n" % ((i,) * 5) for i in range(23)) \
    + "svc:x:999:999:Service, with, commas:/var/svc:/usr/sbin/nologin\n"


@pytest.mark.parametrize("content, why", [
    (PASSWD, "its first line names no run_id, status or images_per_sec"),
    ("", "it is empty"),
    (b"\xff\xfe\x00binary", "it is not UTF-8 text"),
    ("run_id,model\nr1,m\n", "its first line names no status or images_per_sec"),
], ids=["passwd", "empty", "binary", "other_csv"])
def test_a_file_that_is_no_results_csv_is_one_line_saying_what_was_expected(
        tmp_path, capsys, content, why):
    # `tfbench report /etc/passwd`: pandas' tokenizer said "Expected 1 fields in line 24, saw 4"
    # in the error line, and its message's newline left a blank line after it.
    path = tmp_path / "f.csv"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert cli.main(["tfbench", "report", str(path), "--out", str(tmp_path / "o")]) == \
        errors.EXIT_USAGE
    err = capsys.readouterr().err
    assert err == ("tfbench: error: %s is not a tfbench results CSV (%s): expected the CSV a "
                   "run writes with --csv_file, a header row naming run_id, status and "
                   "images_per_sec, then one row per run\n" % (path, why))


def test_a_results_csv_with_a_damaged_row_names_its_line(tmp_path):
    path = tmp_path / "r.csv"
    header = ",".join(csv_out.COLUMN_NAMES)
    row = ",".join("" for _ in csv_out.COLUMN_NAMES)
    path.write_text("%s\n%s\n%s,extra,fields\n" % (header, row, row))
    with pytest.raises(errors.UsageError) as err:
        load.read_results([str(path)])
    assert str(err.value) == ("%s is a tfbench results CSV that is damaged: line 3 has more "
                              "fields than the header" % path)
    path.write_bytes(("%s\n%s\n" % (header, row)).encode() + b"\xff\xfe,\x80\n")
    with pytest.raises(errors.UsageError) as err:
        load.read_results([str(path)])
    assert str(err.value) == ("%s is a tfbench results CSV that is damaged: line 3 is not "
                              "UTF-8 text" % path)
