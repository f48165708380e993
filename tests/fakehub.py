"""A local stand-in for the Hugging Face Hub on 127.0.0.1, answering the endpoints `huggingface_hub` calls.

Repos hold project-built files under the real repo and file names. Point `HF_ENDPOINT` at `FakeHub.url`
(with a fresh `HF_HOME`) and the real download code runs against it: file HEAD/GET with `Range`
(resume), 404s with the Hub's error codes, repo info and tree listings for `snapshot_download`.
`requests` records what was asked; `cut_after` makes the next GET of a file stop after N bytes, as a
dropped connection would.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/(?P<kind>revision|tree)/(?P<rev>[^/?]+))?")


@dataclass
class FakeHub:
    repos: dict[str, dict[str, Path | bytes]] = field(default_factory=dict)  # repo -> path in repo -> content
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # (method, path, Range header)
    cut_after: dict[str, int] = field(default_factory=dict)  # "repo/path" -> bytes to send before dropping

    def add(self, repo: str, path: str, content: Path | bytes) -> None:
        self.repos.setdefault(repo, {})[path] = content

    def content(self, repo: str, path: str) -> bytes | None:
        item = self.repos.get(repo, {}).get(path)
        return item.read_bytes() if isinstance(item, Path) else item

    @staticmethod
    def sha(repo: str) -> str:
        return hashlib.sha1(repo.encode()).hexdigest()  # one fixed "commit" per repo

    def file_requests(self, method: str = "GET") -> list[str]:
        return [p for m, p, _ in self.requests if m == method and "/resolve/" in p]

    # -- server ---------------------------------------------------------------
    def start(self) -> FakeHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                hub._serve(self, body=False)

            def do_GET(self):
                hub._serve(self, body=True)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _serve(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(urlparse(h.path).path)
        self.requests.append((h.command, path, h.headers.get("Range")))
        if m := RESOLVE.match(path):
            return self._file(h, m["repo"], m["path"], body)
        if m := API.match(path):
            return self._api(h, m["repo"], m["kind"])
        self._error(h, 404, "RepoNotFound")

    def _error(self, h, status: int, code: str) -> None:
        h.send_response(status)
        h.send_header("X-Error-Code", code)
        h.send_header("X-Error-Message", f"{code} (fake hub)")
        h.send_header("Content-Length", "0")
        h.end_headers()

    def _file(self, h, repo: str, path: str, body: bool) -> None:
        if repo not in self.repos:
            return self._error(h, 404, "RepoNotFound")
        data = self.content(repo, path)
        if data is None:
            return self._error(h, 404, "EntryNotFound")
        start = 0
        if body and (rng := h.headers.get("Range")):
            start = int(re.match(r"bytes=(\d+)-", rng).group(1))
        part = data[start:]
        h.send_response(206 if start else 200)
        h.send_header("X-Repo-Commit", self.sha(repo))
        h.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        h.send_header("Content-Length", str(len(part) if body else len(data)))
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.end_headers()
        if not body:
            return
        cut = self.cut_after.pop(f"{repo}/{path}", None)
        h.wfile.write(part if cut is None else part[:cut])
        if cut is not None:
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(2)

    def _api(self, h, repo: str, kind: str | None) -> None:
        if repo not in self.repos:
            return self._error(h, 404, "RepoNotFound")
        files = self.repos[repo]
        if kind == "tree":
            body = [{"type": "file", "path": p, "size": len(self.content(repo, p)),
                     "oid": hashlib.sha1(self.content(repo, p)).hexdigest()} for p in files]
        else:
            body = {"id": repo, "modelId": repo, "sha": self.sha(repo), "private": False,
                    "siblings": [{"rfilename": p} for p in files]}
        data = json.dumps(body).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
