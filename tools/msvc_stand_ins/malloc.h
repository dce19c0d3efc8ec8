/* Stand-in for the UCRT's <malloc.h> (clang's mm_malloc.h needs it). */
#pragma once
#include <stddef.h>
void *__cdecl _aligned_malloc(size_t size, size_t alignment);
void __cdecl _aligned_free(void *block);
