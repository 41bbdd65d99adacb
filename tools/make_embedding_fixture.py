#!/usr/bin/env python3
"""tests/data/models/qwen3_embedding: the qwen3 fixture as an embedding checkpoint laid out as Qwen3-Embedding ships
(sentence-transformers: modules.json, 1_Pooling with last-token pooling, 2_Normalize; the base model's tensors without
the "model." prefix and without an LM head), and its reference embeddings taken from transformers' own numbers.

The reference needs no transformers run: the qwen3 golden (tools/make_goldens.py) holds transformers' last-position
logits of each prompt, logits = W h with W the tied [vocab, hidden] table, so the final-normed hidden state h is the
least-squares solution of W h = logits (vocab 512 >> hidden 64, a well-conditioned random W), and the embedding is
h / |h|. numpy only.

    tools/make_embedding_fixture.py   # rewrites the folder
"""
import json
import pathlib

import numpy as np

from make_fp8_fixtures import read_safetensors, write_safetensors

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests/data/models/qwen3"
TARGET = ROOT / "tests/data/models/qwen3_embedding"


def main():
    tensors = read_safetensors(SOURCE / "model.safetensors")
    config = json.loads((SOURCE / "config.json").read_text())
    assert config["tie_word_embeddings"], "the reference solves for h through the tied table"
    table = tensors["model.embed_tokens.weight"].astype(np.float64)
    TARGET.mkdir(parents=True, exist_ok=True)
    # Qwen3-Embedding's layout: Qwen3Model's tensors (no prefix, no lm_head) under a Qwen3ForCausalLM config.
    write_safetensors(TARGET / "model.safetensors", {name.removeprefix("model."): ("F32", t)
                                                     for name, t in tensors.items() if not name.startswith("lm_head")})
    (TARGET / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (TARGET / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ], indent=2) + "\n")
    (TARGET / "1_Pooling").mkdir(exist_ok=True)
    (TARGET / "1_Pooling/config.json").write_text(json.dumps({
        "word_embedding_dimension": config["hidden_size"], "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": True, "include_prompt": True}, indent=2) + "\n")
    golden = json.loads((SOURCE / "golden.json").read_text())
    cases = []
    for case in golden["cases"]:
        logits = np.asarray(case["last_logits"], dtype=np.float64)
        hidden, residual, rank, _ = np.linalg.lstsq(table, logits, rcond=None)
        assert rank == table.shape[1]
        fit = np.abs(table @ hidden - logits).max()
        assert fit < 1e-4, f"logits are not W h: residual {fit}"  # they are, up to the golden's own rounding
        cases.append({"prompt_ids": case["prompt_ids"], "embedding": (hidden / np.linalg.norm(hidden)).tolist(),
                      "hidden_norm": float(np.linalg.norm(hidden)), "fit_residual": float(fit)})
    (TARGET / "reference.json").write_text(json.dumps({
        "source": "tests/data/models/qwen3/golden.json (transformers last-position logits), solved through the tied "
                  "embedding table: tools/make_embedding_fixture.py",
        "cases": cases}) + "\n")
    print(f"{TARGET}: {len(cases)} cases, fit residual <= {max(c['fit_residual'] for c in cases):.2e}")


if __name__ == "__main__":
    main()
