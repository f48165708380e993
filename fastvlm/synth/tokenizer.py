"""A real byte-level BPE tokenizer for the synthetic models, learned from a small embedded text.

The vocabulary is GPT-2 style (what llama.cpp calls `gpt2` with the `qwen2`
pre-tokenizer): the 256 byte tokens, written through GPT-2's byte-to-unicode
map, then one token per learned merge, then the Qwen2 special tokens. Any
byte string can be tokenized (every byte has a token), and ordinary English
falls into multi-byte tokens thanks to the merges.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

from fastvlm.convert._deps import require
from fastvlm.convert.qwen2_gguf import (
    CHAT_TEMPLATE,
    CONTROL,
    ENDOFTEXT,
    IM_END,
    IM_START,
    NORMAL,
    QWEN2_SPECIAL_BASE,
    UNUSED,
    Vocab,
)
from fastvlm.convert.vocab import IMAGE_TOKEN, QWEN2_SPLIT

# The Qwen2 pre-tokenizer, with stdlib stand-ins for \p{L} and \p{N} (exact for ASCII text).
_LETTERS = r"[^\W\d_]+"
_PRETOKENIZE = re.compile(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
    rf"|(?:[^\r\n\w]|_)?{_LETTERS}"
    r"|\d"
    r"| ?(?:[^\s\w]|_)+[\r\n]*"
    r"|\s*[\r\n]+"
    r"|\s+(?!\S)"
    r"|\s+"
)

CORPUS = """\
The image shows a small brown dog sitting on a green lawn in front of a white house. \
The dog is looking at the camera, and there is a red ball next to its front paws. \
In the background there are tall trees, a blue sky and a few white clouds. \
A woman is standing near the door of the house, holding a cup of coffee in her right hand. \
This picture was taken on a sunny day in the summer, and the light comes from the left side.

A person is riding a bicycle along a street in the city. There are cars parked on both sides \
of the street, and the buildings are made of red brick. The man is wearing a black jacket, \
blue jeans and a white helmet. On the right there is a shop with a large window, and people \
are walking on the sidewalk. The photo looks like it was taken in the morning.

The chart shows the number of visitors for each month of the year. The values are highest \
in the summer and lowest in the winter. The title of the chart is written at the top, and \
the labels of the months are written along the bottom. There is a legend in the upper right \
corner that explains the colors of the bars.

On the table there is a plate with two slices of bread, a bowl of fruit and a glass of water. \
The fruit in the bowl includes apples, bananas and oranges. The table is made of wood and it \
stands next to a window with white curtains. A cat is sleeping on a chair beside the table.

The text in the image reads: Welcome to the park. Please keep the grass clean and do not feed \
the birds. The sign is painted in green and white, and it stands at the entrance of the park \
near a large old tree. Children are playing on the grass, and their parents are sitting on \
benches in the shade of the trees.

What is in this picture? It is a photo of a kitchen with white cabinets, a silver fridge and \
a window above the sink. There are plants on the window and the walls are painted light \
yellow. Can you describe the colors? The main colors are white, yellow, green and silver.

Two people are sitting at a desk in an office, looking at a computer screen. One of them is \
pointing at a number on the screen while the other is writing in a notebook. There are papers, \
a phone and a small plant on the desk, and a large map of the world is hanging on the wall \
behind them. The room is bright because of the windows on the left.

A train is arriving at a station in the evening. The platform is crowded with travelers carrying \
bags and suitcases, and a clock above the entrance shows a quarter past seven. The lights of the \
station are reflected on the wet ground, because it has been raining. In the distance you can see \
mountains covered with snow and a few houses with their lights turned on.

This is a screenshot of a web page. At the top there is a menu with five buttons, and below it \
there is a search box. The main part of the page shows a list of products with their prices, \
pictures and short descriptions. The first product is a pair of running shoes that costs forty \
dollars, and the second product is a backpack that costs twenty five dollars.
"""


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from each byte to a printable unicode character."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


def pretokenize(text: str) -> list[str]:
    return _PRETOKENIZE.findall(text)


def _to_symbols(word: str) -> tuple[str, ...]:
    table = bytes_to_unicode()
    return tuple(table[b] for b in word.encode("utf-8"))


def train_bpe(text: str, n_merges: int, min_count: int = 2) -> list[tuple[str, str]]:
    """Learn up to `n_merges` merges, most frequent pair first; ties go to the smaller pair (deterministic)."""
    words = {_to_symbols(w): c for w, c in Counter(pretokenize(text)).items()}
    merges: list[tuple[str, str]] = []
    while len(merges) < n_merges:
        pairs: Counter[tuple[str, str]] = Counter()
        for syms, count in words.items():
            for pair in zip(syms, syms[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[best] < min_count:
            break
        merges.append(best)
        words = {_merge_word(syms, best): c for syms, c in words.items()}
    return merges


def _merge_word(syms: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    out: list[str] = []
    i = 0
    while i < len(syms):
        if i + 1 < len(syms) and (syms[i], syms[i + 1]) == pair:
            out.append(syms[i] + syms[i + 1])
            i += 2
        else:
            out.append(syms[i])
            i += 1
    return tuple(out)


def encode(text: str, vocab: Vocab) -> list[int]:
    """Reference tokenization of plain text (no special tokens): pre-tokenize, then merge by rank."""
    ranks = {tuple(m.split(" ")): i for i, m in enumerate(vocab.merges)}
    ids = {t: i for i, t in enumerate(vocab.tokens)}
    out: list[int] = []
    for word in pretokenize(text):
        syms = _to_symbols(word)
        while len(syms) > 1:
            best = min(zip(syms, syms[1:]), key=lambda p: ranks.get(p, len(ranks)))
            if best not in ranks:
                break
            syms = _merge_word(syms, best)
        out += [ids[s] for s in syms]
    return out


def build_vocab(n_merges: int = 400, vocab_size: int | None = None) -> Vocab:
    """Byte tokens, learned merges, then the specials.

    With `vocab_size` (e.g. Qwen2's 151936) the specials sit at their real Qwen2
    ids 151643..151645: the gap before them is filled with normal tokens that
    decode to " w<N>" (never produced by tokenizing, but visible when sampled)
    and the slots after them with unused `[PAD<N>]` tokens, as Qwen2 GGUFs have.
    """
    merges = train_bpe(CORPUS, n_merges)
    tokens = [bytes_to_unicode()[b] for b in range(256)] + [a + b for a, b in merges]
    types = [NORMAL] * len(tokens)
    if vocab_size is not None:
        if vocab_size < QWEN2_SPECIAL_BASE + 3 or len(tokens) > QWEN2_SPECIAL_BASE:
            raise ValueError(f"vocab_size {vocab_size} leaves no room for Qwen2's special ids")
        space = bytes_to_unicode()[ord(" ")]
        tokens += [f"{space}w{i}" for i in range(len(tokens), QWEN2_SPECIAL_BASE)]
        types += [NORMAL] * (QWEN2_SPECIAL_BASE - len(types))
    base = len(tokens)
    tokens += [ENDOFTEXT, IM_START, IM_END]
    types += [CONTROL] * 3
    if vocab_size is not None:
        tokens += [f"[PAD{i}]" for i in range(len(tokens), vocab_size)]
        types += [UNUSED] * (vocab_size - len(types))
    if len(set(tokens)) != len(tokens):
        raise AssertionError("token texts must be unique")
    return Vocab(tuple(tokens), tuple(types), tuple(f"{a} {b}" for a, b in merges), base, base + 1, base + 2)


def synth_vocab_with_image(vocab_size: int | None = None) -> tuple[Vocab, int]:
    """The synthetic models' vocabulary plus `<image>` (CONTROL) right after the specials; (vocab, image id)."""
    v = build_vocab(vocab_size=vocab_size)
    image_id = v.im_end + 1
    if image_id < len(v.tokens):  # Qwen2-sized: an unused slot becomes <image>, as in FastVLM (151646)
        tokens = (*v.tokens[:image_id], IMAGE_TOKEN, *v.tokens[image_id + 1:])
        types = (*v.types[:image_id], CONTROL, *v.types[image_id + 1:])
    else:
        tokens, types = (*v.tokens, IMAGE_TOKEN), (*v.types, CONTROL)
    return Vocab(tokens, types, v.merges, v.endoftext, v.im_start, v.im_end), image_id


def write_tokenizer(vocab: Vocab, out_dir: Path) -> None:
    """Save `vocab` as a Hugging Face Qwen2-style tokenizer (tokenizer.json + tokenizer_config.json)."""
    tk = require("tokenizers")
    transformers = require("transformers")
    regular = {t: i for i, (t, k) in enumerate(zip(vocab.tokens, vocab.types)) if k == NORMAL}
    merges = [tuple(m.split(" ")) for m in vocab.merges]
    tok = tk.Tokenizer(tk.models.BPE(vocab=regular, merges=merges, byte_fallback=False))
    tok.normalizer = tk.normalizers.NFC()
    tok.pre_tokenizer = tk.pre_tokenizers.Sequence([
        tk.pre_tokenizers.Split(tk.Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = tk.decoders.ByteLevel()
    specials = [(i, t) for i, (t, k) in enumerate(zip(vocab.tokens, vocab.types)) if k == CONTROL]
    for i, t in specials:  # added in id order, so each lands on its own id
        if tok.get_vocab_size(with_added_tokens=True) != i:
            raise ValueError(f"special token {t!r} must follow the regular tokens directly (id {i})")
        tok.add_special_tokens([tk.AddedToken(t, special=True, normalized=False)])
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=IM_END, pad_token=ENDOFTEXT, chat_template=CHAT_TEMPLATE)
    fast.save_pretrained(str(out_dir))
