/* Stand-in for the Windows SDK's <windows.h> (syntax checks only, see README.md):
 * the threads, locks, condition variables, atomics and clock the thread pool uses,
 * with the SDK's signatures. */
#pragma once
#include <stddef.h>
typedef int BOOL;
typedef unsigned long DWORD;
typedef unsigned char BOOLEAN;
typedef void *HANDLE;
typedef void *LPVOID;
typedef long long LONGLONG;
typedef union _LARGE_INTEGER { struct { DWORD LowPart; long HighPart; } u; LONGLONG QuadPart; }
    LARGE_INTEGER;
typedef struct _RTL_SRWLOCK { void *Ptr; } SRWLOCK, *PSRWLOCK;
typedef struct _RTL_CONDITION_VARIABLE { void *Ptr; } CONDITION_VARIABLE, *PCONDITION_VARIABLE;
typedef struct _SECURITY_ATTRIBUTES SECURITY_ATTRIBUTES;
#define WINAPI __stdcall
#define INFINITE 0xFFFFFFFFul
#define SRWLOCK_INIT {0}
#define CONDITION_VARIABLE_INIT {0}
typedef DWORD(WINAPI *LPTHREAD_START_ROUTINE)(LPVOID parameter);
HANDLE WINAPI CreateThread(SECURITY_ATTRIBUTES *attributes, size_t stack_size,
                           LPTHREAD_START_ROUTINE start, LPVOID parameter, DWORD flags,
                           DWORD *thread_id);
BOOL WINAPI CloseHandle(HANDLE object);
BOOL WINAPI SwitchToThread(void);
void WINAPI AcquireSRWLockExclusive(PSRWLOCK lock);
void WINAPI ReleaseSRWLockExclusive(PSRWLOCK lock);
BOOLEAN WINAPI TryAcquireSRWLockExclusive(PSRWLOCK lock);
BOOL WINAPI SleepConditionVariableSRW(PCONDITION_VARIABLE condition, PSRWLOCK lock,
                                      DWORD milliseconds, unsigned long flags);
void WINAPI WakeAllConditionVariable(PCONDITION_VARIABLE condition);
BOOL WINAPI QueryPerformanceCounter(LARGE_INTEGER *count);
BOOL WINAPI QueryPerformanceFrequency(LARGE_INTEGER *frequency);
/* the SDK maps these to compiler intrinsics, as here */
long long _InterlockedCompareExchange64(long long volatile *target, long long exchange,
                                        long long comparand);
long long _InterlockedExchange64(long long volatile *target, long long value);
long long _InterlockedExchangeAdd64(long long volatile *target, long long value);
#define InterlockedCompareExchange64 _InterlockedCompareExchange64
#define InterlockedExchange64 _InterlockedExchange64
#define InterlockedExchangeAdd64 _InterlockedExchangeAdd64
