"""Android app libraries: one shared library per ABI (library.py), linked without the NDK against stubs
(stubs.py); the JNI glue and Java class (jni.py)."""
