"""The accuracy harness with a scripted fake engine and hand-scored tiny datasets."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from fastvlm.eval import cli
from fastvlm.eval.convert import convert
from fastvlm.eval.data import DataError, Item, load_items, write_items
from fastvlm.eval.metrics import (gqa_correct, normalize_vqa, ocrbench_correct, ocrbench_scores, parse_yes_no,
                                  pope_metrics, vqa_accuracy)
from fastvlm.eval.prompts import SHORT_ANSWER, build_prompt
from fastvlm.eval.runner import RunSettings, evaluate, read_results
from fastvlm.engine.events import Request, Result, Stats


class FakeEngine:
    """Scripted answers keyed by the bare question; an Exception value is raised."""

    def __init__(self, script: dict[str, str | Exception]):
        self.script = script
        self.calls: list[Request] = []
        self.closed = False

    def answer(self, request: Request) -> Result:
        self.calls.append(request)
        reply = self.script[request.question.removesuffix(SHORT_ANSWER)]
        if isinstance(reply, Exception):
            raise reply
        return Result(text=reply, stats=Stats(new_tokens=3))

    def close(self) -> None:
        self.closed = True


def write_dataset(tmp_path: Path, rows: list[dict], name: str = "data.jsonl") -> Path:
    for row in rows:
        (tmp_path / row["image"]).write_bytes(b"not really a jpeg")
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def run_eval(task: str, data: Path, engine: FakeEngine, tmp_path: Path, **kw) -> dict:
    settings = RunSettings(task=task, images_root=data.parent, max_new_tokens=kw.pop("max_new_tokens", 16))
    items = load_items(data, task)
    return evaluate(items, tmp_path / "out" / "results.jsonl", settings, lambda: engine, progress=False)


# ---- POPE -------------------------------------------------------------------------------------

def test_parse_yes_no_reads_only_a_first_word_yes_or_no():
    assert parse_yes_no("Yes.") == "yes"
    assert parse_yes_no("NO, there is none") == "no"
    assert parse_yes_no('"No"') == "no"
    for unparsed in ("Not sure", "I don't know", "know", "Nope", "", None, "There is no dog"):
        assert parse_yes_no(unparsed) is None, unparsed


POPE_ROWS = [  # (question, label, category, scripted answer)
    ("q1", "yes", "adversarial", "Yes."),  # TP
    ("q2", "yes", "adversarial", "yes, there is a dog"),  # TP
    ("q3", "yes", "adversarial", "No"),  # FN
    ("q4", "yes", "adversarial", "Not sure"),  # unparsed, a miss
    ("q5", "no", "random", "no."),  # TN
    ("q6", "no", "random", "YES"),  # FP
    ("q7", "no", "random", "I don't know"),  # unparsed, wrong
    ("q8", "no", "random", RuntimeError("decoder crashed")),  # failure, wrong
]


def test_pope_run_scores_unparsed_and_failures_as_wrong(tmp_path):
    data = write_dataset(tmp_path, [{"id": f"id{i}", "image": f"{i}.jpg", "question": q, "label": y, "category": c}
                                    for i, (q, y, c, _) in enumerate(POPE_ROWS)])
    engine = FakeEngine({q: a for q, _, _, a in POPE_ROWS})
    summary = run_eval("pope", data, engine, tmp_path)
    m = summary["metrics"]
    assert (m["tp"], m["fp"], m["tn"], m["fn"], m["unparsed"], summary["errors"]) == (2, 1, 1, 1, 2, 1)
    assert m["accuracy"] == pytest.approx(0.375)  # (TP 2 + TN 1) / 8
    assert m["precision"] == pytest.approx(0.6667, abs=1e-4)  # 2 / (2 + 1)
    assert m["recall"] == pytest.approx(0.5)  # 2 / 4 yes-labelled (the unparsed one is a miss)
    assert m["f1"] == pytest.approx(0.5714, abs=1e-4)  # 2 * 2/3 * 1/2 / (2/3 + 1/2) = 4/7
    assert m["yes_ratio"] == pytest.approx(0.375)  # 3 "yes" answers / 8
    adversarial, rnd = summary["by_category"]["adversarial"], summary["by_category"]["random"]
    assert adversarial["accuracy"] == pytest.approx(0.5)  # 2 TP / 4
    assert adversarial["f1"] == pytest.approx(0.6667, abs=1e-4)  # P = 2/2, R = 2/4: 2 * 1 * .5 / 1.5
    assert rnd["accuracy"] == pytest.approx(0.25)  # 1 TN / 4
    assert rnd["f1"] == 0.0  # no yes-labelled items, one FP
    # The prompt carries the short-answer suffix; decoding is greedy with the task's budget.
    assert engine.calls[0].question == "q1\nAnswer the question using a single word or phrase."
    assert engine.calls[0].options.temperature == 0.0 and engine.calls[0].options.max_new_tokens == 16
    assert engine.calls[0].image == str(tmp_path / "0.jpg")
    assert engine.closed
    saved = json.loads((tmp_path / "out" / "results.summary.json").read_text())
    assert saved["metrics"]["accuracy"] == pytest.approx(0.375)
    rows = read_results(tmp_path / "out" / "results.jsonl")
    assert rows["id7"]["prediction"] is None and rows["id7"]["error"] == "RuntimeError: decoder crashed"
    assert set(rows["id0"]) >= {"id", "question", "prediction", "answers", "time_s"}


def test_pope_metrics_without_any_yes_answer_is_zero_not_a_crash():
    m = pope_metrics(["no", "no"], ["yes", "no"])
    assert (m["precision"], m["recall"], m["f1"], m["accuracy"]) == (0.0, 0.0, 0.0, 0.5)


# ---- TextVQA ----------------------------------------------------------------------------------

@pytest.mark.parametrize("matches, expected", [
    (0, 0.0),
    (1, 0.3),  # leave out the match: 0/3 once; leave out another: 1/3 nine times -> 9/3 / 10
    (2, 0.6),  # 2 * (1/3) + 8 * (2/3) = 6, / 10
    (3, 0.9),  # 3 * (2/3) + 7 * 1 = 9, / 10
    (4, 1.0),  # 4 * 1 + 6 * 1 = 10, / 10
])
def test_vqa_accuracy_over_ten_leave_one_out_subsets(matches, expected):
    answers = ["2"] * matches + ["3"] * (10 - matches)
    assert vqa_accuracy("Two", answers) == pytest.approx(expected)


def test_vqa_normalization():
    assert normalize_vqa("Two") == normalize_vqa("2") == "2"
    assert normalize_vqa("the cat.") == "cat"
    assert normalize_vqa("dont") == normalize_vqa("don't") == "don't"
    assert normalize_vqa("3.5") == "3.5"  # a decimal point stays
    assert normalize_vqa("3,000") == "3000"  # digit,digit: commas vanish
    assert normalize_vqa("black-and-white") == "black and white"  # a glued mark separates words
    assert normalize_vqa("yes !") == "yes"  # a mark touching a space vanishes
    assert normalize_vqa("A\tDog") == "dog"
    assert vqa_accuracy("dont", ["don't"] * 3 + ["no"] * 7) == pytest.approx(0.9)
    assert vqa_accuracy(None, ["a"] * 10) == 0.0


def test_textvqa_run_averages_item_accuracies(tmp_path):
    data = write_dataset(tmp_path, [
        {"id": "a", "image": "a.jpg", "question": "how many?", "answers": ["2", "two"] + ["3"] * 8},
        {"id": "b", "image": "b.jpg", "question": "what sign?", "answers": ["stop sign"] * 10},
    ])
    engine = FakeEngine({"how many?": "Two", "what sign?": "The stop sign."})
    summary = run_eval("textvqa", data, engine, tmp_path)
    assert summary["metrics"]["accuracy"] == pytest.approx(0.8)  # (0.6 for 2 matches + 1.0) / 2


# ---- GQA --------------------------------------------------------------------------------------

def test_gqa_exact_match_after_normalization(tmp_path):
    qa = [("where?", "left", "Left."), ("what?", "table", "A table"), ("is it?", "yes", "no"),
          ("color?", "red", "dark red")]
    data = write_dataset(tmp_path, [{"id": q, "image": f"{i}.jpg", "question": q, "answers": [a]}
                                    for i, (q, a, _) in enumerate(qa)])
    summary = run_eval("gqa", data, FakeEngine({q: p for q, _, p in qa}), tmp_path)
    assert summary["metrics"]["accuracy"] == pytest.approx(0.5)  # left, table right; no, dark red wrong: 2 / 4
    assert not gqa_correct("red car", ["red"])  # exact, not substring
    assert not gqa_correct(None, ["red"])


# ---- OCRBench ---------------------------------------------------------------------------------

OCR_ROWS = [  # (category, answers, prediction, correct?)
    ("Regular Text Recognition", ["HELLO"], "The text says hello.", True),
    ("Digit String Recognition", ["12345"], "1234", False),
    ("Scene Text-centric VQA", ["coca cola", "coke"], "Coke", True),
    ("Doc-oriented VQA", ["$5.00"], "5.00", False),
    ("Key Information Extraction", ["ACME\nINC"], "acme inc", True),
    ("Handwritten Mathematical Expression Recognition", ["x ^ { 2 }"], "$x^{2}$", True),
    ("Handwritten Mathematical Expression Recognition", ["\\frac { a } { b }"], "\\frac{A}{b}", False),
]


def test_ocrbench_categories_groups_and_total(tmp_path):
    data = write_dataset(tmp_path, [{"id": str(i), "image": f"{i}.png", "question": f"q{i}", "answers": a,
                                     "category": c} for i, (c, a, _, _) in enumerate(OCR_ROWS)])
    engine = FakeEngine({f"q{i}": p for i, (_, _, p, _) in enumerate(OCR_ROWS)})
    summary = run_eval("ocrbench", data, engine, tmp_path)
    assert engine.calls[0].question == "q0"  # the bare question
    assert summary["metrics"]["total"] == 4 and summary["metrics"]["n"] == 7  # rows 0, 2, 4, 5
    assert summary["metrics"]["groups"] == {
        "Text Recognition": 1,  # regular 1 + digit string 0
        "Scene Text-Centric VQA": 1,
        "Doc-Oriented VQA": 0,
        "Key Information Extraction": 1,
        "Handwritten Mathematical Expression Recognition": 1,  # 1 of 2
    }
    assert summary["by_category"]["Handwritten Mathematical Expression Recognition"] == 1
    for c, a, p, correct in OCR_ROWS:
        assert ocrbench_correct(p, a, c) is correct, (c, p)
    assert ocrbench_scores([None], [["x"]], ["Doc-oriented VQA"])["total"] == 0


# ---- Resume, one pass -------------------------------------------------------------------------

def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_resume_answers_each_item_exactly_once(tmp_path, capsys):
    script: dict[str, str | Exception] = {"a?": "yes", "b?": ValueError("bad image"), "c?": "no", "d?": "Yes"}
    data = write_dataset(tmp_path, [{"id": q[0], "image": f"{q[0]}.jpg", "question": q, "label": "yes"}
                                    for q in script])
    engine, built = FakeEngine(script), []

    def factory(args):
        built.append(args)
        return engine

    out = tmp_path / "res.jsonl"
    argv = ["--task", "pope", "--data", str(data), "--out", str(out)]
    assert cli.run(_parse(argv + ["--limit", "2"]), factory) == 0
    assert [r.question.removesuffix(SHORT_ANSWER) for r in engine.calls] == ["a?", "b?"]
    assert cli.run(_parse(argv), factory) == 0  # the failed "b?" is not asked again
    assert cli.run(_parse(argv), factory) == 0  # nothing left: no engine is built
    assert [r.question.removesuffix(SHORT_ANSWER) for r in engine.calls] == ["a?", "b?", "c?", "d?"]
    assert len(built) == 2
    assert len(out.read_text().splitlines()) == 4
    summary = json.loads((tmp_path / "res.summary.json").read_text())
    assert summary["metrics"]["accuracy"] == pytest.approx(0.5)  # a, d right; b failed, c wrong: 2 / 4
    assert "accuracy" in capsys.readouterr().out


def test_resume_after_a_cut_short_write_and_refusals(tmp_path):
    data = write_dataset(tmp_path, [{"id": q, "image": f"{q}.jpg", "question": q, "label": "no"} for q in "xy"])
    out = tmp_path / "res.jsonl"
    good = {"id": "x", "question": "x", "prediction": "no", "answers": ["no"], "time_s": 0.1}
    out.write_text(json.dumps(good) + '\n{"id": "y", "predi')  # killed mid-row
    engine = FakeEngine({"y": "no"})
    assert cli.run(_parse(["--task", "pope", "--data", str(data), "--out", str(out)]), lambda a: engine) == 0
    assert len(engine.calls) == 1 and set(read_results(out)) == {"x", "y"}
    # Other settings than the file was made with: refused before any engine is built.
    argv = ["--task", "pope", "--data", str(data), "--out", str(out), "--max-tokens", "99"]
    assert cli.run(_parse(argv), lambda a: pytest.fail("engine built")) == 2
    # A missing image is refused before any engine is built, and nothing is recorded.
    (tmp_path / "y.jpg").unlink()
    argv = ["--task", "pope", "--data", str(data), "--out", str(tmp_path / "new.jsonl")]
    assert cli.run(_parse(argv), lambda a: pytest.fail("engine built")) == 2
    assert not (tmp_path / "new.jsonl").exists()


# ---- Data format and converters ---------------------------------------------------------------

def test_malformed_lines_are_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"id": "1", "image": "i.jpg", "question": "q", "answers": ["a"]})
    cases = {
        "{not json": "line 3: not valid JSON",
        json.dumps({"id": "2", "image": "i.jpg", "answers": ["a"]}): 'line 3: "question" must be',
        json.dumps({"id": "2", "image": "i.jpg", "question": "q", "answers": []}): 'line 3: "answers" must be',
        good: "line 3: id '1' already used on line 1",
    }
    for bad, message in cases.items():
        path.write_text(f"{good}\n\n{bad}\n")
        with pytest.raises(DataError, match=message):
            load_items(path)
    path.write_text(good + "\n")
    with pytest.raises(DataError, match='line 1: POPE items need "label"'):
        load_items(path, "pope")
    with pytest.raises(DataError, match="no such data file"):
        load_items(tmp_path / "missing.jsonl")


def test_prompts():
    assert build_prompt("gqa", "Is it red?") == "Is it red?\nAnswer the question using a single word or phrase."
    assert build_prompt("textvqa", "What brand?") == "What brand?" + SHORT_ANSWER
    assert build_prompt("pope", "Is it red?" + SHORT_ANSWER) == "Is it red?" + SHORT_ANSWER  # no second copy
    assert build_prompt("ocrbench", " What is written? ") == "What is written?"


def test_converters_on_hand_written_sources(tmp_path):
    pope = tmp_path / "coco_pope_adversarial.json"
    pope.write_text('{"question_id": 1, "image": "COCO_1.jpg", "text": "Is there a dog?", "label": "yes"}\n'
                    '{"question_id": 2, "image": "COCO_2.jpg", "text": "Is there a cat?", "label": "no"}\n')
    assert convert("pope", [pope]) == [
        Item("adversarial/1", "COCO_1.jpg", "Is there a dog?", ("yes",), "adversarial", "yes"),
        Item("adversarial/2", "COCO_2.jpg", "Is there a cat?", ("no",), "adversarial", "no"),
    ]
    gqa = tmp_path / "testdev_balanced_questions.json"
    gqa.write_text(json.dumps({"201": {"imageId": "n16", "question": "Is it sunny?", "answer": "yes",
                                       "types": {"structural": "verify", "semantic": "attr"}}}))
    assert convert("gqa", [gqa]) == [Item("201", "n16.jpg", "Is it sunny?", ("yes",), "verify")]
    tvqa = tmp_path / "TextVQA_0.5.1_val.json"
    tvqa.write_text(json.dumps({"dataset_name": "textvqa", "data": [
        {"question_id": 34602, "image_id": "003a8", "question": "what brand?", "answers": ["nokia"] * 10}]}))
    assert convert("textvqa", [tvqa]) == [Item("34602", "003a8.jpg", "what brand?", ("nokia",) * 10)]
    ocr = tmp_path / "OCRBench.json"
    ocr.write_text(json.dumps([
        {"id": 0, "image_path": "./IIIT5K/1.png", "question": "what is written?", "answers": "HELLO",
         "type": "Regular Text Recognition"},
        {"image_path": "./HME/2.jpg", "question": "latex?", "answers": ["x ^ 2", "x^2"],
         "type": "Handwritten Mathematical Expression Recognition"}]))
    items = convert("ocrbench", [ocr])
    assert items[0] == Item("0", "./IIIT5K/1.png", "what is written?", ("HELLO",), "Regular Text Recognition")
    assert items[1].id == "1" and items[1].answers == ("x ^ 2", "x^2")
    write_items(items, tmp_path / "ocr.jsonl")
    assert load_items(tmp_path / "ocr.jsonl", "ocrbench") == items  # round trip
    # The CLI wrapper; a broken source names the record.
    parser = argparse.ArgumentParser()
    cli.add_convert_arguments(parser)
    assert cli.run_convert(parser.parse_args(["--task", "pope", "--src", str(pope), "--out",
                                              str(tmp_path / "p.jsonl")])) == 0
    assert len(load_items(tmp_path / "p.jsonl", "pope")) == 2
    tvqa.write_text(json.dumps({"data": [{"question_id": 1, "question": "q", "answers": ["a"]}]}))
    with pytest.raises(DataError, match=r"data\[0\]: missing 'image_id'"):
        convert("textvqa", [tvqa])
    pope.write_text('{"question_id": 1, "image": "a.jpg", "text": "Is it?", "label": "yes"}\n\n{"question_id": 2,\n')
    with pytest.raises(DataError, match=r"coco_pope_adversarial.json line 3: not valid JSON"):  # counted from 1
        convert("pope", [pope])


def test_a_resume_with_another_model_is_refused(tmp_path):
    data = write_dataset(tmp_path, [{"id": q, "image": f"{q}.jpg", "question": q, "label": "no"} for q in "xy"])
    out = tmp_path / "res.jsonl"
    argv = ["--task", "pope", "--data", str(data), "--out", str(out)]
    model = {"vision": "a/vision.onnx", "vision_bytes": 1, "llm": "a/llm.gguf", "llm_bytes": 2, "quant": "auto",
             "vision_runtime": "auto", "cpu": "X"}
    engine = FakeEngine({"x": "no", "y": "no"})
    assert cli.run(_parse(argv + ["--limit", "1"]), lambda a: engine, model, {"threads": 2}) == 0
    summary = json.loads((tmp_path / "res.summary.json").read_text())
    assert summary["model"] == model and summary["machine"] == {"threads": 2}
    other = model | {"llm": "b/llm.gguf"}
    assert cli.run(_parse(argv), lambda a: pytest.fail("engine built"), other, {"threads": 2}) == 2
    assert cli.run(_parse(argv), lambda a: engine, model, {"threads": 2}) == 0  # the same model resumes
    assert [r.question.removesuffix(SHORT_ANSWER) for r in engine.calls] == ["x", "y"]
