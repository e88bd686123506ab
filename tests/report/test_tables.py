"""Table rendering: Markdown (pandas + tabulate), aligned text (rich), HTML (pandas)."""

import math

import pandas as pd

from tfbench.report import tables

FRAME = pd.DataFrame({
    "model": ["resnet50", "vgg16"],
    "images_per_sec": [1234.5, math.nan],
    "speedup": [1.0, 0.0625],
    "xla": [1, 0],
    "error": ["[bold]not markup[/bold] a|b", "first line\nsecond [[{{node conv1/Conv2D}}]]"],
})


def test_markdown_keeps_the_formatted_cells_and_parses_back():
    md = tables.markdown(FRAME)
    assert tables.parse_markdown(md) == [
        {"Model": "resnet50", "Images/sec": "1,234.5", "Speed-up (x)": "1.00", "XLA": "on",
         "Error": "[bold]not markup[/bold] a|b"},
        {"Model": "vgg16", "Images/sec": "", "Speed-up (x)": "0.06", "XLA": "off",
         "Error": "first line second [[{{node conv1/Conv2D}}]]"}]
    header, rule = md.splitlines()[:2]
    # Columns of numbers right-aligned, text left-aligned.
    sides = ["right" if c.strip().endswith(":") else "left" for c in rule.strip("|").split("|")]
    assert sides == ["left", "right", "right", "left", "left"]
    assert header.startswith("| Model ")


def test_markdown_of_no_rows_is_the_header():
    md = tables.markdown(FRAME.iloc[:0])
    assert tables.parse_markdown(md) == [] and md.startswith("| Model ")
    assert tables.markdown(pd.DataFrame()) == ""


def test_text_is_aligned_plain_and_one_line_per_row():
    text = tables.text(FRAME, ["model", "images_per_sec", "error"])
    lines = text.splitlines()
    assert "\x1b" not in text and len(lines) == 4
    assert lines[0].split() == ["Model", "Images/sec", "Error"]
    assert set(lines[1]) == {"-", " "}
    assert lines[2].split(None, 2) == ["resnet50", "1,234.5", "[bold]not markup[/bold] a|b"]
    assert lines[3].startswith("vgg16 ") and lines[3].endswith(
        "first line second [[{{node conv1/Conv2D}}]]")
    # Numbers right-aligned under their title.
    assert lines[2].index("1,234.5") + len("1,234.5") == lines[0].index("Images/sec") + len(
        "Images/sec")
    assert all(line == line.rstrip() for line in lines)


def test_text_is_never_wrapped():
    wide = pd.DataFrame({"error": ["x" * 500], "model": ["m"]})
    assert len(tables.text(wide).splitlines()) == 3


# Cells of every kind a table holds: numbers (right-aligned), text with spaces at either end,
# sparklines, accents, combining marks, wide characters, markup-like brackets, empty cells.
PIECES = ["1", "23", "4,567.8", "-0.5", "+6.0%", "resnet50", " lead", "trail ", "a b", "@",
          "\u2581\u2584\u2588", "caf\u00e9", "e\u0301", "\u65e5\u672c", "[bold]", "x/y", ""]


def test_text_lays_out_a_table_as_rich_does(monkeypatch):
    import random
    rng = random.Random(44)
    frames = []
    for _ in range(120):
        columns, rows = rng.randint(1, 5), rng.randint(0, 4)
        numbers = [rng.random() < 0.4 for _ in range(columns)]
        frames.append(pd.DataFrame({
            "c%d %s" % (i, rng.choice(PIECES[5:-1])): [
                rng.choice(PIECES[:5] + [""]) if numbers[i] else
                "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 3)))
                for _ in range(rows)] for i in range(columns)}))
    plain = [tables.text(f) for f in frames]
    monkeypatch.setattr(tables, "_plain", lambda *args: None)   # rich lays out every one
    assert plain == [tables.text(f) for f in frames]


def test_text_leaves_to_rich_what_rich_would_change():
    # An emoji code rich replaces, a tab: laid out by rich itself.
    assert tables._plain(["a"], [[":thumbs_up:"]], ["left"]) is None
    assert tables._plain(["a"], [["x\ty"]], ["left"]) is None
    assert ":thumbs_up:" not in tables.text(pd.DataFrame({"a": [":thumbs_up:"]}))


def test_html_has_the_titles_and_escapes():
    html = tables.html(FRAME)
    assert "<th>Images/sec</th>" in html and "<td>1,234.5</td>" in html
    assert "[[{{node conv1/Conv2D}}]]" in html and "<script" not in tables.html(
        pd.DataFrame({"error": ["<script>"]}))
