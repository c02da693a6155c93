"""MkDocs hooks of the pm_perm site (named in mkdocs.yml).

* KaTeX, offline: the math renderer is copied into the built site (``assets/katex/``) from the
  npm package ``katex`` at a pinned version, checked against its SHA-256. The package is fetched
  once with ``npm pack`` into ``.cache/`` (not in git), or taken from ``$PM_PERM_KATEX_TGZ`` (a
  path to the same ``.tgz``). The site then renders its math with no network access.
* Docstrings on the API pages are numpydoc with a few reStructuredText constructs that
  mkdocstrings leaves as text: ``.. math::`` blocks and ``:math:`` roles (turned into KaTeX
  math), Sphinx cross-reference roles such as ``:func:`` (dropped, keeping the name as code),
  and simple ``====`` tables (turned into HTML tables).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from mkdocs.exceptions import PluginError

log = logging.getLogger("mkdocs.hooks.pm_perm")

ROOT = Path(__file__).resolve().parents[1]
KATEX_VERSION = "0.16.47"
KATEX_SHA256 = "ad2d1ab2f7fcc227019784320e8a2c5218ff6bb333b36df4136d10365ae29375"
KATEX_FILES = ("katex.min.js", "katex.min.css", "contrib/auto-render.min.js", "fonts")
def _katex_tarball() -> Path:
    given = os.environ.get("PM_PERM_KATEX_TGZ")
    if given:
        return Path(given)
    cached = ROOT / ".cache" / f"katex-{KATEX_VERSION}.tgz"
    if cached.exists():
        return cached
    npm = shutil.which("npm")
    if npm is None:
        raise PluginError(
            f"KaTeX {KATEX_VERSION} is needed to render the site's math offline, and npm is not "
            "installed to fetch it: install Node.js/npm, or set PM_PERM_KATEX_TGZ to a "
            f"katex-{KATEX_VERSION}.tgz (from `npm pack katex@{KATEX_VERSION}`)."
        )
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run([npm, "pack", f"katex@{KATEX_VERSION}", "--silent"], cwd=tmp,
                             capture_output=True, text=True, timeout=300)
        if run.returncode != 0:
            raise PluginError(f"`npm pack katex@{KATEX_VERSION}` failed: {run.stderr.strip()}")
        shutil.move(str(Path(tmp) / f"katex-{KATEX_VERSION}.tgz"), cached)
    return cached


def on_post_build(config):
    tgz = _katex_tarball()
    digest = hashlib.sha256(tgz.read_bytes()).hexdigest()
    if digest != KATEX_SHA256:
        raise PluginError(f"{tgz}: SHA-256 {digest} is not that of katex {KATEX_VERSION} "
                          f"({KATEX_SHA256}); delete it to fetch it again")
    dest = Path(config["site_dir"]) / "assets" / "katex"
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(tgz) as tar:
        tar.extractall(tmp, filter="data")
        dist = Path(tmp) / "package" / "dist"
        for name in KATEX_FILES:
            src, out = dist / name, dest / name
            out.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, out, dirs_exist_ok=True)
            else:
                shutil.copy2(src, out)
    log.info("KaTeX %s copied into %s", KATEX_VERSION, dest)


_MATH_BLOCK = re.compile(r'<p>\.\. math::</p>\s*<div class="highlight"><pre><span></span><code>'
                         r'(.*?)</code></pre></div>', re.S)
_MATH_ROLE = re.compile(r":math:<code>(.*?)</code>", re.S)
_XREF_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|obj|exc):<code>~?")
_RST_TABLE = re.compile(r"<p>(=+)(\s+)=+\n(.*?)\n=+\s+=+</p>", re.S)


def _rst_table(match):
    width = len(match.group(1)) + len(match.group(2))
    rows = []
    for line in match.group(3).splitlines():
        key, value = line[:width].strip(), line[width:].strip()
        rows.append(f"<tr><th>{key}</th><td>{value}</td></tr>")
    return "<table><tbody>" + "".join(rows) + "</tbody></table>"


def rst_to_html(text: str) -> str:
    """Render the reStructuredText leftovers of docstrings (see the module docstring)."""
    text = _MATH_BLOCK.sub(
        lambda m: f'<div class="arithmatex">\\[{m.group(1).strip()}\\]</div>', text)
    text = _MATH_ROLE.sub(lambda m: f'<span class="arithmatex">\\({m.group(1)}\\)</span>', text)
    text = _XREF_ROLE.sub("<code>", text)
    return _RST_TABLE.sub(_rst_table, text)


def on_page_content(html_text, page, config, files):
    return rst_to_html(html_text)
