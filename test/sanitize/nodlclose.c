/*
 * nodlclose.c -- preloaded into the sanitizer flavor's ranks after libasan
 * (test/sanitize/run_sanitize_tests.sh): dlclose does nothing, so the
 * components Open MPI unloads at MPI_Finalize are still mapped when
 * LeakSanitizer reports at exit, and a leak's stack names gpuring's frames
 * instead of "<unknown module>".
 */
int dlclose(void *handle);

int dlclose(void *handle)
{
    (void)handle;
    return 0;
}
