"""The installed llama.cpp moves to an older CPU: the tiny-model `predict` under qemu's Haswell (AVX2, no AVX-512).

A `-march=native` build made on an AVX-512 machine dies there by SIGILL (exit 132); requirements.txt's portable
build (`GGML_CPU_ALL_VARIANTS`, runtime dispatch) loads its `haswell` variant and answers. Debian's qemu-user 7.2
emulates AVX2 and rejects AVX-512, so this runs on any x86-64 machine; `.ci/run` installs it. About 7 s here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from tests.installed import ci_installs

QEMU = shutil.which("qemu-x86_64")
pytestmark = pytest.mark.skipif(QEMU is None,
                                reason=ci_installs("qemu-user", "qemu-x86_64 missing: apt-get install qemu-user"))


def test_predict_answers_on_a_haswell_cpu(tiny_models, tmp_path):
    image = tmp_path / "image.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 96, 3), dtype=np.uint8)).save(image)
    cmd = [QEMU, "-cpu", "Haswell", sys.executable, "-m", "fastvlm", "predict", "--vision", str(tiny_models.vision),
           "--llm", str(tiny_models.llm), "--image", str(image), "--max-tokens", "4", "--resolution", "256",
           "--vision-runtime", "onnxruntime", "--threads", "1", "--n-ctx", "512", "--json"]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, (f"predict under qemu -cpu Haswell exited {done.returncode} (-4 or 132: illegal "
                                  f"instruction, a llama.cpp built for the build machine's CPU only)\n"
                                  f"{done.stderr[-3000:]}")
    out = json.loads(done.stdout)
    assert out["new_tokens"] > 0 and out["answer"]
    assert out["llama_cpu"] == "haswell"  # the variant ggml picked for the emulated CPU
