"""The site builds without warnings (mkdocs --strict) and renders in a real browser.

The build test needs mkdocs, mkdocs-material and mkdocstrings (the ``docs`` / ``test`` extras)
and npm or a KaTeX tarball (``scripts/mkdocs_hooks.py``). The browser test renders the home page,
one guide and one API page in headless Chromium (Debian package ``chromium``; ``.ci/run``
installs it) and fails on broken links, missing images or unrendered math
(``scripts/check_site.py``); it skips with a message when Chromium is absent. While ``.ci/run``
is still installing Chromium beside the suite, the browser test waits for the install's outcome
(the file ``$PM_PERM_CHROMIUM_INSTALL`` names). Screenshots go to ``$PM_PERM_SCREENSHOTS`` when set.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_site", ROOT / "scripts" / "check_site.py")
check_site = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_site)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    for module in ("mkdocs", "material", "mkdocstrings"):
        pytest.importorskip(module)
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_docs_build_strict(site):
    for page in ("index.html", "getting_started/index.html", "howto/learn_to_rank/index.html",
                 "guide/learning_to_rank/index.html", "api/distributions/index.html",
                 "benchmarks/index.html"):
        assert (site / page).is_file(), page
    # the math renderer is in the site itself (no CDN): the page references local copies
    for asset in ("katex.min.js", "katex.min.css", "contrib/auto-render.min.js"):
        assert (site / "assets" / "katex" / asset).stat().st_size > 1000, asset
    assert list((site / "assets" / "katex" / "fonts").glob("*.woff2"))
    home = (site / "index.html").read_text()
    assert "assets/katex/katex.min.js" in home and "cdn" not in home.lower()


def test_site_checker_finds_what_is_broken(tmp_path):
    """check_page flags unrendered math, raw TeX, broken links, missing anchors and images."""
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "index.html").write_text('<html><h2 id="there">x</h2></html>')
    good = ('<html><body><a href="guide/">ok</a><a href="guide/#there">ok</a>'
            '<span class="arithmatex"><span class="katex">x</span></span>'
            '<pre><code>$$ in code is fine \\(</code></pre></body></html>')
    assert check_site.check_page(tmp_path, "index.html", good) == []
    bad = ('<html><body><a href="nowhere/">x</a><a href="guide/#missing">y</a><img src="no.png">'
           '<span class="arithmatex">\\(x^2\\)</span><span class="katex-error">e</span>'
           '<p>$$ y $$</p></body></html>')
    problems = "\n".join(check_site.check_page(tmp_path, "index.html", bad))
    for expected in ("broken link 'nowhere/'", "no anchor #missing", "missing image 'no.png'",
                     "math did not render: 0 of 1", "KaTeX error", "raw TeX '\\\\('",
                     "raw TeX '$$'"):
        assert expected in problems, (expected, problems)


_NO_CHROMIUM = "chromium not installed (apt-get install chromium); .ci/run installs it"


def wait_for_chromium(find=check_site._chromium, outcome=None, timeout=600.0, poll=0.5):
    """Chromium's path and ``""``, or ``None`` and the reason it is absent.

    ``outcome`` is the file ``.ci/run``'s background install writes when it ends (its path is in
    ``$PM_PERM_CHROMIUM_INSTALL``); while it does not exist the install is still running, and this
    waits for it, at most ``timeout`` seconds, then raises ``TimeoutError``.
    """
    found = find()
    if found is not None or outcome is None:
        return found, "" if found is not None else _NO_CHROMIUM
    outcome = Path(outcome)
    deadline = time.monotonic() + timeout
    while not outcome.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the chromium install that .ci/run started has not ended in "
                               f"{timeout:.0f} s (no {outcome})")
        time.sleep(poll)
    found = find()
    return found, f"chromium {outcome.read_text().strip()}" if found is None else ""


def test_site_renders_in_chromium(site, tmp_path):
    chromium, reason = wait_for_chromium(outcome=os.environ.get("PM_PERM_CHROMIUM_INSTALL"))
    if chromium is None:
        pytest.skip(reason)
    shots = Path(os.environ.get("PM_PERM_SCREENSHOTS", tmp_path / "screenshots"))
    problems = check_site.run_check(site, screenshots=shots)
    assert problems == [], "\n".join(problems)
    for name in ("index.png", "guide_learning_to_rank.png", "api_distributions.png"):
        png = shots / name
        assert png.is_file() and png.stat().st_size > 10_000, name
    assert shutil.which("chromium") or os.environ.get("CHROMIUM")


def test_browser_test_waits_for_the_install_ci_started(tmp_path):
    """With an install running, the browser test waits for its outcome file, then looks again;
    with no install running it does not wait; a hung install ends in an error, not a hang."""
    outcome = tmp_path / "outcome"
    seen = []

    def find():  # chromium appears once the install has written its outcome
        seen.append(outcome.exists())
        return "/usr/bin/chromium" if outcome.exists() else None

    writer = threading.Timer(0.3, lambda: outcome.write_text("installed in 20 s\n"))
    writer.start()
    t0 = time.monotonic()
    assert wait_for_chromium(find, outcome, timeout=30, poll=0.02) == ("/usr/bin/chromium", "")
    assert time.monotonic() - t0 >= 0.25 and seen == [False, True]
    writer.join()
    # the install failed: skipped with the install's own words
    failed = tmp_path / "failed"
    failed.write_text("could not be installed (apt-get failed)\n")
    assert wait_for_chromium(lambda: None, failed) == (
        None, "chromium could not be installed (apt-get failed)")
    # chromium already there: no wait, even for an outcome file that never comes
    assert wait_for_chromium(lambda: "/usr/bin/chromium", tmp_path / "never") == (
        "/usr/bin/chromium", "")
    # no install running (not .ci/run, or not root): no wait, the usual reason
    assert wait_for_chromium(lambda: None, None) == (None, _NO_CHROMIUM)
    with pytest.raises(TimeoutError, match="has not ended in 0 s"):
        wait_for_chromium(lambda: None, tmp_path / "never", timeout=0.1, poll=0.02)


def test_every_guide_figure_is_made_by_a_script():
    """scripts/make_figures.sh regenerates every figure of the guides, from scripts that exist."""
    listing = subprocess.run(["bash", str(ROOT / "scripts" / "make_figures.sh"), "--list"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    text = (ROOT / "scripts" / "make_figures.sh").read_text()
    for png in (ROOT / "docs").rglob("*.png"):
        target = png.relative_to(ROOT / "docs").as_posix()
        assert f":{target}" in text, f"docs/{target} has no entry in make_figures.sh"
    for line in listing.splitlines():
        script = line.split("python ", 1)[1].split()[0]
        assert script == "-m" or (ROOT / script).is_file(), line


def test_every_figure_is_shown_by_a_page():
    """Every image under docs/, and every image make_figures.sh copies there, is shown by a page
    (an image no page shows is kept up to date for nobody)."""
    pages = " ".join(p.read_text() for p in (ROOT / "docs").rglob("*.md"))
    images = [p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*")
              if p.suffix.lower() in {".png", ".svg", ".jpg", ".jpeg", ".gif", ".webp"}
              and "assets" not in p.relative_to(ROOT / "docs").parts]
    copied = [pair.rsplit(":", 1)[1].rstrip("\"")
              for pair in (ROOT / "scripts" / "make_figures.sh").read_text().split()
              if pair.startswith("$OUT/") and ":" in pair]
    assert copied, "make_figures.sh lists no figures: has its format changed?"
    unshown = sorted({image for image in images + copied
                      if image.rsplit("/", 1)[-1] + ")" not in pages})
    assert not unshown, f"no page shows these figures (show them or stop making them): {unshown}"
