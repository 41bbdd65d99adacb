// pytorch_model.bin as torch.save writes it (fixtures from tools/make_torch_checkpoints.py, torch 1.13): the same
// tensors as a safetensors twin, byte for byte, and clear refusals of what the loader cannot or must not read.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "base/error.h"
#include "loader/checkpoint.h"
#include "loader/torch_pickle.h"
#include "loader/weight_source.h"

namespace rs::loader {
namespace {
namespace fs = std::filesystem;
using namespace std::literals;

const fs::path kData = fs::path(RS_SOURCE_DIR) / "tests/data/torch";

// Every tensor of `file`'s twin, with the same dtype, shape and bytes.
void expect_same_as_twin(const Checkpoint& checkpoint, size_t expected_count) {
  const CheckpointFile twin(kData / "state_dict.safetensors");
  EXPECT_EQ(checkpoint.names().size(), expected_count);
  for (const auto& [name, entry] : twin.entries()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(checkpoint.contains(name));
    const Tensor want = twin.tensor(name), got = checkpoint.tensor(name);
    ASSERT_EQ(got.dtype(), want.dtype());
    ASSERT_EQ(got.ndim(), want.ndim());
    for (int i = 0; i < want.ndim(); ++i) EXPECT_EQ(got.dim(i), want.dim(i));
    ASSERT_EQ(got.bytes(), want.bytes());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.bytes()), 0);
  }
}

std::string error_of(const fs::path& path) {
  try {
    CheckpointFile file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TorchCheckpoint, ReadsEveryDtypeViewAndTieAsTheSafetensorsTwin) {
  const CheckpointFile file(kData / "state_dict.bin");
  // 14 tensors; the integer entry "step" is skipped.
  EXPECT_EQ(file.entries().size(), 14u);
  EXPECT_FALSE(file.contains("step"));
  // Ties and views share the storage record: tied is f32 itself, row_view starts 16 floats in.
  EXPECT_EQ(file.tensor("tied").data(), file.tensor("f32").data());
  EXPECT_EQ(file.tensor("row_view").data_as<float>(), file.tensor("f32").data_as<float>() + 16);
  EXPECT_EQ(file.tensor("scalar").ndim(), 0);
  EXPECT_EQ(file.tensor("scalar").data_as<float>()[0], 3.5f);
  EXPECT_EQ(file.tensor("i64").data_as<int64_t>()[0], -5);
  fs::path dir = fs::temp_directory_path() / ("rs_torch_single_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kData / "state_dict.bin", dir / "pytorch_model.bin");
  expect_same_as_twin(Checkpoint(dir), 14);
  fs::remove_all(dir);
}

TEST(TorchCheckpoint, ReadsShardsFromTheirIndex) { expect_same_as_twin(Checkpoint(kData / "sharded"), 14); }

TEST(TorchCheckpoint, ReadsZip64Archives) {
  const CheckpointFile zip64(kData / "zip64.bin"), plain(kData / "state_dict.bin");
  ASSERT_EQ(zip64.entries().size(), plain.entries().size());
  for (const auto& [name, entry] : plain.entries())
    EXPECT_EQ(std::memcmp(zip64.tensor(name).data(), plain.tensor(name).data(), entry.bytes), 0) << name;
}

TEST(TorchCheckpoint, WeightSourceHandsOutAlignedTensors) {
  // zip64.bin is written by Python's zipfile, which does not align records as torch does.
  fs::path dir = fs::temp_directory_path() / ("rs_torch_ws_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kData / "zip64.bin", dir / "pytorch_model.bin");
  auto source = WeightSource::checkpoint(dir);
  const Tensor f32 = source.require("f32", {6, 8});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f32.data()) % alignof(float), 0u);
  EXPECT_EQ(source.require("i64", {12}, DType::kI64).data_as<int64_t>()[11], 6);
  fs::remove_all(dir);
}

TEST(TorchCheckpoint, ReadsTorch2RebuildV3ForFloat8AndUint16) {
  const CheckpointFile file(kData / "torch2_v3.bin");
  const Tensor fp8 = file.tensor("fp8"), u16 = file.tensor("u16");
  EXPECT_EQ(fp8.dtype(), DType::kF8E4M3);
  ASSERT_EQ(fp8.numel(), 3);
  EXPECT_EQ(fp8.data_as<uint8_t>()[0], 0x38);  // element 1 of the storage: the offset counts fp8 elements
  EXPECT_EQ(fp8.data_as<uint8_t>()[2], 0x48);
  EXPECT_EQ(u16.dtype(), DType::kU16);
  uint16_t last;  // Python's zipfile wrote this archive: records are not aligned as torch aligns them
  std::memcpy(&last, static_cast<const char*>(u16.data()) + 2, 2);
  EXPECT_EQ(last, 65535);
}

TEST(TorchCheckpoint, SafetensorsWinWhenAFolderHasBoth) {
  fs::path dir = fs::temp_directory_path() / ("rs_torch_both_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kData / "noncontiguous.bin", dir / "pytorch_model.bin");  // would be refused if read
  fs::copy_file(kData / "state_dict.safetensors", dir / "model.safetensors");
  EXPECT_EQ(Checkpoint(dir).names().size(), 14u);
  fs::remove_all(dir);
}

TEST(TorchCheckpoint, RefusesWhatItCannotMapOrMustNotRun) {
  const auto expect_error = [](const char* file, const char* needle) {
    const std::string error = error_of(kData / file);
    EXPECT_NE(error.find(needle), std::string::npos) << file << ": " << error;
    EXPECT_NE(error.find(file), std::string::npos) << file << ": " << error;
  };
  expect_error("noncontiguous.bin", "tensor 'transposed' is stored non-contiguously");
  expect_error("unsafe.bin", "calls posix.system, which is not part of a PyTorch state dict");
  expect_error("compressed.bin", "compressed");
  expect_error("legacy.bin", "legacy (pre-1.6) format");
  expect_error("nested.bin", "the tensors are nested under 'model'");
  expect_error("negated.bin", "saved as a 'neg' view");
  expect_error("lfs_pointer.bin", "a Git LFS pointer");
  EXPECT_NE(error_of(kData).find("not a regular file"), std::string::npos);
  // A valid archive cut short loses its central directory.
  fs::path cut = fs::temp_directory_path() / ("rs_torch_cut_" + std::to_string(::getpid()) + ".bin");
  fs::copy_file(kData / "state_dict.bin", cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, fs::file_size(cut) - 100);
  EXPECT_NE(error_of(cut).find("no zip central directory"), std::string::npos) << error_of(cut);
  fs::remove(cut);
}

TEST(TorchPickle, RefusesMalformedStreams) {
  const auto error = [](std::string_view pickle) {
    try {
      read_pickled_state_dict(pickle, "x.pkl");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error(""sv).find("ends without a STOP"), std::string::npos);
  EXPECT_NE(error("\x80\x02}q\x00"sv).find("ends without a STOP"), std::string::npos);
  EXPECT_NE(error("\x80\x02h\x05."sv).find("memo entry 5"), std::string::npos);
  EXPECT_NE(error("\x80\x02K\x01."sv).find("no state dict"), std::string::npos);
  EXPECT_NE(error("\x80\x02"
                  "cbuiltins\neval\n)R."sv)
                .find("calls builtins.eval"),
            std::string::npos);
  EXPECT_NE(error("\x80\x02p0\n."sv).find("opcode 0x70"), std::string::npos);
  // A list holding itself through the memo: refused without looping or leaking.
  EXPECT_NE(error("\x80\x02]q\x00"
                  "h\x00"
                  "a."sv)
                .find("no state dict"),
            std::string::npos);
  // Recalling one tensor under many keys, or rebuilding one many times, is bounded by the input's size.
  const std::string callable = "ctorch._utils\n_rebuild_tensor_v2\n";
  const std::string eight_ones = "(K\x01K\x01K\x01K\x01K\x01K\x01K\x01K\x01t";
  const std::string args = "((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x00"s + "0" +
                           "X\x03\x00\x00\x00"s + "cpuK\x01tQK\x00"s + eight_ones + eight_ones + "\x89Nt";
  std::string repeated_keys = "\x80\x02}(X\x01\x00\x00\x00kq\x02"s + callable + args + "Rq\x01";
  for (int i = 0; i < 200000; ++i) repeated_keys += "h\x02h\x01";
  EXPECT_NE(error(repeated_keys + "u.").find("repeats its tensors far more"), std::string::npos);
  std::string rebuilt = "\x80\x02}" + callable + "q\x05" + args + "q\x04" + "00";
  for (int i = 0; i < 200000; ++i) rebuilt += "h\x05h\x04R0";
  EXPECT_NE(error(rebuilt + ".").find("builds far more"), std::string::npos) << error(rebuilt + ".");
  // Without the repetition the same stream is a valid (empty) state dict.
  EXPECT_TRUE(
      read_pickled_state_dict("\x80\x02}" + callable + "q\x05" + args + "q\x04" + "00h\x05h\x04R0.", "x.pkl").empty());
  // An empty dict is a state dict without tensors.
  EXPECT_TRUE(read_pickled_state_dict("\x80\x02}."sv, "x.pkl").empty());
}

}  // namespace
}  // namespace rs::loader
