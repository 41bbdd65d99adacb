// The x86 SIMD intrinsics, included once for every CPU kernel. GCC 12's own AVX-512 headers trip -Wuninitialized and
// -Wmaybe-uninitialized inside their intrinsics (their _mm512_undefined_* placeholders, GCC bug 105593), so those two
// warnings are off for the header's lines only; our code keeps them.
#pragma once

#if defined(__AVX512F__) || defined(__AVX2__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
