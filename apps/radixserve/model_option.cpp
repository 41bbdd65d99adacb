#include "apps/radixserve/model_option.h"

#include <exception>

#include "loader/model_folder.h"

namespace rs::app {

CLI::Validator model_folder() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          value = loader::resolve_model_folder(value).string();
        } catch (const std::exception& e) {
          return e.what();
        }
        return "";
      },
      "", "");
}

}  // namespace rs::app
