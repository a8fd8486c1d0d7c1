"""Headless Chromium driven over the DevTools protocol, for tests of Flywheel's web pages: real
mouse events at elements' boxes, real text input, screenshots. The `browser` fixture
(tests/conftest.py) skips with the reason where Chromium or `websockets` is missing."""

import json
import shutil
import subprocess
import time
import urllib.request

import pytest


def chromium() -> str | None:
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


class DevTools:
    """A page target of a running Chromium, over the DevTools protocol (one websocket)."""

    def __init__(self, ws):
        self.ws, self.next_id = ws, 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:  # events arrive in between; the reply carries our id
            message = json.loads(self.ws.recv(timeout=15))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def eval(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 10):
        deadline = time.monotonic() + timeout
        while not (value := self.eval(expression)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"never true: {expression}")
            time.sleep(0.05)
        return value

    def click(self, selector: str) -> None:
        """A real left click at the middle of the element's box (scrolled into view first)."""
        x, y = self.eval(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            e.scrollIntoView({{block: "center"}}); const b = e.getBoundingClientRect();
            return [b.x + b.width / 2, b.y + b.height / 2]; }})()""")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def type(self, selector: str, text: str) -> None:
        self.click(selector)
        self.call("Input.insertText", text=text)


def open_browser(tmp_path):
    """A generator (for a fixture to `yield from`): a DevTools client of a fresh headless
    Chromium with its own profile under tmp_path, killed after."""
    exe = chromium()
    if exe is None:
        pytest.skip("no Chromium (/usr/bin/chromium, chromium-browser, google-chrome) on this machine")
    pytest.importorskip("websockets", reason="the CDP client needs `websockets` (test extra)")
    profile = tmp_path / "profile"
    proc = subprocess.Popen([exe, "--headless=new", "--no-sandbox", "--disable-gpu",
                             "--remote-debugging-port=0", f"--user-data-dir={profile}",
                             "--window-size=1200,1500", "--no-first-run", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not (profile / "DevToolsActivePort").is_file() or \
                not (profile / "DevToolsActivePort").read_text().strip():
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail("Chromium did not open its DevTools port")
            time.sleep(0.05)
        port = (profile / "DevToolsActivePort").read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:
            page = next(t for t in json.load(reply) if t["type"] == "page")
        from websockets.sync.client import connect
        with connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10) as ws:
            yield DevTools(ws)
    finally:
        proc.kill()
        proc.wait()


def screenshot(browser, path: str) -> None:
    """The page's viewport as a PNG at `path`."""
    import base64
    shot = browser.call("Page.captureScreenshot", format="png")
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
