"""goldens_common.py — shared state and helpers of tools/make_goldens.py (and tools/make_goldens_hybrid.py).

Holds the offline environment set-up (before torch/transformers are imported), the run-wide state SEED_BUMP and
NOTES, and the model-independent helpers: config building, reference loading, greedy reference, random init, output.
SEED_BUMP is rebound by the entry points between attempts: read it as `goldens_common.SEED_BUMP` at call time,
never `from goldens_common import SEED_BUMP` (that copies the value once).
"""

import copy
import json
import math
import os
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402

N_GREEDY = 32
NOTES = []
SEED_BUMP = 0  # raised by the entry points' main() when a seed gives a degenerate greedy continuation
MIN_DISTINCT = 8  # each case's greedy_ids must hold at least this many distinct tokens
MIN_MARGIN = 2e-3  # and no greedy step may be a near-tie


class Degenerate(Exception):
    pass


TIED_RULES = {  # tied embeddings: keep e_t small in the residual (else the model just repeats the last token)
    "embed_tokens": lambda n, s, g: 0.15 * torch.randn(s, generator=g),
    "model.norm.weight": lambda n, s, g: 4.0 * (1.0 + 0.2 * torch.randn(s, generator=g)),
}


def note(*parts):
    NOTES.append(" ".join(str(p) for p in parts))


def log(*parts):
    print(*parts, flush=True)


# ----------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------

def sig6(x):
    return float(f"{x:.6g}")


def make_config(cls, rope, **kw):
    """Build a config with v5 `rope_parameters`; fall back to v4 rope_theta/rope_scaling."""
    try:
        return cls(rope_parameters=dict(rope), **kw)
    except TypeError as e:
        log(f"  {cls.__name__}(rope_parameters=...) failed ({e}); trying rope_theta/rope_scaling")
        r = dict(rope)
        theta = r.pop("rope_theta")
        scaling = r if r.get("rope_type", "default") != "default" else None
        return cls(rope_theta=theta, rope_scaling=scaling, **kw)


def load_ref(cls, path, **overrides):
    """Load a saved fixture as the reference model: fp32, eager attention, eager experts, CPU."""
    kw = dict(dtype=torch.float32, attn_implementation="eager")
    kw.update(overrides)
    model = None
    try:
        model, info = cls.from_pretrained(path, output_loading_info=True, experts_implementation="eager", **kw)
    except Exception as e:  # versions without the kwarg, or models that reject it
        log(f"  from_pretrained(experts_implementation='eager') failed ({type(e).__name__}: {e}); retrying without")
        model, info = cls.from_pretrained(path, output_loading_info=True, **kw)
    bad = {}
    for k in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        v = [x for x in (info.get(k) or []) if not (k == "missing_keys" and "lm_head" in str(x)
                                                     and model.config.tie_word_embeddings)]
        if v:
            bad[k] = v
    if bad:
        raise RuntimeError(f"loading {path}: {bad}")
    model = model.float().eval().to("cpu")
    cfg = model.config
    if hasattr(cfg, "_experts_implementation") and getattr(cfg, "_experts_implementation", None) != "eager":
        try:
            if hasattr(model, "set_experts_implementation"):
                model.set_experts_implementation("eager")
            else:
                cfg._experts_implementation = "eager"
        except Exception as e:  # pragma: no cover
            log("  could not force eager experts:", e)
    return model


def impl_desc(model):
    cfg = model.config
    return {
        "attn_implementation": getattr(cfg, "_attn_implementation", None),
        "experts_implementation": getattr(cfg, "_experts_implementation", "n/a"),
    }


@torch.no_grad()
def forward_logits(model, ids):
    out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
    return out.logits[0].float()


@torch.no_grad()
def greedy(model, prompt, n=N_GREEDY):
    seq = list(prompt)
    ids, margins, first_logits = [], [], None
    for _ in range(n):
        logits = forward_logits(model, seq)[-1]
        if first_logits is None:
            first_logits = logits.clone()
        top2 = torch.topk(logits, 2).values
        nxt = int(torch.argmax(logits))  # first (lowest) index on ties
        ids.append(nxt)
        margins.append(float(top2[0] - top2[1]))
        seq.append(nxt)
    return first_logits, ids, margins


@torch.no_grad()
def generate_check(model, prompt, greedy_ids):
    """Cross-check with generate(do_sample=False) (KV cache path)."""
    try:
        inp = torch.tensor([prompt], dtype=torch.long)
        out = model.generate(inp, attention_mask=torch.ones_like(inp), do_sample=False,
                             max_new_tokens=len(greedy_ids), pad_token_id=0)
        gen = out[0, len(prompt):].tolist()
        n = min(len(gen), len(greedy_ids))
        same = gen[:n] == greedy_ids[:n]
        first_diff = next((i for i in range(n) if gen[i] != greedy_ids[i]), None)
        return {"compared_tokens": n, "matches": same, "first_mismatch": first_diff}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def rand_prompt(gen, n, vocab):
    return torch.randint(3, vocab, (n,), generator=gen).tolist()


def randomize(model, seed, H, special=None):
    """Re-randomize EVERY parameter with a seeded normal (HF _init_weights zeroes biases/sinks)."""
    g = torch.Generator().manual_seed(seed)
    special = special or {}
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            shape = tuple(p.shape)
            rule = None
            for key, fn in special.items():
                if key in name:
                    rule = fn
                    break
            if rule is not None:
                val = rule(name, shape, g)
            elif name.endswith("norm.weight"):  # input/post/final/q/k norms: clearly not ones
                val = 1.0 + 0.2 * torch.randn(shape, generator=g)
            elif name.endswith("sinks"):
                val = 1.0 * torch.randn(shape, generator=g)
            elif name.endswith("bias"):
                val = 0.1 * torch.randn(shape, generator=g)
            elif "embed_tokens" in name:
                val = 0.5 * torch.randn(shape, generator=g)
            elif "lm_head" in name:
                val = (2.0 / math.sqrt(H)) * torch.randn(shape, generator=g)
            elif len(shape) == 2:  # Linear [out, in]
                val = torch.randn(shape, generator=g) / math.sqrt(shape[1])
            else:
                raise RuntimeError(f"no init rule for {name} {shape}")
            p.copy_(val.to(p.dtype))


def tensor_list(path):
    rows = []
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
        for k in sorted(f.keys()):
            sl = f.get_slice(k)
            rows.append(f"{k} {sl.get_dtype()} {list(sl.get_shape())}")
    return meta, rows


def folder_size(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def build_cases(model, prompts):
    cases = []
    for p in prompts:
        first_logits, ids, margins = greedy(model, p)
        cases.append({
            "prompt_ids": p,
            "last_logits": [sig6(x) for x in first_logits.tolist()],
            "greedy_ids": ids,
            "greedy_margins": [sig6(x) for x in margins],
            "_max_abs_logit": float(first_logits.abs().max()),
        })
    for c in cases:
        nd, mm = len(set(c["greedy_ids"])), min(c["greedy_margins"])
        if nd < MIN_DISTINCT or mm < MIN_MARGIN:
            raise Degenerate(f"prompt len {len(c['prompt_ids'])}: {nd} distinct greedy ids, min margin {mm:.3g}")
    return cases


def finish(name, out_dir, model, cases, dtype_of_weights, extra=None):
    gchecks = [generate_check(model, c["prompt_ids"], c["greedy_ids"]) for c in cases]
    max_abs = max(c.pop("_max_abs_logit") for c in cases)
    min_margin = min(min(c["greedy_margins"]) for c in cases)
    golden = {
        "fixture": name,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "dtype_of_weights": dtype_of_weights,
        "reference": "transformers fp32 eager on CPU",
        "implementations": impl_desc(model),
        "greedy_method": ("full forward pass over prompt+generated ids at every step, no KV cache; "
                          "argmax over fp32 logits, lowest index on ties"),
        "generate_check": {"method": "model.generate(do_sample=False) with KV cache, compared to greedy_ids",
                           "cases": gchecks},
        "logits_rounding": "6 significant digits",
        "seed_bump": SEED_BUMP,
        "max_abs_last_logit": sig6(max_abs),
        "min_greedy_margin": sig6(min_margin),
    }
    if extra:
        golden.update(extra)
    golden["cases"] = cases
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    meta, rows = tensor_list(os.path.join(out_dir, "model.safetensors"))
    for fn in ("config.json", "generation_config.json"):
        if os.path.exists(os.path.join(out_dir, fn)):
            with open(os.path.join(out_dir, fn)) as f:
                note(f"--- {name}/{fn}\n{f.read()}")
    note(f"\n=== {name}: files {sorted(os.listdir(out_dir))}, {folder_size(out_dir)} bytes, metadata {meta}")
    note("\n".join(rows))
    log(f"[{name}] size={folder_size(out_dir)} B  max|logit|={max_abs:.4f}  min greedy margin={min_margin:.6f}  "
        f"prompt lens={[len(c['prompt_ids']) for c in cases]}  impl={impl_desc(model)}  generate_check={gchecks}")
    if extra:
        log(f"[{name}] extra: {json.dumps({k: v for k, v in extra.items() if not isinstance(v, list)})}")


def fresh_dir(root, name):
    d = os.path.join(root, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    return d


def save_hf(model, d, dtype=None):
    m = model if dtype is None else copy.deepcopy(model).to(dtype)
    m.save_pretrained(d, safe_serialization=True)
    files = sorted(os.listdir(d))
    assert "model.safetensors" in files, files

