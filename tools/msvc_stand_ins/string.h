/* Stand-in for the UCRT's <string.h> (syntax checks only, see README.md). */
#pragma once
#include <stddef.h>
void *__cdecl memcpy(void *destination, const void *source, size_t size);
void *__cdecl memmove(void *destination, const void *source, size_t size);
void *__cdecl memset(void *destination, int value, size_t size);
int __cdecl memcmp(const void *a, const void *b, size_t size);
size_t __cdecl strlen(const char *text);
