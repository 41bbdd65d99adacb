#include <string>

#include "apps/radixserve/commands.h"
#include "radixserve_git_revision.h"  // generated at build time by cmake/git_revision.cmake

namespace rs::app {

std::string version_string() { return std::string(RS_VERSION) + " (" + RS_GIT_REVISION + ")"; }

}  // namespace rs::app
