"""Scoring for each task, as pure functions of predictions and ground truth.

A prediction of `None` stands for a failed request (the engine raised): it is always wrong.

- POPE: the answer's first word decides (yes/no, any case, surrounding punctuation stripped);
  anything else ("Not sure", "I don't know", "") is *unparsed*: reported, counted wrong,
  never guessed. Positive class = "yes".
- TextVQA: VQA accuracy with the official VQA normalization (see `normalize_vqa`), averaged
  over the 10 leave-one-out subsets of the human answers: min(#matches / 3, 1).
- GQA: exact match after lowercasing and removing punctuation and articles.
- OCRBench: OCRBench's own rule: an item scores 1 when some answer (lowercased, stripped,
  newlines as spaces) is a substring of the prediction (likewise); for Handwritten Mathematical
  Expression Recognition all spaces are removed instead and case is kept (LaTeX is case-sensitive).
"""

from __future__ import annotations

import re
import string
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

# ---- POPE -------------------------------------------------------------------------------------


def parse_yes_no(text: str | None) -> str | None:
    """"yes" / "no" from the answer's first word, else None."""
    words = (text or "").split()
    if not words:
        return None
    first = words[0].strip(string.punctuation).lower()
    return first if first in ("yes", "no") else None


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def pope_metrics(predictions: Sequence[str | None], labels: Sequence[str]) -> dict[str, Any]:
    """Accuracy, precision, recall, F1 (positive = yes), yes-ratio and the unparsed count."""
    parsed = [parse_yes_no(p) for p in predictions]
    pairs = list(zip(parsed, labels, strict=True))
    tp = sum(p == "yes" and y == "yes" for p, y in pairs)
    fp = sum(p == "yes" and y == "no" for p, y in pairs)
    tn = sum(p == "no" and y == "no" for p, y in pairs)
    fn = sum(p == "no" and y == "yes" for p, y in pairs)
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, sum(y == "yes" for y in labels))  # unparsed answers to "yes" items are misses
    return {
        "n": len(pairs),
        "accuracy": _ratio(tp + tn, len(pairs)),
        "precision": precision,
        "recall": recall,
        "f1": _ratio(2 * precision * recall, precision + recall),
        "yes_ratio": _ratio(tp + fp, len(pairs)),
        "unparsed": sum(p is None and pred is not None for p, pred in zip(parsed, predictions)),
        "tp": tp, "fp": fp, "tn": tn, "fn": fn,
    }


# ---- VQA normalization (TextVQA) --------------------------------------------------------------

_PUNCTUATION = ';/[]"{}()=+\\_-><@`,?!'  # the official list: no apostrophe, periods handled apart
_DIGIT_COMMA_DIGIT = re.compile(r"\d,\d")
_PERIOD_NOT_DECIMAL = re.compile(r"\.(?!\d)")
_NUMBER_WORDS = {w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine ten".split())}
_NUMBER_WORDS["none"] = "0"
_ARTICLES = {"a", "an", "the"}


def _contractions() -> dict[str, str]:
    """Apostrophe-less spellings -> the spelling with apostrophes; words that are also
    ordinary words without one (its, ill, well, were, wed, whore, hell, shell, id, lets) are left alone."""
    negated = ("ain aren can couldn didn doesn don hadn hasn haven isn mightn mustn needn shan shouldn "
               "wasn weren won wouldn")
    table = {w + "t": w + "'t" for w in negated.split()}
    table.update({w + "tve": w + "'t've" for w in "couldn mightn mustn shouldn wouldn".split()})
    table.update({w + "ve": w + "'ve" for w in "could might must should would i you we they who what where".split()})
    table.update({w + "ll": w + "'ll" for w in "you they it that there what who".split()})
    table.update({w + "re": w + "'re" for w in "you they what why".split()})
    table.update({w + "d": w + "'d" for w in "you they it that there who".split()})
    table.update({w + "s": w + "'s" for w in "he she that there what where who how when why".split()})
    table.update({"im": "i'm", "yall": "y'all", "oclock": "o'clock", "maam": "ma'am", "twas": "'twas"})
    return table


_CONTRACTIONS = _contractions()


def _strip_punctuation(text: str) -> str:
    # A mark touching a space, or any digit,digit in the answer: drop it; else it separates words.
    digit_comma = _DIGIT_COMMA_DIGIT.search(text) is not None
    out = text
    for mark in _PUNCTUATION:
        glued = (mark + " ") in text or (" " + mark) in text or digit_comma
        out = out.replace(mark, "" if glued else " ")
    return _PERIOD_NOT_DECIMAL.sub("", out)  # "3.5" keeps its period, "cat." loses it


def normalize_vqa(text: str) -> str:
    """The official VQA answer normalization: punctuation, number words -> digits, articles, contractions."""
    text = _strip_punctuation(text.replace("\n", " ").replace("\t", " ").strip())
    words = (_NUMBER_WORDS.get(w, w) for w in text.lower().split())
    return " ".join(_CONTRACTIONS.get(w, w) for w in words if w not in _ARTICLES)


def vqa_accuracy(prediction: str | None, answers: Sequence[str]) -> float:
    """Mean over leave-one-out subsets of the human answers of min(#matches / 3, 1).

    With 10 answers of which n match: 1 -> 0.3, 2 -> 0.6, 3 -> 0.9, 4+ -> 1.0.
    A single reference answer is scored by exact match (leave-one-out would leave nothing).
    """
    if prediction is None:
        return 0.0
    pred = normalize_vqa(prediction)
    matches = [normalize_vqa(a) == pred for a in answers]
    if len(matches) == 1:
        return float(matches[0])
    total = sum(matches)
    return sum(min((total - m) / 3, 1.0) for m in matches) / len(matches)


# ---- GQA --------------------------------------------------------------------------------------

_PUNCT_TABLE = str.maketrans("", "", string.punctuation)


def normalize_gqa(text: str) -> str:
    words = text.lower().translate(_PUNCT_TABLE).split()
    return " ".join(w for w in words if w not in _ARTICLES)


def gqa_correct(prediction: str | None, answers: Sequence[str]) -> bool:
    return prediction is not None and normalize_gqa(prediction) in {normalize_gqa(a) for a in answers}


# ---- OCRBench ---------------------------------------------------------------------------------

HMER = "Handwritten Mathematical Expression Recognition"
OCRBENCH_GROUPS: dict[str, tuple[str, ...]] = {
    "Text Recognition": (
        "Regular Text Recognition", "Irregular Text Recognition", "Artistic Text Recognition",
        "Handwriting Recognition", "Digit String Recognition", "Non-Semantic Text Recognition",
    ),
    "Scene Text-Centric VQA": ("Scene Text-centric VQA",),
    "Doc-Oriented VQA": ("Doc-oriented VQA",),
    "Key Information Extraction": ("Key Information Extraction",),
    HMER: (HMER,),
}


def ocrbench_correct(prediction: str | None, answers: Sequence[str], category: str) -> bool:
    if prediction is None:
        return False
    if category.lower() == HMER.lower():
        def norm(s: str) -> str:
            return s.strip().replace("\n", " ").replace(" ", "")
    else:
        def norm(s: str) -> str:
            return s.lower().strip().replace("\n", " ")
    pred = norm(prediction)
    return any(a and a in pred for a in map(norm, answers))


def ocrbench_scores(predictions: Sequence[str | None], answers: Sequence[Sequence[str]],
                    categories: Sequence[str]) -> dict[str, Any]:
    """Correct counts per category, per standard group and in total (out of `n`)."""
    by_category: dict[str, int] = defaultdict(int)
    for pred, ans, cat in zip(predictions, answers, categories, strict=True):
        by_category[cat] += ocrbench_correct(pred, ans, cat)
    lowered = {c.lower(): v for c, v in by_category.items()}
    groups = {g: sum(lowered.get(c.lower(), 0) for c in members) for g, members in OCRBENCH_GROUPS.items()}
    return {"n": len(categories), "total": sum(by_category.values()), "groups": groups,
            "by_category": dict(by_category)}
