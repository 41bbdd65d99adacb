#!/usr/bin/env python3
"""Writes the small hand-made tokenizer.json fixtures under tests/tokenizer/data/ (committed).

byte_level/     Qwen-style byte-level BPE: NFC, Qwen split regex, added tokens with every flag.
sentencepiece/  Llama-2-style BPE: Prepend+Replace normalizer, byte_fallback, unk, <s> template,
                Replace/ByteFallback/Fuse/Strip decoder.
metaspace/      SentencePiece BPE through the Metaspace pre-tokenizer (prepend_scheme "first") and
                Metaspace decoder, without byte_fallback (unknown characters fuse into <unk>).
"""
import json
import pathlib

DATA = pathlib.Path(__file__).resolve().parent / "data"
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")


def bytes_to_unicode():
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, shifted = {}, 0x100
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(shifted)
            shifted += 1
    return table


def added(id_, content, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


def with_merges(vocab, merges):
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    return vocab


def byte_level():
    table = bytes_to_unicode()
    vocab = {table[b]: b for b in range(256)}
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("a", "a"), ("aa", "aa"), ("l", "l"), ("e", "ll"),
              ("h", "ell"), ("hell", "o"), ("Ġ", "Ġ"), ("Ċ", "Ċ"), ("Ġ", "hello"), ("ä", "½")]
    vocab = with_merges(vocab, merges)
    vocab["Ġworld"] = len(vocab)  # reachable only through ignore_merges
    n = len(vocab)
    tokens = [added(n, "<|im_end|>"), added(n + 1, "<think>", special=False),
              added(n + 2, "<lm>", lstrip=True), added(n + 3, "<rm>", rstrip=True),
              added(n + 4, "<sw>", special=False, single_word=True),
              added(n + 5, "<Up>", special=False, normalized=True)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": tokens,
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN_SPLIT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }


def sentencepiece_vocab():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for ch in "▁Helowrdthia你":
        vocab.setdefault(ch, len(vocab))
    merges = [("l", "l"), ("▁", "H"), ("e", "ll"), ("▁H", "ell"), ("▁Hell", "o"), ("▁", "w"), ("o", "r"),
              ("▁w", "or"), ("l", "d"), ("▁wor", "ld"), ("▁", "t"), ("h", "e"), ("▁t", "he"), ("▁", "▁")]
    return with_merges(vocab, merges), [f"{a} {b}" for a, b in merges]


def sentencepiece():
    vocab, merges = sentencepiece_vocab()
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "ignore_merges": False, "vocab": vocab, "merges": merges},
    }


def metaspace():
    tokenizer = sentencepiece()
    tokenizer["normalizer"] = None
    tokenizer["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                                  "split": True}
    tokenizer["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True}
    tokenizer["model"]["byte_fallback"] = False
    return tokenizer


def write(name, tokenizer, config):
    folder = DATA / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False, indent=1) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    write("byte_level", byte_level(), {"bos_token": None, "eos_token": "<|im_end|>",
                                       "tokenizer_class": "Qwen2Tokenizer"})
    write("sentencepiece", sentencepiece(), {"bos_token": {"__type": "AddedToken", "content": "<s>"},
                                             "eos_token": "</s>", "tokenizer_class": "PreTrainedTokenizerFast"})
    write("metaspace", metaspace(), {"bos_token": "<s>", "eos_token": "</s>"})
