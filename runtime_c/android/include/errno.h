/* Stand-in for bionic's <errno.h> (see stdlib.h beside it): errno is the
 * thread's slot that libc.so's __errno() returns. */
#ifndef RXE_ANDROID_ERRNO_H_
#define RXE_ANDROID_ERRNO_H_

int* __errno(void);
#define errno (*__errno())
#endif
