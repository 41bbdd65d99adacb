# Finds the Debian packages that scripts/setup installs. Nothing is vendored.
find_package(Threads REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# Boost.Asio and Beast (header-only) carry the HTTP server; cpp-httplib remains the tests' HTTP client and stub server.
find_package(Boost 1.74 REQUIRED CONFIG)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)

# OpenBLAS (pthread flavour) for CPU GEMM; we drive its threads ourselves.
find_path(OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas-pthread openblas)
find_library(OPENBLAS_LIBRARY NAMES openblas PATH_SUFFIXES openblas-pthread)
if(NOT OPENBLAS_INCLUDE_DIR OR NOT OPENBLAS_LIBRARY)
  message(FATAL_ERROR "OpenBLAS not found: run scripts/setup")
endif()
add_library(rs_openblas INTERFACE)
target_include_directories(rs_openblas INTERFACE ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(rs_openblas INTERFACE ${OPENBLAS_LIBRARY})

if(RS_TESTS)
  find_package(GTest REQUIRED)
endif()
if(RS_BENCH)
  find_package(benchmark REQUIRED)
endif()

# KV cache events (src/kv_events): libzmq with cppzmq, msgpack-cxx and OpenSSL's libcrypto (SHA-256). Optional so
# that a machine without them (the GPU machine, docs/DEVICE.md) still builds; scripts/setup installs them.
pkg_check_modules(ZMQ IMPORTED_TARGET libzmq)
find_path(CPPZMQ_INCLUDE_DIR zmq.hpp)
find_path(MSGPACK_CXX_INCLUDE_DIR msgpack.hpp)
find_package(OpenSSL COMPONENTS Crypto)
if(ZMQ_FOUND AND CPPZMQ_INCLUDE_DIR AND MSGPACK_CXX_INCLUDE_DIR AND OpenSSL_FOUND)
  set(RS_KV_EVENTS ON)
else()
  set(RS_KV_EVENTS OFF)
  message(STATUS "KV cache events off: libzmq, cppzmq, msgpack-cxx or OpenSSL missing (run scripts/setup)")
endif()

# Hub downloads (src/hub): libcurl (OpenSSL's libcrypto, found above, checks SHA-256). Optional likewise.
pkg_check_modules(CURL IMPORTED_TARGET libcurl)
if(CURL_FOUND AND OpenSSL_FOUND)
  set(RS_HUB ON)
else()
  set(RS_HUB OFF)
  message(STATUS "Hub downloads off: libcurl or OpenSSL missing (run scripts/setup)")
endif()
