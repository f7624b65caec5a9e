"""`aiadmit audit --format html`: one self-contained page, checked as a browser shows it.

The page is rendered by a real headless Chromium (Debian package `chromium`; .ci/run installs it): the DOM after
its script ran must hold the charts, the coverage table and every finding, the console must stay free of errors
(a Content-Security-Policy violation, i.e. any attempt to fetch something, is one), and a screenshot is kept in
$AIADMIT_ARTIFACTS (default: the test's temporary directory). The console check is itself checked on a page that
raises an error and tries a fetch, so a Chromium that logs nothing cannot make the test pass.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser

import pytest

from testdata import CORPUS

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr",
                  "--v=0"]


def aiadmit(*args):
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, timeout=300)


def _chromium() -> str | None:
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


def chromium(*args: str) -> subprocess.CompletedProcess:
    binary = _chromium()
    if binary is None:
        pytest.skip("no chromium on this machine (Debian: apt-get install chromium; .ci/run installs it)")
    with tempfile.TemporaryDirectory(prefix="aiadmit-chromium-") as profile:
        return subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=120)


def console_errors(stderr: str) -> list[str]:
    """The page's console errors and blocked fetches as Chromium logs them (`CONSOLE(...)` lines)."""
    return [line for line in stderr.splitlines()
            if "CONSOLE" in line and re.search(r"Uncaught|Error|Refused|violat", line)]


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.tags, self.attributes = set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        self.attributes += list(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])


def parse(text: str) -> _Collect:
    collected = _Collect()
    collected.feed(text)
    return collected


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    path = tmp_path_factory.mktemp("html") / "report.html"
    done = aiadmit("audit", "--format", "html", CORPUS)
    assert done.returncode == 2, done.stderr  # the corpus holds one unparseable file
    path.write_text(done.stdout, encoding="utf-8")
    document = json.loads(aiadmit("audit", "--format", "json", CORPUS).stdout)
    return path, done.stdout, document


def test_the_page_is_self_contained_and_complete(report):
    _, text, document = report
    page = parse(text)
    assert {"totals", "chart-policy", "chart-namespace", "chart-class", "coverage", "findings", "hints"} <= page.ids
    assert not [a for a in page.attributes if a in ("src", "href", "action", "srcset")], "nothing to fetch"
    assert not re.search(r"url\(|@import|https?://(?!www\.w3\.org/2000/svg)", text), "no reference out of the page"
    csp = [attrs["content"] for tag, attrs in page.tags if tag == "meta" and attrs.get("http-equiv")]
    assert csp and csp[0].startswith("default-src 'none'")
    rows = text.split("<tbody>")[-1].count("<tr ")
    assert rows == len(document["findings"])
    assert text.count('class="bar ') >= len({f["policy"] for f in document["findings"]})


def test_text_from_manifests_is_escaped(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\nspec:\n  containers:\n"
                    "    - name: 'c</td><script>alert(1)</script>'\n      image: train:v1\n"
                    "      resources: {limits: {nvidia.com/gpu: 1}}\n")
    text = aiadmit("audit", "--format", "html", str(path)).stdout
    assert "<script>alert(1)" not in text and "&lt;script&gt;alert(1)" in text
    assert text.count("<script>") == 1


def test_chromium_renders_it_without_console_errors(report, tmp_path):
    path, _, document = report
    artifacts = os.environ.get("AIADMIT_ARTIFACTS") or str(tmp_path)
    os.makedirs(artifacts, exist_ok=True)
    screenshot = os.path.join(artifacts, "aiadmit-report.png")
    dom = chromium("--virtual-time-budget=5000", "--dump-dom", path.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert not console_errors(dom.stderr), console_errors(dom.stderr)
    page = parse(dom.stdout)
    assert {"chart-policy", "chart-namespace", "chart-class", "coverage", "findings"} <= page.ids
    body = [attrs for tag, attrs in page.tags if tag == "body"][0]
    assert body.get("data-ready") == "1", "the page's script did not run to its end"
    shown = re.search(r'<span id="shown">(\d+) of (\d+) shown</span>', dom.stdout)
    assert shown and int(shown.group(1)) == int(shown.group(2)) == len(document["findings"])
    shot = chromium("--window-size=1400,2400", f"--screenshot={screenshot}", path.as_uri())
    assert shot.returncode == 0 and os.path.getsize(screenshot) > 10_000, shot.stderr[-2000:]
    with open(screenshot, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    print(f"screenshot: {screenshot}")


def test_the_console_check_sees_errors_and_blocked_fetches(tmp_path):
    """A page with the report's policy that raises and tries to load an image must show up in the log."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
                   "content=\"default-src 'none'; script-src 'unsafe-inline'\"></head><body>"
                   '<img src="https://example.invalid/x.png"><script>notDefined();</script></body></html>')
    done = chromium("--virtual-time-budget=3000", "--dump-dom", bad.as_uri())
    errors = console_errors(done.stderr)
    assert any("notDefined" in line for line in errors), done.stderr[-2000:]
    assert any("Refused" in line or "violat" in line for line in errors), done.stderr[-2000:]
