/* Stand-in for bionic's <stdlib.h> when runtime_c/vulkan and a Vulkan model
 * are compiled for Android without the NDK (-nostdlibinc): the declarations
 * they use, as bionic's libc.so exports them (relax_edge/android/stub_symbols.txt
 * lists the same names). */
#ifndef RXE_ANDROID_STDLIB_H_
#define RXE_ANDROID_STDLIB_H_
#include <stddef.h>

void* malloc(size_t size);
void* calloc(size_t count, size_t size);
void* realloc(void* ptr, size_t size);
void free(void* ptr);
char* getenv(const char* name);
void abort(void) __attribute__((__noreturn__));
#endif
