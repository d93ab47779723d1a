"""A copy of a GGUF file with another `<arch>.context_length`, for tests whose
prompts (a chat template's tools section, an agent's turns) pass a small
model's context. The model's RoPE runs at any position; only the prompt's
fit changes.

GGUF metadata (ggml's docs/gguf.md): a key is a u64 length and its bytes,
then a u32 value type (4 = UINT32) and the value.
"""

import pathlib
import struct


def with_context_length(src, dst, positions, arch="llama"):
    data = bytearray(pathlib.Path(src).read_bytes())
    key = f"{arch}.context_length".encode()
    at = data.find(key)
    if at < 8 or struct.unpack_from("<Q", data, at - 8)[0] != len(key):
        raise ValueError(f"no {key.decode()} key in {src}")
    if struct.unpack_from("<I", data, at + len(key))[0] != 4:
        raise ValueError(f"{key.decode()} in {src} is not a UINT32")
    struct.pack_into("<I", data, at + len(key) + 4, positions)
    pathlib.Path(dst).write_bytes(bytes(data))
    return str(dst)
