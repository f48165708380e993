"""`python -m fastvlm`'s flags and environment (fastvlm/cli/main.py): what they resolve to, and `predict`'s output,
with the weights' lookup and the engine replaced."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from fastvlm.cli import main as cli
from fastvlm.engine.config import TRAINED_RESOLUTION, physical_cores
from fastvlm.engine.events import Done, FirstToken, ModelFileError, Stats, TextDelta

PATHS = SimpleNamespace(vision=Path("/m/vision.onnx"), llm=Path("/m/llm.gguf"),
                        sources={"vision": "here", "llm": "the Hub"})


def parse(*flags: str):
    return cli.build_parser().parse_args(["predict", "--image", "x.png", *flags])


@pytest.fixture
def looked(monkeypatch) -> list[dict]:
    """The keyword arguments of every weights lookup (`fastvlm.weights.resolve`), which finds PATHS."""
    import fastvlm.weights as weights

    calls = []

    def resolve(vision, llm, models, **kwargs):
        calls.append({"vision": vision, **kwargs})
        return PATHS

    monkeypatch.setattr(weights, "resolve", resolve)
    return calls


def test_resolution_and_threads_come_from_the_flag_the_environment_or_the_defaults(monkeypatch):
    monkeypatch.delenv("FASTVLM_RESOLUTION", raising=False)
    monkeypatch.delenv("FASTVLM_THREADS", raising=False)
    args = parse()
    assert (args.resolution, args.threads) == (None, physical_cores())  # None: the engine's trained size
    monkeypatch.setenv("FASTVLM_RESOLUTION", "512")
    monkeypatch.setenv("FASTVLM_THREADS", "3")
    assert (parse().resolution, parse().threads) == (512, 3)
    assert (parse("--resolution", "1024", "--threads", "1").resolution, parse("--threads", "1").threads) == (1024, 1)


def test_weights_are_downloaded_unless_told_not_to_and_a_vision_file_is_looked_up_as_given(looked):
    cli.model_paths(parse())
    cli.model_paths(parse("--no-download"))
    cli.model_paths(parse(), download=False)
    cli.model_paths(parse("--vision", "my.onnx"))
    assert [c["download"] for c in looked] == [True, False, False, True]
    assert [c["vision"] for c in looked] == [None, None, None, Path("my.onnx")]


def test_the_engine_config_takes_the_paths_given_or_looks_them_up_and_defaults_to_the_trained_size(monkeypatch,
                                                                                                   looked):
    import fastvlm.amx as amx

    monkeypatch.setattr(amx, "llama_settings", lambda: SimpleNamespace(extra_buffers=True, llama_notice=""))
    given = SimpleNamespace(vision=Path("/given/vision.onnx"), llm=Path("/given/llm.gguf"), sources={})
    config = cli.engine_config(parse(), given)
    assert not looked and (config.vision_path, config.resolution) == (given.vision, TRAINED_RESOLUTION)
    assert config.vision_precision == "auto" and not config.kv_f32
    config = cli.engine_config(parse("--resolution", "512"))
    assert len(looked) == 1 and (config.vision_path, config.resolution) == (PATHS.vision, 512)


class _Engine:
    """Streams "Hello world" with known timings."""

    config = SimpleNamespace(sources={"vision": "here"})

    def __init__(self):
        self.requests, self.closed = [], False

    def describe(self) -> dict:
        return {"llama_cpu": "zen4"}

    def stream(self, request):
        self.requests.append(request)
        yield FirstToken(6.5)
        yield TextDelta("Hello")
        yield TextDelta(" world")
        yield Done(Stats(preprocess_s=1.0, encode_s=2.0, prefill_s=3.0, ttft_s=6.5, decode_s=1.0, new_tokens=11))

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def engine(monkeypatch) -> _Engine:
    engine = _Engine()
    monkeypatch.setattr(cli, "load_engine", lambda args: engine)
    return engine


def test_predict_streams_the_answer_then_its_timings(engine, capsys):
    assert cli.main(["predict", "--image", "x.png", "--prompt", "What is it?", "--max-tokens", "9"]) == 0
    out, err = capsys.readouterr()
    assert out == "Hello world"
    assert "TTFT 6500 ms (preprocess 1000, encode 2000, prefill 3000) · decode 10.0 tok/s · 11 tokens" in err
    request = engine.requests[0]
    assert (request.question, request.options.max_new_tokens, engine.closed) == ("What is it?", 9, True)


def test_predict_json_prints_one_object_and_no_stream(engine, capsys):
    assert cli.main(["predict", "--image", "x.png", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["answer"] == "Hello world" and result["ttft_s"] == 6.5 and result["tokens_per_s"] == 10.0
    assert result["llama_cpu"] == "zen4" and result["sources"] == {"vision": "here"}


def test_download_says_where_each_file_came_from(looked, capsys):
    assert cli.main(["download", "--no-download"]) == 0
    assert capsys.readouterr().out == "vision: /m/vision.onnx\n  from here\nllm: /m/llm.gguf\n  from the Hub\n"
    assert looked[0]["download"] is False


@pytest.mark.parametrize("error", [ModelFileError("no weights in /m"), ValueError("--threads 0: give 1 or more")])
def test_a_missing_file_or_a_bad_setting_is_one_logged_line_and_exit_2(monkeypatch, caplog, error):
    def load_engine(args):
        raise error

    monkeypatch.setattr(cli, "load_engine", load_engine)
    assert cli.main(["predict", "--image", "x.png"]) == 2
    assert str(error) in caplog.text
