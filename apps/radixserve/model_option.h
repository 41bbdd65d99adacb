// --model (and --speculative-draft-model) accept a Hugging Face folder, a .gguf file or a folder of one GGUF model:
// this transform replaces a GGUF path by its folder view (loader/model_folder.h) as the option is parsed, so every
// command reads one kind of folder. A GGUF file that cannot be served is a usage error naming the reason.
#pragma once

#include <CLI/CLI.hpp>

namespace rs::app {

CLI::Validator model_folder();

}  // namespace rs::app
