/* Depthwise planes (see plane.h), compiled for the platform's baseline: the
 * portable and NEON sets' (kernel_set.h).  On AArch64 the blocks are NEON
 * vectors with fused multiply-adds (the NEON set's arithmetic); elsewhere, with
 * GCC or Clang, 16-byte vector extensions (SSE2, VSX, ...) with a multiply and
 * an add, the portable set's; other compilers sum one output at a time. */
#include <string.h>

#include "plane.h"
#include "sets.h"

#define PLANE_NAME(part) convt_plane_##part
#define PLANE_TARGET

#if defined(CONVT_AARCH64)
/* NEON, with the NEON set's fused multiply-adds */
#include <arm_neon.h>
#define PLANE_V_f32 float32x4_t
#define PLANE_LANES_f32 4
#define PLANE_ZERO_f32() vdupq_n_f32(0.0f)
#define PLANE_SPLAT_f32(v) vdupq_n_f32(v)
#define PLANE_LOAD_f32(p) vld1q_f32(p)
#define PLANE_STORE_f32(p, v) vst1q_f32((p), (v))
#define PLANE_ADD_f32(a, b) vaddq_f32(a, b)
#define PLANE_MADD_f32(w, x, acc) vfmaq_f32(acc, w, x)
#define PLANE_V_f64 float64x2_t
#define PLANE_LANES_f64 2
#define PLANE_ZERO_f64() vdupq_n_f64(0.0)
#define PLANE_SPLAT_f64(v) vdupq_n_f64(v)
#define PLANE_LOAD_f64(p) vld1q_f64(p)
#define PLANE_STORE_f64(p, v) vst1q_f64((p), (v))
#define PLANE_ADD_f64(a, b) vaddq_f64(a, b)
#define PLANE_MADD_f64(w, x, acc) vfmaq_f64(acc, w, x)
#elif (defined(__GNUC__) || defined(__clang__)) && !defined(CONVT_NO_VECTOR_EXTENSIONS)
typedef float plane_v4f __attribute__((vector_size(16)));
typedef double plane_v2d __attribute__((vector_size(16)));

static inline plane_v4f plane_load_f32(const float *p)
{
    plane_v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline plane_v2d plane_load_f64(const double *p)
{
    plane_v2d v;
    memcpy(&v, p, sizeof v);
    return v;
}
#define PLANE_V_f32 plane_v4f
#define PLANE_LANES_f32 4
#define PLANE_ZERO_f32() ((plane_v4f){0.0f, 0.0f, 0.0f, 0.0f})
#define PLANE_SPLAT_f32(v) ((plane_v4f){(v), (v), (v), (v)})
#define PLANE_LOAD_f32(p) plane_load_f32(p)
#define PLANE_STORE_f32(p, v) memcpy((p), &(v), sizeof(plane_v4f))
#define PLANE_V_f64 plane_v2d
#define PLANE_LANES_f64 2
#define PLANE_ZERO_f64() ((plane_v2d){0.0, 0.0})
#define PLANE_SPLAT_f64(v) ((plane_v2d){(v), (v)})
#define PLANE_LOAD_f64(p) plane_load_f64(p)
#define PLANE_STORE_f64(p, v) memcpy((p), &(v), sizeof(plane_v2d))
#else
#define PLANE_V_f32 float
#define PLANE_LANES_f32 1
#define PLANE_ZERO_f32() 0.0f
#define PLANE_SPLAT_f32(v) (v)
#define PLANE_LOAD_f32(p) (*(p))
#define PLANE_STORE_f32(p, v) (*(p) = (v))
#define PLANE_V_f64 double
#define PLANE_LANES_f64 1
#define PLANE_ZERO_f64() 0.0
#define PLANE_SPLAT_f64(v) (v)
#define PLANE_LOAD_f64(p) (*(p))
#define PLANE_STORE_f64(p, v) (*(p) = (v))
#endif
#ifndef CONVT_AARCH64
#define PLANE_ADD_f32(a, b) ((a) + (b))
#define PLANE_ADD_f64(a, b) ((a) + (b))
#define PLANE_MADD_f32(w, x, acc) CONVT_MUL_ADD(w, x, acc)
#define PLANE_MADD_f64(w, x, acc) CONVT_MUL_ADD(w, x, acc)
#endif

#include "plane_body.h"
