// What --model names, as the Hugging Face folder the rest of radixserve reads: a folder as given, or, for a GGUF file
// (or a folder of one model's .gguf parts), a folder radixserve writes beside its cache holding the config.json,
// generation_config.json, tokenizer.json and tokenizer_config.json rebuilt from the file's metadata and links to the
// .gguf files, whose tensors Checkpoint then reads (gguf/gguf_weights.h).
#pragma once

#include <filesystem>

namespace rs::loader {

// The folder for what --model names: a folder as given; a Hugging Face repository id ("ORG/NAME", or
// "ORG/NAME/FILE.gguf") found in the hub cache (hub_cache_dir(): models--ORG--NAME/snapshots/<refs/main>); and for a
// GGUF model its folder view, made once per file version (path, size and modification time) under cache_dir().
// Fails with the reason when nothing is found or a GGUF file cannot be served.
std::filesystem::path resolve_model_folder(const std::filesystem::path& path);

// $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
std::filesystem::path hub_cache_dir();

// "ORG/NAME" when `folder` is a hub cache snapshot (.../models--ORG--NAME/snapshots/REV), else empty.
std::string hub_repo_of(const std::filesystem::path& folder);

// $RADIXSERVE_CACHE_DIR, else $XDG_CACHE_HOME/radixserve, else ~/.cache/radixserve, else a folder in the temp dir.
std::filesystem::path cache_dir();

}  // namespace rs::loader
