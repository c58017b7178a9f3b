"""Regenerate the docs' flag tables from the job specs (podsim.jobs): every parameter's flag,
aliases, default and help, between the markers of podsim.jobs.kinds.markers.

    python scripts/docs_flags.py          # rewrite the tables
    python scripts/docs_flags.py --check  # exit 1 if a table is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from podsim.jobs.kinds import DOCS_PAGE, PARAMS_BY_COMMAND, markers
from podsim.params import markdown_table

ROOT = Path(__file__).resolve().parents[1]


def render(text: str, command: str) -> str:
    """``text`` (a docs page) with the flag table of ``command`` regenerated."""
    start, end = markers(command)
    if start not in text or end not in text[text.index(start) :]:
        raise SystemExit(f"docs_flags: {DOCS_PAGE[command]} has no '{start}' ... '{end}' block")
    i = text.index(start) + len(start)
    j = text.index(end, i)
    return text[:i] + "\n" + markdown_table(PARAMS_BY_COMMAND[command]) + "\n" + text[j:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check; exit 1 if a table is out of date")
    args = ap.parse_args()
    stale = []
    for command, page in DOCS_PAGE.items():
        path = ROOT / page
        text = path.read_text()
        new = render(text, command)
        if new != text:
            stale.append(page)
            if not args.check:
                path.write_text(new)
    if stale:
        print(("out of date: " if args.check else "rewrote: ") + ", ".join(stale))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
