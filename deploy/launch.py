"""N replicas of `app.py` on loopback ports behind one nginx, on this machine (README "Serving many people").

    FASTVLM_API_KEY=... python deploy/launch.py --replicas 2 --listen 0.0.0.0:8080 --server-name vlm.example.org \\
        -- --models models/fastvlm --protect-page

Everything after `--` goes to every `app.py`. Each replica gets `--host 127.0.0.1 --port P`, reads the client
from nginx's `X-Forwarded-For` only (`--trusted-proxies 127.0.0.1 --forwarded-header x-forwarded-for`: its
right-most address that is not 127.0.0.1, so a TLS front on this host that appends its client's address keeps a
keyless stack local-only), accepts the public name as a Host (`--allowed-hosts`), and a share of the CPU cores
(`--threads`). The key is inherited from the environment, never put on a command line. nginx runs in the
foreground with its own prefix under `--run-dir` (config, logs, temp files, pid); nothing under /etc/nginx is read
or written. A replica that exits is started again; Ctrl-C or SIGTERM stops everything.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("fastvlm.deploy")

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = Path(__file__).with_name("nginx.conf.template")
RESTART_DELAY_S = 5.0  # a replica that exits is started again after this long (a crash loop stays slow)
STOP_GRACE_S = 10.0  # how long each process may take to stop gracefully before its process group is killed


def nginx_binary() -> str:
    """Debian's nginx lives in /usr/sbin, which is not on every user's PATH."""
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if found is None:
        raise FileNotFoundError("nginx is not installed: apt-get install nginx (Debian/Ubuntu)")
    return found


@dataclass(frozen=True)
class StackConfig:
    """What the launcher starts. Only `main()` maps its flags onto this."""

    replicas: int = 2  # app.py processes; each loads its own model (memory and cores are per replica)
    listen: str = "127.0.0.1:8080"  # nginx's address; anything but loopback needs FASTVLM_API_KEY set
    first_port: int = 7861  # replicas listen on 127.0.0.1:first_port, first_port + 1, ...
    server_name: str = "_"  # the host name(s) clients use, space-separated; "_": any (loopback use)
    run_dir: Path = Path("run/deploy")  # nginx.conf, logs, temp files, replica logs
    app_args: tuple[str, ...] = ()  # passed to every app.py (--models DIR, --protect-page, ...)
    threads: int | None = None  # CPU threads per replica; None: the machine's cores shared out (at least 1)
    api_body: str = "20m"  # nginx's body limit for the API and MCP: ApiSettings.max_body_bytes (20 MiB)
    page_body: str = "50m"  # for the page's uploads: ui/app.py's MAX_UPLOAD
    conn_per_address: int = 64  # open requests per client address (this machine's not counted); more get 429
    python: str = field(default_factory=lambda: sys.executable)

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError("replicas must be at least 1")

    @property
    def ports(self) -> list[int]:
        return [self.first_port + i for i in range(self.replicas)]

    @property
    def threads_per_replica(self) -> int:
        return self.threads or max(1, (os.cpu_count() or 1) // self.replicas)

    @property
    def public_names(self) -> list[str]:
        return [n for n in self.server_name.split() if n != "_"]


def render(config: StackConfig, body_temp: Path | None = None) -> str:
    """nginx.conf for `config`, from nginx.conf.template; `body_temp`: where request bodies over 128 KiB are
    spilled (default: client_body in the run folder; see `body_temp_dir`)."""
    def servers(marks: str) -> str:
        return "\n".join(f"        server 127.0.0.1:{p} {marks};" for p in config.ports)

    values = {"RUN_DIR": str(Path(config.run_dir).resolve()), "LISTEN": config.listen,
              "SERVER_NAME": config.server_name, "SERVERS": servers("max_fails=1 fail_timeout=10s"),
              "API_SERVERS": servers("max_fails=0"), "REPLICA_COUNT": str(config.replicas),
              "API_BODY": config.api_body, "PAGE_BODY": config.page_body,
              "CONN_PER_ADDRESS": str(config.conn_per_address),
              "BODY_TEMP": str(body_temp or Path(config.run_dir).resolve() / "client_body")}
    text = TEMPLATE.read_text()
    for name, value in values.items():
        text = text.replace("{{" + name + "}}", value)
    return text


def body_temp_dir(run_dir: Path) -> tuple[Path, Path | None]:
    """Where nginx spills request bodies, and a folder made for it that `Stack.stop` removes (or None). Started as
    root, nginx's workers run as `nobody` and must enter every folder above it: if others cannot enter the run
    folder (a home folder, pytest's), a fresh one in the system's temp folder (mode 0711; nginx makes the
    client_body inside it the workers' own, 0700)."""
    if os.geteuid() != 0 or all(d.stat().st_mode & 0o001 for d in (run_dir, *run_dir.parents)):
        return run_dir / "client_body", None
    made = Path(tempfile.mkdtemp(prefix="fastvlm-nginx-"))
    made.chmod(0o711)
    return made / "client_body", made


def replica_command(config: StackConfig, port: int) -> list[str]:
    """`python app.py ...` for the replica on `port`."""
    args = [config.python, str(ROOT / "app.py"), "--host", "127.0.0.1", "--port", str(port),
            "--trusted-proxies", "127.0.0.1", "--forwarded-header", "x-forwarded-for"]
    if config.public_names:
        args += ["--allowed-hosts", ",".join(config.public_names)]
    if "--threads" not in config.app_args:
        args += ["--threads", str(config.threads_per_replica)]
    return args + list(config.app_args)


def health(port: int, timeout: float = 2.0) -> dict | None:
    """A replica's /health answer, or None while it does not answer as a replica does (nothing listening yet,
    or not HTTP: a connect to a port no one listens on can meet itself, and reads back its own request)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout) as r:
            return json.load(r)
    except (OSError, ValueError, http.client.HTTPException):
        return None


class Stack:
    """The replicas and nginx as child processes of this one."""

    def __init__(self, config: StackConfig, env: dict[str, str] | None = None):
        """`env`: variables added to the replicas' environment (FASTVLM_API_KEY, ...), beside this process's."""
        self.config = config
        self.env = {**os.environ, **(env or {})}
        self.run_dir = Path(config.run_dir).resolve()
        self.replicas: dict[int, subprocess.Popen] = {}
        self.nginx: subprocess.Popen | None = None
        self._restart_at: dict[int, float] = {}
        self._body_temp_made: Path | None = None

    def start_replica(self, port: int) -> subprocess.Popen:
        logfile = open(self.run_dir / f"replica-{port}.log", "ab")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen(replica_command(self.config, port), cwd=ROOT, stdout=logfile, env=self.env,
                                stderr=subprocess.STDOUT, start_new_session=True)
        logfile.close()
        self.replicas[port] = proc
        log.info("replica on 127.0.0.1:%d started (pid %d, log %s)", port, proc.pid, logfile.name)
        return proc

    def start(self, conf_edit: Callable[[str], str] | None = None) -> Stack:
        """Replicas and nginx started (not yet ready: `wait_ready`); `conf_edit`: changes `render`'s config."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        body_temp, self._body_temp_made = body_temp_dir(self.run_dir)
        conf = self.run_dir / "nginx.conf"
        text = render(self.config, body_temp)
        conf.write_text(conf_edit(text) if conf_edit else text)
        for port in self.config.ports:
            self.start_replica(port)
        self.nginx = subprocess.Popen([nginx_binary(), "-p", str(self.run_dir), "-c", str(conf)], cwd=self.run_dir,
                                      start_new_session=True)  # its workers killable as one group (`stop`)
        log.info("nginx on %s (pid %d, config %s)", self.config.listen, self.nginx.pid, conf)
        return self

    def wait_ready(self, timeout: float = 600.0) -> None:
        """Until every replica's model is loaded (`/health` says ready); RuntimeError on a failure or timeout."""
        deadline = time.monotonic() + timeout
        waiting = set(self.config.ports)
        while waiting:
            for port in sorted(waiting):
                info = health(port)
                state = (info or {}).get("engine", {}).get("state", "ready" if info else None)
                if state == "ready":
                    waiting.discard(port)
                elif state == "failed" or self.replicas[port].poll() is not None:
                    raise RuntimeError(f"the replica on port {port} failed to start: see "
                                       f"{self.run_dir / f'replica-{port}.log'}")
            if self.nginx is not None and self.nginx.poll() is not None:
                raise RuntimeError(f"nginx exited: see {self.run_dir / 'error.log'}")
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(f"replicas on ports {sorted(waiting)} not ready after {timeout:.0f} s")
            time.sleep(0.5 if waiting else 0)

    def watch_once(self) -> None:
        """Start again any replica that has exited (after RESTART_DELAY_S); RuntimeError if nginx exited."""
        now = time.monotonic()
        for port, proc in list(self.replicas.items()):
            if proc.poll() is None:
                continue
            if port not in self._restart_at:
                log.warning("replica on port %d exited (code %s); starting it again in %.0f s", port,
                            proc.returncode, RESTART_DELAY_S)
                self._restart_at[port] = now + RESTART_DELAY_S
            elif now >= self._restart_at[port]:
                del self._restart_at[port]
                self.start_replica(port)
        if self.nginx is not None and self.nginx.poll() is not None:
            raise RuntimeError(f"nginx exited (code {self.nginx.returncode}): see {self.run_dir / 'error.log'}")

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM to the replicas, SIGQUIT to nginx (it finishes open requests); whatever has not exited after
        `grace_s` is killed with its whole process group: a killed nginx master leaves its workers serving the
        public port otherwise, so the next start could not listen on it."""
        procs = [p for p in (*self.replicas.values(), self.nginx) if p is not None and p.poll() is None]
        for proc in procs:
            proc.send_signal(signal.SIGTERM if proc is not self.nginx else signal.SIGQUIT)  # nginx: graceful
        for proc in procs:
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # each child leads a session of its own (start_new_session)
                proc.wait()
        if self._body_temp_made is not None:
            shutil.rmtree(self._body_temp_made, ignore_errors=True)


def build_parser() -> argparse.ArgumentParser:
    d = StackConfig()
    p = argparse.ArgumentParser(prog="python deploy/launch.py", description=__doc__.split("\n")[0])
    p.add_argument("--replicas", type=int, default=d.replicas, help="app.py processes (default %(default)s)")
    p.add_argument("--listen", default=d.listen, help="nginx's address:port (default %(default)s)")
    p.add_argument("--first-port", type=int, default=d.first_port, help="first replica port (default %(default)s)")
    p.add_argument("--server-name", default=d.server_name, help="host name(s) clients use (space-separated)")
    p.add_argument("--run-dir", type=Path, default=d.run_dir, help="config, logs, temp files (default %(default)s)")
    p.add_argument("--threads", type=int, help="CPU threads per replica (default: cores / replicas)")
    p.add_argument("--conn-per-address", type=int, default=d.conn_per_address,
                   help="open requests per client address; more get 429 (default %(default)s)")
    p.add_argument("app_args", nargs="*", help="after --: arguments for every app.py")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = StackConfig(args.replicas, args.listen, args.first_port, args.server_name, args.run_dir,
                         tuple(args.app_args), args.threads, conn_per_address=args.conn_per_address)
    stack = Stack(config)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        stack.start().wait_ready()
        log.info("serving on http://%s/ with %d replicas", config.listen, config.replicas)
        while True:
            stack.watch_once()
            time.sleep(1.0)
    except RuntimeError as e:
        log.error("%s", e)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        stack.stop()


if __name__ == "__main__":
    sys.exit(main())
