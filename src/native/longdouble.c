/* INCRBYFLOAT / HINCRBYFLOAT arithmetic exactly as Redis does it: the value and the
 * increment are read with strtold into a C `long double`, added, and printed with
 * "%.17Lf" with trailing zeroes removed (Redis's string2ld and ld2string in
 * LD_STR_HUMAN mode, src/util.c). Rust has no long double, so this small file does
 * the arithmetic; the callers in src/numbers/long_double.rs do everything else. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Redis's MAX_LONG_DOUBLE_CHARS. */
#define TG_LD_CHARS (5 * 1024)

/* Redis's string2ld: 1 with *dp set, or 0 when `s` is not a float. */
static int tg_string2ld(const char *s, size_t slen, long double *dp) {
    char buf[TG_LD_CHARS];
    long double value;
    char *eptr;

    if (slen == 0 || slen >= sizeof(buf)) return 0;
    memcpy(buf, s, slen);
    buf[slen] = '\0';

    errno = 0;
    value = strtold(buf, &eptr);
    if (isspace((unsigned char)buf[0]) || eptr[0] != '\0' || (size_t)(eptr - buf) != slen ||
        ((errno == ERANGE) &&
         (value == HUGE_VALL || value == -HUGE_VALL || fpclassify(value) == FP_ZERO)) ||
        errno == EINVAL || isnan(value))
        return 0;
    *dp = value;
    return 1;
}

/* 0: a float; 1: not a float; 2: NaN or infinite (HINCRBYFLOAT refuses those). */
int tg_ld_check(const char *s, size_t len) {
    long double v;
    if (!tg_string2ld(s, len, &v)) return 1;
    if (isnan(v) || isinf(v)) return 2;
    return 0;
}

/* `cur` (NULL for a missing value, read as 0) plus `by`, printed into `out` (at least
 * TG_LD_CHARS bytes). Returns the length written, or -1: `cur` is not a float, -2: `by`
 * is not a float, -3: the sum is NaN or infinite, -4: no room. */
long tg_ld_incr(const char *cur, size_t cur_len, const char *by, size_t by_len, char *out,
                size_t cap) {
    long double value = 0, incr;
    int l;

    if (cur != NULL && !tg_string2ld(cur, cur_len, &value)) return -1;
    if (!tg_string2ld(by, by_len, &incr)) return -2;
    value += incr;
    if (isnan(value) || isinf(value)) return -3;
    l = snprintf(out, cap, "%.17Lf", value);
    if (l < 0 || (size_t)l + 1 > cap) return -4;
    if (strchr(out, '.') != NULL) {
        char *p = out + l - 1;
        while (*p == '0') {
            p--;
            l--;
        }
        if (*p == '.') l--;
    }
    if (l == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        l = 1;
    }
    return l;
}
