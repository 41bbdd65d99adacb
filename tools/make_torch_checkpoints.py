#!/usr/bin/python3
"""PyTorch checkpoints (pytorch_model.bin, torch.save's zip format) for radixserve's loader tests, written by torch
itself (Debian's python3-torch; not needed to run the tests, only to remake their fixtures).

    tools/make_torch_checkpoints.py convert SRC_DIR OUT_DIR [--shards N]
        A safetensors model folder as pytorch_model.bin (N > 1: pytorch_model-0000k-of-0000N.bin shards and
        pytorch_model.bin.index.json, as transformers' save_pretrained(safe_serialization=False) writes them); the
        folder's *.json files are copied. tests/data/eagle3/cycle_head_bin comes from
        `convert tests/data/eagle3/cycle_head tests/data/eagle3/cycle_head_bin`.

    tools/make_torch_checkpoints.py fixtures OUT_DIR
        tests/data/torch: state_dict.bin (every dtype the loader maps, tied and offset views, a scalar, an empty
        tensor, a Parameter, a non-tensor entry, _metadata) beside state_dict.safetensors holding the same tensors;
        sharded/ (the same tensors in two shards with an index); zip64.bin (state_dict.bin re-packed with every zip64
        field in use, as archives over 4 GiB have them); torch2_v3.bin (torch >= 2.1's layout for float8 and uint16
        tensors, _rebuild_tensor_v3 over untyped storages, written by hand: torch 1.13 cannot); and files the loader
        must refuse: noncontiguous.bin, unsafe.bin (a pickle that calls os.system), compressed.bin (deflated
        records), legacy.bin (torch < 1.6's format), nested.bin (a training checkpoint, weights under "model"),
        negated.bin (torch 2.x's neg-view metadata, by hand) and lfs_pointer.bin (a Git LFS pointer)."""
import argparse
import collections
import json
import os
import pathlib
import shutil
import struct
import zipfile
import zlib

import torch

SAFETENSORS_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "F64": torch.float64,
                      "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
                      "U8": torch.uint8, "BOOL": torch.bool}
NAMES = {dtype: name for name, dtype in SAFETENSORS_DTYPES.items()}


def read_safetensors(path: pathlib.Path) -> dict:
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    tensors = collections.OrderedDict()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[8 + length + begin:8 + length + end])
        dtype = SAFETENSORS_DTYPES[info["dtype"]]
        flat = torch.frombuffer(raw, dtype=dtype) if raw else torch.zeros(0, dtype=dtype)
        tensors[name] = flat.reshape(info["shape"]).clone()
    return tensors


def write_safetensors(path: pathlib.Path, tensors: dict) -> None:
    header, blobs, offset = {}, [], 0
    for name, tensor in tensors.items():
        raw = tensor.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        header[name] = {"dtype": NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def save_sharded(tensors: dict, out: pathlib.Path, shards: int) -> None:
    if shards <= 1:
        torch.save(tensors, out / "pytorch_model.bin")
        return
    names = list(tensors)
    weight_map, total = {}, 0
    for k in range(shards):
        part = names[k * len(names) // shards:(k + 1) * len(names) // shards]
        file = f"pytorch_model-{k + 1:05d}-of-{shards:05d}.bin"
        torch.save(collections.OrderedDict((n, tensors[n]) for n in part), out / file)
        for n in part:
            weight_map[n] = file
            total += tensors[n].numel() * tensors[n].element_size()
    (out / "pytorch_model.bin.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2) + "\n")


def convert(src: pathlib.Path, out: pathlib.Path, shards: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tensors = collections.OrderedDict()
    for path in sorted(src.glob("*.safetensors")):
        tensors.update(read_safetensors(path))
    save_sharded(tensors, out, shards)
    for path in src.glob("*.json"):
        if not path.name.startswith("model.safetensors"):
            shutil.copy(path, out / path.name)
    loaded = {}
    for path in out.glob("pytorch_model*.bin"):
        loaded.update(torch.load(path))
    assert loaded.keys() == tensors.keys() and all(torch.equal(loaded[n], tensors[n]) for n in tensors)


def repack_zip64(src: pathlib.Path, dst: pathlib.Path) -> None:
    """Every record of `src` stored again with its sizes and offsets in zip64 extra fields (0xFFFFFFFF in the
    32-bit fields), a zip64 end-of-directory record and its locator: the layout of an archive over 4 GiB."""
    with zipfile.ZipFile(src) as archive:
        records = [(info.filename, archive.read(info)) for info in archive.infolist()]
    out, directory = bytearray(), bytearray()
    for name, data in records:
        crc, encoded = zlib.crc32(data), name.encode()
        local_offset = len(out)
        extra = struct.pack("<HHQQ", 1, 16, len(data), len(data))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(encoded),
                           len(extra)) + encoded + extra + data
        extra = struct.pack("<HHQQQ", 1, 24, len(data), len(data), local_offset)
        directory += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF,
                                 0xFFFFFFFF, len(encoded), len(extra), 0, 0, 0, 0, 0xFFFFFFFF) + encoded + extra
    start = len(out)
    out += directory
    end64 = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, len(records), len(records), len(directory), start)
    out += struct.pack("<IIQI", 0x07064B50, 0, end64, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    dst.write_bytes(bytes(out))


def binunicode(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def rebuild_call(version: int, storage_type: str, key: str, numel: int, offset: int, size: tuple,
                 tail: bytes) -> bytes:
    """A pickled torch._utils._rebuild_tensor_v<version>(storage, offset, size, stride, False, OrderedDict(), ...)
    as torch 2.x writes it; `tail` pickles the arguments after backward_hooks."""
    stride = [1] * len(size)
    for i in range(len(size) - 2, -1, -1):
        stride[i] = stride[i + 1] * size[i + 1]
    ints = lambda values: b"(" + b"".join(b"K" + bytes([v]) for v in values) + b"t"  # noqa: E731
    return (f"ctorch._utils\n_rebuild_tensor_v{version}\n(".encode() + b"(" + binunicode("storage") +
            f"ctorch\n{storage_type}\n".encode() + binunicode(key) + binunicode("cpu") + b"K" + bytes([numel]) +
            b"tQ" + b"K" + bytes([offset]) + ints(size) + ints(stride) + b"\x89ccollections\nOrderedDict\n)R" + tail +
            b"tR")


def write_archive(path: pathlib.Path, pickle_bytes: bytes, storages: dict) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", pickle_bytes)
        archive.writestr("archive/byteorder", "little")
        for key, data in storages.items():
            archive.writestr(f"archive/data/{key}", data)


def hand_built(out: pathlib.Path) -> None:
    # float8_e4m3fn [3] from element 1 of an untyped 4-byte storage; uint16 [2] with an empty metadata dict.
    state = (b"\x80\x02}(" + binunicode("fp8") +
             rebuild_call(3, "UntypedStorage", "0", 4, 1, (3,), b"ctorch\nfloat8_e4m3fn\n") + binunicode("u16") +
             rebuild_call(3, "UntypedStorage", "1", 4, 0, (2,), b"ctorch\nuint16\n}") + b"u.")
    write_archive(out / "torch2_v3.bin", state, {"0": bytes([0x00, 0x38, 0x40, 0x48]), "1": struct.pack("<HH", 7, 65535)})
    negated = (b"\x80\x02}(" + binunicode("w") +
               rebuild_call(2, "FloatStorage", "0", 2, 0, (2,), b"}" + binunicode("neg") + b"\x88s") + b"u.")
    write_archive(out / "negated.bin", negated, {"0": struct.pack("<ff", 1.0, 2.0)})
    (out / "lfs_pointer.bin").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 +
                                         "\nsize 16060522240\n")


class RunsCode:
    def __reduce__(self):
        return (os.system, ("true",))


def fixtures(out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(6, 8, generator=generator)
    tensors = collections.OrderedDict()
    tensors["f32"] = base
    tensors["bf16"] = base.to(torch.bfloat16)
    tensors["f16"] = base.to(torch.float16)
    tensors["f64"] = base[0].to(torch.float64)
    tensors["i64"] = torch.arange(-5, 7)
    tensors["i32"] = torch.arange(10, dtype=torch.int32)
    tensors["i8"] = torch.arange(-3, 3, dtype=torch.int8)
    tensors["u8"] = torch.arange(200, 256, dtype=torch.uint8).reshape(2, 4, 7)
    tensors["bool"] = torch.tensor([True, False, True])
    tensors["scalar"] = torch.tensor(3.5)
    tensors["empty"] = torch.zeros(0, 4)
    tensors["tied"] = base  # the same storage as f32
    tensors["row_view"] = base[2:4]  # a view at element 16 of f32's storage
    tensors["param"] = torch.nn.Parameter(torch.full((3,), 0.25))
    state = collections.OrderedDict(tensors)
    state["step"] = 7  # not a tensor: skipped
    state._metadata = collections.OrderedDict({"": {"version": 1}})
    torch.save(state, out / "state_dict.bin")
    write_safetensors(out / "state_dict.safetensors", {n: t.detach() for n, t in tensors.items()})
    (out / "sharded").mkdir(exist_ok=True)
    save_sharded(collections.OrderedDict((n, t.detach().clone()) for n, t in tensors.items()), out / "sharded", 2)
    repack_zip64(out / "state_dict.bin", out / "zip64.bin")
    reloaded = torch.load(out / "zip64.bin")
    assert all(torch.equal(reloaded[n], tensors[n]) for n in tensors)
    torch.save({"transposed": base.t()}, out / "noncontiguous.bin")
    torch.save({"w": base, "hook": RunsCode()}, out / "unsafe.bin")
    with zipfile.ZipFile(out / "state_dict.bin") as src, \
            zipfile.ZipFile(out / "compressed.bin", "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    torch.save({"w": base}, out / "legacy.bin", _use_new_zipfile_serialization=False)
    torch.save({"model": collections.OrderedDict(w=base), "epoch": 3}, out / "nested.bin")
    hand_built(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    conv = commands.add_parser("convert")
    conv.add_argument("src", type=pathlib.Path)
    conv.add_argument("out", type=pathlib.Path)
    conv.add_argument("--shards", type=int, default=1)
    fix = commands.add_parser("fixtures")
    fix.add_argument("out", type=pathlib.Path)
    args = parser.parse_args()
    if args.command == "convert":
        convert(args.src, args.out, args.shards)
    else:
        fixtures(args.out)


if __name__ == "__main__":
    main()
