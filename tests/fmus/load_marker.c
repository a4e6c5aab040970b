/* Appended to a test model: the shared library's constructor, run when the library is loaded (dlopen), writes
   "loaded <pid>" to the file named by the environment variable COSIMRUN_TEST_LOAD_MARKER (nothing without it). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void cosimrun_test_mark_load(void) {
    const char *path = getenv("COSIMRUN_TEST_LOAD_MARKER");
    FILE *file;
    if (path == NULL) return;
    file = fopen(path, "w");
    if (file == NULL) return;
    fprintf(file, "loaded %ld\n", (long)getpid());
    fclose(file);
}
