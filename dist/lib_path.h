// dist/lib_path.h — where a library that mingpt loads with dlopen lives (the MPI communicator,
// dist/comm.c; the CUDA backend, kernels/backend.c): an environment variable's path when it is
// set, else the path the build recorded, relative to the directory of the running executable.
#ifndef MINGPT_LIB_PATH_H
#define MINGPT_LIB_PATH_H

#include <stddef.h>

enum { LIB_PATH_OK = 0, LIB_PATH_NOT_BUILT = 1, LIB_PATH_NO_EXE = 2 };

// out (len bytes) = $env when set and not empty; else <directory of /proc/self/exe>/rel.
// Returns LIB_PATH_OK, LIB_PATH_NOT_BUILT when rel is NULL (this build has no such library), or
// LIB_PATH_NO_EXE when the executable cannot be located. Does not check that the file exists.
int lib_path(const char *env, const char *rel, char *out, size_t len);

#endif
