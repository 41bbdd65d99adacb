// The x86 SIMD intrinsics, included once for every CPU kernel. GCC 12's own AVX-512 headers trip -Wuninitialized and
// -Wmaybe-uninitialized inside their intrinsics (their _mm512_undefined_* placeholders, GCC bug 105593), so those two
// warnings are off for the header's lines only; our code keeps them.
#pragma once

#if defined(__x86_64__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
// Functions compiled for AVX2 + FMA whatever the build's -march (kernels/gemv_avx2.h, attention_avx2.h): called only
// where the CPU has them (cpu_has_avx2_fma), so a portable build runs them too.
#define RS_TARGET_AVX2 __attribute__((target("avx2,fma")))
#endif
