// config/cfg_number.c — the three number grammars of config text and Python's float repr.
#include "config/cfg_number.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/strbuf.h"

// Digits with single '_' between them (Hydra's and Python's numbers; YAML allows any '_').
#define DIGITS "[0-9](_?[0-9])*"

enum { YAML_INT, YAML_FLOAT, YAML_TIMESTAMP, HYDRA_INT, HYDRA_FLOAT, PY_INT, PY_FLOAT, N_GRAMMARS };

// Each grammar: its pattern, and the characters a match can start with (after blanks), which
// rule most texts out before the regex runs (PyYAML indexes its resolvers the same way).
static const struct {
    const char *pattern, *first;
} GRAMMARS[N_GRAMMARS] = {
    // PyYAML's int resolver: binary, octal, decimal, hex, base 60.
    [YAML_INT] = {"^[-+]?(0b[01_]+|0[0-7_]+|0|[1-9][0-9_]*(:[0-5]?[0-9])*|0x[0-9a-fA-F_]+)$", "-+0123456789"},
    // OmegaConf's float resolver (PyYAML's, plus 1e-3 without a dot and the exponent's sign optional).
    [YAML_FLOAT] = {"^([-+]?[0-9][0-9_]*\\.[0-9_]*([eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+"
                    "|\\.[0-9_]+([eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\\.[0-9_]*"
                    "|[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN))$", "-+0123456789."},
    // A date, or a date and (T or blanks) something with a time's colon: looser than PyYAML's
    // timestamp, so that whatever it would read as a timestamp is quoted.
    [YAML_TIMESTAMP] = {"^[0-9]{4}-([0-9]{2}-[0-9]{2}$|[0-9][0-9]?-[0-9][0-9]?([Tt]|[ \t]+[Tt]?)[0-9].*:)",
                        "0123456789"},
    // OverrideLexer: INT is 0 or has no leading zero; FLOAT needs a dot or an exponent.
    [HYDRA_INT] = {"^[+-]?(0|[1-9](_?[0-9])*)$", "-+0123456789"},
    [HYDRA_FLOAT] = {"^[+-]?((" DIGITS "\\.(" DIGITS ")?|\\." DIGITS ")([eE][+-]?[0-9]+)?|" DIGITS
                     "[eE][+-]?[0-9]+|[iI][nN][fF]|[nN][aA][nN])$", "-+0123456789.iInN"},
    // Python's int() and float() of a str (leading zeros allowed: int('010') is 10).
    [PY_INT] = {"^[[:space:]]*[+-]?" DIGITS "[[:space:]]*$", "-+0123456789"},
    [PY_FLOAT] = {"^[[:space:]]*[+-]?((" DIGITS "(\\.(" DIGITS ")?)?|\\." DIGITS ")([eE][+-]?" DIGITS
                  ")?|inf|infinity|nan)[[:space:]]*$", "-+0123456789.iInN"},
};

// Compiled once per process and never changed after: a cache of the constants above.
static regex_t g_grammar[N_GRAMMARS];
static pthread_once_t g_compiled = PTHREAD_ONCE_INIT;

static void compile_grammars(void) {
    for (int i = 0; i < N_GRAMMARS; i++)
        if (regcomp(&g_grammar[i], GRAMMARS[i].pattern, REG_EXTENDED | REG_NOSUB | (i == PY_FLOAT ? REG_ICASE : 0)))
            abort();  // the patterns are fixed: a failure is a bug
}

static bool matches(int grammar, const char *text) {
    const char *t = text + strspn(text, " \t\n\v\f\r");
    if (!*t || !strchr(GRAMMARS[grammar].first, *t)) return false;
    pthread_once(&g_compiled, compile_grammars);
    return regexec(&g_grammar[grammar], text, 0, NULL, 0) == 0;
}

// Copy of the n bytes at s without '_' (digit separators in all three grammars).
static char *strip_underscores(const char *s, size_t n) {
    char *d = cfg_strndup(s, n), *w = d;
    for (const char *r = d; *r; r++)
        if (*r != '_') *w++ = *r;
    *w = 0;
    return d;
}

// Value of "a:b:c" base 60 (underscores already removed); the last part may be fractional.
static double sexagesimal(const char *s) {
    double v = 0;
    for (const char *p = s;;) {
        char *end;
        v = v * 60 + strtod(p, &end);
        if (*end != ':') return v;
        p = end + 1;
    }
}

bool cfg_yaml_int(const char *text, long long *out, bool *big) {
    *big = false;
    if (!matches(YAML_INT, text)) return false;
    bool neg = *text == '-';
    const char *s = text + (*text == '-' || *text == '+');
    int base = s[0] != '0' ? 10 : s[1] == 'b' ? 2 : s[1] == 'x' ? 16 : s[1] ? 8 : 10;
    const char *digits = s + (base == 2 || base == 16 ? 2 : base == 8);
    char *clean = strip_underscores(digits, strlen(digits));
    bool ok = *clean != 0;  // "0b_": PyYAML would fail; keep it a string
    if (ok && strchr(clean, ':')) {
        double v = sexagesimal(clean);
        if (v > 9.2e18) *big = true;
        else *out = neg ? -(long long)v : (long long)v;
    } else if (ok) {
        errno = 0;
        unsigned long long u = strtoull(clean, NULL, base);
        if (errno == ERANGE || u > (unsigned long long)LLONG_MAX + (neg ? 1u : 0u)) *big = true;
        else *out = neg ? (long long)(0 - u) : (long long)u;
    }
    free(clean);
    return ok;
}

bool cfg_yaml_float(const char *text, double *out) {
    if (!matches(YAML_FLOAT, text)) return false;
    bool neg = *text == '-';
    const char *s = text + (*text == '-' || *text == '+');
    if (s[0] == '.' && isalpha((unsigned char)s[1])) {  // .inf / .nan
        *out = tolower((unsigned char)s[1]) == 'n' ? NAN : neg ? -INFINITY : INFINITY;
        return true;
    }
    char *clean = strip_underscores(s, strlen(s)), *end;
    // "._": PyYAML would fail; keep it a string
    bool good = strspn(clean, "0123456789") > 0 || (clean[0] == '.' && isdigit((unsigned char)clean[1]));
    double v = 0;
    if (good && strchr(clean, ':')) {
        v = sexagesimal(clean);
    } else if (good) {
        v = strtod(clean, &end);
        good = *end == 0;
    }
    free(clean);
    if (good) *out = neg ? -v : v;
    return good;
}

bool cfg_yaml_timestamp(const char *text) { return matches(YAML_TIMESTAMP, text); }

bool cfg_hydra_int(const char *text, long long *out, bool *big) {
    if (!matches(HYDRA_INT, text)) return false;
    char *clean = strip_underscores(text, strlen(text));
    errno = 0;
    *out = strtoll(clean, NULL, 10);
    *big = errno == ERANGE;
    free(clean);
    return true;
}

bool cfg_hydra_float(const char *text, double *out) {
    if (!matches(HYDRA_FLOAT, text)) return false;
    const char *s = text + (*text == '+' || *text == '-');
    if (isalpha((unsigned char)*s)) {  // inf / nan
        *out = tolower((unsigned char)*s) == 'n' ? NAN : *text == '-' ? -INFINITY : INFINITY;
        return true;
    }
    char *clean = strip_underscores(text, strlen(text));
    *out = strtod(clean, NULL);
    free(clean);
    return true;
}

// text without the whitespace around it: [*b, *e).
static void trim(const char *text, const char **b, const char **e) {
    while (isspace((unsigned char)*text)) text++;
    const char *end = text + strlen(text);
    while (end > text && isspace((unsigned char)end[-1])) end--;
    *b = text;
    *e = end;
}

CfgConv cfg_py_int(const char *text, long long *out, unsigned long long *uout, bool *neg) {
    if (!matches(PY_INT, text)) return CONV_BAD;
    const char *s, *e;
    trim(text, &s, &e);
    bool minus = *s == '-';
    unsigned long long v = 0;
    for (const char *p = s; p < e; p++) {
        if (!isdigit((unsigned char)*p)) continue;  // the sign and the '_' between digits
        unsigned d = (unsigned)(*p - '0');
        if (v > (ULLONG_MAX - d) / 10) return CONV_RANGE;
        v = v * 10 + d;
    }
    if (neg) *neg = minus;
    if (uout) *uout = v;
    if (out) {
        if (v > (unsigned long long)LLONG_MAX + (minus ? 1u : 0u)) return CONV_RANGE;
        *out = minus ? (long long)(0 - v) : (long long)v;
    }
    return CONV_OK;
}

CfgConv cfg_py_float(const char *text, double *out) {
    if (!matches(PY_FLOAT, text)) return CONV_BAD;
    const char *s, *e;
    trim(text, &s, &e);
    char *clean = strip_underscores(s, (size_t)(e - s));
    bool fits = strlen(clean) < 128;  // what a config value needs; float() takes longer ones
    if (fits) *out = strtod(clean, NULL);
    free(clean);
    return fits ? CONV_OK : CONV_RANGE;
}

int cfg_format_float(double x, char *buf, size_t n, bool yaml_style) {
    if (isnan(x)) return snprintf(buf, n, "%s", yaml_style ? ".nan" : "nan");
    if (isinf(x)) return snprintf(buf, n, "%s%s", x < 0 ? "-" : "", yaml_style ? ".inf" : "inf");
    // Shortest precision that reads back exactly (what Python's repr does).
    char tmp[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        if (strtod(tmp, NULL) == x) break;
    }
    // tmp = [-]d[.ddd]e[+-]XX -> sign, digit string, decimal exponent.
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg) p++;
    char dig[24];
    size_t nd = 0;
    for (; *p && *p != 'e'; p++)
        if (isdigit((unsigned char)*p) && nd < sizeof dig - 1) dig[nd++] = *p;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    dig[nd] = 0;
    int e = atoi(p + 1);
    char out[64];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (e >= -4 && e < 16) {
        if (e >= 0) {
            for (int i = 0; i <= e; i++) out[o++] = (size_t)i < nd ? dig[i] : '0';
            out[o++] = '.';
            if ((size_t)e + 1 < nd)
                for (size_t i = (size_t)e + 1; i < nd; i++) out[o++] = dig[i];
            else
                out[o++] = '0';
        } else {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -e - 1; i++) out[o++] = '0';
            for (size_t i = 0; i < nd; i++) out[o++] = dig[i];
        }
        out[o] = 0;
    } else {
        out[o++] = dig[0];
        if (nd > 1) {
            out[o++] = '.';
            for (size_t i = 1; i < nd; i++) out[o++] = dig[i];
        } else if (yaml_style) {
            // PyYAML writes 1.0e-08: YAML 1.1 floats need a dot.
            out[o++] = '.';
            out[o++] = '0';
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    return snprintf(buf, n, "%s", out);
}
