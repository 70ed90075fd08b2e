/* Stand-in for bionic's <dlfcn.h> (see stdlib.h beside it): libdl.so's
 * functions and bionic's flag values, which differ between 32- and 64-bit
 * ABIs (RTLD_NOW is 0 on armeabi-v7a, 2 on arm64-v8a and x86_64). */
#ifndef RXE_ANDROID_DLFCN_H_
#define RXE_ANDROID_DLFCN_H_

#define RTLD_LOCAL 0
#define RTLD_LAZY 1
#if defined(__LP64__)
#define RTLD_NOW 2
#define RTLD_GLOBAL 0x00100
#else
#define RTLD_NOW 0
#define RTLD_GLOBAL 2
#endif

void* dlopen(const char* filename, int flags);
void* dlsym(void* handle, const char* symbol);
int dlclose(void* handle);
char* dlerror(void);
#endif
