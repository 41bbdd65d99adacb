// resolve_model_folder: Hugging Face hub cache ids (ORG/NAME, ORG/NAME/FILE) and GGUF folder views.
#include "loader/model_folder.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace rs::loader {
namespace {
namespace fs = std::filesystem;

const fs::path kModels = fs::path(RS_SOURCE_DIR) / "tests/data/models";

class HubCache : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("rs_hub_test_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    ::setenv("HF_HUB_CACHE", (root_ / "hub").c_str(), 1);
    ::setenv("RADIXSERVE_CACHE_DIR", (root_ / "views").c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("HF_HUB_CACHE");
    fs::remove_all(root_);
  }
  // A repository as huggingface_hub caches it: files in blobs/, snapshot entries linking to them, refs/main.
  fs::path add_repo(const std::string& folder, const std::string& revision, const std::vector<fs::path>& files,
                    bool ref = true) {
    const fs::path repo = root_ / "hub" / folder;
    fs::create_directories(repo / "blobs");
    fs::create_directories(repo / "snapshots" / revision);
    for (const auto& file : files) {
      const fs::path blob = repo / "blobs" / (revision + "-" + file.filename().string());
      fs::copy_file(file, blob);
      fs::create_symlink(fs::path("../../blobs") / blob.filename(), repo / "snapshots" / revision / file.filename());
    }
    if (ref) {
      fs::create_directories(repo / "refs");
      std::ofstream(repo / "refs" / "main") << revision;
    }
    return repo / "snapshots" / revision;
  }
  fs::path root_;
};

TEST_F(HubCache, RepositoryIdsResolveToTheirSnapshot) {
  const fs::path snapshot =
      add_repo("models--Org--Tiny", "abc123", {kModels / "qwen3/config.json", kModels / "qwen3/model.safetensors"});
  add_repo("models--Org--Tiny", "old", {kModels / "qwen3/config.json"}, /*ref=*/false);
  EXPECT_EQ(resolve_model_folder("Org/Tiny"), snapshot);
  EXPECT_EQ(hub_repo_of(snapshot), "Org/Tiny");
  EXPECT_EQ(hub_repo_of(kModels / "qwen3"), "");
  // A folder that exists wins over the cache.
  EXPECT_EQ(resolve_model_folder(kModels / "qwen3"), kModels / "qwen3");
}

TEST_F(HubCache, GgufFilesInARepositoryGetTheirView) {
  add_repo("models--Org--Tiny-GGUF", "r1", {kModels / "qwen3_gguf_q4/qwen3_gguf_q4.gguf"});
  const fs::path view = resolve_model_folder("Org/Tiny-GGUF/qwen3_gguf_q4.gguf");
  EXPECT_TRUE(fs::exists(view / "config.json"));
  EXPECT_EQ(view.filename(), "qwen3_gguf_q4");
  EXPECT_EQ(resolve_model_folder("Org/Tiny-GGUF"), view);  // the repository's only model
}

TEST_F(HubCache, MissingModelsNameWhereTheyWereLookedFor) {
  const auto message = [](const std::string& model) {
    try {
      resolve_model_folder(model);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("Org/Missing").find("models--Org--Missing"), std::string::npos) << message("Org/Missing");
  EXPECT_NE(message("/no/such/folder").find("no such file or folder"), std::string::npos);
  add_repo("models--Org--Two", "a", {kModels / "qwen3/config.json"}, false);
  add_repo("models--Org--Two", "b", {kModels / "qwen3/config.json"}, false);
  EXPECT_NE(message("Org/Two").find("2 snapshots"), std::string::npos) << message("Org/Two");
  add_repo("models--Org--Three", "a", {kModels / "qwen3/config.json"});
  EXPECT_NE(message("Org/Three/nothing.gguf").find("has no nothing.gguf"), std::string::npos);
}

}  // namespace
}  // namespace rs::loader
