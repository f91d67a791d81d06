// config/search_path.h — Hydra's config search path, as mingpt builds it: the places a primary
// config (--config-name) is looked for, in order, and how --info searchpath and the
// "Cannot find primary config" error list them (Hydra 1.3: hydra/_internal/hydra.py,
// _print_search_path; hydra/_internal/utils.py, create_config_search_path).
//
//   provider=hydra         pkg://hydra.conf        Hydra's own defaults (built into mingpt)
//   provider=main          file://<--config-path>  when given (relative to the current directory), alone;
//                          else file://<cwd>, then
//   provider=mingpt        file://<directory of the mingpt binary>, then
//   provider=mingpt        file://<that directory>/../share/mingpt (an installed mingpt's configs)
//   provider=command-line  file://<each --config-dir>
//   provider=schema        structured://           mingpt's schema defaults (config/config.h)
//
// Hydra looks next to the application (the script's directory) instead of in the current
// directory; mingpt looks in both, the current directory first. A directory already listed
// (the binary run from the current directory) is not listed twice.
#ifndef MINGPT_SEARCH_PATH_H
#define MINGPT_SEARCH_PATH_H

#include <stdio.h>

typedef struct {
    char provider[16];  // hydra, main, mingpt, command-line, schema
    char schema[16];    // pkg, file, structured
    char *path;         // absolute directory for file://; "hydra.conf"; "" for structured://
    char *lookup;       // file:// only: the directory as the user gave it (relative ones kept, for
                        // messages naming the config file); NULL for the others
} SearchDir;

typedef struct {
    SearchDir *dirs;
    int n;
} SearchPath;

// Builds the search path: config_path (NULL: the current directory, the binary's directory
// and the installed share directory) and the n_dirs --config-dir directories. Never fails
// (a directory that cannot be located, e.g. without /proc, is left out).
void search_path_build(SearchPath *sp, const char *config_path, const char *const *config_dirs, int n_dirs);
void search_path_free(SearchPath *sp);

// One line per place, as Hydra's errors list them: "\tprovider=main, path=file:///abs\n".
// Writes at most len bytes (always NUL-terminated).
void search_path_lines(const SearchPath *sp, char *buf, size_t len);

// p made absolute against the current directory (lexically: "." and "./" dropped; no "..").
void search_path_absolute(const char *p, char *out, size_t len);

// --info searchpath: Hydra's table (a blank line, "Config search path" underlined with '*',
// then | Provider | Search path | rows between dashed lines).
void search_path_print(FILE *out, const SearchPath *sp);

#endif
