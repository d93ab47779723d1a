#!/usr/bin/env python3
"""Writes a random-weight Llama GGUF of the stories110m shape for side-by-side
server benchmarks (bench/side_by_side.sh): the same file for every server.

Shape: dim 768, 12 layers, 12 heads (12 KV), FFN 2048, context 2048, the
vocabulary of a llama.cpp vocab file (copied field by field: e.g. the
32000-token SentencePiece one) or of a Hugging Face tokenizer.json (a
byte-level BPE such as Llama 3's 128,256 tokens, written as llama.cpp's
"gpt2" model with pre-tokenizer "llama-bpe"). Weights ~ N(0, 1/fan_in),
norms 1, the output head N(0, 9/dim), a fixed seed; F16 matrices.

The output head's rows of byte, control and unknown tokens are zero, so
their logits are 0 while the others' have std ~3: greedy decoding never
picks them. A random model otherwise emits lone byte tokens (invalid
UTF-8), which llama-server refuses to stream on every endpoint. Paceline
serves either; this keeps the comparison to text both can send.

A tokenizer.json vocabulary is for sampling at temperature 1 as well,
where a logit of 0 is not rare enough (over 128k tokens, ~0.1% of the
draws). There the model carries a constant channel: residual dimension 0
is SAMPLE_GUARD in every token's embedding and no layer writes to it
(row 0 of attn_output and ffn_down is 0), so after the final norm it is
large and positive; the output head's column 0 is -GUARD_WEIGHT for
control tokens other than end-of-generation ones and for tokens whose
bytes alone are not valid UTF-8 (pieces of a multi-byte character), and
0 for the rest. Those logits sit ~100 below the others: never sampled.
End-of-generation tokens keep a 0 row (their logit is 0: rare at
temperature 1, and a grammar can still end on them).

usage: PYTHONPATH=<llama.cpp>/gguf-py /usr/bin/python3 make_bench_model.py \
           VOCAB.gguf|tokenizer.json OUT.gguf [SEED]
"""
import json
import sys

import numpy as np
import gguf

DIM, LAYERS, HEADS, FFN, CONTEXT = 768, 12, 12, 2048, 2048
SAMPLE_GUARD, GUARD_WEIGHT = 16.0, 256.0
# Llama 3's <|begin_of_text|>, <|eot_id|> and its other end-of-generation
# tokens, <|end_of_text|> and <|eom_id|>.
LLAMA3_BOS, LLAMA3_EOS, LLAMA3_EOG = 128000, 128009, (128001, 128008, 128009)


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


def byte_decoder():
    """GPT-2's byte-level alphabet: the character standing for each byte."""
    printable = (list(range(ord("!"), ord("~") + 1))
                 + list(range(ord("\u00a1"), ord("\u00ac") + 1))
                 + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + n)] = b
            n += 1
    return chars


def hf_tokenizer(path, writer):
    """A byte-level BPE tokenizer.json as llama.cpp's gpt2 model; returns
    the token types and the ids never to be sampled (see the docstring)."""
    hf = json.load(open(path, encoding="utf-8"))
    vocab, merges = hf["model"]["vocab"], hf["model"]["merges"]
    added = {t["id"]: t for t in hf["added_tokens"]}
    n_vocab = max(list(vocab.values()) + list(added)) + 1
    tokens = [f"[PAD{i}]" for i in range(n_vocab)]
    types = [int(gguf.TokenType.UNUSED)] * n_vocab
    for text, i in vocab.items():
        tokens[i], types[i] = text, int(gguf.TokenType.NORMAL)
    for i, t in added.items():
        tokens[i] = t["content"]
        types[i] = int(gguf.TokenType.CONTROL if t["special"]
                       else gguf.TokenType.USER_DEFINED)
    decode = byte_decoder()
    banned = []
    for i, text in enumerate(tokens):
        if types[i] == int(gguf.TokenType.NORMAL):
            try:
                bytes(decode[c] for c in text).decode("utf-8")
                continue
            except (KeyError, UnicodeDecodeError):
                pass
        elif i in LLAMA3_EOG:
            continue
        banned.append(i)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("llama-bpe")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m)
                             for m in merges])
    writer.add_bos_token_id(LLAMA3_BOS)
    writer.add_eos_token_id(LLAMA3_EOS)
    writer.add_eot_token_id(LLAMA3_EOS)
    writer.add_add_bos_token(True)
    return types, banned


def main():
    vocab_path, out_path = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    writer = gguf.GGUFWriter(out_path, "llama")
    if vocab_path.endswith(".json"):
        types, banned = hf_tokenizer(vocab_path, writer)
    else:
        types, banned = copy_tokenizer(gguf.GGUFReader(vocab_path), writer), None
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

    def residual_writer(rows, cols, std):  # leaves the guard channel alone
        m = matrix(rows, cols, std)
        if banned is not None:
            m[0] = 0
        return m

    ones = np.ones(DIM, dtype=np.float32)
    embd = matrix(n_vocab, DIM, 1.0)
    if banned is not None:
        embd[:, 0] = SAMPLE_GUARD
    writer.add_tensor("token_embd.weight", embd)
    for layer in range(LAYERS):
        p = f"blk.{layer}."
        writer.add_tensor(p + "attn_norm.weight", ones)
        for name in ("attn_q", "attn_k", "attn_v"):
            writer.add_tensor(p + name + ".weight", matrix(DIM, DIM, DIM ** -0.5))
        writer.add_tensor(p + "attn_output.weight",
                          residual_writer(DIM, DIM, DIM ** -0.5))
        writer.add_tensor(p + "ffn_norm.weight", ones)
        writer.add_tensor(p + "ffn_gate.weight", matrix(FFN, DIM, DIM ** -0.5))
        writer.add_tensor(p + "ffn_up.weight", matrix(FFN, DIM, DIM ** -0.5))
        writer.add_tensor(p + "ffn_down.weight",
                          residual_writer(DIM, FFN, FFN ** -0.5))
    writer.add_tensor("output_norm.weight", ones)
    head = matrix(n_vocab, DIM, 3 * DIM ** -0.5)
    normal = int(gguf.TokenType.NORMAL)
    head[[i for i, t in enumerate(types) if t != normal]] = 0
    if banned is not None:
        head[:, 0] = 0
        head[banned, 0] = -GUARD_WEIGHT
    writer.add_tensor("output.weight", head)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
