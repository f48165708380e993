"""Is llama.cpp's AMX path safe on this CPU? A probe in a child process, its cached verdict, and what it decides:
the engine's llama.cpp settings (`llama_settings`), the CPU class and `--quant auto`'s GGUF type (`auto_quant`)."""

from .policy import LlamaSettings, auto_quant, cpu_class, llama_settings
from .probe import Verdict, amx_verdict

__all__ = ["LlamaSettings", "Verdict", "amx_verdict", "auto_quant", "cpu_class", "llama_settings"]
