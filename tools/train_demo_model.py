#!/usr/bin/env python3
"""Train radixserve's small demo model (models/radixserve-demo) from scratch.

Input: the corpus written by tools/prepare_demo_corpus.sh (English text from Debian
packages; documents separated by a line "<|endoftext|>").

Steps, all inside one wall-clock budget (--deadline, default 480 s; the training loop itself
is capped by --train-seconds, default 100 s):
  1. hold out ~1% of the documents for validation;
  2. train a byte-level BPE tokenizer (4096 tokens, GPT-style split regex, special tokens
     <|endoftext|>, <|im_start|>, <|im_end|>) with the `tokenizers` library;
  3. train a LlamaForCausalLM (~14M parameters, tied embeddings) with bf16 autocast, AdamW
     and a cosine schedule over the time left, on random 512-token windows of the packed
     token stream, keeping the checkpoint with the best validation loss;
  4. export a standard Hugging Face folder: config.json, generation_config.json,
     model.safetensors (bf16), tokenizer.json, tokenizer_config.json (ChatML template);
  5. reload it with AutoModelForCausalLM / AutoTokenizer, measure validation loss and
     perplexity, write reference_greedy.json (greedy continuations from transformers in
     fp32 on the CPU, with the top1-top2 logit margin of every step) and README.md.

Steps after the export are each guarded, so a late failure still leaves the exported files.

Usage (on the GPU machine):
  python3 tools/train_demo_model.py --corpus .demo_corpus/corpus.txt.gz --out OUTDIR
  python3 tools/train_demo_model.py --smoke --corpus ... --out /tmp/smoke   # 1-minute check
"""
import argparse
import gzip
import hashlib
import json
import math
import os
import random
import sys
import time
import traceback

T_START = time.time()

EOT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIALS = [EOT, IM_START, IM_END]  # ids 0, 1, 2
# GPT-4/Qwen2-style split: contractions, letter runs with one leading non-letter, single
# digits, punctuation runs, newlines, other whitespace.
SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = ("{% for message in messages %}"
                 "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
                 "{% endfor %}"
                 "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

PROMPTS = [
    {"name": "pipes", "text": "A pipe is a unidirectional data channel that can be used for interprocess communication. When a process"},
    {"name": "python_list", "text": "In Python, a list is a mutable sequence type. You can add an element to the end of a list with"},
    {"name": "postgres", "text": "The PostgreSQL query planner examines the different ways a query can be executed and then"},
    {"name": "kernel", "text": "The Linux kernel provides a number of mechanisms for synchronization between threads, such as"},
    {"name": "quote", "text": "The most important thing in life is not what you know, but"},
    {"name": "chat_ls", "messages": [{"role": "user", "content": "What does the ls command do?"}]},
    {"name": "chat_fortune", "messages": [{"role": "system", "content": "You are a helpful assistant."},
                                          {"role": "user", "content": "Tell me a fortune."}]},
]


def log(*a):
    print(f"[{time.time() - T_START:7.1f}s]", *a, flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=".demo_corpus/corpus.txt.gz")
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline", type=float, default=480.0, help="total wall-clock budget in seconds")
    ap.add_argument("--reserve", type=float, default=75.0, help="seconds kept after training for export and checks")
    ap.add_argument("--train-seconds", type=float, default=100.0,
                    help="cap on the training loop (seconds); the cosine schedule spans it. Longer runs overfit the "
                         "~15M-token corpus: in a 340-s run validation loss bottomed out after ~9 passes and then rose")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--tok-train-chars", type=int, default=20_000_000, help="characters used to train the tokenizer")
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--max-pos", type=int, default=2048)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--eval-every", type=float, default=20.0, help="seconds of training between validation passes")
    ap.add_argument("--val-frac", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model for training")
    ap.add_argument("--smoke", action="store_true", help="tiny end-to-end run to check the pipeline")
    a = ap.parse_args()
    if a.smoke:
        a.tok_train_chars = 2_000_000
        a.batch = 16
        a.deadline = min(a.deadline, 150.0)
        a.train_seconds = 10.0
        a.eval_every = 5.0
        a.warmup = 10
    return a


# --------------------------------------------------------------------------- data
def load_documents(path, smoke):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        raw = f.read()
    docs = [d.strip("\n") for d in raw.split("\n" + EOT + "\n")]
    docs = [d for d in docs if d.strip()]
    if smoke:
        docs = docs[:4000]
    return docs


def split_documents(docs, val_frac):
    train, val = [], []
    for d in docs:
        h = int.from_bytes(hashlib.sha1(d.encode("utf-8")).digest()[:8], "little")
        (val if (h % 10_000) < val_frac * 10_000 else train).append(d)
    return train, val


def train_tokenizer(train_docs, vocab_size, max_chars, seed):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, show_progress=False,
        special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    rng = random.Random(seed)
    sample = list(train_docs)
    rng.shuffle(sample)
    texts, n = [], 0
    for d in sample:
        for s in SPECIALS:
            d = d.replace(s, "\n")
        texts.append(d)
        n += len(d)
        if n >= max_chars:
            break
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    for i, s in enumerate(SPECIALS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    return tok, n


def encode_stream(tok, docs):
    import numpy as np
    eot = tok.token_to_id(EOT)
    parts = [np.array([eot], dtype=np.int32)]
    B = 2048
    for i in range(0, len(docs), B):
        for e in tok.encode_batch(docs[i:i + B], add_special_tokens=False):
            parts.append(np.asarray(e.ids, dtype=np.int32))
            parts.append(np.array([eot], dtype=np.int32))
    return np.concatenate(parts)


# --------------------------------------------------------------------------- model
def make_config(a, tok):
    from transformers import LlamaConfig
    eot, im_end = tok.token_to_id(EOT), tok.token_to_id(IM_END)
    kw = dict(vocab_size=tok.get_vocab_size(), hidden_size=a.hidden, intermediate_size=a.intermediate,
              num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
              head_dim=a.hidden // a.heads, hidden_act="silu", max_position_embeddings=a.max_pos,
              initializer_range=0.02, rms_norm_eps=1e-5, use_cache=True, tie_word_embeddings=True,
              bos_token_id=eot, eos_token_id=eot, pad_token_id=eot, attention_bias=False,
              attention_dropout=0.0, mlp_bias=False)
    try:
        cfg = LlamaConfig(rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **kw)
    except TypeError:
        cfg = LlamaConfig(rope_theta=10000.0, **kw)
    cfg.architectures = ["LlamaForCausalLM"]
    return cfg


def count_params(model):
    seen, n = set(), 0
    for p in model.parameters():
        if p.data_ptr() in seen:
            continue
        seen.add(p.data_ptr())
        n += p.numel()
    return n


def evaluate(model, val_tokens, seq, batch, device, max_windows=None, autocast=True):
    import torch
    import torch.nn.functional as F
    n_win = (len(val_tokens) - 1) // seq
    if max_windows:
        n_win = min(n_win, max_windows)
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for i in range(0, n_win, batch):
            idx = torch.arange(i, min(i + batch, n_win), device=device)[:, None] * seq + torch.arange(seq + 1, device=device)[None]
            chunk = val_tokens[idx]
            x, y = chunk[:, :-1], chunk[:, 1:]
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast and device.type == "cuda"):
                logits = model(input_ids=x).logits
            loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum")
            total += loss.item()
            count += y.numel()
    model.train()
    return total / max(count, 1), count


# --------------------------------------------------------------------------- export
def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def export(model, cfg, tok, out):
    import torch
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    sd = model.state_dict()
    tied = model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    tensors = {}
    for k, v in sd.items():
        if k == "lm_head.weight" and tied:
            continue
        tensors[k] = v.detach().to(torch.bfloat16).contiguous().cpu()
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})

    cfg.save_pretrained(out)
    cpath = os.path.join(out, "config.json")
    c = json.load(open(cpath))
    write_json(cpath + ".orig", c)
    c["architectures"] = ["LlamaForCausalLM"]
    c["torch_dtype"] = "bfloat16"
    c["dtype"] = "bfloat16"
    rp = c.get("rope_parameters") or {}
    c.setdefault("rope_theta", rp.get("rope_theta", 10000.0))
    c["use_cache"] = True
    write_json(cpath, dict(sorted(c.items())))

    eot, im_start, im_end = (tok.token_to_id(s) for s in SPECIALS)
    write_json(os.path.join(out, "generation_config.json"), {
        "bos_token_id": eot,
        "eos_token_id": [im_end, eot],
        "pad_token_id": eot,
        "do_sample": True,
        "temperature": 0.7,
        "top_k": 40,
        "top_p": 0.9,
    })

    tok.save(os.path.join(out, "tokenizer.json"))
    added = {}
    for s in SPECIALS:
        added[str(tok.token_to_id(s))] = {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                          "single_word": False, "special": True}
    write_json(os.path.join(out, "tokenizer_config.json"), {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": False,
        "add_eos_token": False,
        "added_tokens_decoder": added,
        "bos_token": None,
        "eos_token": EOT,
        "pad_token": EOT,
        "unk_token": None,
        "clean_up_tokenization_spaces": False,
        "model_max_length": cfg.max_position_embeddings,
        "chat_template": CHAT_TEMPLATE,
    })
    return {k: os.path.getsize(os.path.join(out, k)) for k in sorted(os.listdir(out))}


def render_chat(messages, add_generation_prompt=True):
    s = "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)
    return s + (f"{IM_START}assistant\n" if add_generation_prompt else "")


# --------------------------------------------------------------------------- checks after export
def reload_and_check(out, tok, model_mem, val_tokens_cpu, seq, results):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        hf_tok = AutoTokenizer.from_pretrained(out)
        results["autotokenizer_ok"] = True
    except Exception:
        traceback.print_exc()
        log("AutoTokenizer failed; falling back to PreTrainedTokenizerFast(tokenizer_file=...)")
        from transformers import PreTrainedTokenizerFast
        hf_tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(out, "tokenizer.json"), eos_token=EOT, pad_token=EOT)
        hf_tok.chat_template = CHAT_TEMPLATE
        results["autotokenizer_ok"] = False
    log("reloaded tokenizer:", type(hf_tok).__name__, "vocab", len(hf_tok), "eos", hf_tok.eos_token, hf_tok.eos_token_id)
    checks = ["Hello, world! It's 2024 and the café's   spaces\n\nnew lines\ttabs.",
              "def f(x):\n    return x ** 2  # square",
              render_chat([{"role": "user", "content": "Hi there"}])]
    mism = 0
    for s in checks:
        a = hf_tok(s)["input_ids"]
        b = tok.encode(s, add_special_tokens=True).ids
        if a != b:
            mism += 1
            log("TOKENIZER MISMATCH", repr(s), a[:20], b[:20])
        if hf_tok.decode(a) != s:
            log("decode round trip differs:", repr(hf_tok.decode(a)), "vs", repr(s))
    results["tokenizer_matches_tokenizers_lib"] = mism == 0
    tmpl = hf_tok.apply_chat_template([{"role": "user", "content": "Hi there"}], tokenize=False, add_generation_prompt=True)
    results["chat_template_ok"] = tmpl == render_chat([{"role": "user", "content": "Hi there"}])
    log("chat template renders:", repr(tmpl), "ok" if results["chat_template_ok"] else "MISMATCH")

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    def load():
        try:
            return AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
        except TypeError:
            return AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32, attn_implementation="eager")
    try:
        m = load()
    except Exception:
        traceback.print_exc()
        log("loading with the patched config.json failed; retrying with transformers' own config.json")
        cpath = os.path.join(out, "config.json")
        os.replace(cpath + ".orig", cpath)
        m = load()
        results["config_patch_reverted"] = True
    if os.path.exists(os.path.join(out, "config.json.orig")):
        os.remove(os.path.join(out, "config.json.orig"))
    m.eval()
    log("reloaded model:", type(m).__name__, "params", count_params(m), "dtype", next(m.parameters()).dtype,
        "tied", m.lm_head.weight.data_ptr() == m.model.embed_tokens.weight.data_ptr())
    results["reloaded_class"] = type(m).__name__
    # reloaded fp32 model vs the trained model (bf16-rounded weights, fp32 math)
    m = m.to(dev)
    ref = model_mem
    x = val_tokens_cpu[:seq].to(dev)[None].long()
    with torch.no_grad():
        la = m(input_ids=x).logits.float()
        lb = ref(input_ids=x).logits.float()
    diff = (la - lb).abs().max().item()
    results["reload_vs_memory_max_logit_diff"] = diff
    log(f"reload vs in-memory bf16-rounded model: max |logit diff| = {diff:.3e}")
    vl, n = evaluate(m, val_tokens_cpu.to(dev), seq, 32, dev, autocast=False)
    results["val_loss"] = vl
    results["val_ppl"] = math.exp(vl)
    results["val_tokens"] = n
    log(f"VALIDATION (reloaded bf16 weights, fp32 math): loss {vl:.4f}  perplexity {math.exp(vl):.2f}  on {n} tokens")
    return hf_tok, m.cpu()


def greedy_reference(hf_tok, m, out, max_new=32):
    import torch
    from transformers import GenerationConfig
    torch.manual_seed(0)
    gen_cfg = json.load(open(os.path.join(out, "generation_config.json")))
    eos = gen_cfg["eos_token_id"]
    eos = eos if isinstance(eos, list) else [eos]
    m = m.cpu().float().eval()
    recs = []
    for p in PROMPTS:
        text = p["text"] if "text" in p else hf_tok.apply_chat_template(p["messages"], tokenize=False, add_generation_prompt=True)
        ids = hf_tok(text)["input_ids"]
        # manual greedy loop (full recompute each step) for the per-step margins
        cur = list(ids)
        gen, margins, top1 = [], [], []
        with torch.no_grad():
            for _ in range(max_new):
                logits = m(input_ids=torch.tensor([cur])).logits[0, -1].float()
                v, i = torch.topk(logits, 2)
                t = int(i[0])
                gen.append(t)
                margins.append(round(float(v[0] - v[1]), 5))
                top1.append(round(float(v[0]), 5))
                cur.append(t)
                if t in eos:
                    break
        # transformers' own generate()
        gc = GenerationConfig(do_sample=False, max_new_tokens=max_new, eos_token_id=eos, pad_token_id=gen_cfg["pad_token_id"],
                              repetition_penalty=1.0, temperature=1.0, top_k=None, top_p=None)
        with torch.no_grad():
            o = m.generate(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                           generation_config=gc)
        hf_gen = o[0, len(ids):].tolist()
        rec = {"name": p["name"], "prompt": text}
        if "messages" in p:
            rec["messages"] = p["messages"]
        rec.update({
            "prompt_ids": ids,
            "completion_ids": hf_gen,
            "completion_text": hf_tok.decode(hf_gen, skip_special_tokens=False),
            "finish_reason": "stop" if hf_gen and hf_gen[-1] in eos else "length",
            "top1_top2_margin": margins,
            "top1_logit": top1,
            "manual_loop_matches_generate": gen == hf_gen,
        })
        recs.append(rec)
        log(f"greedy [{p['name']}] ({len(ids)} prompt tokens, min margin {min(margins):.3f}): "
            f"{text!r} -> {rec['completion_text']!r}")
        if gen != hf_gen:
            log("  NOTE: manual loop differs from generate():", gen, hf_gen)
    return recs, eos


def sampled_examples(hf_tok, m, n_tokens=60):
    import torch
    outs = []
    for p in PROMPTS[:3] + PROMPTS[5:6]:
        text = p["text"] if "text" in p else hf_tok.apply_chat_template(p["messages"], tokenize=False, add_generation_prompt=True)
        ids = torch.tensor([hf_tok(text)["input_ids"]])
        torch.manual_seed(7)
        with torch.no_grad():
            o = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_tokens, do_sample=True,
                           temperature=0.7, top_k=40, top_p=0.9, repetition_penalty=1.1)
        s = hf_tok.decode(o[0, ids.shape[1]:].tolist(), skip_special_tokens=False)
        outs.append({"prompt": text, "sample": s})
        log(f"sample [{p['name']}]: {text!r} -> {s!r}")
    return outs


# --------------------------------------------------------------------------- model card
def write_card(out, a, info, results, corpus_dir):
    sources = []
    p = os.path.join(corpus_dir, "corpus_stats.json")
    stats = json.load(open(p)) if os.path.exists(p) else {}
    for name, s in stats.get("sources", {}).items():
        sources.append(f"| {name} | {s.get('version', '-')} | {s.get('license', '')} | {s.get('chars', 0) / 1e6:.2f} |")
    vl, ppl = results.get("val_loss"), results.get("val_ppl")
    if vl is None:
        vl, ppl = info.get("best_val_loss_during_training"), None
        val_line = (f"Validation loss (bf16 autocast, during training): {vl:.4f}" if vl else "not measured")
    else:
        val_line = f"Validation loss **{vl:.4f}** nats/token, perplexity **{ppl:.2f}**"
    samples = "\n".join(f"- `{r['prompt']!r}` → `{r['completion_text']!r}`" for r in results.get("greedy", []))
    card = f"""---
language: en
library_name: transformers
pipeline_tag: text-generation
tags: [llama, demo, tiny, radixserve]
---

# radixserve-demo

A tiny **demo** language model trained from scratch for radixserve's out-of-the-box
experience and end-to-end tests. It writes English in the style of Unix/Linux
documentation, manual pages and fortune cookies. **It is a demo, not an assistant:** it
knows little, makes things up, and its "chat" is only the shape of ChatML learned from a
few thousand synthetic question/answer pairs. Do not use it for anything that matters.

## Model

| | |
| --- | --- |
| architecture | `LlamaForCausalLM` (transformers' own class) |
| parameters | {info['params']:,} ({info['params'] / 1e6:.1f}M; embeddings tied with the LM head) |
| layers / hidden / intermediate | {a.layers} / {a.hidden} / {a.intermediate} |
| attention heads / KV heads / head dim | {a.heads} / {a.kv_heads} / {a.hidden // a.heads} (grouped-query attention) |
| positions | RoPE, theta 10000, max_position_embeddings {a.max_pos} (trained on {a.seq}-token windows) |
| norm / activation | RMSNorm (eps 1e-5) / SiLU (SwiGLU MLP) |
| weights | `model.safetensors`, bfloat16, {info['files'].get('model.safetensors', 0) / 1e6:.1f} MB |
| tokenizer | byte-level BPE, {info['vocab']} tokens, trained on this corpus (`tokenizer.json`) |

Tokenizer: `Split` pre-tokenizer with the GPT-4/Qwen2-style regex (single digits), then
`ByteLevel` (no prefix space); `ByteLevel` decoder; no normalizer and no post-processor (no
BOS is added). Special tokens: `<|endoftext|>` = 0 (document separator, also bos/pad),
`<|im_start|>` = 1, `<|im_end|>` = 2. Generation stops at `<|im_end|>` or `<|endoftext|>`
(`generation_config.json`). The chat template (`tokenizer_config.json`) is plain ChatML:
`<|im_start|>{{role}}\\n{{content}}<|im_end|>\\n` for each message, and
`<|im_start|>assistant\\n` as the generation prompt.

## Training data

About {info['corpus_chars'] / 1e6:.0f}M characters ({info['train_tokens'] / 1e6:.1f}M tokens) of English text
taken from Debian 12 (bookworm) packages in the `main` section, converted to plain text
by `tools/prepare_demo_corpus.sh` (man pages rendered with groff; HTML, POD,
reStructuredText and AsciiDoc stripped to prose; code blocks dropped; deduplicated by
paragraph and by document). About 4% is synthetic ChatML built from the same packages
(fortune cookies, Jargon File entries, man-page NAME lines). The training text is not part of
the repository; the script rebuilds it.

| package | version | license (from the package's copyright file) | text (M chars) |
| --- | --- | --- | --- |
{chr(10).join(sources)}

## Training

{info['steps']} steps of {a.batch} × {a.seq} tokens ({info['tokens_seen'] / 1e6:.0f}M tokens,
about {info['tokens_seen'] / max(info['train_tokens'], 1):.0f} passes over the training split) on one
NVIDIA H200 in {info['train_seconds']:.0f} s of training ({info['total_seconds']:.0f} s for the whole script,
tokenizer included). AdamW (β 0.9/0.95, weight decay {a.wd}), peak learning rate {a.lr}, {a.warmup}
warm-up steps, cosine decay to {a.min_lr_frac:g}× over the time budget, bf16 autocast, fp32
master weights; the checkpoint with the best validation loss is the one exported
(step {info.get('best_step')}). The corpus is small, so training is deliberately short: in a
trial run of 340 s (5425 steps, ~23 passes) validation loss bottomed out at 2.89 after ~9
passes, at a still-high learning rate, and then rose to 3.19 while training loss fell to 1.85.

## Evaluation

Held-out split: ~{a.val_frac * 100:g}% of the documents (chosen by hash), {results.get('val_tokens', 0):,} tokens
in non-overlapping {a.seq}-token windows. {val_line}, measured after reloading the
exported bf16 weights with `AutoModelForCausalLM` (fp32 math).

`reference_greedy.json` holds greedy continuations (32 new tokens at most, stopping at an
EOS id) produced by transformers {info.get('transformers_version', '')} on the CPU in fp32 from these weights,
with prompt ids and the top-1/top-2 logit margin of every step, for comparing other
runtimes (a step with a small margin may legitimately flip under different arithmetic):

{samples}

## Regenerate

```
tools/prepare_demo_corpus.sh                 # on Debian 12: writes .demo_corpus/
python3 tools/train_demo_model.py --corpus .demo_corpus/corpus.txt.gz --out models/radixserve-demo
```

(PyTorch, transformers and tokenizers on a CUDA machine; about 2.5 minutes on one H200, 100 s
of it training. Results vary slightly between runs because the training loop is time-boxed.)
"""
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(card)


# --------------------------------------------------------------------------- main
def main():
    a = parse_args()
    import numpy as np
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import LlamaForCausalLM

    log(f"torch {torch.__version__}, transformers {transformers.__version__}, cuda {torch.cuda.is_available()}",
        torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
    random.seed(a.seed)
    np.random.seed(a.seed)
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    os.makedirs(a.out, exist_ok=True)
    corpus_dir = os.path.dirname(os.path.abspath(a.corpus))

    docs = load_documents(a.corpus, a.smoke)
    train_docs, val_docs = split_documents(docs, a.val_frac if not a.smoke else 0.05)
    corpus_chars = sum(len(d) for d in docs)
    log(f"corpus: {len(docs)} documents, {corpus_chars / 1e6:.1f}M chars; train {len(train_docs)}, val {len(val_docs)}")

    tok, n_tok_chars = train_tokenizer(train_docs, a.vocab, a.tok_train_chars, a.seed)
    log(f"tokenizer: vocab {tok.get_vocab_size()} trained on {n_tok_chars / 1e6:.1f}M chars")
    train_np = encode_stream(tok, train_docs)
    val_np = encode_stream(tok, val_docs)
    log(f"tokens: train {len(train_np) / 1e6:.2f}M, val {len(val_np) / 1e3:.0f}K "
        f"({corpus_chars / (len(train_np) + len(val_np)):.2f} chars/token)")
    for s in ["The quick brown fox jumps over the lazy dog.", render_chat([{"role": "user", "content": "Hi"}])]:
        e = tok.encode(s)
        log("  tokenization:", repr(s), "->", e.tokens)

    train_t = torch.from_numpy(train_np.astype(np.int64)).to(dev)
    val_t = torch.from_numpy(val_np.astype(np.int64)).to(dev)

    cfg = make_config(a, tok)
    model = LlamaForCausalLM(cfg)
    if model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
        model.lm_head.weight = model.model.embed_tokens.weight
    model.config.use_cache = False
    model.to(dev)
    try:
        model.set_attn_implementation("sdpa")
    except Exception as e:
        log("could not select sdpa attention explicitly:", e)
    n_params = count_params(model)
    log(f"model: {n_params:,} parameters ({n_params * 2 / 1e6:.1f} MB in bf16); attn {getattr(model.config, '_attn_implementation', '?')}")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    fwd = torch.compile(model) if a.compile else model

    train_start = time.time()
    budget = a.deadline - (train_start - T_START) - a.reserve
    if a.train_seconds is not None:
        budget = min(budget, a.train_seconds)
    budget = max(budget, 5.0)
    log(f"training for {budget:.0f} s (deadline {a.deadline:.0f} s, reserve {a.reserve:.0f} s)")
    n_windows = len(train_t) - a.seq - 1
    ar = torch.arange(a.seq + 1, device=dev)
    step, tokens_seen, next_eval = 0, 0, a.eval_every
    best = (float("inf"), None, 0)
    history = []
    last_log, loss_acc, loss_n = time.time(), 0.0, 0
    model.train()
    while True:
        el = time.time() - train_start
        if el >= budget:
            break
        frac = el / budget
        lr = a.lr * min(1.0, (step + 1) / a.warmup) * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        offs = torch.randint(0, n_windows, (a.batch,), device=dev)
        chunk = train_t[offs[:, None] + ar[None]]
        x, y = chunk[:, :-1], chunk[:, 1:]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = fwd(input_ids=x).logits
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens_seen += x.numel()
        if step % 25 == 0:
            loss_acc += loss.item()
            loss_n += 1
        if step % 200 == 0 or (a.smoke and step % 10 == 0):
            now = time.time()
            log(f"step {step:5d}  loss {loss_acc / max(loss_n, 1):.4f}  lr {lr:.2e}  "
                f"{tokens_seen / (now - train_start) / 1e6:.2f}M tok/s  epoch {tokens_seen / len(train_t):.1f}")
            loss_acc, loss_n = 0.0, 0
        if time.time() - train_start >= next_eval or time.time() - train_start >= budget:
            next_eval += a.eval_every
            vl, _ = evaluate(model, val_t, a.seq, 64, dev)
            history.append({"step": step, "seconds": round(time.time() - train_start, 1), "val_loss": round(vl, 4),
                            "train_loss": round(loss.item(), 4)})
            improved = vl < best[0]
            if improved:
                best = (vl, {k: v.detach().clone() for k, v in model.state_dict().items()}, step)
            log(f"eval step {step}: val loss {vl:.4f} (ppl {math.exp(vl):.2f}){'  *best*' if improved else ''}")
    train_seconds = time.time() - train_start
    vl, _ = evaluate(model, val_t, a.seq, 64, dev)
    history.append({"step": step, "seconds": round(train_seconds, 1), "val_loss": round(vl, 4)})
    log(f"training done: {step} steps, {tokens_seen / 1e6:.0f}M tokens in {train_seconds:.0f} s; final val loss {vl:.4f}")
    if vl < best[0]:
        best = (vl, None, step)
    elif best[1] is not None:
        model.load_state_dict(best[1])
        log(f"restored best checkpoint from step {best[2]} (val loss {best[0]:.4f})")

    # export (bf16) and keep an fp32 copy of the bf16-rounded weights for the reload check
    info = {"params": n_params, "vocab": tok.get_vocab_size(), "corpus_chars": corpus_chars,
            "train_tokens": int(len(train_np)), "val_tokens_stream": int(len(val_np)), "steps": step,
            "tokens_seen": tokens_seen, "train_seconds": train_seconds, "best_step": best[2],
            "best_val_loss_during_training": best[0], "history": history,
            "transformers_version": transformers.__version__, "torch_version": torch.__version__,
            "args": vars(a)}
    model.eval()
    with torch.no_grad():
        for p in model.parameters():
            p.data = p.data.to(torch.bfloat16).float()
    info["files"] = export(model, cfg, tok, a.out)
    log("exported:", info["files"])

    results = {}
    try:
        hf_tok, m = reload_and_check(a.out, tok, model, val_t.cpu(), a.seq, results)
        try:
            recs, eos = greedy_reference(hf_tok, m, a.out)
            results["greedy"] = recs
            write_json(os.path.join(a.out, "reference_greedy.json"), {
                "description": "Greedy continuations from transformers (fp32 on CPU, eager attention, weights upcast "
                               "from model.safetensors' bf16) for comparing other runtimes. prompt_ids come from the "
                               "tokenizer with default settings (no BOS added); chat prompts are rendered with the chat "
                               "template and add_generation_prompt=True. Generation stops after max_new_tokens or at an "
                               "eos id (the eos id is included in completion_ids). top1_top2_margin[i] is the gap "
                               "between the two largest logits at step i.",
                "transformers_version": transformers.__version__, "torch_version": torch.__version__,
                "max_new_tokens": 32, "eos_token_id": eos, "prompts": recs})
        except Exception:
            traceback.print_exc()
        try:
            results["samples"] = sampled_examples(hf_tok, m)
        except Exception:
            traceback.print_exc()
    except Exception:
        traceback.print_exc()
    info["total_seconds"] = time.time() - T_START
    try:
        write_card(a.out, a, info, results, corpus_dir)
    except Exception:
        traceback.print_exc()
    info["files"] = {k: os.path.getsize(os.path.join(a.out, k)) for k in sorted(os.listdir(a.out))}
    summary = {**info, **{k: v for k, v in results.items() if k not in ("greedy",)}}
    write_json(os.path.join(os.path.dirname(os.path.abspath(a.out)), os.path.basename(a.out) + ".train_info.json"), summary)
    log("files:", info["files"])
    log(f"DONE in {time.time() - T_START:.0f} s; val loss {results.get('val_loss')}, ppl {results.get('val_ppl')}")


if __name__ == "__main__":
    main()
