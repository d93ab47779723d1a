#!/usr/bin/env python3
"""Writes a random-weight Llama GGUF of the stories110m shape for side-by-side
server benchmarks (bench/side_by_side.sh): the same file for every server.

Shape: dim 768, 12 layers, 12 heads (12 KV), FFN 2048, context 2048, the
32000-token SentencePiece vocabulary of a llama.cpp vocab file (copied
field by field). Weights ~ N(0, 1/fan_in), norms 1, the output head
N(0, 9/dim), a fixed seed; F16 matrices.

The output head's rows of byte, control and unknown tokens are zero, so
their logits are 0 while the others' have std ~3: greedy decoding never
picks them. A random model otherwise emits lone byte tokens (invalid
UTF-8), which llama-server refuses to stream on every endpoint. Paceline
serves either; this keeps the comparison to text both can send.

usage: PYTHONPATH=<llama.cpp>/gguf-py /usr/bin/python3 make_bench_model.py \
           VOCAB.gguf OUT.gguf [SEED]
"""
import sys

import numpy as np
import gguf

DIM, LAYERS, HEADS, FFN, CONTEXT = 768, 12, 12, 2048, 2048


def copy_tokenizer(reader, writer):
    """Every tokenizer.ggml.* field; returns the token types."""
    types = None
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer.ggml."):
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            item = field.types[-1]
            if item == gguf.GGUFValueType.STRING:
                value = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
            else:
                value = [field.parts[i][0].item() for i in field.data]
            writer.add_array(field.name, value)
            if field.name == "tokenizer.ggml.token_type":
                types = value
        elif kind == gguf.GGUFValueType.STRING:
            writer.add_string(field.name, bytes(field.parts[-1]).decode("utf-8"))
        else:
            value = field.parts[-1][0].item()
            writer.add_key_value(field.name, value, kind)
    return types


def main():
    vocab_path, out_path = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    reader = gguf.GGUFReader(vocab_path)
    writer = gguf.GGUFWriter(out_path, "llama")
    types = copy_tokenizer(reader, writer)
    n_vocab = len(types)
    writer.add_name("paceline-bench-110m")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(DIM)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(DIM // HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    def matrix(rows, cols, std):  # (out, in): ggml's (in, out)
        return (rng.standard_normal((rows, cols), dtype=np.float32) * std).astype(np.float16)

    ones = np.ones(DIM, dtype=np.float32)
    writer.add_tensor("token_embd.weight", matrix(n_vocab, DIM, 1.0))
    for layer in range(LAYERS):
        p = f"blk.{layer}."
        writer.add_tensor(p + "attn_norm.weight", ones)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(p + name + ".weight", matrix(DIM, DIM, DIM ** -0.5))
        writer.add_tensor(p + "ffn_norm.weight", ones)
        writer.add_tensor(p + "ffn_gate.weight", matrix(FFN, DIM, DIM ** -0.5))
        writer.add_tensor(p + "ffn_up.weight", matrix(FFN, DIM, DIM ** -0.5))
        writer.add_tensor(p + "ffn_down.weight", matrix(DIM, FFN, FFN ** -0.5))
    writer.add_tensor("output_norm.weight", ones)
    head = matrix(n_vocab, DIM, 3 * DIM ** -0.5)
    normal = int(gguf.TokenType.NORMAL)
    head[[i for i, t in enumerate(types) if t != normal]] = 0
    writer.add_tensor("output.weight", head)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
