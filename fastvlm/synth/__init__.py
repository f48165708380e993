"""Random-weight models for tests and benchmarks, nothing downloaded: `models` (tiny/0.5b vision ONNX + Qwen2
GGUF), `tokenizer` (a real byte-level BPE), `random_model` (checkpoints in transformers' layout),
`apple_layout` (the same in Apple's layout, from `fastvlm.convert.manifest`).

Uses `fastvlm.convert`; the converter never uses it.
"""
