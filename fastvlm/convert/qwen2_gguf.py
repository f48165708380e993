"""What a `qwen2` GGUF records besides its tensors: sizes, the ChatML chat template and the byte-level BPE
vocabulary (`Vocab`), with the Qwen2 special tokens. The converter writes it; the synthetic models reuse it."""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Vocab:
    """A tokenizer as GGUF stores it: token texts, token types, merges, and the special ids."""

    tokens: tuple[str, ...]
    types: tuple[int, ...]
    merges: tuple[str, ...]  # "a b": the two token texts merged, best first
    endoftext: int
    im_start: int
    im_end: int


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
