// TemplateError formatting.
#include "chat/template_error.h"

#include <fmt/format.h>

namespace rs::chat {

TemplateError::TemplateError(SourcePos pos, const std::string& message)
    : rs::Error(fmt::format("template:{}:{}: {}", pos.line, pos.column, message)), pos_(pos), detail_(message) {}

}  // namespace rs::chat
