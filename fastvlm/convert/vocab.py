"""The tokenizer between Hugging Face's `tokenizer.json` and the GGUF vocabulary.

A GGUF stores what `qwen2_gguf.Vocab` holds: token texts, token types and merges. Reading a
checkpoint's byte-level BPE `tokenizer.json` gives that (added special tokens become CONTROL, as
llama.cpp's own converter does; ids with no token up to the embedding's row count become unused
`[PAD<id>]`). `fastvlm.synth.tokenizer` writes one from a `Vocab` for random-weight checkpoints.
"""

from __future__ import annotations

import json
from pathlib import Path

from .qwen2_gguf import CHAT_TEMPLATE, CONTROL, ENDOFTEXT, IM_END, IM_START, NORMAL, UNUSED, Vocab

USER_DEFINED = 4  # gguf.TokenType.USER_DEFINED
IMAGE_TOKEN = "<image>"
# Qwen2's pre-tokenizer split, as its tokenizer.json writes it.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def _tokenizer_data(checkpoint: Path) -> tuple[Path, dict]:
    """tokenizer.json's content, or the same built from vocab.json + merges.txt + tokenizer_config.json
    (the slow-tokenizer files LLaVA-style repos such as Apple's ship)."""
    path = checkpoint / "tokenizer.json"
    if path.is_file():
        return path, json.loads(path.read_text(encoding="utf-8"))
    vocab, merges, config = checkpoint / "vocab.json", checkpoint / "merges.txt", checkpoint / "tokenizer_config.json"
    if not (vocab.is_file() and merges.is_file()):
        raise FileNotFoundError(f"{path} is missing, and so are vocab.json + merges.txt: the checkpoint needs "
                                "its tokenizer files")
    lines = [ln for ln in merges.read_text(encoding="utf-8").splitlines() if ln and not ln.startswith("#version")]
    added = json.loads(config.read_text(encoding="utf-8")).get("added_tokens_decoder", {}) if config.is_file() else {}
    tokens = [{"id": int(i), **t} for i, t in added.items()] or _added_tokens_json(checkpoint)
    return vocab, {"model": {"type": "BPE", "vocab": json.loads(vocab.read_text(encoding="utf-8")), "merges": lines},
                   "added_tokens": tokens}


def _added_tokens_json(checkpoint: Path) -> list[dict]:
    """added_tokens.json (content -> id) as tokenizer.json's added tokens; `<|...|>` tokens and those named in
    special_tokens_map.json are special."""
    path, special_map = checkpoint / "added_tokens.json", checkpoint / "special_tokens_map.json"
    if not path.is_file():
        return []
    specials: set[str] = set()
    if special_map.is_file():
        for v in json.loads(special_map.read_text(encoding="utf-8")).values():
            for item in v if isinstance(v, list) else [v]:
                specials.add(item["content"] if isinstance(item, dict) else item)
    return [{"id": int(i), "content": t, "special": t in specials or (t.startswith("<|") and t.endswith("|>"))}
            for t, i in json.loads(path.read_text(encoding="utf-8")).items()]


def read_vocab(checkpoint: Path, n_rows: int) -> Vocab:
    """The checkpoint's tokenizer as a GGUF vocabulary, padded to the embedding's `n_rows` tokens."""
    path, data = _tokenizer_data(Path(checkpoint))
    model = data.get("model", {})
    if model.get("type") != "BPE":
        raise ValueError(f"{path}: expected a byte-level BPE tokenizer (Qwen2), found {model.get('type')!r}")
    texts: dict[int, str] = {i: t for t, i in model["vocab"].items()}
    types = {i: NORMAL for i in texts}
    for added in data.get("added_tokens", []):
        texts[added["id"]] = added["content"]
        types[added["id"]] = CONTROL if added.get("special") else USER_DEFINED
    if max(texts) >= n_rows:
        raise ValueError(f"{path} has token id {max(texts)} but the embedding has only {n_rows} rows")
    tokens = [texts.get(i, f"[PAD{i}]") for i in range(n_rows)]
    kinds = [types.get(i, UNUSED) for i in range(n_rows)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    ids = {t: i for i, t in texts.items() if types[i] != NORMAL}
    missing = [t for t in (ENDOFTEXT, IM_START, IM_END) if t not in ids]
    if missing:
        raise ValueError(f"{path} lacks the Qwen2 special token(s) {', '.join(missing)}: not a Qwen2 tokenizer")
    return Vocab(tuple(tokens), tuple(kinds), tuple(merges), ids[ENDOFTEXT], ids[IM_START], ids[IM_END])


def read_chat_template(checkpoint: Path) -> str:
    """The checkpoint's chat template (chat_template.jinja or tokenizer_config.json), else Qwen2's ChatML."""
    checkpoint = Path(checkpoint)
    jinja = checkpoint / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    config = checkpoint / "tokenizer_config.json"
    if config.is_file():
        template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
        if isinstance(template, str):
            return template
    return CHAT_TEMPLATE


