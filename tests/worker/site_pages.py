# ruff: noqa: E501  (page markup and scripts read better unwrapped)
"""Pages for the step e2e tests, served on 127.0.0.1 by a small threaded server.

Unlike conftest's ``site`` (HTML only), this one serves any content type, extra headers
(downloads), slow answers, and remembers the request headers it saw (extra_headers).
"""

from __future__ import annotations

import http.server
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from devstack.loopback import serve_on_loopback


@dataclass
class Resource:
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class StepSite:
    base_url: str
    resources: dict[str, Resource]
    seen_headers: dict[str, dict[str, str]]
    # Every path asked for, in order (seen_headers keeps only the last ask of each).
    asked: list[str] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"


@contextmanager
def serve(resources: dict[str, Resource]) -> Iterator[StepSite]:
    seen: dict[str, dict[str, str]] = {}
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            seen[path] = {k.lower(): v for k, v in self.headers.items()}
            asked.append(path)
            resource = resources.get(path)
            if resource is None:
                resource = Resource(b"<h1>not found</h1>")
                self.send_response(404)
            else:
                time.sleep(resource.delay_s)
                self.send_response(200)
            self.send_header("Content-Type", resource.content_type)
            self.send_header("Content-Length", str(len(resource.body)))
            for key, value in resource.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(resource.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = serve_on_loopback(Handler, "step-site")
    try:
        yield StepSite(server.url, resources, seen, asked)
    finally:
        server.stop()


def html(body: str, title: str = "test") -> Resource:
    return Resource(
        f"<!doctype html><html><head><title>{title}</title></head>{body}</html>".encode()
    )


# --- interaction: type, press, select, check, uncheck, hover, scroll, upload ----------------
FORM = html(
    """<body style="margin:0">
  <input id="name"><span id="keys">0</span><span id="pressed"></span>
  <select id="color"><option value="r">Red</option><option value="g">Green</option></select>
  <select id="size"><option value="s">Small</option><option value="l">Large</option></select>
  <select id="qty"><option>1</option><option>2</option><option>3</option></select>
  <input type="checkbox" id="terms"><input type="checkbox" id="news" checked>
  <button id="menu">Menu</button><div id="tip" style="display:none">Tooltip!</div>
  <input type="file" id="file"><pre id="file-out"></pre>
  <input type="file" id="bin"><pre id="bin-out"></pre>
  <div style="height:3000px"></div>
  <p id="far">far below</p>
  <div id="env"></div>
  <script>
    const $ = id => document.getElementById(id);
    $('name').addEventListener('keydown', () => { $('keys').textContent = +$('keys').textContent + 1; });
    $('name').addEventListener('keydown', e => { if (e.key === 'Enter') $('pressed').textContent = 'enter:' + $('name').value; });
    $('menu').addEventListener('mouseenter', () => { $('tip').style.display = 'block'; });
    function show(input, out, asHex) {
      $(input).addEventListener('change', async () => {
        const f = $(input).files[0];
        const buf = new Uint8Array(await f.arrayBuffer());
        $(out).textContent = f.name + '|' + f.type + '|' +
          (asHex ? Array.from(buf).map(b => b.toString(16).padStart(2, '0')).join('') : new TextDecoder().decode(buf));
      });
    }
    show('file', 'file-out', false); show('bin', 'bin-out', true);
    $('env').textContent = JSON.stringify({ua: navigator.userAgent, lang: navigator.language,
      tz: Intl.DateTimeFormat().resolvedOptions().timeZone, w: innerWidth});
  </script>
</body>"""
)


# --- a paginated table: /table/1 .. /table/3 --------------------------------------------------
def table_page(number: int, last: int = 3) -> Resource:
    rows = "".join(
        f'<tr class="row"><td class="sku">P{number}-{i}</td><td class="name">Item {number}.{i}</td>'
        f'<td><a class="link" href="/item/{number}/{i}">more</a></td></tr>'
        for i in range(1, 3)
    )
    following = (
        f'<a id="next" href="/table/{number + 1}">Next</a>'
        if number < last
        else '<a id="next" aria-disabled="true">Next</a>'
    )
    return html(f"<body><h1>Page {number}</h1><table>{rows}</table>{following}</body>")


# --- a download and an iframe -------------------------------------------------------------------
DOWNLOADS = html('<body><a id="get" href="/files/report">Get the report</a></body>')
REPORT = Resource(
    b"sku,qty\nP1,3\n",
    content_type="text/csv",
    headers={"Content-Disposition": 'attachment; filename="Q3 report (final).csv"'},
)
FRAMED = html('<body><h1>outer</h1><iframe id="inner" src="/frame-inner"></iframe></body>')
FRAME_INNER = html('<body><p class="msg">hello from the frame</p><button id="b">x</button></body>')
# An iframe inside an iframe, and a form whose fields hold what a user typed.
NESTED = html('<body><iframe id="outer" src="/nested-middle"></iframe></body>')
NESTED_MIDDLE = html('<body><iframe id="deep" src="/nested-inner"></iframe></body>')
NESTED_INNER = html(
    '<body><input id="q" value="initial"><select id="s"><option>a</option>'
    "<option selected>b</option></select><li>1</li><li>2</li><li>3</li></body>"
)

# --- slow, and changes after a delay ------------------------------------------------------------
SLOW = Resource(html("<body><h1 id='slow'>finally</h1></body>").body, delay_s=1.5)
LATE = html(
    """<body><p id="state">loading</p><script>
  setTimeout(() => { document.getElementById('state').textContent = 'ready';
    const d = document.createElement('div'); d.id = 'late'; d.textContent = 'arrived';
    document.body.appendChild(d); }, 700);
</script></body>"""
)

# --- a login (the session lives in a cookie and in localStorage) --------------------------------
LOGIN = html(
    """<body><form id="f"><input id="user"><input id="pw" type="password">
  <button id="login" type="submit">Log in</button></form><p id="echo"></p>
<script>
  document.getElementById('pw').addEventListener('input', e => {
    document.getElementById('echo').textContent = 'typed: ' + e.target.value;
  });
  document.getElementById('f').addEventListener('submit', e => {
    e.preventDefault();
    const pw = document.getElementById('pw').value;
    if (pw !== 'hunter2-s3cret') { document.getElementById('echo').textContent = 'wrong'; return; }
    document.cookie = 'sid=user-' + document.getElementById('user').value + '; path=/; max-age=3600';
    localStorage.setItem('theme', 'dark');
    location.href = '/account';
  });
</script></body>"""
)
ACCOUNT = html(
    """<body><h1 id="who"></h1><p id="theme"></p><script>
  const m = document.cookie.match(/sid=user-([^;]+)/);
  document.getElementById('who').textContent = m ? 'Welcome ' + m[1] : 'Please log in';
  document.getElementById('theme').textContent = localStorage.getItem('theme') || 'none';
</script></body>"""
)


def all_pages() -> dict[str, Resource]:
    pages = {
        "/form": FORM,
        "/downloads": DOWNLOADS,
        "/files/report": REPORT,
        "/framed": FRAMED,
        "/frame-inner": FRAME_INNER,
        "/nested": NESTED,
        "/nested-middle": NESTED_MIDDLE,
        "/nested-inner": NESTED_INNER,
        "/slow": SLOW,
        "/late": LATE,
        "/login": LOGIN,
        "/account": ACCOUNT,
        "/plain": html("<body><h1 id='t'>Plain page</h1><p>nothing to see</p></body>"),
    }
    pages.update({f"/table/{n}": table_page(n) for n in (1, 2, 3)})
    return pages
