/* The x86 intrinsics of the AVX2 and AVX-512 sets, for every compiler.
 *
 * GCC, Clang and MSVC declare every intrinsic in <immintrin.h>.  clang-cl
 * before clang 19 does not: in MSVC mode its <immintrin.h> leaves out the
 * headers of instruction sets not enabled for the whole file (llvm-project
 * issue 53520), so functions with target attributes found no AVX2 or AVX-512
 * intrinsic.  Those headers are included here by name (they have include
 * guards, so newer clang-cl includes them once). */
#ifndef CONVT_X86_INTRINSICS_H
#define CONVT_X86_INTRINSICS_H

#include <immintrin.h>

#if defined(_MSC_VER) && defined(__clang__)
#include <smmintrin.h>
#include <avxintrin.h>
#include <avx2intrin.h>
#include <fmaintrin.h>
#include <f16cintrin.h>
#include <avx512fintrin.h>
#include <avx512vlintrin.h>
#endif

#endif /* CONVT_X86_INTRINSICS_H */
