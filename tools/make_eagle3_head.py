#!/usr/bin/env python3
"""Writes a random-weight EAGLE-3 draft head (LlamaForCausalLMEagle3, the layout SGLang loads) for a target checkpoint
folder: config.json and model.safetensors with fc, midlayer.*, norm, lm_head, d2t and t2d, f32. The draft vocabulary is
every `--stride`-th target token (d2t[d] = target id - d). Standard library only (no torch or numpy), so it runs
anywhere; the tiny test fixture tests/data/eagle3/llama_head comes from

    tools/make_eagle3_head.py tests/data/models/llama tests/data/eagle3/llama_head

With --cycle TARGET_OUT, it first writes a Llama target whose attention and MLP outputs are zero (o_proj, down_proj),
so that its residual stream is the token's embedding at every layer, and whose LM head is the embedding table
permuted by a random cycle s: the target's next token is s(current token). The head then gets fc = [I | 0 | 0],
zero attention and MLP outputs, and an LM head (over a permuted draft vocabulary) that reads s(s(t)) off the embedding
of t: from the target's features of position p it predicts the token at p + 2 exactly, so every first draft token
is accepted, and only if the features of the right position reach it (tests/data/eagle3/cycle_target, cycle_head):

    tools/make_eagle3_head.py --cycle tests/data/eagle3/cycle_target tests/data/models/llama tests/data/eagle3/cycle_head

With --lm-head target or tied, a random head has no lm_head.weight or d2t: it predicts the whole vocabulary with the
target's LM head (config.json without draft_vocab_size, as nvidia's gpt-oss heads) or the target's embedding table
(tie_word_embeddings). --self-attending writes, for the cycle target as TARGET_DIR, an exact head that has no LM head of its own (it takes
the target's) and whose every draft token is right, also those of its self-fed draft steps. Its fc is 0, so a step fed
by the target has residual 0 and hidden 0; a draft step has residual = hidden = the head's previous pre-norm output.
Two 64-dim attention heads: A scores by the input token (input_layernorm(embed)) and returns it, B scores by the
hidden part and returns hidden_norm(hidden); o_proj = [I | -I]. Each query's own position wins both softmaxes (earlier
copies of its token return the same value in A and have hidden 0 in B), so the output is en(token) + residual -
hidden_norm(residual) = en(token) for residual 0 or en(previous token). The target's LM head turns en(t(p+1)) into
s(t(p+1)) = t(p+2), and a draft step's en(d) into s(d) (tests/data/eagle3/cycle_head_shared):

    tools/make_eagle3_head.py --self-attending tests/data/eagle3/cycle_target tests/data/eagle3/cycle_head_shared

Usage: make_eagle3_head.py [--cycle TARGET_OUT | --self-attending] TARGET_DIR OUT_DIR [--stride 2] [--seed 1]
       [--std 0.1] [--lm-head own|target|tied]"""
import argparse
import json
import pathlib
import random
import struct


def tensor_bytes(values, fmt: str) -> bytes:
    return struct.pack(f"<{len(values)}{fmt}", *values)


def write_safetensors(path: pathlib.Path, tensors: dict) -> None:
    """tensors: name -> (dtype, shape, raw bytes)."""
    header, offset, blobs = {}, 0, []
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for raw in blobs:
            out.write(raw)


def dims(target: dict):
    """hidden, heads, kv heads, head_dim, intermediate and vocabulary sizes of a Llama-style config."""
    hidden, heads = target["hidden_size"], target["num_attention_heads"]
    return (hidden, heads, target.get("num_key_value_heads", heads), target.get("head_dim", hidden // heads),
            target["intermediate_size"], target["vocab_size"])


def normal(rng: random.Random, std: float, *shape):
    count = 1
    for n in shape:
        count *= n
    return ("F32", list(shape), tensor_bytes([rng.gauss(0.0, std) for _ in range(count)], "f"))


def head_config(target: dict, draft_vocab: int, **extra) -> dict:
    hidden, heads, kv_heads, head_dim, inter, vocab = dims(target)
    return {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": hidden,
            "intermediate_size": inter, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
            "head_dim": head_dim, "num_hidden_layers": 1, "vocab_size": vocab, "draft_vocab_size": draft_vocab,
            "target_hidden_size": hidden, "max_position_embeddings": target.get("max_position_embeddings", 2048),
            "rms_norm_eps": target.get("rms_norm_eps", 1e-5),
            "rope_theta": target.get("rope_parameters", {}).get("rope_theta", target.get("rope_theta", 10000.0)),
            "tie_word_embeddings": False, "torch_dtype": "float32", **extra}


def write_self_attending(target: dict, head_out: pathlib.Path) -> None:
    hidden, _, _, _, inter, _ = dims(target)

    def f32(shape, values):
        return ("F32", list(shape), tensor_bytes(values, "f"))

    def halves(token_scale, hidden_scale):  # [2 hidden, 2 hidden]: head A reads the token half, head B the hidden half
        return f32([2 * hidden, 2 * hidden], [(token_scale if r < hidden else hidden_scale) if c == r else 0.0
                                              for r in range(2 * hidden) for c in range(2 * hidden)])

    zeros = lambda *shape: f32(shape, [0.0] * (shape[0] * shape[1]))  # noqa: E731
    ones = f32([hidden], [1.0] * hidden)
    head = {
        "fc.weight": zeros(hidden, 3 * hidden),
        "midlayer.input_layernorm.weight": ones, "midlayer.hidden_norm.weight": ones,
        "midlayer.post_attention_layernorm.weight": ones,
        # Scores 8 x (x . x') / sqrt(64) for unit-RMS x: ~64 for the position itself against ~±8 for another.
        "midlayer.self_attn.q_proj.weight": halves(8.0, 8.0),
        "midlayer.self_attn.k_proj.weight": halves(1.0, 1.0),
        "midlayer.self_attn.v_proj.weight": halves(1.0, 1.0),
        # out = residual + en(token) - hidden_norm(h): head A adds the token, head B takes the residual away.
        "midlayer.self_attn.o_proj.weight": f32([hidden, 2 * hidden], [
            1.0 if c == r else -1.0 if c == r + hidden else 0.0 for r in range(hidden) for c in range(2 * hidden)]),
        "midlayer.mlp.gate_proj.weight": zeros(inter, hidden),
        "midlayer.mlp.up_proj.weight": zeros(inter, hidden),
        "midlayer.mlp.down_proj.weight": zeros(hidden, inter),
        "norm.weight": ones,
    }
    config = head_config(dict(target, num_attention_heads=2, num_key_value_heads=2, head_dim=hidden), 0)
    del config["draft_vocab_size"]
    head_out.mkdir(parents=True, exist_ok=True)
    (head_out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(head_out / "model.safetensors", head)
    print(f"wrote {head_out}: an exact head of the cycle target that uses the target's LM head")


def write_cycle(target: dict, target_out: pathlib.Path, head_out: pathlib.Path, seed: int) -> None:
    hidden, heads, kv_heads, head_dim, inter, vocab = dims(target)
    layers = target["num_hidden_layers"]
    rng = random.Random(seed)

    def f32(shape, values):
        return ("F32", list(shape), tensor_bytes(values, "f"))

    def random_weight(*shape):
        return normal(rng, 0.1, *shape)

    def zeros(*shape):
        return f32(shape, [0.0] * (shape[0] * shape[1]))

    ones = f32([hidden], [1.0] * hidden)
    embed = [[rng.gauss(0.0, 1.0) for _ in range(hidden)] for _ in range(vocab)]
    order = list(range(vocab))
    rng.shuffle(order)
    step = {order[i]: order[(i + 1) % vocab] for i in range(vocab)}  # one cycle through every token
    back = {after: before for before, after in step.items()}
    # Target: logits[s] = embed[back[s]] . norm(embed[t]), largest at back[s] = t, i.e. s = step[t].
    tensors = {"model.embed_tokens.weight": f32([vocab, hidden], [v for row in embed for v in row]),
               "model.norm.weight": ones,
               "lm_head.weight": f32([vocab, hidden], [v for s in range(vocab) for v in embed[back[s]]])}
    for layer in range(layers):
        p = f"model.layers.{layer}."
        tensors.update({
            p + "input_layernorm.weight": ones, p + "post_attention_layernorm.weight": ones,
            p + "self_attn.q_proj.weight": random_weight(heads * head_dim, hidden),
            p + "self_attn.k_proj.weight": random_weight(kv_heads * head_dim, hidden),
            p + "self_attn.v_proj.weight": random_weight(kv_heads * head_dim, hidden),
            p + "self_attn.o_proj.weight": zeros(hidden, heads * head_dim),
            p + "mlp.gate_proj.weight": random_weight(inter, hidden),
            p + "mlp.up_proj.weight": random_weight(inter, hidden),
            p + "mlp.down_proj.weight": zeros(hidden, inter)})
    target_out.mkdir(parents=True, exist_ok=True)
    config = dict(target, tie_word_embeddings=False)
    (target_out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(target_out / "model.safetensors", tensors)
    # Head: residual = fc(features) = the embedding of the token at p; lm_head row d reads s(s(t)) for draft id d,
    # whose target id is perm[d].
    perm = list(range(vocab))
    rng.shuffle(perm)
    fc = [1.0 if c == r else 0.0 for r in range(hidden) for c in range(3 * hidden)]
    head = {
        "fc.weight": f32([hidden, 3 * hidden], fc),
        "midlayer.input_layernorm.weight": ones, "midlayer.hidden_norm.weight": ones,
        "midlayer.post_attention_layernorm.weight": ones,
        "midlayer.self_attn.q_proj.weight": random_weight(heads * head_dim, 2 * hidden),
        "midlayer.self_attn.k_proj.weight": random_weight(kv_heads * head_dim, 2 * hidden),
        "midlayer.self_attn.v_proj.weight": random_weight(kv_heads * head_dim, 2 * hidden),
        "midlayer.self_attn.o_proj.weight": zeros(hidden, heads * head_dim),
        "midlayer.mlp.gate_proj.weight": random_weight(inter, hidden),
        "midlayer.mlp.up_proj.weight": random_weight(inter, hidden),
        "midlayer.mlp.down_proj.weight": zeros(hidden, inter),
        "norm.weight": ones,
        "lm_head.weight": f32([vocab, hidden], [v for d in range(vocab) for v in embed[back[back[perm[d]]]]]),
        "d2t": ("I64", [vocab], tensor_bytes([perm[d] - d for d in range(vocab)], "q")),
        "t2d": ("BOOL", [vocab], bytes([1] * vocab)),
    }
    config_of_head = head_config(target, vocab, rope_theta=10000.0,
                              eagle_config={"eagle_aux_hidden_state_layer_ids": [0, layers // 2, layers - 1]})
    head_out.mkdir(parents=True, exist_ok=True)
    (head_out / "config.json").write_text(json.dumps(config_of_head, indent=2) + "\n")
    write_safetensors(head_out / "model.safetensors", head)
    print(f"wrote {target_out} (next token = a {vocab}-cycle step) and its exact head {head_out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target")
    parser.add_argument("out")
    parser.add_argument("--stride", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--std", type=float, default=0.1)
    parser.add_argument("--cycle", help="write the cycle target here (from TARGET_DIR's config) and its exact head")
    parser.add_argument("--self-attending", action="store_true",
                        help="TARGET_DIR is the cycle target: write its exact head that uses the target's LM head")
    parser.add_argument("--lm-head", choices=["own", "target", "tied"], default="own")
    args = parser.parse_args()
    target = json.loads((pathlib.Path(args.target) / "config.json").read_text())
    if args.cycle:
        write_cycle(target, pathlib.Path(args.cycle), pathlib.Path(args.out), args.seed)
        return
    if args.self_attending:
        write_self_attending(target, pathlib.Path(args.out))
        return
    hidden, heads, kv_heads, head_dim, inter, vocab = dims(target)
    draft_vocab = (vocab + args.stride - 1) // args.stride if args.lm_head == "own" else vocab
    rng = random.Random(args.seed)

    def random_weight(*shape):
        return normal(rng, args.std, *shape)

    def norm_weight():
        return ("F32", [hidden], tensor_bytes([1.0 + rng.gauss(0.0, 0.05) for _ in range(hidden)], "f"))

    tensors = {
        "fc.weight": random_weight(hidden, 3 * hidden),
        "midlayer.input_layernorm.weight": norm_weight(),
        "midlayer.hidden_norm.weight": norm_weight(),
        "midlayer.post_attention_layernorm.weight": norm_weight(),
        "midlayer.self_attn.q_proj.weight": random_weight(heads * head_dim, 2 * hidden),
        "midlayer.self_attn.k_proj.weight": random_weight(kv_heads * head_dim, 2 * hidden),
        "midlayer.self_attn.v_proj.weight": random_weight(kv_heads * head_dim, 2 * hidden),
        "midlayer.self_attn.o_proj.weight": random_weight(hidden, heads * head_dim),
        "midlayer.mlp.gate_proj.weight": random_weight(inter, hidden),
        "midlayer.mlp.up_proj.weight": random_weight(inter, hidden),
        "midlayer.mlp.down_proj.weight": random_weight(hidden, inter),
        "norm.weight": norm_weight(),
        "lm_head.weight": random_weight(draft_vocab, hidden),
        "d2t": ("I64", [draft_vocab], tensor_bytes([d * args.stride - d for d in range(draft_vocab)], "q")),
        "t2d": ("BOOL", [vocab], bytes(1 if t % args.stride == 0 else 0 for t in range(vocab))),
    }
    config = head_config(target, draft_vocab)
    if args.lm_head != "own":
        for name in ("lm_head.weight", "d2t", "t2d"):
            del tensors[name]
        del config["draft_vocab_size"]
        config["tie_word_embeddings"] = args.lm_head == "tied"
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(out / "model.safetensors", tensors)
    print(f"wrote {out}: hidden {hidden}, draft vocabulary {draft_vocab} of {vocab}")


if __name__ == "__main__":
    main()
