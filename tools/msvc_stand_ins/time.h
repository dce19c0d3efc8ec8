/* Stand-in for the UCRT's <time.h> (syntax checks only, see README.md). */
#pragma once
typedef long clock_t;
#define CLOCKS_PER_SEC ((clock_t)1000)
clock_t __cdecl clock(void);
