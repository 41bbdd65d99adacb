# Writes OUTPUT, a C++ source that defines `std::string_view FUNCTION()` (declared in HEADER) returning the bytes of
# INPUT as one raw string literal: how the web chat page (src/server/web/chat.html) is built into the binary.
# Run at build time by add_custom_command (cmake -DINPUT=... -DOUTPUT=... -DHEADER=... -DFUNCTION=... -P embed_text.cmake).
file(READ ${INPUT} text)
set(delimiter "rs_embed")
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains ')${delimiter}\"', which would end the raw string literal early")
endif()
set(content "// Generated from ${INPUT} by cmake/embed_text.cmake; do not edit.\n#include \"${HEADER}\"\n\n")
string(APPEND content "using namespace std::string_view_literals;\n\n")
string(APPEND content "std::string_view ${FUNCTION}() {\n  return R\"${delimiter}(${text})${delimiter}\"sv;\n}\n")
file(WRITE ${OUTPUT} "${content}")
