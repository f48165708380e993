"""Random-weight models for tests and benchmarks, nothing downloaded: `models` (tiny/0.5b vision ONNX + Qwen2
GGUF), `tokenizer` (a real byte-level BPE), `random_model` (checkpoints in transformers' or Apple's layout).

Uses `fastvlm.convert`; the converter never uses it.
"""
