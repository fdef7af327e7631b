"""Diagrams in built docs, as a browser shows them: the whole diagram within a 1,200 px
window.

Small Sphinx and MkDocs sites are built with an SVG, a PNG and a Mermaid diagram of
the standard machine (1,776 px wide as drawn), opened from disk in headless Chromium
with a 1,200 by 900 window, screenshotted, and measured: each picture's rendered box
must lie inside the content column that holds it and inside the window, keep its
aspect ratio, and leave nothing hidden in a scrolled view. The "Full size" toggle must
show the drawing at its drawn size in a view that scrolls. The Mermaid diagram is drawn
by the site's own copy of the bundled script, with no network.

The check is shown to fail when the width limit is taken out of the pages.
Chromium comes from Debian's ``chromium`` package; without it the tests skip outside
CI and fail in CI (see :func:`browser_helpers.chromium_or_skip`).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import Browser, chromium_or_skip
from test_doc_extensions import mkdocs_page, mkdocs_project, sphinx_build, sphinx_project

from lifecycle.diagrams import embed

TARGET = "lifecycle.machines.managed:ManagedResourceMachine"
WIDTH = 1200

#: Every diagram of the page: the picture's rendered box, the box of the content column
#: holding it (its parent's content box), its drawn size and its view's scroll width.
MEASURE = """(() => Array.from(document.querySelectorAll('.lifecycle-diagram')).map(box => {
  const pic = box.querySelector('.lifecycle-diagram-view svg, .lifecycle-diagram-view img,'
                                + ' pre.mermaid svg');
  const column = box.parentElement, style = getComputedStyle(column);
  const c = column.getBoundingClientRect();
  const view = box.querySelector('.lifecycle-diagram-view') || box;
  if (!pic) return {kind: box.querySelector('pre.mermaid') ? 'mermaid (not drawn)' : 'none'};
  const r = pic.getBoundingClientRect();
  const vb = pic.viewBox && pic.viewBox.baseVal;
  const drawn = pic.tagName === 'IMG'
    ? [Number(pic.getAttribute('width')), Number(pic.getAttribute('height'))]
    : (pic.closest('pre.mermaid') ? [vb.width, vb.height]
                                  : [pic.width.baseVal.value, pic.height.baseVal.value]);
  return {kind: pic.closest('pre.mermaid') ? 'mermaid' : pic.tagName.toLowerCase(),
          left: r.left, right: r.right, width: r.width, height: r.height,
          columnLeft: c.left + parseFloat(style.paddingLeft) + parseFloat(style.borderLeftWidth),
          columnRight: c.right - parseFloat(style.paddingRight)
                       - parseFloat(style.borderRightWidth),
          window: document.documentElement.clientWidth,
          drawnWidth: drawn[0], drawnHeight: drawn[1],
          viewScroll: view.scrollWidth, viewWidth: view.clientWidth};
}))()"""


def misfits(measured: list[dict[str, Any]]) -> list[str]:
    """What keeps each measured diagram from being seen whole in the window: an empty list
    when every one lies inside its column and the window, undistorted and unclipped."""
    if not measured:
        return ["no diagram in the page"]
    problems = []
    for i, m in enumerate(measured):
        name = f"diagram {i + 1} ({m['kind']})"
        if "left" not in m:
            problems.append(f"{name}: nothing drawn")
            continue
        if m["width"] < 100:
            problems.append(f"{name}: drawn {m['width']:.0f} px wide")
        if m["left"] < m["columnLeft"] - 1 or m["right"] > m["columnRight"] + 1:
            problems.append(f"{name}: {m['width']:.0f} px wide, outside the column "
                            f"{m['columnLeft']:.0f}-{m['columnRight']:.0f} px")
        if m["right"] > m["window"] + 1:
            problems.append(f"{name}: its right edge at {m['right']:.0f} px is beyond the "
                            f"{m['window']} px window")
        if m["drawnWidth"] and m["width"]:
            drawn, shown = m["drawnHeight"] / m["drawnWidth"], m["height"] / m["width"]
            if abs(shown - drawn) > 0.02 * drawn:
                problems.append(f"{name}: distorted (height/width {shown:.3f}, "
                                f"drawn {drawn:.3f})")
        if m["viewScroll"] > m["viewWidth"] + 1:
            problems.append(f"{name}: {m['viewScroll'] - m['viewWidth']} px hidden in a "
                            "scrolled view")
    return problems


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One headless Chromium for the module, its window 1,200 by 900 px."""
    executable = chromium_or_skip()
    assert shutil.which("dot"), "Graphviz 'dot' is needed: apt-get install graphviz"
    with Browser(executable, tmp_path_factory.mktemp("chromium"), width=WIDTH) as opened:
        yield opened


def shoot(browser: Browser, page: Path, name: str) -> list[dict[str, Any]]:
    """Open ``page``, wait for Mermaid to draw, save a screenshot, measure the diagrams.

    The screenshot goes beside the page and, when ``LIFECYCLE_SCREENSHOTS`` names a
    folder, there too (CI keeps it as an artifact).
    """
    browser.open(page)
    browser.wait_for("Array.from(document.querySelectorAll('pre.mermaid'))"
                     ".every(p => p.querySelector('svg'))", timeout=60)
    shot = browser.screenshot(page.with_name(f"{name}.png"))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(shot.read_bytes()[16:20], "big") == WIDTH
    keep = os.environ.get("LIFECYCLE_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
    measured: list[dict[str, Any]] = browser.evaluate(MEASURE)
    return measured


SPHINX_PAGE = f"""
    .. lifecycle-diagram:: {TARGET}

    .. lifecycle-diagram:: {TARGET}
       :format: png

    .. lifecycle-diagram:: {TARGET}
       :format: mermaid
    """
MKDOCS_PAGE = f"""
    # Machines

    ```lifecycle-diagram
    {TARGET}
    ```

    ```lifecycle-diagram
    {TARGET}
    format: png
    ```

    ```lifecycle-diagram
    {TARGET}
    format: mermaid
    ```
    """


def built_sphinx(root: Path) -> Path:
    root.mkdir()
    code, _, warnings = sphinx_build(sphinx_project(root, SPHINX_PAGE), "-W")
    assert (code, warnings) == (0, "")
    return root / "html" / "index.html"


def built_mkdocs(root: Path) -> Path:
    root.mkdir()
    config = mkdocs_project(root, MKDOCS_PAGE)
    mkdocs_page(config)
    return root / "site" / "index.html"


@pytest.mark.parametrize("build", [built_sphinx, built_mkdocs], ids=["sphinx", "mkdocs"])
def test_the_whole_diagram_shows_in_a_1200_px_window(browser: Browser, tmp_path: Path,
                                                     build: Any) -> None:
    page = build(tmp_path / "site")
    measured = shoot(browser, page, "fitted")
    assert [m["kind"] for m in measured] == ["svg", "img", "mermaid"]
    assert misfits(measured) == []
    svg = measured[0]
    assert svg["drawnWidth"] > WIDTH  # the drawing is wider than the window: it was scaled
    assert svg["width"] >= 0.95 * (svg["columnRight"] - svg["columnLeft"])  # to the column
    # the Mermaid diagram was drawn by the site's copy of the bundled script, from disk
    assert browser.evaluate("document.querySelector('script[data-mermaid]').src").startswith(
        "file://") and browser.evaluate("typeof mermaid.run") == "function"


@pytest.mark.parametrize("build", [built_sphinx, built_mkdocs], ids=["sphinx", "mkdocs"])
def test_full_size_shows_the_drawn_size_in_a_view_that_scrolls(browser: Browser,
                                                               tmp_path: Path,
                                                               build: Any) -> None:
    page = build(tmp_path / "site")
    assert misfits(shoot(browser, page, "fitted")) == []
    browser.evaluate("document.querySelector('label.lifecycle-diagram-full').click()")
    full = browser.evaluate(MEASURE)[0]
    browser.screenshot(page.with_name("full-size.png"))
    assert abs(full["width"] - full["drawnWidth"]) <= 1  # its drawn size
    assert full["viewScroll"] > full["viewWidth"]  # the view scrolls to the rest
    assert full["viewWidth"] <= full["columnRight"] - full["columnLeft"] + 1
    browser.evaluate("document.querySelector('label.lifecycle-diagram-full').click()")
    assert misfits(browser.evaluate(MEASURE)[:1]) == []  # and back to the column


@pytest.mark.parametrize("build", [built_sphinx, built_mkdocs], ids=["sphinx", "mkdocs"])
def test_the_check_fails_on_a_diagram_wider_than_the_column(
        browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, build: Any) -> None:
    monkeypatch.setattr(embed, "FIT_STYLE", "height: auto")
    monkeypatch.setattr(embed, "ZOOM_STYLE", re.sub(r"max-width: 100%; ", "", embed.ZOOM_STYLE))
    page = build(tmp_path / "site")
    assert "max-width: 100%" not in page.read_text()
    problems = misfits(shoot(browser, page, "unfitted"))
    assert any(p.startswith("diagram 1 (svg): 1776 px wide, outside the column")
               for p in problems), problems
    assert any("diagram 1 (svg): its right edge" in p for p in problems), problems
    # (the PNG still fits: both themes limit every img to the column itself)


def test_misfits_reads_each_measure() -> None:
    fits = {"kind": "svg", "left": 300, "right": 1000, "width": 700, "height": 350,
            "columnLeft": 300, "columnRight": 1000, "window": 1200, "drawnWidth": 1400,
            "drawnHeight": 700, "viewScroll": 700, "viewWidth": 700}
    assert misfits([fits]) == []
    assert misfits([]) == ["no diagram in the page"]
    assert misfits([{"kind": "mermaid (not drawn)"}]) == [
        "diagram 1 (mermaid (not drawn)): nothing drawn"]
    squashed = {**fits, "height": 200}
    assert misfits([squashed]) == [
        "diagram 1 (svg): distorted (height/width 0.286, drawn 0.500)"]
    clipped = {**fits, "viewScroll": 1400}
    assert misfits([clipped]) == ["diagram 1 (svg): 700 px hidden in a scrolled view"]


def test_a_missing_browser_skips_locally_and_fails_in_ci(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import browser_helpers

    monkeypatch.setattr(browser_helpers.shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium"):
        chromium_or_skip()
    for value in ("true", "1", "yes"):
        monkeypatch.setenv("CI", value)
        with pytest.raises(pytest.fail.Exception, match="CI must run the browser checks"):
            chromium_or_skip()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        chromium_or_skip()
