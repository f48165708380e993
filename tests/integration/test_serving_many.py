"""Serving many people (issue #19): deploy/launch.py's nginx in front of 2 replicas of app.py on the tiny models,
everything on 127.0.0.1, driven through the proxy: the key is needed, gradio_client cannot call ask_image with
page protection on, both replicas busy -> 503 + Retry-After, a killed replica fails over (nothing hangs) and is
started again, and without a key only this machine's clients are served (a TLS front here included; a
client-sent X-Forwarded-For gains nothing). (The page, the openai client and an MCP agent at
once: tests/browser/test_serving_many_page.py.)"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.deploy_stack import KEY, chat, launch, running

AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def served(tiny_models, tmp_path_factory):
    with running(tiny_models, tmp_path_factory.mktemp("stack"), app_args=("--protect-page",)) as s:
        yield s


def client(served, key=KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.url + "/v1", api_key=key, max_retries=0, timeout=30)


def test_the_key_is_needed_through_the_proxy_and_refusals_are_logged(served):
    with pytest.raises(openai.AuthenticationError):
        client(served, "wrong").models.list()
    spoofed = {"X-Forwarded-For": "127.0.0.1", "X-Real-IP": "127.0.0.1", "Forwarded": "for=127.0.0.1"}
    assert httpx.post(served.url + "/v1/chat/completions", json={"messages": chat()},
                      headers=spoofed).status_code == 401
    assert httpx.post(served.url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).status_code == 401
    r = client(served).chat.completions.create(model="fastvlm", messages=chat(), max_tokens=8)
    assert r.choices[0].finish_reason in ("stop", "length")
    logs = "".join((served.stack.run_dir / f"replica-{p}.log").read_text() for p in served.ports)
    assert "refused client=127.0.0.1 GET /v1/models status=401 reason=invalid_api_key" in logs
    assert KEY not in logs and "wrong" not in logs


def test_gradio_client_cannot_call_ask_image_with_page_protection_on(served):
    gradio_client = pytest.importorskip("gradio_client")
    with pytest.raises(Exception, match="401|[Ll]ogin|[Uu]nauthori"):
        gradio_client.Client(served.url, verbose=False).predict(None, "hi", api_name="/ask_image")
    assert httpx.get(served.url + "/config").status_code == 401
    logged_in = gradio_client.Client(served.url, auth=("someone", KEY), verbose=False)  # the key is the password
    assert "/ask_image" in logged_in.view_api(print_info=False, return_format="dict")["named_endpoints"]


def test_when_both_replicas_are_busy_clients_get_503_with_retry_after(served):
    """Many clients at once, none willing to wait (queue_wait_s 0): a busy replica answers 503, nginx tries the
    other, and when that one is busy too the client gets its 503 with Retry-After. Nothing else (no 502)."""
    answers: list[httpx.Response] = []

    def ask():
        for _ in range(3):
            answers.append(httpx.post(served.url + "/v1/chat/completions", headers=AUTH, timeout=30,
                                      json={"messages": chat(), "max_tokens": 900, "queue_wait_s": 0}))

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a request hung"
    statuses = {r.status_code for r in answers}
    assert statuses <= {200, 503} and 200 in statuses, statuses
    busy = [r for r in answers if r.status_code == 503]
    assert busy, "16 clients at once never found both replicas busy"
    assert all(r.headers.get("retry-after") == "5" and r.json()["error"]["code"] == "engine_busy" for r in busy)
    both = [u for u in served.upstreams(served.access_log()) if u.count(",") == 1]
    assert both, "no 503 came after nginx had tried both replicas"


def test_a_killed_replica_fails_over_nothing_hangs_and_it_is_started_again(served):
    victim_port, other_port = served.ports
    victim = served.stack.replicas[victim_port]
    results: list[tuple[float, int, float]] = []  # (end time, status, seconds)
    stop = threading.Event()

    def ask():
        while not stop.is_set():
            t = time.monotonic()
            try:
                status = httpx.post(served.url + "/v1/chat/completions", headers=AUTH, timeout=30,
                                    json={"messages": chat(), "max_tokens": 64}).status_code
            except httpx.HTTPError:  # an answer cut off mid-body when its replica died
                status = 0
            results.append((time.monotonic(), status, time.monotonic() - t))

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    victim.kill()
    killed = time.monotonic()
    time.sleep(2.0)
    stop.set()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a request hung after a replica was killed"
    assert max(s for _, _, s in results) < 30
    after = [status for end, status, _ in results if end > killed + 0.5]
    assert after and all(s == 200 for s in after), after  # new requests go to the replica that is left
    deadline = time.monotonic() + 90  # the launcher starts it again (after RESTART_DELAY_S)
    while (launch.health(victim_port) or {}).get("engine", {}).get("state") != "ready":
        assert time.monotonic() < deadline, "the killed replica was not started again"
        served.stack.watch_once()
        time.sleep(0.5)
    assert served.stack.replicas[victim_port].pid != victim.pid
    start = len(served.access_log())
    for _ in range(6):
        assert client(served).chat.completions.create(model="fastvlm", messages=chat(), max_tokens=8).choices
    assert f"127.0.0.1:{victim_port}" in served.upstreams(served.access_log()[start:])  # back in the rotation


def as_if_from(conf: str) -> str:
    """nginx takes its peer's address from `X-Test-Peer` when a test sends one (the test has only loopback; the
    realip module sets $remote_addr as a remote client's would be); everything else as rendered."""
    return conf.replace("server_name ", "set_real_ip_from 127.0.0.1;\n        real_ip_header X-Test-Peer;\n"
                        "        server_name ", 1)


@pytest.fixture(scope="module")
def keyless(tiny_models, tmp_path_factory):
    """One replica without a key; a test's X-Test-Peer header is the address nginx sees (`as_if_from`)."""
    with running(tiny_models, tmp_path_factory.mktemp("keyless"), replicas=1, key=None, conf_edit=as_if_from) as s:
        yield s


def test_a_keyless_stack_serves_this_machine_only_even_behind_a_tls_front_here(keyless):
    """A replica without a key serves local clients only. A client on this machine is served; a TLS front on this
    host connects from 127.0.0.1 and appends its client's address to X-Forwarded-For, which nginx passes on, so
    that client is refused; a client nginx sees as remote (192.0.2.7) is refused whatever forwarding headers it
    writes itself."""
    mcp = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    s = keyless
    assert httpx.get(s.url + "/v1/models").status_code == 200  # a laptop's own stack, no key
    assert httpx.post(s.url + "/mcp", json=mcp, headers=accept).status_code == 200
    front = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https"}
    assert httpx.get(s.url + "/v1/models", headers=front).status_code == 403
    assert httpx.post(s.url + "/mcp", json=mcp, headers={**front, **accept}).status_code == 403
    remote = {"X-Test-Peer": "192.0.2.7"}
    for headers in ({}, {"X-Forwarded-For": "127.0.0.1"}, {"Forwarded": "for=127.0.0.1"}, {"X-Real-IP": "::1"}):
        r = httpx.get(s.url + "/v1/models", headers={**remote, **headers})
        assert r.status_code == 403 and r.json()["error"]["code"] == "remote_client_refused", (headers, r.text)
    assert httpx.get(f"http://127.0.0.1:{s.ports[0]}/v1/models").status_code == 200  # a local client, direct
    log = (s.stack.run_dir / f"replica-{s.ports[0]}.log").read_text()
    assert "refused client=203.0.113.9 GET /v1/models status=403 reason=remote_client_refused" in log
    assert "refused client=192.0.2.7 GET /v1/models status=403 reason=remote_client_refused" in log


def test_the_page_has_https_urls_behind_a_tls_front_here_only(keyless):
    """Gradio builds the page's URLs from X-Forwarded-Proto: a TLS front on this host says https, and the page
    (its config's root) then names https://; the same header from a client elsewhere changes nothing."""
    https = {"X-Forwarded-Proto": "https", "Host": "vlm.example.org"}
    assert httpx.get(keyless.url + "/config", headers=https).json()["root"].startswith("https://vlm.example.org")
    remote = {**https, "X-Test-Peer": "192.0.2.7"}
    assert httpx.get(keyless.url + "/config", headers=remote).json()["root"].startswith("http://vlm.example.org")
    assert httpx.get(keyless.url + "/config").json()["root"].startswith("http://127.0.0.1")


def nginx_worker_rss_mib(served) -> float:
    master = served.stack.nginx.pid
    children = Path(f"/proc/{master}/task/{master}/children")
    if not children.exists():
        pytest.skip("this kernel does not list a process's children in /proc")
    status = [Path(f"/proc/{pid}/status").read_text() for pid in children.read_text().split()]
    return sum(int(line.split()[1]) for s in status for line in s.splitlines() if line.startswith("VmRSS")) / 1024


def open_request(url: str, peer: str, path: str, body_bytes: int, declared: int) -> socket.socket:
    """A request from `peer` (as nginx sees it) that declares a `declared`-byte body and sends `body_bytes`."""
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nX-Test-Peer: {peer}\r\nContent-Type: application/json\r\n"
              f"Content-Length: {declared}\r\n\r\n".encode() + b" " * body_bytes)
    return s


def test_bodies_spill_to_disk_and_one_address_holds_at_most_64_requests(keyless):
    """Bodies are read whole before a key or login is checked: 8 clients sending 12 MiB of 19 each and stopping
    leave nginx's memory as it was (it held all 96 MiB), the rest is in a temp file; one address holds at most
    64 open requests (the 65th: 429 at once), while this machine's clients and other addresses are served."""
    before = nginx_worker_rss_mib(keyless)
    slow = [open_request(keyless.url, "192.0.2.7", "/v1/chat/completions", 12 << 20, 19 << 20) for _ in range(8)]
    time.sleep(1.0)
    grown = nginx_worker_rss_mib(keyless) - before
    for s in slow:
        s.close()
    assert grown < 16, f"nginx holds {grown:.0f} MiB more for 8 unfinished bodies"
    body = json.dumps({"messages": chat(), "max_tokens": 4}) + " " * (2 << 20)  # spilled, then passed on whole
    r = httpx.post(keyless.url + "/v1/chat/completions", content=body, timeout=60,
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    held = [open_request(keyless.url, "192.0.2.8", "/v1/chat/completions", 1, 1000) for _ in range(64)]
    try:
        time.sleep(0.5)
        assert httpx.get(keyless.url + "/health", headers={"X-Test-Peer": "192.0.2.8"}).status_code == 429
        assert httpx.get(keyless.url + "/health", headers={"X-Test-Peer": "192.0.2.9"}).status_code == 200
        assert httpx.get(keyless.url + "/health").status_code == 200
    finally:
        for s in held:
            s.close()
    time.sleep(0.5)
    assert httpx.get(keyless.url + "/health", headers={"X-Test-Peer": "192.0.2.8"}).status_code == 200


def test_an_answer_past_the_read_timeout_is_not_made_again_on_another_replica(tiny_models, tmp_path):
    """proxy_read_timeout scaled from 300 s to 1 ms, as a long non-streamed answer of a real model can take longer
    than 300 s: no answer comes back that soon (100 ms did not hold: on an AVX-512 EPYC the tiny models' random
    answer met their end token after 166 tokens, 0.064 s in all). The client gets a 504 that says it timed out,
    after one replica. (It was made again on every replica, then reported as "busy or down".)"""
    def short_timeout(conf: str) -> str:
        return conf.replace("proxy_read_timeout 300s;", "proxy_read_timeout 1ms;")

    with running(tiny_models, tmp_path, replicas=2, key=None, conf_edit=short_timeout) as s:
        r = httpx.post(s.url + "/v1/chat/completions", timeout=60, json={"messages": chat(), "max_tokens": 900})
        assert r.status_code == 504 and r.json()["error"]["code"] == "upstream_timeout", r.text
        assert "did not answer in time" in r.json()["error"]["message"]
        # nginx writes the line when it finalizes the request, which may be after the client has read the reply
        deadline = time.monotonic() + 10
        while not (lines := [line for line in s.access_log() if '"POST /v1/chat/completions' in line]):
            assert time.monotonic() < deadline, s.access_log()
            time.sleep(0.05)
        tried = s.upstreams(lines)
        assert len(tried) == 1 and "," not in tried[0], lines
