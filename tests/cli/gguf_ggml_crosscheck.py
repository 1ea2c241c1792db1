#!/usr/bin/env python3
"""cli.gguf.ggml: a GGUF file made entirely by third parties checks clean in qgold.

usage: gguf_ggml_crosscheck.py QGOLD TMP_DIR

Weights from the pinned stream are quantized to Q4_K, Q5_K and Q6_K by ggml's own quantizer
(ggml_quantize_chunk without an importance matrix: from the ggml-python package, or from the libggml-base
that `ci/setup.sh --ggml` builds out of llama-cpp-python's sources) and written, with an F16 and an
F32 tensor, by gguf-py's GGUFWriter. Then:
  * `qgold gguf check --gemv` passes (container, per-block rule, every backend's bits, every GEMV);
  * `qgold gguf dequant` of each K-quant tensor equals gguf-py's numpy dequantization bit for bit;
  * the fraction of blocks byte-identical to qgold's own quantizer (generators/qgold_gen/kquants.py) is
    printed, not judged (ggml may be built with FMA contraction, which changes some roundings).

Needs `gguf` in the running python and one of the two ggml quantizers; without them it exits 77
(skipped, saying which is missing).
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "generators"))

try:
    import ctypes

    import gguf
    import gguf.quants
    import numpy as np
    from gguf import GGMLQuantizationType as T
    from gguf import GGUFWriter
except Exception as e:  # ImportError or a broken install
    print(f"skipped: needs gguf and numpy ({type(e).__name__}: {e})")
    sys.exit(77)

# ggml's quantizer: the ggml-python package if the python has it, else ggml's own C library through its
# public function ggml_quantize_chunk (ci/setup.sh --ggml builds libggml-base into .venv/ggml/lib; the
# directory may be named by QGOLD_GGML_LIB_DIR). ggml's type ids are gguf-py's GGMLQuantizationType values.
try:
    import ggml as _ggml_python

    ggml_quantize_chunk = _ggml_python.ggml_quantize_chunk
    GGML_FROM = "ggml-python"
except Exception:
    lib_dir = os.environ.get("QGOLD_GGML_LIB_DIR") or os.path.join(HERE, "..", "..", ".venv", "ggml", "lib")
    try:
        _lib = ctypes.CDLL(os.path.join(lib_dir, "libggml-base.so"))
    except OSError as e:
        print(f"skipped: needs ggml's quantizer: ggml-python, or libggml-base.so from ci/setup.sh --ggml ({e})")
        sys.exit(77)
    ggml_quantize_chunk = _lib.ggml_quantize_chunk
    ggml_quantize_chunk.restype = ctypes.c_size_t
    ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_int64,
                                    ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_float)]
    GGML_FROM = f"libggml-base.so in {os.path.abspath(lib_dir)}"

from qgold_gen import kquants as kq  # noqa: E402
from qgold_gen.rng import Stream  # noqa: E402

TYPES = {"q4_k": (T.Q4_K, int(T.Q4_K), 144), "q5_k": (T.Q5_K, int(T.Q5_K), 176), "q6_k": (T.Q6_K, int(T.Q6_K), 210)}


def ggml_quantize(gtype, x: np.ndarray, block_bytes: int) -> np.ndarray:
    rows, cols = x.shape
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros(rows * cols // 256 * block_bytes, np.uint8)
    n = ggml_quantize_chunk(gtype, x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.ctypes.data_as(ctypes.c_void_p),
                                 0, rows, cols, None)
    assert n == out.size, (n, out.size)
    return out.reshape(rows, -1)


def main() -> int:
    qgold, tmp = sys.argv[1], sys.argv[2]
    os.makedirs(tmp, exist_ok=True)
    path = os.path.join(tmp, "ggml_quantized.gguf")
    print(f"ggml quantizer: {GGML_FROM}")
    w = GGUFWriter(path, "llama")
    w.add_string("general.name", "qgold cross-check: ggml quantizer, gguf-py writer")
    w.add_uint32("llama.block_count", 1)
    blocks = {}
    same = total = 0
    for i, (name, (ttype, gtype, bb)) in enumerate(TYPES.items()):
        rows, cols = 8, 1024
        x = Stream(900 + i).uniform_array(-3.0, 3.0, rows * cols).reshape(rows, cols)
        q = ggml_quantize(gtype, x, bb)
        blocks[name] = q
        ours = kq.quantize_blocks(name, x).reshape(rows, -1)
        a, b = q.reshape(-1, bb), ours.reshape(-1, bb)
        same += int(np.sum(np.all(a == b, axis=1)))
        total += a.shape[0]
        w.add_tensor(f"blk.0.{name}.weight", q, raw_dtype=ttype)
    w.add_tensor("token_embd.weight", Stream(950).uniform_array(-1.0, 1.0, 4 * 96).reshape(4, 96).astype(np.float16))
    w.add_tensor("output_norm.weight", Stream(951).uniform_array(-1.0, 1.0, 96))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    fails = 0
    r = subprocess.run([qgold, "gguf", "check", path, "--gemv"], capture_output=True, text=True)
    print(r.stdout, end="")
    if r.returncode != 0 or "5 tensors checked, 0 failed" not in r.stdout:
        print(f"FAIL: qgold gguf check exit {r.returncode}\n{r.stderr}")
        fails += 1
    for name, (ttype, _, bb) in TYPES.items():
        out = os.path.join(tmp, f"{name}.f32")
        r = subprocess.run([qgold, "gguf", "dequant", path, "--tensor", f"blk.0.{name}.weight", "--out", out],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL: qgold gguf dequant {name}: {r.stderr}")
            fails += 1
            continue
        mine = np.fromfile(out, dtype="<u4")
        theirs = np.asarray(gguf.quants.dequantize(blocks[name].reshape(-1, bb), ttype), np.float32).reshape(-1).view(np.uint32)
        if mine.shape != theirs.shape or not np.array_equal(mine, theirs):
            print(f"FAIL: {name}: qgold's dequantization differs from gguf-py's")
            fails += 1
        else:
            print(f"ok   {name}: {mine.size} values, qgold gguf dequant == gguf-py dequantize (bits)")
    print(f"ggml's quantizer and qgold's agree byte for byte on {same} of {total} blocks")
    print(f"cli.gguf.ggml: {'FAILED' if fails else 'OK'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
