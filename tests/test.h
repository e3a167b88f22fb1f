/* test.h: the smallest harness: CHECK counts failures and says where; test_report prints the
 * "N passed, N failed" line and returns the exit status. SKIP ends a test that cannot run here. */
#ifndef ST_TEST_H
#define ST_TEST_H
#include <stdio.h>
#include <stdlib.h>

static int test_passed, test_failed;
#define CHECK(cond) do { if (cond) test_passed++; else { test_failed++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { if (cond) test_passed++; else { test_failed++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
/* ctest treats exit code 77 as skipped (SKIP_RETURN_CODE is set for every unit test). */
#define SKIP(...) do { fprintf(stderr, "skipped: "); fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr); exit(77); } while (0)

static inline int test_report(const char *name) {
    fprintf(stderr, "%s: %d checks passed, %d failed\n", name, test_passed, test_failed);
    return test_failed ? 1 : 0;
}
#endif
