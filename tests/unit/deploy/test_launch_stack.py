"""deploy/launch.py without nginx or replicas: the config's arithmetic, the rendered nginx.conf, each replica's
command line, where request bodies spill, and the supervisor's restart, readiness, stop and main loop (fake
processes and a fake clock). The real stack: tests/integration/test_serving_many.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.deploy_stack import launch


def test_a_stack_needs_a_replica():
    with pytest.raises(ValueError, match="at least 1"):
        launch.StackConfig(replicas=0)


@pytest.mark.parametrize("cores, replicas, threads, want", [(8, 2, None, 4), (7, 2, None, 3), (2, 4, None, 1),
                                                          (8, 2, 3, 3)])
def test_threads_share_the_cores_out(monkeypatch, cores, replicas, threads, want):
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert launch.StackConfig(replicas=replicas, threads=threads).threads_per_replica == want


def test_an_unknown_core_count_counts_as_one(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert launch.StackConfig(replicas=1).threads_per_replica == 1


def test_ports_and_public_names():
    config = launch.StackConfig(replicas=3, first_port=9000, server_name="vlm.example.org _ vlm.internal")
    assert config.ports == [9000, 9001, 9002]
    assert config.public_names == ["vlm.example.org", "vlm.internal"]
    assert launch.StackConfig().public_names == []


def test_the_config_is_filled_in_completely(tmp_path):
    config = launch.StackConfig(replicas=2, listen="0.0.0.0:8443", first_port=9000, server_name="vlm.example.org",
                                run_dir=tmp_path, conn_per_address=7)
    text = launch.render(config)
    assert re.findall(r"\{\{\w+\}\}", launch.TEMPLATE.read_text()) and not re.findall(r"\{\{\w+\}\}", text)
    assert "listen 0.0.0.0:8443" in text and "server_name vlm.example.org" in text
    assert text.count("server 127.0.0.1:9000 ") == 2 and text.count("server 127.0.0.1:9001 ") == 2  # page, API
    assert "server 127.0.0.1:9002" not in text
    assert f"client_body_temp_path {tmp_path.resolve() / 'client_body'};" in text
    assert f"client_body_temp_path {tmp_path / 'spill'};" in launch.render(config, tmp_path / "spill")
    assert "limit_conn fastvlm_per_address 7;" in text


def test_a_replica_listens_on_loopback_and_trusts_only_the_proxy(tmp_path):
    config = launch.StackConfig(replicas=2, threads=3, server_name="a.example b.example",
                                app_args=("--models", "m"))
    cmd = launch.replica_command(config, 9001)
    assert cmd[1].endswith("app.py") and cmd[cmd.index("--port") + 1] == "9001"
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("--trusted-proxies") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--allowed-hosts") + 1] == "a.example,b.example"
    assert cmd[cmd.index("--threads") + 1] == "3" and cmd[-2:] == ["--models", "m"]
    assert "--allowed-hosts" not in launch.replica_command(launch.StackConfig(), 9001)


def test_the_apps_own_threads_flag_wins():
    cmd = launch.replica_command(launch.StackConfig(threads=3, app_args=("--threads", "1")), 9001)
    assert cmd.count("--threads") == 1 and cmd[-2:] == ["--threads", "1"]


def test_nginx_is_found_on_the_path_or_in_sbin(monkeypatch):
    monkeypatch.setattr(launch.shutil, "which", lambda name: "/opt/nginx/bin/nginx")
    monkeypatch.setattr(launch.os, "access", lambda path, mode: False)
    assert launch.nginx_binary() == "/opt/nginx/bin/nginx"
    monkeypatch.setattr(launch.shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match="apt-get install nginx"):
        launch.nginx_binary()
    monkeypatch.setattr(launch.os, "access", lambda path, mode: path == "/usr/sbin/nginx")
    assert launch.nginx_binary() == "/usr/sbin/nginx"


def test_bodies_spill_into_the_run_folder_unless_root_cannot_reach_it(monkeypatch, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setattr(launch.os, "geteuid", lambda: 1000)
    assert launch.body_temp_dir(run) == (run / "client_body", None)
    monkeypatch.setattr(launch.os, "geteuid", lambda: 0)
    reachable = Path("/")  # every folder above / can be entered by others (there is none)
    assert launch.body_temp_dir(reachable) == (reachable / "client_body", None)
    tmp_path.chmod(0o700)
    spill, made = launch.body_temp_dir(run)
    try:
        assert spill == made / "client_body" and made.stat().st_mode & 0o777 == 0o711
    finally:
        made.rmdir()


class FakeProc:
    """A child process: `exit(code)` makes it exit; records the signals sent to it."""

    pids = iter(range(4000, 5000))

    def __init__(self, *, hangs: bool = False):
        self.returncode: int | None = None
        self.signals: list[int] = []
        self.hangs, self.pid = hangs, next(FakeProc.pids)

    def poll(self):
        return self.returncode

    def exit(self, code: int = 1) -> None:
        self.returncode = code

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)
        if not self.hangs:
            self.exit(-sig)

    def wait(self, timeout=None):
        if self.returncode is None:
            raise subprocess.TimeoutExpired("replica", timeout)
        return self.returncode


class Clock:
    def __init__(self):
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


@pytest.fixture
def stack(monkeypatch, tmp_path):
    """A Stack whose replicas are FakeProcs (`stack.started`: ports in start order) on a fake clock."""
    clock = Clock()
    monkeypatch.setattr(launch.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(launch.time, "sleep", clock.sleep)
    s = launch.Stack(launch.StackConfig(replicas=2, first_port=9000, run_dir=tmp_path))
    s.clock, s.started = clock, []

    def start_replica(port):
        s.replicas[port] = FakeProc()
        s.started.append(port)
        return s.replicas[port]

    monkeypatch.setattr(s, "start_replica", start_replica)
    for port in s.config.ports:
        s.start_replica(port)
    s.started.clear()
    return s


def test_an_exited_replica_is_started_again_after_the_delay(stack):
    stack.replicas[9001].exit(1)
    stack.watch_once()
    stack.clock.now = 100.0 + launch.RESTART_DELAY_S - 0.5
    stack.watch_once()
    assert stack.started == []  # a crash loop stays slow
    stack.clock.now = 100.0 + launch.RESTART_DELAY_S  # due now
    stack.watch_once()
    assert stack.started == [9001] and stack.replicas[9001].poll() is None
    stack.watch_once()
    assert stack.started == [9001]


def test_the_supervisor_stops_when_nginx_exits(stack):
    stack.nginx = FakeProc()
    stack.watch_once()
    stack.nginx.exit(1)
    with pytest.raises(RuntimeError, match="nginx exited .*error.log"):
        stack.watch_once()


def test_ready_when_every_replica_says_so(stack, monkeypatch):
    states = {9000: iter([None, {"engine": {"state": "loading"}}, {"engine": {"state": "ready"}}]),
              9001: iter([{"ok": True}])}  # an answer without an engine section counts as ready
    asked = []
    monkeypatch.setattr(launch, "health", lambda port: asked.append(port) or next(states[port]))
    stack.wait_ready(timeout=10)
    assert asked == [9000, 9001, 9000, 9000] and stack.clock.now == 101.0


@pytest.mark.parametrize("how", ["failed", "exited"])
def test_a_replica_that_fails_to_start_is_named(stack, monkeypatch, how):
    monkeypatch.setattr(launch, "health", lambda port: {"engine": {"state": "failed" if how == "failed" else "x"}})
    if how == "exited":
        stack.replicas[9001].exit(1)
    with pytest.raises(RuntimeError, match=f"port {9000 if how == 'failed' else 9001} failed.*replica-"):
        stack.wait_ready(timeout=10)


def test_readiness_stops_when_nginx_exits(stack, monkeypatch):
    monkeypatch.setattr(launch, "health", lambda port: None)
    stack.nginx = FakeProc()
    stack.nginx.exit(1)
    with pytest.raises(RuntimeError, match="nginx exited: see .*error.log"):
        stack.wait_ready(timeout=10)
    assert stack.clock.now == 100.0


def test_start_writes_the_config_then_starts_replicas_and_nginx(monkeypatch, tmp_path):
    started = []

    def popen(cmd, **kw):
        started.append((cmd, kw))
        return FakeProc()

    monkeypatch.setattr(launch.subprocess, "Popen", popen)
    monkeypatch.setattr(launch, "nginx_binary", lambda: "/sbin/nginx")
    run = tmp_path / "a" / "run"  # made, with its parents
    stack = launch.Stack(launch.StackConfig(replicas=2, first_port=9000, run_dir=run), env={"FASTVLM_API_KEY": "k"})
    stack.start(conf_edit=lambda text: text + "# edited\n")
    assert (run / "nginx.conf").read_text().endswith("# edited\n")
    (r1, kw1), (r2, _), (nginx, kw_nginx) = started
    assert r1 == launch.replica_command(stack.config, 9000) and r2 == launch.replica_command(stack.config, 9001)
    assert kw1["env"]["FASTVLM_API_KEY"] == "k" and kw1["start_new_session"]  # Ctrl-C reaches the launcher only
    assert (run / "replica-9000.log").exists() and (run / "replica-9001.log").exists()
    assert nginx == ["/sbin/nginx", "-p", str(run.resolve()), "-c", str(run.resolve() / "nginx.conf")]
    assert kw_nginx["start_new_session"]  # its workers die with it (`stop` kills the group)
    assert set(stack.replicas) == {9000, 9001} and stack.nginx is not None


def test_readiness_gives_up_at_its_timeout(stack, monkeypatch):
    monkeypatch.setattr(launch, "health", lambda port: None if port == 9001 else {"engine": {"state": "ready"}})
    with pytest.raises(RuntimeError, match=r"\[9001\] not ready after 3 s"):
        stack.wait_ready(timeout=3)
    assert 103.0 <= stack.clock.now <= 103.5


def test_stop_ends_replicas_and_nginx_gracefully_and_kills_what_hangs_with_its_group(stack, tmp_path, monkeypatch):
    stack.nginx = FakeProc(hangs=True)
    stack.replicas[9001] = FakeProc(hangs=True)
    killed = []

    def killpg(pgid, sig):
        killed.append((pgid, sig))
        next(p for p in (stack.nginx, *stack.replicas.values()) if p.pid == pgid).exit(-sig)

    monkeypatch.setattr(launch.os, "killpg", killpg)
    stack._body_temp_made = made = tmp_path / "spill"
    made.mkdir()
    stack.stop(grace_s=0.5)
    assert stack.replicas[9000].signals == [signal.SIGTERM] and stack.replicas[9001].signals == [signal.SIGTERM]
    assert stack.nginx.signals == [signal.SIGQUIT] and not made.exists()
    assert killed == [(stack.replicas[9001].pid, signal.SIGKILL), (stack.nginx.pid, signal.SIGKILL)]


def test_stop_leaves_alone_what_already_exited_or_never_started(stack):
    stack.replicas[9000].exit(1)
    stack.stop()  # nginx never started
    assert stack.replicas[9000].signals == [] and stack.replicas[9001].signals == [signal.SIGTERM]


class FakeStack:
    """What main() drives: ready at once, then `watch_once` fails on its third call."""

    def __init__(self, config):
        self.config, self.watched, self.stopped = config, 0, False
        FakeStack.made = self

    def start(self):
        return self

    def wait_ready(self):
        pass

    def watch_once(self):
        self.watched += 1
        if self.watched == 3:
            raise RuntimeError("nginx exited")

    def stop(self):
        self.stopped = True


def test_main_watches_until_the_stack_fails_then_stops_it(monkeypatch):
    handlers = {}
    monkeypatch.setattr(launch, "Stack", FakeStack)
    monkeypatch.setattr(launch.time, "sleep", lambda s: None)
    monkeypatch.setattr(launch.signal, "signal", handlers.__setitem__)
    monkeypatch.setattr(launch.logging, "basicConfig", lambda **kw: None)
    assert launch.main(["--replicas", "3", "--threads", "2", "--", "--models", "m"]) == 1
    made = FakeStack.made
    assert made.watched == 3 and made.stopped
    with pytest.raises(SystemExit) as e:  # SIGTERM: out through main's `finally` (the stack stopped), exit 0
        handlers[signal.SIGTERM](signal.SIGTERM, None)
    assert e.value.code == 0
    assert made.config.replicas == 3 and made.config.threads == 2 and made.config.app_args == ("--models", "m")


def test_ctrl_c_stops_the_stack_and_exits_0(monkeypatch):
    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "Stack", FakeStack)
    monkeypatch.setattr(FakeStack, "wait_ready", interrupted)
    monkeypatch.setattr(launch.signal, "signal", lambda *a: None)
    monkeypatch.setattr(launch.logging, "basicConfig", lambda **kw: None)
    assert launch.main([]) == 0 and FakeStack.made.stopped
