/* Stand-in for the UCRT's <math.h> (syntax checks only, see README.md). */
#pragma once
double __cdecl fma(double x, double y, double z);
float __cdecl fmaf(float x, float y, float z);
double __cdecl fabs(double x);
float __cdecl fabsf(float x);
double __cdecl sqrt(double x);
