/* Winograd F(2x2, 3x3) transforms (see winograd.h), compiled for the platform's
 * baseline: the portable set's, and every set's without its own (kernel_set.h). */
#include "winograd.h"

#define WINOGRAD_NAME(part) convt_winograd_##part
#define WINOGRAD_TARGET
#include "winograd_body.h"
