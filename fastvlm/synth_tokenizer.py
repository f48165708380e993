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
from dataclasses import dataclass
from functools import lru_cache

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
QWEN2_SPECIAL_BASE = 151643  # where Qwen2 puts <|endoftext|>, <|im_start|>, <|im_end|>

# gguf.TokenType values, repeated here so this module needs no third-party package.
NORMAL, CONTROL, UNUSED = 1, 3, 5

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

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


@dataclass(frozen=True)
class Vocab:
    """A tokenizer as GGUF stores it: token texts, token types, merges, and the special ids."""

    tokens: tuple[str, ...]
    types: tuple[int, ...]
    merges: tuple[str, ...]  # "a b": the two token texts merged, best first
    endoftext: int
    im_start: int
    im_end: int


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


@dataclass(frozen=True)
class Qwen2Sizes:
    """The hyper-parameters a `qwen2` GGUF records."""

    context: int
    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    rope_theta: float
    rms_eps: float


def add_qwen2_metadata(w, gguf, name: str, sizes: Qwen2Sizes, f16: bool, vocab: Vocab, chat_template: str,
                       file_type: int | None = None) -> None:
    """Everything but the tensors, for a GGUFWriter `w`: sizes, file type (`file_type`, else F16/F32 by
    `f16`), and the ChatML BPE tokenizer."""
    w.add_name(name)
    w.add_context_length(sizes.context)
    w.add_embedding_length(sizes.hidden)
    w.add_block_count(sizes.layers)
    w.add_feed_forward_length(sizes.intermediate)
    w.add_head_count(sizes.heads)
    w.add_head_count_kv(sizes.kv_heads)
    w.add_rope_freq_base(sizes.rope_theta)
    w.add_layer_norm_rms_eps(sizes.rms_eps)
    if file_type is None:
        file_type = gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32
    w.add_file_type(file_type)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(list(vocab.tokens))
    w.add_token_types(list(vocab.types))
    w.add_token_merges(list(vocab.merges))
    w.add_eos_token_id(vocab.im_end)  # generation ends at <|im_end|>
    w.add_bos_token_id(vocab.endoftext)
    w.add_pad_token_id(vocab.endoftext)
    w.add_add_bos_token(False)
    w.add_chat_template(chat_template)
