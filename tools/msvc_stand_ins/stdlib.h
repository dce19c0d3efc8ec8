/* Stand-in for the UCRT's <stdlib.h> (syntax checks only, see README.md). */
#pragma once
#include <stddef.h>
void *__cdecl malloc(size_t size);
void *__cdecl calloc(size_t count, size_t size);
void *__cdecl realloc(void *block, size_t size);
void __cdecl free(void *block);
void __cdecl abort(void);
