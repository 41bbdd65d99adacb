# rs_add_module(), rs_add_test(): one static library per src/ folder; tests beside the sources.
# Designated initialisers that leave defaulted members out are idiomatic (STYLE.md 19), not a mistake.
set(RS_WARNINGS -Wall -Wextra -Wpedantic -Wno-unused-parameter -Wno-missing-field-initializers)
# STYLE.md: our sources build warning-free. CI turns warnings into errors (.ci/run sets RS_WERROR=ON); other builds only
# warn, so a newer compiler's new warnings (g++ 13/14, clang) never stop a user's build.
option(RS_WERROR "Treat warnings in radixserve's own C++ sources as errors" OFF)
if(RS_WERROR)
  list(APPEND RS_WARNINGS -Werror)
endif()
set(RS_ARCH_FLAGS "")
if(RS_NATIVE)
  set(RS_ARCH_FLAGS -march=native)
endif()

if(RS_FUZZ)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=address,undefined)
endif()
if(RS_SANITIZE STREQUAL "thread")
  if(RS_FUZZ)
    message(FATAL_ERROR "RS_SANITIZE=thread cannot be combined with RS_FUZZ (which needs ASan)")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread> $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=thread)
elseif(RS_SANITIZE)  # ON or address
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined> $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=address,undefined)
endif()

function(rs_target_defaults target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${RS_WARNINGS} ${RS_ARCH_FLAGS}>)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
endfunction()

# rs_add_module(NAME SOURCES ... DEPS ...): static library rs_<NAME>.
function(rs_add_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_library(rs_${name} STATIC ${M_SOURCES})
  rs_target_defaults(rs_${name})
  target_link_libraries(rs_${name} PUBLIC ${M_DEPS})
endfunction()

# rs_add_test(NAME SOURCES ... DEPS ... LABELS ...): a GoogleTest binary registered with CTest.
function(rs_add_test name)
  if(NOT RS_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  rs_target_defaults(${name})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE RS_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
