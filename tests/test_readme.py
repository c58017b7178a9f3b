"""The commands of README.md and docs/*.md run as written, in order, each page in an empty folder,
without ../shared (issue 13, item 1): the ``bash`` blocks are taken from the pages themselves.
Syntax that is not meant to run as is (placeholders, brackets) stays out of ``bash`` blocks."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README] + sorted((ROOT / "docs").glob("*.md"))


def readme_commands(text: str) -> list[str]:
    """The shell commands of the ``bash`` blocks, continuation lines joined; the set-up lines
    keep only what follows their ``pip install ... &&`` (the package is installed already) and
    the test-suite line is left out (it is this suite)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for cmd in block.replace("\\\n", " ").splitlines():
            cmd = cmd.strip()
            if not cmd or cmd.startswith("#"):
                continue
            if cmd.startswith("pip install"):
                rest = cmd.split("&&", 1)[1].strip() if "&&" in cmd else ""
                if not rest.startswith("podsim"):
                    continue
                cmd = rest
            out.append(cmd)
    return out


def test_readme_commands_are_found() -> None:
    cmds = readme_commands(README.read_text())
    assert cmds[0].startswith("podsim example") and len(cmds) >= 15
    for page in PAGES:  # every documented command is a podsim command, without placeholder brackets
        for c in readme_commands(page.read_text()):
            assert c.startswith("podsim ") and "[" not in c.split("#")[0], (page.name, c)


@pytest.mark.parametrize("page", [p for p in PAGES if readme_commands(p.read_text())], ids=lambda p: p.name)
def test_documented_commands_run_as_written(page: Path, tmp_path: Path) -> None:
    from importlib.util import find_spec

    for mod in ("torch", "torchvision", "matplotlib"):  # found, not imported (torchvision needs podsim first)
        if find_spec(mod) is None:
            pytest.skip(f"the README's commands need {mod}: pip install -e '.[test]' torch==2.13.0 torchvision==0.28.0")
    exe = shutil.which("podsim") or f"{sys.executable} -m podsim"
    env = dict(os.environ, PODSIM_REFERENCE_DATA=str(tmp_path / "no-shared-data"))
    timings = []
    for cmd in readme_commands(page.read_text()):
        t0 = time.perf_counter()
        run = subprocess.run(
            ["bash", "-c", cmd.replace("podsim ", exe + " ", 1)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        timings.append((time.perf_counter() - t0, cmd[:70]))
        out = run.stdout + run.stderr
        assert run.returncode == 0 and "Traceback" not in out, f"{cmd}\n{out[-3000:]}"
    if page == README:  # its Python snippets too, after its commands, in the same folder (issue 29)
        for code in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S):
            run = subprocess.run(
                [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
            )
            assert run.returncode == 0, f"{code}\n{run.stderr[-3000:]}"
    print("\n".join(f"{t:7.1f} s  {c}" for t, c in timings))
