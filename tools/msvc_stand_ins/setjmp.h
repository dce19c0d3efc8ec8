/* Stand-in for the UCRT's <setjmp.h> (clang's intrin.h needs jmp_buf). */
#pragma once
typedef struct { unsigned __int64 part[2]; } _JBTYPE;
typedef _JBTYPE jmp_buf[16];
