/* Stand-in for bionic's <unistd.h> (see stdlib.h beside it). */
#ifndef RXE_ANDROID_UNISTD_H_
#define RXE_ANDROID_UNISTD_H_

typedef int pid_t;
pid_t getpid(void);
#endif
