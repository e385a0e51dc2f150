#!/usr/bin/env python3
"""Convert a trace model folder (Hugging Face layout, qwen2 or qwen3) to GGUF for llama.cpp.

    hf_to_gguf.py --gguf-py DIR [--dtype f32|bf16] MODEL_DIR OUT.gguf

llama.cpp's own convert_hf_to_gguf.py imports torch and transformers, which neither Debian nor
npm provide; this converter needs only numpy (python3-numpy) and the pure-Python gguf-py
package of the llama.cpp source (--gguf-py: its gguf-py folder). It writes what
convert_hf_to_gguf.py writes for Qwen2ForCausalLM / Qwen3ForCausalLM:

- hyper-parameters: context length, widths, heads, kv heads, head_dim (key/value length),
  RoPE theta, RMSNorm epsilon; tied embeddings by leaving `output.weight` out;
- the vocabulary as a GPT-2 byte-level BPE (`tokenizer.ggml.model` gpt2, pre-tokenizer qwen2)
  from tokenizer.json: every id below vocab_size, missing ids as `[PAD<id>]` (UNUSED), added
  tokens CONTROL when special (or `<|...|>`), else USER_DEFINED; the merges and the special
  ids through gguf-py's SpecialVocab, as convert_hf_to_gguf.py does;
- the weights: with --dtype f32 every matrix widened from its stored bf16/f16/f32 exactly
  (bf16 -> f32 is exact); with --dtype bf16 the matrices keep their stored bf16 bytes
  unchanged (f32/f16 sources are refused: rounding them would change the model). Norm weights
  and the q/k/v biases are always F32, as llama.cpp requires.

Errors are one line on stderr naming the file and tensor, exit status 1.
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from pathlib import Path


def fail(msg: str) -> None:
    print(f"hf_to_gguf: {msg}", file=sys.stderr)
    sys.exit(1)


def read_safetensors(path: Path, np):
    """Yields (name, numpy array as stored, dtype name) for every tensor of one file (mmapped)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            fail(f"{path}: truncated safetensors file (no header length)")
        (n,) = struct.unpack("<Q", raw)
        if n > 100_000_000:
            fail(f"{path}: safetensors header of {n} bytes is implausible")
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    kinds = {"BF16": (np.uint16, 2), "F16": (np.float16, 2), "F32": (np.float32, 4)}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in kinds:
            fail(f"{path}: tensor '{name}': dtype {dtype} is not supported (BF16, F16, F32)")
        np_type, size = kinds[dtype]
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        count = 1
        for d in shape:
            count *= d
        if end - begin != count * size or end > data.shape[0]:
            fail(f"{path}: tensor '{name}': data_offsets [{begin}, {end}) do not fit shape {list(shape)}")
        yield name, data[begin:end].view(np_type).reshape(shape), dtype


def weight_files(model_dir: Path) -> list[Path]:
    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        return [model_dir / f for f in sorted(set(weight_map.values()))]
    single = model_dir / "model.safetensors"
    if not single.exists():
        fail(f"{model_dir}: no model.safetensors nor model.safetensors.index.json")
    return [single]


def vocabulary(model_dir: Path, vocab_size: int, gguf):
    """tokens, token types, as convert_hf_to_gguf.py's get_vocab_base, from tokenizer.json."""
    path = model_dir / "tokenizer.json"
    if not path.exists():
        fail(f"{path}: missing (llama.cpp needs the vocabulary to load a model)")
    tok = json.loads(path.read_text(encoding="utf-8"))
    if tok.get("model", {}).get("type") != "BPE":
        fail(f"{path}: model.type is {tok.get('model', {}).get('type')!r}, only BPE is supported")
    by_id: dict[int, str] = {i: t for t, i in tok["model"]["vocab"].items()}
    added: dict[int, dict] = {}
    for a in tok.get("added_tokens", []):
        by_id[a["id"]] = a["content"]
        added[a["id"]] = a
    if max(by_id) >= vocab_size:
        fail(f"{path}: token id {max(by_id)} is not below the config's vocab_size {vocab_size}")
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
            continue
        text = by_id[i]
        if i in added:
            looks_special = text.startswith("<|") and text.endswith("|>")
            types.append(gguf.TokenType.CONTROL if added[i].get("special") or looks_special
                         else gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
        tokens.append(text)
    return tokens, types


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--gguf-py", required=True, help="the gguf-py folder of the llama.cpp source")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                    help="type of the matrices in the GGUF (default f32)")
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("out", type=Path)
    args = ap.parse_args()

    try:
        import numpy as np
    except ImportError:
        fail("numpy is missing: install python3-numpy (apt) and run with /usr/bin/python3")
    sys.path.insert(0, str(Path(args.gguf_py).resolve()))
    try:
        import gguf
    except ImportError as e:
        fail(f"--gguf-py {args.gguf_py}: cannot import gguf ({e})")

    config_path = args.model_dir / "config.json"
    if not config_path.exists():
        fail(f"{config_path}: missing")
    cfg = json.loads(config_path.read_text())
    model_type = cfg.get("model_type")
    arches = {"qwen2": gguf.MODEL_ARCH.QWEN2, "qwen3": gguf.MODEL_ARCH.QWEN3}
    if model_type not in arches:
        fail(f"{config_path}: model_type {model_type!r} is not supported (qwen2, qwen3)")
    if cfg.get("rope_scaling") not in (None, {}) and cfg["rope_scaling"].get("rope_type", cfg["rope_scaling"].get("type")) != "default":
        fail(f"{config_path}: rope_scaling {cfg['rope_scaling']} is not supported")
    arch = arches[model_type]
    n_layers = cfg["num_hidden_layers"]
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    vocab_size = cfg["vocab_size"]
    tied = bool(cfg.get("tie_word_embeddings", False))

    w = gguf.GGUFWriter(str(args.out), gguf.MODEL_ARCH_NAMES[arch])
    w.add_name(args.model_dir.name)
    w.add_context_length(cfg.get("max_position_embeddings", 4096))
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(n_layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(cfg.get("num_key_value_heads", heads))
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    w.add_vocab_size(vocab_size)
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if args.dtype == "f32" else gguf.LlamaFileType.MOSTLY_BF16)

    tokens, types = vocabulary(args.model_dir, vocab_size, gguf)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    special = gguf.SpecialVocab(args.model_dir, load_merges=True, n_vocab=vocab_size)
    if not special.merges:
        fail(f"{args.model_dir / 'tokenizer.json'}: no BPE merges found")
    special.add_to_gguf(w)

    names = gguf.get_tensor_name_map(arch, n_layers)
    seen = set()
    for path in weight_files(args.model_dir):
        for name, data, dtype in read_safetensors(path, np):
            if tied and name == "lm_head.weight":
                continue
            new_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
            if new_name is None:
                fail(f"{path}: tensor '{name}' has no GGUF name for {model_type}")
            seen.add(new_name)
            matrix = data.ndim == 2
            if matrix and args.dtype == "bf16":
                if dtype != "BF16":
                    fail(f"{path}: tensor '{name}' is {dtype}; --dtype bf16 keeps bf16 bytes only")
                w.add_tensor(new_name, np.ascontiguousarray(data), raw_dtype=gguf.GGMLQuantizationType.BF16)
                continue
            if dtype == "BF16":  # exact: a bf16 is the top half of an f32
                f32 = (data.astype(np.uint32) << 16).view(np.float32)
            else:
                f32 = data.astype(np.float32)
            w.add_tensor(new_name, np.ascontiguousarray(f32))
    if "token_embd.weight" not in seen:
        fail(f"{args.model_dir}: no model.embed_tokens.weight")
    print(f"hf_to_gguf: writing {len(seen)} tensors ({args.dtype}) to {args.out}", file=sys.stderr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()


if __name__ == "__main__":
    main()
