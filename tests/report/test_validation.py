"""`tfbench report` given a validate.json: its Validation section, the verdict table FAIL first,
rows classed by status, the status line; read from a recorded validate.json."""

import html.parser
import json
import os
import shutil

import pytest

from tfbench import errors
from tfbench.report import build, tables, validation
from tfbench.validate.verdicts import Check

from paths import DATA

RECORDED = os.path.join(DATA, "validate_example.json")
# The recorded rows as the report orders them: FAIL, WARN, PASS, SKIP, each as written.
ORDERED = [
    ("gpu-node-7", "GPU 5", "straggler", "FAIL", "straggler",
     "step alone 1.31x the median of 8 devices", "<= 1.05x the median"),
    ("gpu-node-7", "GPU 3", "numeric", "FAIL", "wrong_results",
     "not bit-exact: max_rel_diff 0.031 & loss 7.02", "bit-exact with GPU 0 (op determinism on)"),
    ("gpu-node-7", "host", "images_per_sec", "WARN", "unstable",
     "1552 images/sec (median of 3), 3.0% below; spread 19.3% over 3 repeats",
     ">= 1520 (95% of 1600 in old.csv) (repeats within 10% to judge)"),
    ("gpu-node-7", "GPU 0", "pcie_width", "PASS", "ok", "x16", "x16"),
    ("gpu-node-7", "host", "driver", "PASS", "ok", "CUDA 12.4 (driver 550.54.15)",
     "CUDA 12.3 or newer"),
    ("gpu-node-7", "host", "median_alone_ms", "PASS", "ok", "87.1 ms (median of 3), 1.0% shorter",
     "<= 92.63 (88 in old.csv / 95%)"),
    ("gpu-node-7", "GPU 2", "temperature", "PASS", "ok", "61 C",
     "below 87 C (slowdown 92 C less 5)"),
    ("gpu-node-7", "GPU 0", "nvlink", "SKIP", "no_nvlink", "no NVLink on this GPU", ""),
]
HEADER = ["Host", "Subject", "Check", "Status", "Reason", "Figure", "Expectation"]
STATUS_LINE = "validate: FAIL (2 FAIL, 1 WARN, 4 PASS, 1 SKIP)"


class _Tables(html.parser.HTMLParser):
    """Every <table>'s header cells and rows (each row: its class and its cells' text)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables, self.paragraphs, self._cell, self._p = [], [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append({"header": [], "rows": [], "class": dict(attrs).get("class")})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append((dict(attrs).get("class"), []))
        elif tag in ("td", "th"):
            self._cell = (tag, [])
        elif tag == "p":
            self._p = (dict(attrs).get("class"), [])

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1].append(data)
        if self._p is not None:
            self._p[1].append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            kind, text = self._cell
            table = self.tables[-1]
            (table["header"] if kind == "th" else table["rows"][-1][1]).append("".join(text))
            self._cell = None
        elif tag == "p" and self._p is not None:
            self.paragraphs.append((self._p[0], "".join(self._p[1])))
            self._p = None


def _page(path):
    parser = _Tables()
    with open(path) as handle:
        parser.feed(handle.read())
    return parser


def test_the_recorded_rows_are_validation_checks():
    with open(RECORDED) as handle:
        rows = json.load(handle)["rows"]
    assert [Check.from_json(r).to_json() for r in rows] == rows


def test_a_validate_json_renders_its_verdict_table_fail_first(tmp_path):
    report = build.build_report([RECORDED], str(tmp_path / "rep"))
    page = _page(report.html_path)
    [table] = page.tables
    assert table["header"] == HEADER
    assert "text" in table["class"].split()
    body = [row for row in table["rows"] if row[1]]
    assert [tuple(cells) for _, cells in body] == ORDERED
    assert [cls for cls, _ in body] == ["status-fail"] * 2 + ["status-warn"] + \
        ["status-pass"] * 4 + ["status-skip"]
    assert ("status-line", STATUS_LINE) in page.paragraphs
    with open(report.html_path) as handle:
        text = handle.read()
    assert "<h2>Validation</h2>" in text
    assert "&lt;= 1.05x the median" in text and "0.031 &amp; loss" in text
    assert "tr.status-fail td{background:" in text      # the colours are the page's
    # The Markdown says the same, and the section's CSV keeps the rows.
    with open(report.markdown_path) as handle:
        md = handle.read()
    section = md[md.index("## Validation"):]
    assert "**%s**" % STATUS_LINE in section
    assert [tuple(r[h] for h in HEADER) for r in tables.parse_markdown(section)] == ORDERED
    assert os.path.isfile(tmp_path / "rep" / "validation.csv")


def test_a_directory_holding_validate_json_and_a_csv_give_validation_first(tmp_path):
    from run_results import a100_result as result, write_results_csv as write_csv
    out_dir = tmp_path / "tfbench_validate_x"
    out_dir.mkdir()
    shutil.copy(RECORDED, out_dir / "validate.json")
    csv_path = write_csv(tmp_path / "results.csv", [result(images_per_sec=900.0)])
    report = build.build_report([str(out_dir), csv_path], str(tmp_path / "rep"))
    assert [s.slug for s in report.sections][:2] == ["validation", "results"]
    with open(report.markdown_path) as handle:
        md = handle.read()
    assert md.index("## Validation") < md.index("## Results")
    assert "Sources: %s, %s" % (out_dir, csv_path) in md


def test_the_validation_s_own_summary_line_is_shown(tmp_path):
    with open(RECORDED) as handle:
        data = json.load(handle)
    data["summary"] = "FAIL (2 FAIL, 1 WARN, 4 PASS, 1 SKIP): GPU 5 straggler; GPU 3 wrong_results"
    section = validation.validation_section(data, "v.json")
    assert section.intro == "validate: " + data["summary"]
    assert section.note.startswith("v.json (level standard; host gpu-node-7; baseline old.csv; "
                                   "tolerance 5%; 2026-12-02T10:00:00+00:00 to "
                                   "2026-12-02T10:12:31+00:00)")


def test_several_validations_are_one_section_each(tmp_path):
    second = tmp_path / "b.json"
    with open(RECORDED) as handle:
        data = json.load(handle)
    data["rows"], data["status"] = data["rows"][:1], "PASS"
    second.write_text(json.dumps(data))
    sections = validation.validation_sections([RECORDED, str(second)])
    assert [(s.slug, s.title) for s in sections] == [
        ("validation_1", "Validation: %s" % RECORDED),
        ("validation_2", "Validation: %s" % second)]
    assert sections[1].intro == "validate: PASS (1 PASS)"
    assert "text" in tables.section_html(sections[1])


@pytest.mark.parametrize("content, why", [
    ('{"schema": "tfbench.run"}', "its schema is not tfbench.validate"),
    ('{"schema": "tfbench.validate", "schema_version": 2, "rows": []}',
     "schema_version 2; this tfbench reads 1"),
    ('{"schema": "tfbench.validate", "schema_version": 1}', 'no "rows" list of checks'),
    ('{"schema": ', "invalid JSON (line 1)")])
def test_a_json_that_is_no_validate_json_is_one_error_line(tmp_path, capsys, content, why):
    from tfbench import cli as dispatcher
    path = tmp_path / "x.json"
    path.write_text(content)
    out = tmp_path / "rep"
    assert dispatcher.main(["tfbench", "report", str(path), "--out", str(out)]) == \
        errors.EXIT_USAGE
    assert capsys.readouterr().err == "tfbench: error: %s is not a tfbench validate.json: %s\n" \
        % (path, why)
    assert not out.exists()     # nothing written


def test_a_directory_without_validate_json_is_one_error_line(tmp_path, capsys):
    from tfbench import cli as dispatcher
    assert dispatcher.main(["tfbench", "report", str(tmp_path), "--out",
                            str(tmp_path / "rep")]) == errors.EXIT_USAGE
    assert capsys.readouterr().err == "tfbench: error: validation file not found: %s\n" % (
        tmp_path / "validate.json")
