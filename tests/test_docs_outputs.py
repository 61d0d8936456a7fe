"""Printed outputs shown in the guide are what the code on the page prints today.

Bug this catches: docs/guide/reading_results.rst showed DV estimates of 15.27 and 1.28 after a
change of the point estimate's defaults had made them 9.28 and 1.27, and its text built on the
stale 15.3 ("close to the truth"). The page's code runs here and every number it prints is
compared with the page's output block, to 0.5% (the page says the digits depend on library
versions; a change of defaults moves them by far more).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide"
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _blocks(text: str) -> list[tuple[str, str]]:
    """The page's code blocks as (language, dedented body), in order."""
    blocks = []
    for match in re.finditer(r"^\.\. code-block:: (\w+)\n\n((?:   .*\n|\n)+)", text, re.M):
        body = "\n".join(line[3:] for line in match.group(2).splitlines())
        blocks.append((match.group(1), body.strip("\n")))
    return blocks


def _rows(text: str) -> list[str]:
    """Non-blank lines, whitespace runs made single (columns pad to the numbers' widths)."""
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


@pytest.mark.slow
def test_reading_results_example_prints_what_the_page_shows():
    page = (GUIDE / "reading_results.rst").read_text(encoding="utf-8")
    example = page[page.index("An example\n") :]
    (lang, code), (out_lang, shown) = _blocks(example)[:2]
    assert (lang, out_lang) == ("python", "text")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "reading_results.rst", "exec"), {})
    got, want = _rows(printed.getvalue()), _rows(shown)
    assert len(got) == len(want), (got, want)
    for got_line, want_line in zip(got, want, strict=True):
        assert NUMBER.sub("#", got_line) == NUMBER.sub("#", want_line), (got_line, want_line)
        for a, b in zip(NUMBER.findall(got_line), NUMBER.findall(want_line), strict=True):
            assert float(a) == pytest.approx(float(b), rel=5e-3, abs=1e-4), (got_line, want_line)
