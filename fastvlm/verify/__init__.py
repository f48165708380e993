"""Is the output right? `parity`/`compare`/`reference` (our engine vs transformers' FastVLM), `quant_check` (a
GGUF type against BF16), `doctor` (`python -m fastvlm doctor`: an install's facts and checks).
"""
