"""deploy/launch.py's stop when nginx does not stop in time: it is killed with its workers. A killed master alone
leaves its workers running on their own, holding the public port, so the next start could not listen on it.
Real nginx, its master held stopped (SIGSTOP) so that it cannot quit; the replica is a stand-in that only
answers /health."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.deploy_stack import free_ports, launch, require_nginx

REPLICA = """
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"engine": {"state": "ready"}}'
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args): pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux's /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _port_free(port: int) -> bool:
    try:
        socket.create_server(("127.0.0.1", port)).close()
        return True
    except OSError:
        return False


def test_nginx_that_does_not_stop_in_time_is_killed_with_its_workers(tmp_path):
    require_nginx()
    first = free_ports(2)
    config = launch.StackConfig(replicas=1, listen=f"127.0.0.1:{first}", first_port=first + 1, run_dir=tmp_path)
    stack = launch.Stack(config)
    (tmp_path / "replica.py").write_text(REPLICA)

    def start_replica(port):
        stack.replicas[port] = subprocess.Popen([sys.executable, str(tmp_path / "replica.py"), str(port)],
                                                start_new_session=True)
        return stack.replicas[port]

    stack.start_replica = start_replica
    workers: list[int] = []
    try:
        stack.start()
        stack.wait_ready(timeout=30)
        workers = _children(stack.nginx.pid)
        assert workers and not _port_free(first)
        os.kill(stack.nginx.pid, signal.SIGSTOP)  # a master that cannot quit (hung)
        started = time.monotonic()
        stack.stop(grace_s=0.5)
        assert time.monotonic() - started < 5
        deadline = time.monotonic() + 5
        while any(map(_alive, workers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(map(_alive, workers)), "nginx's workers outlived their killed master"
        assert _port_free(first)
    finally:
        for pid in filter(_alive, workers):  # what the code before left behind
            os.kill(pid, signal.SIGKILL)
        stack.stop(grace_s=0.5)
