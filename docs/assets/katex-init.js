// Render the TeX that pymdownx.arithmatex (generic mode) leaves in .arithmatex elements with the
// KaTeX copy that scripts/mkdocs_hooks.py puts into the built site (no network needed).
function pmPermRenderMath() {
  document.querySelectorAll(".arithmatex").forEach(function (el) {
    renderMathInElement(el, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
      throwOnError: false,
    });
  });
}
if (typeof document$ !== "undefined") {
  document$.subscribe(pmPermRenderMath);   // mkdocs-material: also after instant navigation
} else {
  document.addEventListener("DOMContentLoaded", pmPermRenderMath);
}
