"""Render pages of the built site in headless Chromium and fail on what a reader would see broken.

Usage: ``python scripts/check_site.py SITE_DIR [--pages PAGE ...] [--screenshots DIR]``

Serves ``SITE_DIR`` from ``python -m http.server`` on 127.0.0.1 (a free port), and for each page
(default: the home page, one guide and one API page) runs Chromium headless twice: once to dump
the DOM after the page's scripts ran (``--dump-dom``), once to save a screenshot. It fails when

* a request of the browser got an error status (a missing image, stylesheet, script or font:
  read from the server's log, so whatever the page loads is checked);
* an internal link of a rendered page points to a file that is not in the site, or to an anchor
  that the target page does not have;
* an ``<img>`` points to a missing file;
* math did not render: an ``.arithmatex`` element without KaTeX output, a ``.katex-error``, or
  raw TeX delimiters (``\\(``, ``\\[``, ``$$``) left in the page's text outside code.

Exit code 0 when every page passes; the problems are printed otherwise. Chromium is the Debian
package ``chromium`` (``apt-get install chromium``); ``$CHROMIUM`` overrides its path.
"""

from __future__ import annotations

import argparse
import html.parser
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

DEFAULT_PAGES = ("index.html", "guide/learning_to_rank/index.html", "api/distributions/index.html")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--virtual-time-budget=15000")


class _Page(html.parser.HTMLParser):
    """Links, images, element ids, math elements and text outside code of one HTML document."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links, self.images, self.ids = [], [], set()
        self.arithmatex = 0          # .arithmatex elements
        self.arithmatex_rendered = 0  # ... that contain KaTeX output
        self.katex_errors = 0
        self.text = []
        self._stack = []             # (tag, is_code, is_arithmatex, has_katex)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "img" and a.get("src"):
            self.images.append(a["src"])
        if "katex-error" in classes:
            self.katex_errors += 1
        if "katex" in classes:
            for entry in self._stack:
                if entry[2]:
                    entry[3] = True
        in_code = tag in ("code", "pre", "script", "style", "annotation", "textarea") or any(
            e[1] for e in self._stack)
        is_math = "arithmatex" in classes
        if is_math:
            self.arithmatex += 1
        if tag not in ("br", "img", "hr", "input", "meta", "link", "area", "col", "wbr", "source"):
            self._stack.append([tag, in_code, is_math, False])

    def handle_endtag(self, tag):
        while self._stack:
            entry = self._stack.pop()
            if entry[2] and entry[3]:
                self.arithmatex_rendered += 1
            if entry[0] == tag:
                break

    def handle_data(self, data):
        if not any(e[1] for e in self._stack):
            self.text.append(data)


def parse(html_text: str) -> _Page:
    page = _Page()
    page.feed(html_text)
    page.close()
    return page


def _site_file(site: Path, url_path: str) -> Path:
    path = site / urllib.parse.unquote(url_path).lstrip("/")
    return path / "index.html" if url_path.endswith("/") or path.is_dir() else path


def check_page(site: Path, page_path: str, dom: str) -> list[str]:
    """Problems of one rendered page (``page_path`` relative to the site root)."""
    problems = []
    page = parse(dom)
    base = "/" + page_path
    for href in page.links:
        url = urllib.parse.urlparse(urllib.parse.urljoin(base, href))
        if url.scheme or url.netloc or href.startswith(("mailto:", "javascript:")):
            continue                                  # external: not followed (no network)
        target = _site_file(site, url.path)
        if not target.is_file():
            problems.append(f"{page_path}: broken link {href!r} (no {target.relative_to(site)})")
        elif url.fragment and target.suffix == ".html":
            ids = parse(target.read_text(errors="replace")).ids if target != _site_file(
                site, base) else page.ids
            if urllib.parse.unquote(url.fragment) not in ids:
                problems.append(f"{page_path}: link {href!r}: no anchor #{url.fragment} in "
                                f"{target.relative_to(site)}")
    for src in page.images:
        url = urllib.parse.urlparse(urllib.parse.urljoin(base, src))
        if not url.scheme and not _site_file(site, url.path).is_file():
            problems.append(f"{page_path}: missing image {src!r}")
    if page.katex_errors:
        problems.append(f"{page_path}: {page.katex_errors} KaTeX error(s) (.katex-error)")
    if page.arithmatex != page.arithmatex_rendered:
        problems.append(f"{page_path}: math did not render: {page.arithmatex_rendered} of "
                        f"{page.arithmatex} .arithmatex elements hold KaTeX output")
    text = "".join(page.text)
    for delim in ("\\(", "\\[", "$$"):
        if delim in text:
            i = text.index(delim)
            problems.append(f"{page_path}: raw TeX {delim!r} left in the text: "
                            f"{text[max(0, i - 40): i + 40]!r}")
    return problems


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chromium() -> str | None:
    return (os.environ.get("CHROMIUM") or shutil.which("chromium")
            or shutil.which("chromium-browser"))


def run_check(site: Path, pages=DEFAULT_PAGES, screenshots: Path | None = None,
              width=1280, height=1600) -> list[str]:
    chromium = _chromium()
    if chromium is None:
        raise FileNotFoundError("chromium not found: apt-get install chromium (or set $CHROMIUM)")
    site = site.resolve()
    with tempfile.TemporaryFile(mode="w+") as log_file:
        problems = _render_pages(chromium, site, pages, screenshots, width, height, log_file)
        log_file.seek(0)
        for line in log_file:
            m = re.search(r'"(GET|HEAD) (\S+) [^"]*" (\d{3})', line)
            if m and int(m.group(3)) >= 400:
                problems.append(f"the browser requested {m.group(2)}: HTTP {m.group(3)}")
    return problems


def _render_pages(chromium, site, pages, screenshots, width, height, log_file):
    """Serve the site, dump and screenshot each page; the server's log goes to ``log_file``."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                               "127.0.0.1", "--directory", str(site)],
                              stdout=subprocess.DEVNULL, stderr=log_file)
    problems = []
    try:
        for _ in range(100):                               # wait for the server
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        for page_path in pages:
            if not (site / page_path).is_file():
                problems.append(f"{page_path}: not in the built site")
                continue
            url = f"http://127.0.0.1:{port}/{page_path.removesuffix('index.html')}"
            with tempfile.TemporaryDirectory(prefix="pm_perm_chromium_") as profile:
                cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                       f"--window-size={width},{height}"]
                dump = subprocess.run([*cmd, "--dump-dom", url], capture_output=True, text=True,
                                      timeout=120)
                if dump.returncode != 0 or "<html" not in dump.stdout:
                    problems.append(
                        f"{page_path}: chromium --dump-dom failed: {dump.stderr[-500:]}")
                    continue
                problems += check_page(site, page_path, dump.stdout)
                if screenshots is not None:
                    screenshots.mkdir(parents=True, exist_ok=True)
                    name = page_path.removesuffix("/index.html").replace("/", "_") or "index"
                    png = screenshots / f"{name.removesuffix('.html')}.png"
                    shot = subprocess.run([*cmd, f"--screenshot={png}", url], capture_output=True,
                                          text=True, timeout=120)
                    if shot.returncode != 0 or not png.is_file():
                        problems.append(f"{page_path}: screenshot failed: {shot.stderr[-500:]}")
    finally:
        server.terminate()
        server.wait(timeout=10)
    return problems


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("site", type=Path, help="the built site (mkdocs build --site-dir)")
    p.add_argument("--pages", nargs="+", default=list(DEFAULT_PAGES))
    p.add_argument("--screenshots", type=Path, default=None, help="save one PNG per page here")
    args = p.parse_args(argv)
    problems = run_check(args.site, args.pages, args.screenshots)
    for line in problems:
        print("FAIL", line)
    if not problems:
        print(f"site check passed: {', '.join(args.pages)}"
              + (f"; screenshots in {args.screenshots}" if args.screenshots else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
