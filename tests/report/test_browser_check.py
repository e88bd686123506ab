"""The browser check (tfbench.report.browser_check) in the system's headless Chromium: the
evaluation report passes at 1,280 px with a screenshot; a broken image and a too-wide table are
caught and named. Skipped, with one line, when Chromium is not installed."""

import os

import pytest

from evaluation_fakes import write_evaluation
from tfbench.report import browser_check, evaluation_report

pytestmark = pytest.mark.slow

BROWSER = browser_check.find_browser()
needs_chromium = pytest.mark.skipif(
    BROWSER is None, reason="no Chromium on this machine (apt-get install chromium)")

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082")


@needs_chromium
def test_the_evaluation_report_passes_at_1280_px(tmp_path):
    ev_dir = write_evaluation(str(tmp_path / "ev"), ("resnet50", "vit_tiny", "efficientnet_b0"),
                              device="NVIDIA A100-SXM4-80GB with a long product name")
    report = evaluation_report.build(ev_dir)
    shot = os.path.join(os.path.dirname(report.html_path), "screenshot.png")
    result = browser_check.check(report.html_path, shot)
    assert result.ok, result.summary()
    assert result.images == 9 and result.broken_images == [] and result.tables >= 5
    assert result.viewport <= 1280 and result.page <= result.viewport
    with open(shot, "rb") as handle:
        assert handle.read(8) == PNG[:8]
    assert result.summary().startswith("browser check passed at 1280 px: 9 images loaded")
    assert not [f for f in os.listdir(os.path.dirname(report.html_path))
                if f.startswith(".browser-check-")]   # the probed copy is removed


@needs_chromium
def test_a_broken_image_and_a_wide_table_are_named(tmp_path):
    (tmp_path / "ok.png").write_bytes(PNG)
    wide = "".join("<td>%s</td>" % ("cell%03d" % i) for i in range(300))
    page = tmp_path / "page.html"
    page.write_text("<!DOCTYPE html><html><body><h2>Narrow</h2><table><tr><td>1</td></tr>"
                    "</table><h2>Too wide</h2><table><tr>%s</tr></table>"
                    "<img src='ok.png'><img src='missing.png'></body></html>" % wide)
    result = browser_check.check(str(page), None)
    assert not result.ok and result.screenshot is None
    assert result.broken_images == ["missing.png"]
    assert len(result.wide_tables) == 1 and result.wide_tables[0].startswith("table 2 (Too wide)")
    summary = result.summary()
    assert summary.startswith("browser check FAILED at 1280 px: broken image: missing.png; "
                              "wider than the page: table 2 (Too wide)")


def test_no_browser_is_a_reason_not_a_crash(tmp_path):
    assert browser_check.find_browser({"TFBENCH_CHROMIUM": "/nonexistent/chromium"}) is None
    page = tmp_path / "p.html"
    page.write_text("<html><body></body></html>")
    with pytest.raises(browser_check.BrowserUnavailable, match="cannot start"):
        browser_check.check(str(page), browser="/nonexistent/chromium")


@needs_chromium
def test_tfbench_report_checks_its_page_when_asked(tmp_path, capsys):
    from tfbench.cli import report as report_cli
    ev_dir = write_evaluation(str(tmp_path / "ev"), ("resnet50",))
    out = tmp_path / "rep"
    assert report_cli.main([os.path.join(ev_dir, "evaluation.csv"), "--out", str(out),
                            "--browser_check"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("browser check passed at 1280 px")
    assert (out / "screenshot.png").exists() and (out / "browser_check.json").exists()
