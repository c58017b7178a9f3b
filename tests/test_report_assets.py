"""The HTML report's page files ship as package data and fill the template completely."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from podsim.sweep import report

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]


def test_every_page_file_is_package_data() -> None:
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["podsim"]
    folder = ROOT / "src" / "podsim" / "report" / "html"
    files = sorted(p.relative_to(ROOT / "src" / "podsim").as_posix() for p in folder.iterdir() if p.is_file())
    assert {report.PAGE_FILE, report.CSS_FILE, report.JS_FILE} <= {Path(f).name for f in files}
    for f in files:
        assert any(fnmatch.fnmatch(f, g) for g in globs), f"{f} is not in [tool.setuptools.package-data]"


def test_the_page_holds_its_style_script_and_data_and_no_placeholder() -> None:
    doc = {"model": "M $title ${css} __JS__", "gpu": "G", "rows": [], "best": []}
    page = report.render_report(doc)
    css = (ROOT / "src/podsim/report/html" / report.CSS_FILE).read_text(encoding="utf-8")
    js = (ROOT / "src/podsim/report/html" / report.JS_FILE).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")
    assert f"<style>\n{css}</style>" in page
    assert f"<script>\n{js}</script>" in page
    # the title is escaped and taken literally: no placeholder in it is filled
    assert "<title>podsim search: M $title ${css} __JS__ on G</title>" in page
    assert "cost ($ per million tokens)" in page
    assert '<script type="application/json" id="podsim-data">{"meta":' in page
