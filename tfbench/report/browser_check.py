"""An HTML report checked in a real headless browser: every image loads, no table is wider than
the page at 1,280 px, and a screenshot of the first screen is saved beside the report.

The browser is the system's Chromium (Debian's `chromium` package, /usr/bin/chromium; or
$TFBENCH_CHROMIUM), started headless with networking features off and a new empty profile;
nothing is downloaded. Two calls:
  1. a copy of the page, in the same folder so relative image paths resolve, with a small script
     that measures once the page has loaded (each image complete with a natural width; each
     table's right edge and scroll width against the viewport) and writes the result as JSON
     into the DOM; `--dump-dom` prints the DOM after scripts ran, and the JSON is read back;
  2. `--screenshot` of the page itself at the same window size.
"""

from __future__ import annotations

import dataclasses
import html as html_lib
import json
import os
import re
import shutil
import subprocess
import tempfile
from typing import Optional

from tfbench import errors

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--mute-audio")
RESULT_ID = "tfbench-browser-check"
_PROBE = """<script>
window.addEventListener('load', function () {
  var view = document.documentElement.clientWidth;
  var images = Array.prototype.map.call(document.images, function (img) {
    return {src: img.getAttribute('src'), ok: img.complete && img.naturalWidth > 0};
  });
  var tables = Array.prototype.map.call(document.querySelectorAll('table'), function (t) {
    var box = t.getBoundingClientRect(), head = t.previousElementSibling;
    return {title: head && /^H[1-6]$/.test(head.tagName) ? head.textContent : '',
            right: box.right + window.scrollX, width: box.width, scroll: t.scrollWidth,
            client: t.clientWidth};
  });
  var out = document.createElement('pre');
  out.id = '%s';
  out.textContent = JSON.stringify({viewport: view, page: document.documentElement.scrollWidth,
                                    images: images, tables: tables});
  document.body.appendChild(out);
});
</script>""" % RESULT_ID


class BrowserUnavailable(errors.TfbenchError):
    """No usable Chromium on this machine (the check is skipped, with this reason)."""


@dataclasses.dataclass
class BrowserCheck:
    html: str
    browser: str
    width: int                      # window width asked for, px
    viewport: int                   # the page's layout width (window minus a scrollbar), px
    page: int                       # the page's scroll width, px
    images: int
    broken_images: list[str]
    wide_tables: list[str]
    screenshot: Optional[str]
    tables: int = 0

    @property
    def ok(self) -> bool:
        return not self.broken_images and not self.wide_tables and self.page <= self.viewport

    def summary(self) -> str:
        """One line: the verdict and what failed."""
        what = "%d image%s loaded, %d of %d tables" % (
            self.images - len(self.broken_images), "" if self.images == 1 else "s",
            self.tables - len(self.wide_tables), self.tables)
        if self.ok:
            text = "browser check passed at %d px: %s fit the page" % (self.width, what)
        else:
            problems = ["broken image%s: %s" % ("s" if len(self.broken_images) > 1 else "",
                                                ", ".join(self.broken_images))
                        ] if self.broken_images else []
            problems += ["wider than the page: %s" % "; ".join(self.wide_tables)
                         ] if self.wide_tables else []
            if self.page > self.viewport and not self.wide_tables:
                problems.append("the page scrolls sideways (%d px wide)" % self.page)
            text = "browser check FAILED at %d px: %s" % (self.width, "; ".join(problems))
        return text + (" (screenshot: %s)" % self.screenshot if self.screenshot else "")

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "ok": self.ok, "summary": self.summary()}


def find_browser(environ: Optional[dict] = None) -> Optional[str]:
    """$TFBENCH_CHROMIUM, else the first Chromium on PATH; None when there is none."""
    environ = os.environ if environ is None else environ
    given = environ.get("TFBENCH_CHROMIUM")
    if given:
        return given if shutil.which(given) else None
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _run(browser: str, args: list[str], timeout: float) -> str:
    profile = tempfile.mkdtemp(prefix="tfbench-chromium-")
    try:
        proc = subprocess.run([browser, *FLAGS, "--user-data-dir=" + profile, *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise BrowserUnavailable("%s did not finish within %.0f s" % (browser, timeout)) from None
    except OSError as exc:
        raise BrowserUnavailable("cannot start %s: %s" % (browser, exc)) from None
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if proc.returncode != 0 and not proc.stdout:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise BrowserUnavailable("%s exited with %d: %s" % (browser, proc.returncode,
                                                            lines[-1] if lines else "no output"))
    return proc.stdout


def measure(html_path: str, width: int = 1280, height: int = 900,
            browser: Optional[str] = None, timeout: float = 120.0) -> dict:
    """The probe's JSON for the page at this window size."""
    browser = browser or find_browser()
    if not browser:
        raise BrowserUnavailable("no Chromium found (apt-get install chromium, or set "
                                 "TFBENCH_CHROMIUM)")
    with open(html_path, encoding="utf-8") as handle:
        page = handle.read()
    cut = page.lower().rfind("</body>")
    probed = page[:cut] + _PROBE + page[cut:] if cut >= 0 else page + _PROBE
    folder = os.path.dirname(os.path.abspath(html_path))
    fd, copy = tempfile.mkstemp(prefix=".browser-check-", suffix=".html", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(probed)
        dom = _run(browser, ["--window-size=%d,%d" % (width, height),
                             "--virtual-time-budget=5000", "--dump-dom",
                             "file://" + os.path.abspath(copy)], timeout)
    finally:
        os.remove(copy)
    found = re.search(r'<pre id="%s">(.*?)</pre>' % RESULT_ID, dom, re.S)
    if not found:
        raise BrowserUnavailable("%s loaded the page but its measuring script did not report "
                                 "(%d bytes of DOM)" % (browser, len(dom)))
    return json.loads(html_lib.unescape(found.group(1)))


def check(html_path: str, screenshot: Optional[str] = None, width: int = 1280,
          height: int = 900, browser: Optional[str] = None,
          timeout: float = 120.0) -> BrowserCheck:
    """Measures the page and saves a screenshot of its first screen (when `screenshot` is a
    path). BrowserUnavailable when no browser can do it."""
    browser = browser or find_browser()
    result = measure(html_path, width, height, browser, timeout)
    view = int(result["viewport"])
    broken = [img["src"] for img in result["images"] if not img["ok"]]
    wide = []
    for i, table in enumerate(result["tables"], 1):
        right, scroll, client = table["right"], table["scroll"], table["client"]
        if right > view + 0.5 or scroll > client + 1:
            title = (table["title"] or "").strip()
            wide.append("table %d%s: %.0f px wide, right edge at %.0f px, page %d px" % (
                i, " (%s)" % title if title else "", max(table["width"], scroll), right, view))
    shot = None
    if screenshot:
        os.makedirs(os.path.dirname(os.path.abspath(screenshot)), exist_ok=True)
        _run(browser, ["--window-size=%d,%d" % (width, height), "--hide-scrollbars",
                       "--screenshot=" + os.path.abspath(screenshot),
                       "file://" + os.path.abspath(html_path)], timeout)
        shot = screenshot if os.path.isfile(screenshot) else None
    return BrowserCheck(html_path, browser, width, view, int(result["page"]),
                        len(result["images"]), broken, wide, shot, tables=len(result["tables"]))


def save(result: BrowserCheck, path: str) -> None:
    with open(path, "w") as handle:
        json.dump(result.to_dict(), handle, indent=1)
        handle.write("\n")


def check_report(html_path: str, required: bool = False) -> tuple[Optional[bool], str]:
    """Checks a written report: screenshot.png and browser_check.json beside it. Returns (passed,
    or None when skipped; the one line to print). Without a browser the check is skipped with
    the reason, or BrowserUnavailable when `required`."""
    folder = os.path.dirname(html_path)
    try:
        result = check(html_path, os.path.join(folder, "screenshot.png"))
    except BrowserUnavailable as exc:
        if required:
            raise
        return None, "browser check: skipped (%s)" % exc
    save(result, os.path.join(folder, "browser_check.json"))
    return result.ok, result.summary()
