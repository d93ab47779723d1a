#!/usr/bin/env python3
"""Writes random-weight GGUFs of Gemma 3 4B's and gpt-oss-20b's widths for
benchmarks against llama.cpp (bench/RESULTS.md, issue 37): the same file
for both engines, in the layouts those models ship in; and the hybrid
long-context pair of issue 38 (`llama`: stories110m dense, `qwen35`:
stories110m-hybrid, documented at their functions; Q8_0, llama's 32,000-
token SentencePiece vocabulary, ../shared/vocab/ggml-vocab-llama-spm.gguf).

  gemma3   Gemma 3 4B (engine/model/model_shapes.cc `gemma3-4b`): dim 2560,
           8 heads / 4 KV heads of 256, FFN 10240, sliding window 1024 on
           5 of every 6 layers (pattern 6), RoPE bases 1e6 / 1e4 (sliding),
           linear scaling x8 on the global layers, Q/K norms, tied head.
           Google's QAT Q4_0 layout: every layer matrix Q4_0, token_embd
           (also the output head) F16, norms F32.
  gpt-oss  gpt-oss-20b (`gpt-oss-20b`): dim 2880, 64 heads / 8 KV heads of
           64, 32 experts of width 2880, 4 used, sliding window 128 on even
           layers, YaRN x32 over 4096, sinks, biases. llama-quantize's
           MXFP4_MOE layout: expert matrices MXFP4, the other matrices
           (token_embd, output, attention) Q8_0, the routers and every
           1-D tensor and expert bias F32.

LAYERS (default: the model's own, 34 / 24) keeps the widths and drops
layers; the file's name should say so.

Weights are written as random quantized blocks, not quantized from floats
(numpy quantization of billions of weights is too slow): Q4_0 and Q8_0
get uniform random quants and a block scale chosen so the weights' std is
1/sqrt(fan_in); MXFP4 gets uniform random E2M1 nibbles (symmetric, mean 0)
and the E8M0 exponent nearest that std. The F16 embedding is N(0, 1/dim)
(Gemma multiplies it by sqrt(dim): RMS 1 at the input); the gpt-oss
embedding N(0, 1). Norms are 1, biases and sinks 0, routers
N(0, 1/dim) in F32, so activations stay finite. The vocabulary is copied
field by field from a llama.cpp vocab file (../shared/vocab-hf: Gemma 3's
262,145-token SentencePiece, gpt-oss's 200,019-token o200k BPE).

usage: PYTHONPATH=<llama.cpp>/gguf-py /usr/bin/python3 make_bench_model_next.py \
           gemma3|gpt-oss|llama|qwen35 VOCAB.gguf OUT.gguf [LAYERS [SEED]]
"""
import math
import sys

import numpy as np
import gguf

Q = gguf.GGMLQuantizationType

# E2M1 magnitudes times 2 (ggml's kvalues_mxfp4 without the sign): their
# mean square, for the scale.
MXFP4_RMS_X2 = math.sqrt(np.mean(np.square([0, 1, 2, 3, 4, 6, 8, 12])))


def copy_tokenizer(reader, writer):
    """Every tokenizer.ggml.* field; returns the vocabulary size."""
    n_vocab = 0
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
            if field.name == "tokenizer.ggml.tokens":
                n_vocab = len(value)
        elif kind == gguf.GGUFValueType.STRING:
            writer.add_string(field.name, bytes(field.parts[-1]).decode("utf-8"))
        else:
            writer.add_key_value(field.name, field.parts[-1][0].item(), kind)
    return n_vocab


class Tensors:
    """Random tensors of the statistics in the docstring, added to `writer`."""

    def __init__(self, writer, seed):
        self.w, self.rng = writer, np.random.default_rng(seed)

    def _blocks(self, shape, cols, scale_bytes, quant_bytes, block=32):
        n = int(np.prod(shape)) * (cols // block)
        blocks = np.frombuffer(self.rng.bytes(n * (scale_bytes + quant_bytes)),
                               dtype=np.uint8).reshape(n, scale_bytes + quant_bytes)
        return np.array(blocks)  # writable

    def q4_0(self, name, rows, cols):
        # (q - 8) * d, q uniform in 0..15: std 4.61 d.
        b = self._blocks((rows,), cols, 2, 16)
        b[:, :2] = np.full((len(b), 1), cols ** -0.5 / 4.61, np.float16).view(np.uint8)
        self.w.add_tensor(name, b.reshape(rows, -1), raw_dtype=Q.Q4_0)

    def q8_0(self, name, rows, cols, std=None):
        # q * d, q uniform in -128..127: std 73.9 d.
        b = self._blocks((rows,), cols, 2, 32)
        std = cols ** -0.5 if std is None else std
        b[:, :2] = np.full((len(b), 1), std / 73.9, np.float16).view(np.uint8)
        self.w.add_tensor(name, b.reshape(rows, -1), raw_dtype=Q.Q8_0)

    def mxfp4(self, name, n, rows, cols):
        # kvalues[q] * 2^(e - 127) / 2: std MXFP4_RMS_X2 * 2^(e - 128).
        b = self._blocks((n, rows), cols, 1, 16)
        b[:, 0] = round(128 + math.log2(cols ** -0.5 / MXFP4_RMS_X2))
        self.w.add_tensor(name, b.reshape(n, rows, -1), raw_dtype=Q.MXFP4)

    def f16(self, name, rows, cols, std):
        m = np.empty((rows, cols), np.float16)
        for r in range(0, rows, 16384):
            m[r:r + 16384] = self.rng.standard_normal(
                (min(16384, rows - r), cols), dtype=np.float32) * std
        self.w.add_tensor(name, m)

    def f32(self, name, shape, around=0.0, std=0.0):
        v = np.full(shape, around, np.float32)
        if std:
            v += self.rng.standard_normal(shape, dtype=np.float32) * std
        self.w.add_tensor(name, v)


def gemma3(writer, t, n_vocab, layers):
    dim, heads, kv_heads, head_dim, ffn = 2560, 8, 4, 256, 10240
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    writer.add_context_length(131072)
    writer.add_embedding_length(dim)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(1e6)
    writer.add_rope_freq_base_swa(1e4)
    writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
    writer.add_rope_scaling_factor(8.0)
    writer.add_sliding_window(1024)
    writer.add_sliding_window_pattern(6)
    q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
    t.f16("token_embd.weight", n_vocab, dim, dim ** -0.5)
    t.f32("output_norm.weight", dim, 1.0)
    for i in range(layers):
        p = f"blk.{i}."
        t.f32(p + "attn_norm.weight", dim, 1.0)
        t.q4_0(p + "attn_q.weight", q_dim, dim)
        t.q4_0(p + "attn_k.weight", kv_dim, dim)
        t.q4_0(p + "attn_v.weight", kv_dim, dim)
        t.q4_0(p + "attn_output.weight", dim, q_dim)
        t.f32(p + "attn_q_norm.weight", head_dim, 1.0)
        t.f32(p + "attn_k_norm.weight", head_dim, 1.0)
        t.f32(p + "post_attention_norm.weight", dim, 1.0)
        t.f32(p + "ffn_norm.weight", dim, 1.0)
        t.q4_0(p + "ffn_gate.weight", ffn, dim)
        t.q4_0(p + "ffn_up.weight", ffn, dim)
        t.q4_0(p + "ffn_down.weight", dim, ffn)
        t.f32(p + "post_ffw_norm.weight", dim, 1.0)


def gpt_oss(writer, t, n_vocab, layers):
    dim, heads, kv_heads, head_dim, experts, ffn = 2880, 64, 8, 64, 32, 2880
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_MXFP4_MOE)
    writer.add_context_length(131072)
    writer.add_embedding_length(dim)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(150000.0)
    writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    writer.add_rope_scaling_factor(32.0)
    writer.add_rope_scaling_orig_ctx_len(4096)
    writer.add_expert_count(experts)
    writer.add_expert_used_count(4)
    writer.add_expert_feed_forward_length(ffn)
    writer.add_sliding_window(128)  # no pattern key, as convert_hf_to_gguf
    q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
    t.q8_0("token_embd.weight", n_vocab, dim, std=1.0)
    t.f32("output_norm.weight", dim, 1.0)
    t.q8_0("output.weight", n_vocab, dim)
    for i in range(layers):
        p = f"blk.{i}."
        t.f32(p + "attn_norm.weight", dim, 1.0)
        for name, rows, cols in (("attn_q", q_dim, dim), ("attn_k", kv_dim, dim),
                                 ("attn_v", kv_dim, dim), ("attn_output", dim, q_dim)):
            t.q8_0(p + name + ".weight", rows, cols)
            t.f32(p + name + ".bias", rows)
        t.f32(p + "attn_sinks.weight", heads)
        t.f32(p + "post_attention_norm.weight", dim, 1.0)
        t.f32(p + "ffn_gate_inp.weight", (experts, dim), 0.0, dim ** -0.5)
        t.f32(p + "ffn_gate_inp.bias", experts)
        t.mxfp4(p + "ffn_gate_exps.weight", experts, ffn, dim)
        t.f32(p + "ffn_gate_exps.bias", (experts, ffn))
        t.mxfp4(p + "ffn_up_exps.weight", experts, ffn, dim)
        t.f32(p + "ffn_up_exps.bias", (experts, ffn))
        t.mxfp4(p + "ffn_down_exps.weight", experts, dim, ffn)
        t.f32(p + "ffn_down_exps.bias", (experts, dim))


def stories_ffn(t, p, dim, ffn):
    t.q8_0(p + "ffn_gate.weight", ffn, dim)
    t.q8_0(p + "ffn_up.weight", ffn, dim)
    t.q8_0(p + "ffn_down.weight", dim, ffn)


def stories_keys(writer, layers, heads, rope_dim, base, eps):
    dim, head_dim = 768, 64
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_context_length(32768)
    writer.add_embedding_length(dim)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(2048)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_layer_norm_rms_eps(eps)
    writer.add_rope_freq_base(base)
    writer.add_rope_dimension_count(rope_dim)


def llama(writer, t, n_vocab, layers):
    """stories110m's widths (`stories110m`), 32K context, Q8_0."""
    dim, ffn = 768, 2048
    stories_keys(writer, layers, 12, 64, 10000.0, 1e-5)
    t.q8_0("token_embd.weight", n_vocab, dim, std=1.0)
    t.f32("output_norm.weight", dim, 1.0)
    t.q8_0("output.weight", n_vocab, dim)
    for i in range(layers):
        p = f"blk.{i}."
        t.f32(p + "attn_norm.weight", dim, 1.0)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            t.q8_0(p + name + ".weight", dim, dim)
        t.f32(p + "ffn_norm.weight", dim, 1.0)
        stories_ffn(t, p, dim, ffn)


def qwen35(writer, t, n_vocab, layers):
    """`stories110m-hybrid`: stories110m's widths with Qwen3.5's layers (a
    gated attention layer after every three Gated DeltaNet layers of 6 key /
    12 value heads of 64), 32K context, Q8_0 matrices. The DeltaNet decay
    exp(softplus(dt) * ssm_a) is about 0.5..0.9 per token."""
    dim, ffn, d, nk, nv = 768, 2048, 64, 6, 12
    arch = "qwen35"
    stories_keys(writer, layers, 12, 16, 1e7, 1e-6)
    writer.add_array(f"{arch}.rope.dimension_sections", [3, 3, 2, 0])
    writer.add_uint32(f"{arch}.full_attention_interval", 4)
    writer.add_uint32(f"{arch}.ssm.conv_kernel", 4)
    writer.add_uint32(f"{arch}.ssm.state_size", d)
    writer.add_uint32(f"{arch}.ssm.group_count", nk)
    writer.add_uint32(f"{arch}.ssm.time_step_rank", nv)
    writer.add_uint32(f"{arch}.ssm.inner_size", nv * d)
    conv = (2 * nk + nv) * d
    t.q8_0("token_embd.weight", n_vocab, dim, std=1.0)
    t.f32("output_norm.weight", dim, 1.0)
    t.q8_0("output.weight", n_vocab, dim)
    for i in range(layers):
        p = f"blk.{i}."
        t.f32(p + "attn_norm.weight", dim, 1.0)
        if (i + 1) % 4 != 0:
            t.q8_0(p + "attn_qkv.weight", conv, dim)
            t.q8_0(p + "attn_gate.weight", nv * d, dim)
            t.f32(p + "ssm_conv1d.weight", (conv, 4), 0.0, 0.5)
            t.f32(p + "ssm_a", nv, -1.0, 0.2)
            t.f32(p + "ssm_dt.bias", nv, -1.0, 0.5)
            t.q8_0(p + "ssm_beta.weight", nv, dim)
            t.q8_0(p + "ssm_alpha.weight", nv, dim)
            t.f32(p + "ssm_norm.weight", d, 1.0)
            t.q8_0(p + "ssm_out.weight", dim, nv * d)
        else:
            t.q8_0(p + "attn_q.weight", 2 * 12 * d, dim)
            t.q8_0(p + "attn_k.weight", 12 * d, dim)
            t.q8_0(p + "attn_v.weight", 12 * d, dim)
            t.q8_0(p + "attn_output.weight", dim, 12 * d)
            t.f32(p + "attn_q_norm.weight", d, 1.0)
            t.f32(p + "attn_k_norm.weight", d, 1.0)
        t.f32(p + "post_attention_norm.weight", dim, 1.0)
        stories_ffn(t, p, dim, ffn)


def main():
    arch, vocab_path, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    build, default_layers = {"gemma3": (gemma3, 34), "gpt-oss": (gpt_oss, 24),
                             "llama": (llama, 12), "qwen35": (qwen35, 12)}[arch]
    layers = int(sys.argv[4]) if len(sys.argv) > 4 else default_layers
    seed = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    writer = gguf.GGUFWriter(out_path, arch)
    n_vocab = copy_tokenizer(gguf.GGUFReader(vocab_path), writer)
    writer.add_name(f"paceline-bench-{arch}-{layers}l")
    build(writer, Tensors(writer, seed), n_vocab, layers)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()


if __name__ == "__main__":
    main()
