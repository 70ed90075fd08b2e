/* Stand-in for bionic's <stdio.h> (see stdlib.h beside it): FILE is
 * opaque, stderr the libc.so object bionic exports since API 23. */
#ifndef RXE_ANDROID_STDIO_H_
#define RXE_ANDROID_STDIO_H_
#include <stdarg.h>
#include <stddef.h>

typedef struct __sFILE FILE;
extern FILE* stderr;
#define SEEK_SET 0
#define SEEK_CUR 1
#define SEEK_END 2

FILE* fopen(const char* path, const char* mode);
int fclose(FILE* f);
size_t fread(void* buf, size_t size, size_t count, FILE* f);
size_t fwrite(const void* buf, size_t size, size_t count, FILE* f);
int fseek(FILE* f, long offset, int whence);
long ftell(FILE* f);
int fflush(FILE* f);
int rename(const char* from, const char* to);
int remove(const char* path);
int fprintf(FILE* f, const char* format, ...);
int snprintf(char* buf, size_t size, const char* format, ...);
int vsnprintf(char* buf, size_t size, const char* format, va_list ap);
#endif
