"""`python -m fastvlm eval` and `eval-convert`'s own decisions: where results go by default, and the exit status of
a source that cannot be converted."""

import logging

from fastvlm.cli.main import build_parser
from fastvlm.eval import cli
from tests.unit.eval.test_eval import FakeEngine, write_dataset


def test_results_go_to_eval_results_named_after_the_task_and_data(tmp_path, monkeypatch, capsys):
    data = write_dataset(tmp_path, [{"id": "1", "image": "1.jpg", "question": "x", "label": "no"}], "pope-mini.jsonl")
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["eval", "--task", "pope", "--data", str(data)])
    assert cli.run(args, lambda a: FakeEngine({"x": "no"})) == 0
    out = tmp_path / "eval-results" / "pope-pope-mini.jsonl"
    assert len(out.read_text().splitlines()) == 1
    assert f"results: {cli.default_out('pope', data)}" in capsys.readouterr().out


def test_a_source_that_cannot_be_converted_exits_2_naming_the_record(tmp_path, caplog):
    source = tmp_path / "TextVQA_0.5.1_val.json"
    source.write_text('{"data": [{"question_id": 1, "question": "q", "answers": ["a"]}]}')
    out = tmp_path / "t.jsonl"
    args = build_parser().parse_args(["eval-convert", "--task", "textvqa", "--src", str(source), "--out", str(out)])
    with caplog.at_level(logging.ERROR):
        rc = cli.run_convert(args)
    assert rc == 2 and "missing 'image_id'" in caplog.text and not out.exists()
