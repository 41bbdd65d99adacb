#!/usr/bin/env python3
"""DFlash drafter fixtures (DFlashDraftModel, z-lab's layout: Qwen3 layers under `layers.{i}.`, `fc`, `hidden_norm`,
`norm`; no embedding or LM head: the target's are used). Standard library only (no torch or numpy).

    make_dflash_fixture.py random TARGET_DIR OUT_DIR [--layers 2] [--block 4] [--seed 1]
        a random drafter for the target checkpoint TARGET_DIR (its hidden size, heads and vocabulary; the last token
        of the vocabulary is the mask token; taps spread over the target's layers), bf16.

    make_dflash_fixture.py reference OUT_DIR [--seed 1]
        a tiny self-contained drafter (f32) plus expected/model.safetensors: a target embedding table and LM head, rows of
        tapped target features, and the drafter's logits for two steps over two sequences, computed here in plain
        Python from z-lab's forward (context K/V from hidden_norm(fc(features)) at every layer, block queries seeing
        every cached context key and the whole block). reference.json lists the steps.

    make_dflash_fixture.py cycle TARGET_DIR TARGET_OUT OUT_DIR [--seed 1]
        a target whose residual stream is the token's embedding at every layer and whose next token is s(current) for
        a random cycle s (attention and MLP outputs zero), with a sign-structured embedding table (dimension 0 is +1
        for every token, -1 for the mask token), and an exact drafter for it: in its first layer every mask row attends
        only to the block's first row (the last committed token: its key is +, the masks' and the zero context's are
        - and 0) and copies it (v = I, o = 100 I), so the target's LM head reads s(last token) at every mask row: the
        first draft token of every block is right and the second never is (s has no 2-cycles for more than 2 tokens).
"""
import argparse
import json
import math
import pathlib
import random
import struct
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_eagle3_head import tensor_bytes, write_safetensors  # noqa: E402


def f32(shape, values):
    return ("F32", list(shape), tensor_bytes(values, "f"))


def bf16(shape, values):
    raw = struct.pack(f"<{len(values)}f", *values)
    # Round to nearest even on the upper 16 bits.
    out = bytearray()
    for i in range(0, len(raw), 4):
        bits = struct.unpack_from("<I", raw, i)[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        out += struct.pack("<H", bits & 0xFFFF)
    return ("BF16", list(shape), bytes(out))


def drafter_config(hidden, heads, kv_heads, head_dim, inter, vocab, layers, block, mask, taps, target_layers,
                   dtype="float32", theta=10000.0, eps=1e-6):
    return {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": hidden,
            "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
            "intermediate_size": inter, "num_hidden_layers": layers, "vocab_size": vocab,
            "max_position_embeddings": 4096, "rms_norm_eps": eps, "rope_theta": theta, "attention_bias": False,
            "tie_word_embeddings": False, "is_causal": False, "num_target_layers": target_layers,
            "torch_dtype": dtype,
            "dflash_config": {"block_size": block, "mask_token_id": mask, "target_layer_ids": taps}}


def drafter_weights(rng, hidden, heads, kv_heads, head_dim, inter, layers, taps, std=0.1):
    """name -> (shape, list of floats)."""
    def rand(*shape):
        n = 1
        for s in shape:
            n *= s
        return (list(shape), [rng.gauss(0.0, std) for _ in range(n)])

    def norm(n):
        return ([n], [1.0 + rng.gauss(0.0, 0.1) for _ in range(n)])

    w = {"fc.weight": rand(hidden, len(taps) * hidden), "hidden_norm.weight": norm(hidden), "norm.weight": norm(hidden)}
    for i in range(layers):
        p = f"layers.{i}."
        w.update({p + "input_layernorm.weight": norm(hidden), p + "post_attention_layernorm.weight": norm(hidden),
                  p + "self_attn.q_proj.weight": rand(heads * head_dim, hidden),
                  p + "self_attn.k_proj.weight": rand(kv_heads * head_dim, hidden),
                  p + "self_attn.v_proj.weight": rand(kv_heads * head_dim, hidden),
                  p + "self_attn.o_proj.weight": rand(hidden, heads * head_dim),
                  p + "self_attn.q_norm.weight": norm(head_dim), p + "self_attn.k_norm.weight": norm(head_dim),
                  p + "mlp.gate_proj.weight": rand(inter, hidden), p + "mlp.up_proj.weight": rand(inter, hidden),
                  p + "mlp.down_proj.weight": rand(hidden, inter)})
    return w


def save(path, weights, encode=f32):
    write_safetensors(path, {name: encode(shape, values) for name, (shape, values) in weights.items()})


def spread(count, layers):
    """`count` distinct target layer ids spread over [0, layers - 1)."""
    return sorted({min(layers - 2, round(i * (layers - 2) / max(1, count - 1))) for i in range(count)})


# ---- the reference forward (plain Python) ----

def matvec(w, shape, x):
    rows, cols = shape
    return [sum(w[r * cols + c] * x[c] for c in range(cols)) for r in range(rows)]


def rms_norm(x, weight, eps):
    scale = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * scale * g for v, g in zip(x, weight)]


def rope(x, position, theta):
    """Qwen3's default RoPE on one head: pairs (i, i + d/2)."""
    d = len(x)
    half = d // 2
    out = list(x)
    for i in range(half):
        angle = position * theta ** (-2.0 * i / d)
        c, s = math.cos(angle), math.sin(angle)
        out[i] = x[i] * c - x[i + half] * s
        out[i + half] = x[i + half] * c + x[i] * s
    return out


class Reference:
    def __init__(self, config, weights, embed, head):
        self.c, self.w, self.embed, self.head = config, weights, embed, head
        self.hidden, self.heads = config["hidden_size"], config["num_attention_heads"]
        self.kv_heads, self.hd = config["num_key_value_heads"], config["head_dim"]
        self.eps, self.theta = config["rms_norm_eps"], config["rope_theta"]

    def lin(self, name, x):
        shape, values = self.w[name]
        return matvec(values, shape, x)

    def heads_of(self, v, n):
        return [v[h * self.hd:(h + 1) * self.hd] for h in range(n)]

    def kv(self, layer, x, position):
        p = f"layers.{layer}.self_attn."
        k = [rope(rms_norm(h, self.w[p + "k_norm.weight"][1], self.eps), position, self.theta)
             for h in self.heads_of(self.lin(p + "k_proj.weight", x), self.kv_heads)]
        return k, self.heads_of(self.lin(p + "v_proj.weight", x), self.kv_heads)

    def step(self, cache, begin, features, block_tokens):
        """cache: per layer {position: (k, v)} of committed context rows (updated with the new ones). features: the
        tapped target rows of positions begin .. begin + len - 1; the block follows them. Returns the logits of block
        rows 1 .. B - 1."""
        ctx = [rms_norm(self.lin("fc.weight", f), self.w["hidden_norm.weight"][1], self.eps) for f in features]
        start = begin + len(features)
        x = [list(self.embed[t]) for t in block_tokens]
        for layer in range(self.c["num_hidden_layers"]):
            p = f"layers.{layer}."
            for i, c in enumerate(ctx):
                cache[layer][begin + i] = self.kv(layer, c, begin + i)
            hn = [rms_norm(r, self.w[p + "input_layernorm.weight"][1], self.eps) for r in x]
            block_kv = {start + j: self.kv(layer, h, start + j) for j, h in enumerate(hn)}
            keys = dict(cache[layer])
            keys.update(block_kv)
            order = sorted(keys)
            group = self.heads // self.kv_heads
            out = []
            for j, h in enumerate(hn):
                q = [rope(rms_norm(qh, self.w[p + "self_attn.q_norm.weight"][1], self.eps), start + j, self.theta)
                     for qh in self.heads_of(self.lin(p + "self_attn.q_proj.weight", h), self.heads)]
                attn = []
                for head in range(self.heads):
                    kvh = head // group
                    scores = [sum(a * b for a, b in zip(q[head], keys[pos][0][kvh])) / math.sqrt(self.hd)
                              for pos in order]
                    top = max(scores)
                    e = [math.exp(s - top) for s in scores]
                    total = sum(e)
                    attn += [sum(e[i] * keys[pos][1][kvh][d] for i, pos in enumerate(order)) / total
                             for d in range(self.hd)]
                out.append(self.lin(p + "self_attn.o_proj.weight", attn))
            x = [[a + b for a, b in zip(r, o)] for r, o in zip(x, out)]
            for j in range(len(x)):
                en = rms_norm(x[j], self.w[p + "post_attention_layernorm.weight"][1], self.eps)
                g, u = self.lin(p + "mlp.gate_proj.weight", en), self.lin(p + "mlp.up_proj.weight", en)
                m = self.lin(p + "mlp.down_proj.weight", [a / (1.0 + math.exp(-a)) * b for a, b in zip(g, u)])
                x[j] = [a + b for a, b in zip(x[j], m)]
        logits = []
        for r in x[1:]:
            n = rms_norm(r, self.w["norm.weight"][1], self.eps)
            logits.append([sum(a * b for a, b in zip(row, n)) for row in self.head])
        return logits


def write_reference(out: pathlib.Path, seed: int) -> None:
    rng = random.Random(seed)
    hidden, heads, kv_heads, hd, inter, vocab, layers, block = 32, 4, 2, 8, 48, 40, 2, 4
    taps, target_layers = [0, 2], 4
    mask = vocab - 1
    config = drafter_config(hidden, heads, kv_heads, hd, inter, vocab, layers, block, mask, taps, target_layers)
    weights = drafter_weights(rng, hidden, heads, kv_heads, hd, inter, layers, taps, std=0.2)
    embed = [[rng.gauss(0.0, 1.0) for _ in range(hidden)] for _ in range(vocab)]
    head = [[rng.gauss(0.0, 0.3) for _ in range(hidden)] for _ in range(vocab)]
    feature_slots = 24
    features = [[rng.gauss(0.0, 1.0) for _ in range(len(taps) * hidden)] for _ in range(feature_slots)]
    ref = Reference(config, weights, embed, head)
    # Two sequences over two steps: A catches up on 5 context rows then 2, B on 3 then none (its block only).
    seqs = {"a": {"cache": [dict() for _ in range(layers)], "seen": 0},
            "b": {"cache": [dict() for _ in range(layers)], "seen": 0}}
    plan = [[("a", [3, 7, 1, 9, 12], 5), ("b", [20, 2, 5], 11)], [("a", [4, 16], 30), ("b", [], 6)]]
    steps, expected = [], {}
    for s, step in enumerate(plan):
        entry = []
        for name, rows, last in step:
            seq = seqs[name]
            block_tokens = [last] + [mask] * (block - 1)
            logits = ref.step(seq["cache"], seq["seen"], [features[r] for r in rows], block_tokens)
            entry.append({"sequence": name, "begin": seq["seen"], "feature_rows": rows,
                          "context_tokens": [(r * 7) % (vocab - 1) for r in rows], "block_tokens": block_tokens})
            expected[f"logits.{s}.{name}"] = ([block - 1, vocab], [v for row in logits for v in row])
            seq["seen"] += len(rows)
        steps.append(entry)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save(out / "model.safetensors", weights)
    (out / "expected").mkdir(exist_ok=True)
    save(out / "expected" / "model.safetensors", {
        "embed": ([vocab, hidden], [v for r in embed for v in r]), "head": ([vocab, hidden], [v for r in head for v in r]),
        "features": ([feature_slots, len(taps) * hidden], [v for r in features for v in r]), **expected})
    (out / "reference.json").write_text(json.dumps({"steps": steps}, indent=1) + "\n")
    print(f"wrote {out}: a {layers}-layer drafter and the logits of {len(expected)} blocks")


def target_dims(target):
    text = target.get("text_config", target)
    hidden, heads = text["hidden_size"], text["num_attention_heads"]
    return (hidden, heads, text.get("num_key_value_heads", heads), text.get("head_dim", hidden // heads),
            text["intermediate_size"], text["vocab_size"], text["num_hidden_layers"])


def write_random(target_dir: pathlib.Path, out: pathlib.Path, layers: int, block: int, seed: int) -> None:
    target = json.loads((target_dir / "config.json").read_text())
    hidden, heads, kv_heads, hd, inter, vocab, target_layers = target_dims(target)
    taps = spread(min(3, target_layers - 1), target_layers)
    rng = random.Random(seed)
    weights = drafter_weights(rng, hidden, heads, kv_heads, hd, inter, layers, taps)
    config = drafter_config(hidden, heads, kv_heads, hd, inter, vocab, layers, block, vocab - 1, taps, target_layers,
                            dtype="bfloat16")
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save(out / "model.safetensors", weights, bf16)
    print(f"wrote {out}: a random {layers}-layer drafter (taps {taps}) for {target_dir}")


def write_cycle(target_dir: pathlib.Path, target_out: pathlib.Path, out: pathlib.Path, seed: int) -> None:
    target = json.loads((target_dir / "config.json").read_text())
    hidden, _, _, _, inter, vocab, layers = target_dims(target)
    rng = random.Random(seed)
    mask = vocab - 1
    # Dimension 0 tells real tokens (+1) from the mask token (-1); the rest is random.
    embed = [[1.0 if t != mask else -1.0] + [rng.gauss(0.0, 1.0) for _ in range(hidden - 1)] for t in range(vocab)]
    order = list(range(vocab - 1))
    rng.shuffle(order)
    step = {order[i]: order[(i + 1) % len(order)] for i in range(len(order))}
    back = {after: before for before, after in step.items()}
    zeros = lambda *shape: (list(shape), [0.0] * (shape[0] * shape[1]))  # noqa: E731
    ones = ([hidden], [1.0] * hidden)

    def rand(*shape):
        return (list(shape), [rng.gauss(0.0, 0.1) for _ in range(shape[0] * shape[1])])

    heads, kv_heads, hd = 4, 2, hidden // 4
    t = {"model.embed_tokens.weight": ([vocab, hidden], [v for row in embed for v in row]),
         "model.norm.weight": ones,
         # logits[s] = embed[back[s]] . norm(embed[t]): largest at s = step[t]; the mask token is never predicted.
         "lm_head.weight": ([vocab, hidden], [v for s in range(vocab)
                                              for v in (embed[back[s]] if s != mask else [0.0] * hidden)])}
    for layer in range(layers):
        p = f"model.layers.{layer}."
        t.update({p + "input_layernorm.weight": ones, p + "post_attention_layernorm.weight": ones,
                  p + "self_attn.q_proj.weight": rand(heads * hd, hidden),
                  p + "self_attn.k_proj.weight": rand(kv_heads * hd, hidden),
                  p + "self_attn.v_proj.weight": rand(kv_heads * hd, hidden),
                  p + "self_attn.o_proj.weight": zeros(hidden, heads * hd),
                  p + "self_attn.q_norm.weight": ([hd], [1.0] * hd), p + "self_attn.k_norm.weight": ([hd], [1.0] * hd),
                  p + "mlp.gate_proj.weight": rand(inter, hidden), p + "mlp.up_proj.weight": rand(inter, hidden),
                  p + "mlp.down_proj.weight": zeros(hidden, inter)})
    target_config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": hidden,
                     "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": hd,
                     "intermediate_size": inter, "num_hidden_layers": layers, "vocab_size": vocab,
                     "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
                     "tie_word_embeddings": False, "torch_dtype": "bfloat16", "eos_token_id": mask,
                     "bos_token_id": mask}
    target_out.mkdir(parents=True, exist_ok=True)
    (target_out / "config.json").write_text(json.dumps(target_config, indent=2) + "\n")
    save(target_out / "model.safetensors", t, bf16)
    # The drafter: 4 heads of hd = hidden / 4 with their own K/V (v = I copies the whole normed row). Scores live in
    # each head's dimension hd/2 - 1 (RoPE's slowest pair: ~1e-6 rad per position at theta 1e6): q = -x0, k = +x0,
    # normed per head to +-sqrt(hd) and scaled by 10 (q_norm, k_norm): a mask query scores +100 hd / sqrt(hd) against
    # the block's first row, the same negative against masks, 0 against context rows (fc = 0).
    dh, dkv = 4, 4
    slot = hd // 2 - 1
    q = [0.0] * (dh * hd * hidden)
    k = [0.0] * (dkv * hd * hidden)
    for h in range(dh):
        q[(h * hd + slot) * hidden + 0] = -1.0
        k[(h * hd + slot) * hidden + 0] = 1.0
    norm_w = ([hd], [10.0 if d == slot else 1.0 for d in range(hd)])
    eye = lambda n, scale: ([n, n], [scale if r == c else 0.0 for r in range(n) for c in range(n)])  # noqa: E731
    taps = spread(2, layers)
    d = {"fc.weight": zeros(hidden, len(taps) * hidden), "hidden_norm.weight": ones, "norm.weight": ones}
    for layer in range(2):
        p = f"layers.{layer}."
        first = layer == 0
        d.update({p + "input_layernorm.weight": ones, p + "post_attention_layernorm.weight": ones,
                  p + "self_attn.q_proj.weight": ([dh * hd, hidden], q) if first else rand(dh * hd, hidden),
                  p + "self_attn.k_proj.weight": ([dkv * hd, hidden], k) if first else rand(dkv * hd, hidden),
                  p + "self_attn.v_proj.weight": eye(hidden, 1.0) if first else rand(dkv * hd, hidden),
                  p + "self_attn.o_proj.weight": eye(hidden, 100.0) if first else zeros(hidden, dh * hd),
                  p + "self_attn.q_norm.weight": norm_w, p + "self_attn.k_norm.weight": norm_w,
                  p + "mlp.gate_proj.weight": rand(inter, hidden), p + "mlp.up_proj.weight": rand(inter, hidden),
                  p + "mlp.down_proj.weight": zeros(hidden, inter)})
    config = drafter_config(hidden, dh, dkv, hd, inter, vocab, 2, 4, mask, taps, layers, dtype="bfloat16",
                            theta=1000000.0)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save(out / "model.safetensors", d, bf16)
    print(f"wrote {target_out} (next token = a {vocab - 1}-cycle step) and its exact drafter {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("random")
    r.add_argument("target")
    r.add_argument("out")
    r.add_argument("--layers", type=int, default=2)
    r.add_argument("--block", type=int, default=4)
    ref = sub.add_parser("reference")
    ref.add_argument("out")
    c = sub.add_parser("cycle")
    c.add_argument("target")
    c.add_argument("target_out")
    c.add_argument("out")
    for p in (r, ref, c):
        p.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.mode == "random":
        write_random(pathlib.Path(args.target), pathlib.Path(args.out), args.layers, args.block, args.seed)
    elif args.mode == "reference":
        write_reference(pathlib.Path(args.out), args.seed)
    else:
        write_cycle(pathlib.Path(args.target), pathlib.Path(args.target_out), pathlib.Path(args.out), args.seed)


if __name__ == "__main__":
    main()
