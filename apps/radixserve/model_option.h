// --model (and --speculative-draft-model) accept a Hugging Face folder, a .gguf file, a folder of one GGUF model, or a
// hub repository id (ORG/NAME, ORG/NAME/FILE.gguf): this transform replaces a GGUF path by its folder view and a
// repository id by its hub cache snapshot (loader/model_folder.h), downloading what the cache lacks (hub/, unless
// HF_HUB_OFFLINE=1), as the option is parsed, so every command reads one kind of folder. What cannot be served or
// fetched is a usage error naming the reason.
#pragma once

#include <CLI/CLI.hpp>

namespace rs::app {

CLI::Validator model_folder();

// --revision (vLLM's): the branch, tag or commit a repository id is fetched at (default main). Read while parsing, so
// that it applies wherever it stands on the command line.
void add_revision_option(CLI::App& command);

}  // namespace rs::app
