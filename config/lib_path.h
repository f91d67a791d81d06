// config/lib_path.h — where the files mingpt finds next to itself live: the libraries it loads
// with dlopen (the MPI communicator, dist/comm.c; the CUDA backend, kernels/backend.c; the
// plotting library) and the installed configs (config/search_path.h). An environment
// variable's path when it is set; else the path the build recorded, relative to the directory
// of the running executable (the build tree: ./mingpt and build/lib*.so), or the installed
// layout of `make install` (mk/install.mk): <prefix>/bin/mingpt with <prefix>/lib/mingpt/lib*.so
// and <prefix>/share/mingpt/*.yaml, found relative to the binary so that any PREFIX works.
#ifndef MINGPT_LIB_PATH_H
#define MINGPT_LIB_PATH_H

#include <stddef.h>

// The installed layout, relative to the directory of the installed binary.
#define LIB_PATH_INSTALLED_LIBS "../lib/mingpt"
#define LIB_PATH_INSTALLED_SHARE "../share/mingpt"

enum { LIB_PATH_OK = 0, LIB_PATH_NOT_BUILT = 1, LIB_PATH_NO_EXE = 2 };

// out (len bytes) = $env when set and not empty; else <directory of /proc/self/exe>/rel when
// that file exists (the build tree), else <that directory>/LIB_PATH_INSTALLED_LIBS/<basename of
// rel> when it exists (an installed mingpt); when neither exists, the installed path if the
// directory LIB_PATH_INSTALLED_LIBS exists, else the build tree's (for the caller's "no such
// file" message). Returns LIB_PATH_OK, LIB_PATH_NOT_BUILT when rel is NULL (this build has no
// such library), or LIB_PATH_NO_EXE when the executable cannot be located.
int lib_path(const char *env, const char *rel, char *out, size_t len);

// The directory of the running executable (/proc/self/exe, symbolic links resolved), or -1.
int lib_path_exe_dir(char *out, size_t len);

// One library that mingpt loads with dlopen: where it is and how to name it in messages.
typedef struct {
    const char *env;        // the variable that overrides its path, e.g. "MINGPT_CUDA_LIB"
    const char *built;      // the build's path relative to the executable, or NULL (not built)
    int flags;              // dlopen's flags
    const char *what;       // its name in messages, e.g. "CUDA backend"
    const char *not_built;  // the reason when this build has none
    const char *hint;       // what to do when the build's file is missing
} LibSpec;

// Finds the library (lib_path; the path tried goes into path) and dlopens it. NULL with the
// reason in why: spec->not_built; "cannot locate the mingpt executable"; "no <what> at
// <env>=<path> (no such file)" for an override; "no <what> at <path> (<hint>)"; "cannot load the
// <what>: <dlerror>".
void *lib_open(const LibSpec *spec, char *path, size_t pathlen, char *why, size_t whylen);

// For --version: "<label>: <version> (<path>)\n" from the library's `void version_sym(char *,
// size_t)`; "<label>: not built\n"; "<label>: library not found: <path>\n"; or "<label>: <reason>\n".
void lib_describe(const LibSpec *spec, const char *label, const char *version_sym, char *buf, size_t len);

// For --version: calls `void sym(char *buf, size_t len)` of the dlopen'ed library lib (a
// version string, exported by the library), or writes "version unknown (no sym in the library)".
void lib_path_call_version(void *lib, const char *sym, char *buf, size_t len);

#endif
