"""app.py and the launched app: flags, missing weights, and each tab's function through gradio_client (tiny models)."""

import os
import socket
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image

import app
from fastvlm.cli.slow_cpu import slow_cpu_warning, slow_voice_warning
from fastvlm.engine.events import ModelFileError
from ui import create_app, launch

pytest.importorskip("gradio_client")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_flags_default_to_localhost_and_honour_gradio_variables(monkeypatch):
    monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    monkeypatch.delenv("GRADIO_SERVER_PORT", raising=False)
    args = app.build_parser().parse_args([])
    assert (args.host, args.port) == ("127.0.0.1", 7860)
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")
    monkeypatch.setenv("GRADIO_SERVER_PORT", "9001")
    args = app.build_parser().parse_args(["--resolution", "512"])
    assert (args.host, args.port, args.resolution) == ("0.0.0.0", 9001, 512)
    assert app.build_parser().parse_args(["--port", "7000"]).port == 7000


def test_missing_weights_offline_exit_non_zero_with_the_engines_message(tmp_path, monkeypatch, capsys):
    for var in ("FASTVLM_VISION", "FASTVLM_LLM", "FASTVLM_MODELS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache

    def launch(*args, **kwargs):  # the real one serves until stopped: a regression would hang the run
        raise AssertionError("the page was served with no weights and downloads off")

    monkeypatch.setattr("ui.launch", launch)
    assert app.main(["--models", str(tmp_path), "--no-download"]) == 2
    err = capsys.readouterr().err
    assert "FastVLM weights are not available" in err and "--models DIR" in err


@pytest.fixture(scope="module")
def client(tiny_engine):
    from gradio_client import Client

    from ui import AppSettings

    demo = create_app(tiny_engine, AppSettings(max_new_tokens=16, snapshot_max_new_tokens=16))
    _, url, _ = launch(demo, "127.0.0.1", free_port(), block=False)
    yield lambda: Client(url, verbose=False)
    demo.close()


@pytest.fixture(scope="module")
def photo(tmp_path_factory):
    path = tmp_path_factory.mktemp("img") / "photo.png"
    Image.new("RGB", (96, 64), (20, 160, 90)).save(path)
    return str(path)


def users(chat):
    return [m["content"][0]["text"] for m in chat if m["role"] == "user"]


def test_image_tab_answers_follow_ups_and_keeps_each_client_apart(client, photo):
    from gradio_client import handle_file

    alice, bob = client(), client()
    chat, metrics, _ = alice.predict(handle_file(photo), "alpha?", 128, 16, api_name="/ask_image")
    assert users(chat) == ["alpha?"] and "TTFT" in metrics and "tokens" in metrics
    chat, metrics, _ = alice.predict(handle_file(photo), "", 128, 16, api_name="/ask_image")
    assert users(chat) == ["alpha?", "Describe the image."]
    assert "reused" in metrics  # the follow-up reused the KV cache of the first turn
    chat, _, _ = bob.predict(handle_file(photo), "bravo?", 128, 16, api_name="/ask_image")
    assert users(chat) == ["bravo?"]  # nothing of alice's conversation


def test_image_tab_reports_a_broken_upload_as_an_error(client, tmp_path):
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image at all")
    with pytest.raises(AppError, match="not an image"):
        client().predict(handle_file(str(broken)), "q", 128, 16, api_name="/ask_image")


def test_snapshot_tab_answers_a_frame_with_a_ttft_readout(client, photo):
    from gradio_client import handle_file

    c = client()
    c.predict(handle_file(photo), api_name="/prepare_snapshot")
    answer, readout = c.predict(handle_file(photo), "What am I holding?", api_name="/analyse_snapshot")
    assert isinstance(answer, str)
    assert "TTFT" in readout and " ms · total " in readout and "…" not in readout


def test_launch_trusts_no_proxy_and_leaves_the_process_setting_alone(tiny_engine, monkeypatch):
    """uvicorn must not take X-Forwarded-For from anyone (the API judges it), without changing FORWARDED_ALLOW_IPS
    for anything else in the process (another server, a test) once the app has started."""
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "10.1.2.3")
    demo = create_app(tiny_engine)
    launch(demo, "127.0.0.1", free_port(), block=False)
    try:
        assert demo.server.config.forwarded_allow_ips == ""
        assert os.environ["FORWARDED_ALLOW_IPS"] == "10.1.2.3"
    finally:
        demo.close()


def test_the_voice_line_is_not_deflated(tmp_path):
    """A browser offers permessage-deflate on every WebSocket; the voice line's PCM must go as it is (deflating it
    cost the event loop ~75 ms per 13 s of sound, for ~14 % fewer bytes)."""
    from websockets.sync.client import connect

    from tests.unit.ui.test_ui_voice import make_engine, make_models

    demo = create_app(make_engine(), speech=make_models(tmp_path))
    _, url, _ = launch(demo, "127.0.0.1", free_port(), block=False)
    try:
        with connect(url.replace("http", "ws", 1).rstrip("/") + "/voice/link", open_timeout=10) as ws:
            assert ws.protocol.extensions == []  # websockets' client offers permessage-deflate, as browsers do
    finally:
        demo.close()


AVX2_ONLY = frozenset({"avx2", "fma", "f16c"})  # AMD Zen 3, Intel desktop CPUs
AVX512_BF16 = frozenset({"avx2", "fma", "avx512f", "avx512_bf16"})  # the CPUs the speed targets were set on


@pytest.mark.parametrize("resolution, flags, warned", [
    (1024, AVX2_ONLY, True),
    (512, AVX2_ONLY, False),  # the size the warning asks for
    (1024, AVX512_BF16, False),
    (1024, frozenset({"sse4_2"}), False),  # no AVX2 at all: doctor's AVX2 warning, not this one
])
def test_the_app_warns_at_start_up_of_1024_px_on_a_cpu_without_avx512(resolution, flags, warned):
    warning = slow_cpu_warning(resolution, flags)
    assert (warning is not None) == warned
    if warned:
        assert "AVX-512" in warning and "--resolution 512" in warning and "doctor" in warning


@pytest.mark.parametrize("var", ["GRADIO_SERVER_PORT", "FASTVLM_RESOLUTION", "FASTVLM_THREADS"])
def test_a_number_variable_that_is_not_a_number_is_one_line_and_exit_2_even_for_help(monkeypatch, capsys, var):
    monkeypatch.setenv(var, "abc")
    with pytest.raises(SystemExit) as done:
        app.main(["--help"])
    assert done.value.code == 2 and f"{var}='abc' is not a whole number" in capsys.readouterr().err  # was a
    # ValueError traceback


@pytest.mark.parametrize(("flags", "says"), [(["--trusted-proxies", "proxy.local"], "proxy.local"),
                                             (["--backend", "http://127.0.0.1:1"], "127.0.0.1:1")])
def test_a_bad_proxy_or_an_unreachable_backend_is_one_line_before_any_model_loads(tmp_path, capsys, flags, says):
    assert app.main(["--models", str(tmp_path / "none"), "--no-download", "--no-voice", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and "Traceback" not in err  # were tracebacks (the proxy's
    # after the model had loaded)


def test_a_port_in_use_is_one_line_and_exit_2(tiny_models, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert app.main(["--vision", str(tiny_models.vision), "--llm", str(tiny_models.llm), "--no-voice", "--no-mcp",
                         "--port", port]) == 2
    assert "error: " in capsys.readouterr().err


@pytest.mark.parametrize(("value", "on"), [("1", True), ("TRUE", True), ("yes", True), ("0", False), ("false", False),
                                           ("Off", False), ("", True)])
def test_a_yes_no_variable_reads_the_usual_spellings(monkeypatch, value, on):
    monkeypatch.setenv("FASTVLM_MCP", value)  # on by default
    monkeypatch.setenv("FASTVLM_NO_VOICE", value or "0")
    args = app.build_parser().parse_args([])
    assert args.mcp is on and args.no_voice is (on and value != "")  # "false" was on: only "" and "0" read off


def test_a_yes_no_variable_that_is_neither_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setenv("FASTVLM_PROTECT_PAGE", "maybe")
    with pytest.raises(SystemExit) as done:
        app.build_parser()
    assert done.value.code == 2 and "FASTVLM_PROTECT_PAGE='maybe'" in capsys.readouterr().err


@pytest.mark.parametrize(("value", "taken"), [("", ""), ("/vlm", "/vlm"), ("/vlm/", "/vlm"), ("/a/b/", "/a/b"),
                                              ("https://example.com/vlm/", "https://example.com/vlm")])
def test_the_root_path_is_taken_as_gradio_wants_it_from_the_flag_or_gradios_variable(monkeypatch, value, taken):
    monkeypatch.delenv("GRADIO_ROOT_PATH", raising=False)
    assert app.build_parser().parse_args(["--root-path", value]).root_path == taken
    monkeypatch.setenv("GRADIO_ROOT_PATH", value)
    assert app.build_parser().parse_args([]).root_path == taken


@pytest.mark.parametrize("value", ["vlm", "/a b", "//vlm", "/vlm?x=1"])
def test_a_root_path_that_is_not_a_path_is_one_line_and_exit_2(monkeypatch, capsys, value):
    monkeypatch.setenv("GRADIO_ROOT_PATH", value)
    with pytest.raises(SystemExit) as done:
        app.build_parser().parse_args([])
    err = capsys.readouterr().err
    assert done.value.code == 2 and f"--root-path {value!r}" in err and "like /vlm" in err


def test_on_a_space_visitors_are_told_apart_by_the_address_its_proxy_forwards(monkeypatch):
    """A Space's container sees its proxy's private address as every request's peer: without believing the proxy,
    every visitor counted as that one address (one visitor's 3 API places and 8 voice lines were everyone's)."""
    from fastvlm.api.security import counted_client
    from tests.unit.api.test_gate_per_client import _connection

    monkeypatch.delenv("FASTVLM_TRUSTED_PROXIES", raising=False)
    monkeypatch.setenv("SPACE_ID", "someone/fastvlm")
    settings = app._api_settings(app.build_parser().parse_args([]))
    seen = [counted_client(_connection("10.16.3.80", forwarded), settings)
            for forwarded in ("203.0.113.7", "198.51.100.9", "127.0.0.1, 203.0.113.7")]
    assert seen == ["203.0.113.7", "198.51.100.9", "203.0.113.7"]  # what a visitor writes before it is never read
    monkeypatch.setenv("FASTVLM_TRUSTED_PROXIES", "10.1.2.3")  # the Space's owner decides
    assert app.build_parser().parse_args([]).trusted_proxies == "10.1.2.3"
    monkeypatch.delenv("FASTVLM_TRUSTED_PROXIES")
    monkeypatch.delenv("SPACE_ID")  # anywhere else nothing is believed unless told
    settings = app._api_settings(app.build_parser().parse_args([]))
    assert counted_client(_connection("10.16.3.80", "203.0.113.7"), settings) == "10.16.3.80"


class _Loaded:
    """What the replaced `_build_engine` returns: an engine that only describes itself and closes."""

    def describe(self) -> dict:
        return {"model": "loaded"}

    def close(self) -> None:
        pass


def _replace_the_load(monkeypatch, found: bool):
    """app.py's weights lookup and engine build replaced: the lookups made (their download and look_only), the
    builds asked for (paths, report), and an event that lets a build finish."""
    from fastvlm.cli import main as cli
    from fastvlm.engine.events import ModelFileError

    lookups, builds, release = [], [], threading.Event()

    def model_paths(args, download=None, report=None, look_only=False):
        lookups.append({"download": download, "look_only": look_only})
        if not found:
            raise ModelFileError("no weights on this machine")
        return SimpleNamespace(vision=Path("/m/vision.onnx"), llm=Path("/m/llm.gguf"))

    def build(args, paths, report):
        builds.append((paths, report))
        release.wait(10)
        return _Loaded()

    monkeypatch.setattr(cli, "model_paths", model_paths)
    monkeypatch.setattr(app, "_build_engine", build)
    monkeypatch.delenv("FASTVLM_RESOLUTION", raising=False)
    return lookups, builds, release


@pytest.mark.parametrize(("flags", "resolution", "look_only"), [([], 1024, True), (["--resolution", "512"], 512, True),
                                                                 (["--no-download"], 1024, False)])
def test_the_page_is_served_while_the_model_loads_and_the_header_shows_what_will_load(monkeypatch, flags, resolution,
                                                                                     look_only):
    lookups, builds, release = _replace_the_load(monkeypatch, found=True)
    loader = app.load_engine(app.build_parser().parse_args(["--no-voice", *flags]))
    try:
        info = loader.describe()
        assert info["state"] == "loading" and info["resolution"] == resolution
        assert (info["vision"], info["llm"]) == ("/m/vision.onnx", "/m/llm.gguf")
        # the first look never downloads (the page would wait for it); with downloads off it may convert now
        assert [(s["download"], s["look_only"]) for s in lookups] == [(False, look_only)]
        release.set()
        assert isinstance(loader.ready(10), _Loaded) and builds[0][0].vision == Path("/m/vision.onnx")
    finally:
        release.set()
        loader.close()


def test_weights_not_here_are_fetched_in_the_background_with_the_header_hearing_each_stage(monkeypatch):
    lookups, builds, release = _replace_the_load(monkeypatch, found=False)
    with pytest.raises(ModelFileError):  # downloads off: said at once, before any page is served
        app.load_engine(app.build_parser().parse_args(["--no-voice", "--no-download"]))
    loader = app.load_engine(app.build_parser().parse_args(["--no-voice"]))
    try:
        assert (loader.describe()["vision"], loader.describe()["state"]) == ("", "loading")
        release.set()
        loader.ready(10)
        assert builds == [(None, loader.report)]
    finally:
        release.set()
        loader.close()


def test_the_build_resolves_weights_not_yet_found_with_the_loaders_report(monkeypatch):
    from fastvlm.cli import main as cli

    looked, configured = [], []

    def model_paths(args, download=None, report=None, look_only=False):
        looked.append(report)
        return SimpleNamespace(vision=Path("/m/vision.onnx"))

    def engine_config(args, paths):
        configured.append(paths)
        raise RuntimeError("stop before loading")

    monkeypatch.setattr(cli, "model_paths", model_paths)
    monkeypatch.setattr(cli, "engine_config", engine_config)
    args = app.build_parser().parse_args(["--no-voice"])
    stages = []
    for paths in (None, SimpleNamespace(vision=Path("/here/vision.onnx"))):
        with pytest.raises(RuntimeError, match="stop before loading"):
            app._build_engine(args, paths, stages.append)
    assert looked == [stages.append]  # only the build without paths looked, and a download's stages reach the header
    assert [p.vision for p in configured] == [Path("/m/vision.onnx"), Path("/here/vision.onnx")]


@pytest.mark.parametrize(("argv", "env", "turns"), [([], None, 3), (["--voice-turns", "0"], None, 0),
                                                    ([], "1", 1), (["--voice-turns", "2"], "0", 2)])
def test_the_voice_conversations_turns_reach_the_tab_from_the_flag_or_its_variable(monkeypatch, argv, env, turns):
    import ui

    if env is None:
        monkeypatch.delenv("FASTVLM_VOICE_TURNS", raising=False)
    else:
        monkeypatch.setenv("FASTVLM_VOICE_TURNS", env)
    built = {}
    monkeypatch.setattr(app, "load_engine", lambda args: SimpleNamespace(close=lambda: None))
    monkeypatch.setattr(app, "served_routes", lambda engine, args, settings: ((), None))
    monkeypatch.setattr(ui, "create_app", lambda engine, settings, speech, api: built.setdefault("tab", settings))
    monkeypatch.setattr(ui, "launch", lambda *a, **k: None)
    assert app.main(["--no-voice", "--no-mcp", *argv]) == 0
    assert built["tab"].voice_history_turns == turns


@pytest.mark.parametrize("value", ["-1", "two", "1.5"])
def test_a_voice_turns_value_that_is_not_a_count_is_one_line_and_exit_2(capsys, value):
    with pytest.raises(SystemExit) as done:
        app.build_parser().parse_args(["--voice-turns", value])
    assert done.value.code == 2 and f"{value!r} is not a whole number of turns" in capsys.readouterr().err


@pytest.mark.parametrize("turns, flags, warned", [
    (3, AVX2_ONLY, True),
    (1, AVX2_ONLY, True),
    (0, AVX2_ONLY, False),  # no conversation: nothing is prefilled again
    (3, AVX512_BF16, False),
])
def test_the_app_warns_at_start_up_of_a_voice_conversation_on_a_cpu_without_avx512(turns, flags, warned):
    warning = slow_voice_warning(turns, flags)
    assert (warning is not None) == warned
    if warned:
        assert f"{turns} earlier turn(s)" in warning and "--voice-turns" in warning
