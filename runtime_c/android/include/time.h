/* Stand-in for bionic's <time.h> (see stdlib.h beside it): time_t is a
 * long on every Android ABI (32 bits on armeabi-v7a), clockid_t an int,
 * CLOCK_MONOTONIC the kernel's 1. */
#ifndef RXE_ANDROID_TIME_H_
#define RXE_ANDROID_TIME_H_

typedef long time_t;
typedef int clockid_t;
struct timespec {
  time_t tv_sec;
  long tv_nsec;
};
#define CLOCK_MONOTONIC 1

int clock_gettime(clockid_t clock, struct timespec* ts);
#endif
