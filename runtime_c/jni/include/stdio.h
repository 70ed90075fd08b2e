/* Stand-in for <stdio.h> when the JNI glue is compiled without libc headers
 * (an Android library built by Debian's clang, no NDK): the JDK's jni.h
 * includes <stdio.h> but declares nothing that uses it. Only the glue's
 * compile puts this folder on the include path. */
#ifndef RXE_JNI_STDIO_STANDIN_H_
#define RXE_JNI_STDIO_STANDIN_H_
#endif
